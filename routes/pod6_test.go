package routes

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/internal/poll"
	"github.com/reefcni/reef/routes/internal/nl"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/veth"
)

// Kernel tests of IPv6 and dual-stack pods, in throw-away namespaces as in
// pod_test.go: a "node" namespace and a namespace per pod.

// ping sends one echo request from n to addr and fails t unless the reply
// comes within 2 s: the first packet, no retry.
func ping(t *testing.T, n ns.NetNS, from, addr string) {
	t.Helper()
	args := []string{"ping", "-n", "-q", "-c1", "-W2", addr}
	if strings.Contains(addr, ":") {
		args = slices.Insert(args, 1, "-6")
	}
	start := time.Now()
	if out, err := netnstest.Output(n, args...); err != nil {
		t.Errorf("ping %s from %s, the first packet: %v after %v\n%s", addr, from, err, time.Since(start).Round(time.Millisecond), out)
		return
	}
	t.Logf("ping %s from %s: answered after %v", addr, from, time.Since(start).Round(time.Millisecond))
}

// ipLines runs ip in n and returns its lines without the metric and
// preference the kernel adds to IPv6 routes.
func ipLines(t *testing.T, n ns.NetNS, args ...string) []string {
	t.Helper()
	noise := regexp.MustCompile(` (metric \d+|pref medium)`)
	var out []string
	for _, l := range strings.Split(netnstest.Run(t, n, append([]string{"ip"}, args...)...), "\n") {
		if l = strings.TrimSpace(noise.ReplaceAllString(l, "")); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// v6Node is a node namespace with an uplink (a veth whose peer stays in
// the node) holding the node's addresses, and reef's kernel and sysctl
// owner in it.
type v6Node struct {
	ns     ns.NetNS
	k      *Kernel
	owner  *sysctl.Owner
	pods   map[string]ns.NetNS // by host veth
	specs  []veth.Spec
	blocks []netip.Prefix
}

func newV6Node(t *testing.T, blocks ...string) *v6Node {
	n := &v6Node{ns: netnstest.New(t), owner: sysctl.New(sysctl.Proc{}), pods: map[string]ns.NetNS{}}
	for _, b := range blocks {
		n.blocks = append(n.blocks, pfx(b))
	}
	ip := func(args ...string) { netnstest.Run(t, n.ns, append([]string{"ip"}, args...)...) }
	ip("link", "set", "lo", "up")
	ip("link", "add", "eth0", "type", "veth", "peer", "name", "uplink1")
	ip("link", "set", "uplink1", "up")
	ip("link", "set", "eth0", "up")
	ip("addr", "add", "192.0.2.1/24", "dev", "eth0")
	ip("addr", "add", "2001:db8:1::1/64", "dev", "eth0", "nodad")
	n.k = netnstest.Open(t, n.ns, NewKernel)
	return n
}

// sysctlPods are the node's pods as the sysctl owner sees them.
func (n *v6Node) sysctlPods() []sysctl.Pod {
	var out []sysctl.Pod
	for _, s := range n.specs {
		out = append(out, sysctl.Pod{HostVeth: s.HostVeth, IPv6: slices.ContainsFunc(s.IPs, netip.Addr.Is6)})
	}
	return out
}

// pass is what a reconcile pass does to the node's sysctls and routes.
func (n *v6Node) pass(t *testing.T) []sysctl.Change {
	t.Helper()
	var changes []sysctl.Change
	if err := in(t, n.ns, func() (err error) {
		changes, err = n.owner.Sync(sysctl.Node{Pods: n.sysctlPods(), IPv6Pool: true}, nil)
		return err
	}); err != nil {
		t.Fatalf("sysctl Sync: %v", err)
	}
	if p := n.plan(t); !p.Empty() {
		if err := n.k.Apply(p); err != nil {
			t.Fatalf("Apply %+v: %v", p, err)
		}
	}
	return changes
}

// plan is what Diff finds between the desired state and the kernel's.
func (n *v6Node) plan(t *testing.T) Plan {
	t.Helper()
	have, err := n.k.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	var eps []Endpoint
	for _, s := range n.specs {
		eps = append(eps, Endpoint{IPs: s.IPs, HostVeth: s.HostVeth})
	}
	return Diff(Desired(eps, n.blocks, nil, have.Links), have)
}

// addPod wires a pod in a namespace of its own as ADD does, the host
// settings through the sysctl owner; prepare runs in the pod's namespace
// first.
func (n *v6Node) addPod(t *testing.T, name string, ips []netip.Addr, prepare func(ns.NetNS)) veth.Spec {
	t.Helper()
	pod := netnstest.New(t)
	netnstest.Run(t, pod, "ip", "link", "set", "lo", "up")
	if prepare != nil {
		prepare(pod)
	}
	spec := veth.Spec{Netns: pod.Path(), IfName: "eth0", HostVeth: HostVethName("default", name, ""), IPs: ips, MTU: 1400}
	if err := in(t, n.ns, func() (err error) { _, err = cniPods(n.owner).Up(spec); return err }); err != nil {
		t.Fatalf("Up %s %v: %v", name, ips, err)
	}
	n.pods[spec.HostVeth] = pod
	n.specs = append(n.specs, spec)
	return spec
}

// checkPods waits until veth.Check finds every pod in place. The veth's
// link-local stays tentative for a moment after IPv6 comes up on it, until
// the kernel's DAD work runs and, with accept_dad=0, ends at once; DAD
// itself would take a second or more, so the short wait still fails
// without accept_dad=0.
func (n *v6Node) checkPods(t *testing.T) {
	t.Helper()
	for _, s := range n.specs {
		poll.For(t, 300*time.Millisecond, func() error {
			if err := in(t, n.ns, func() error { return veth.Check(s) }); err != nil {
				return fmt.Errorf("veth.Check %v: %w", s.IPs, err)
			}
			return nil
		})
	}
}

// IPv6 and dual-stack pods from one node's blocks: every pod is reachable
// from the node and from the others with the first packet after ADD, each
// family by its own gateway; the node's routes and the pods' neighbours
// are what docs/design.md says; a pass finds nothing to do, repairs
// what an operator broke, and DEL leaves only the blocks' blackholes.
func TestIPv6Pods(t *testing.T) {
	requireRoot(t)
	n := newV6Node(t, "10.244.1.0/26", "fd00:10:244::/122")
	// The start-up pass: an IPv6 pool makes the node forward IPv6 before
	// its first IPv6 pod, and the blocks get their blackholes.
	if v := sysctlIn(t, n.ns, sysctl.Forwarding6); v != "0" {
		t.Fatalf("a new namespace forwards IPv6 (%s): the test would prove nothing", v)
	}
	// A node whose new links have IPv6 off and would get random
	// link-locals: the sysctl owner's settings make each IPv6 pod's veth
	// what its pod routes through.
	writeSysctlIn(t, n.ns, "net/ipv6/conf/default/disable_ipv6", "1")
	writeSysctlIn(t, n.ns, "net/ipv6/conf/default/addr_gen_mode", "3")
	n.pass(t)
	if v := sysctlIn(t, n.ns, sysctl.Forwarding6); v != "1" {
		t.Errorf("node %s = %s after a pass with an IPv6 pool, want 1", sysctl.Forwarding6, v)
	}

	a := n.addPod(t, "v6-a", addrs("fd00:10:244::1"), nil)
	// A namespace whose new links have IPv6 off: veth.Setup turns it on on
	// the pod's interface.
	b := n.addPod(t, "v6-b", addrs("fd00:10:244::2"), func(pod ns.NetNS) {
		writeSysctlIn(t, pod, "net/ipv6/conf/default/disable_ipv6", "1")
		writeSysctlIn(t, pod, "net/ipv6/conf/all/forwarding", "1")
	})
	c := n.addPod(t, "dual-c", addrs("fd00:10:244::3", "10.244.1.3"), nil)
	d := n.addPod(t, "dual-d", addrs("10.244.1.4", "fd00:10:244::4"), nil)
	podA, podB, podC, podD := n.pods[a.HostVeth], n.pods[b.HostVeth], n.pods[c.HostVeth], n.pods[d.HostVeth]

	// At once, before any DAD of the veths' link-locals could end.
	ping(t, podA, "pod a", "fd00:10:244::2")
	ping(t, podB, "pod b", "fd00:10:244::1")
	ping(t, n.ns, "the node", "fd00:10:244::3")
	ping(t, podD, "pod d", "2001:db8:1::1")
	ping(t, podC, "pod c", "fd00:10:244::4")
	ping(t, podC, "pod c", "10.244.1.4")
	ping(t, podA, "pod a", "fd00:10:244::4")
	ping(t, n.ns, "the node", "10.244.1.3")
	ping(t, podD, "pod d", "192.0.2.1")

	wantRoutes := []string{
		"blackhole fd00:10:244::/122 dev lo",
		"fd00:10:244::1 dev " + a.HostVeth,
		"fd00:10:244::2 dev " + b.HostVeth,
		"fd00:10:244::3 dev " + c.HostVeth,
		"fd00:10:244::4 dev " + d.HostVeth,
	}
	if diff := cmp.Diff(wantRoutes, ipLines(t, n.ns, "-6", "route", "show", "table", "main", "proto", "238")); diff != "" {
		t.Errorf("ip -6 route show proto 238 on the node (-want +got):\n%s", diff)
	}
	wantRoutes4 := []string{
		"10.244.1.3 dev " + c.HostVeth + " scope link",
		"10.244.1.4 dev " + d.HostVeth + " scope link",
		"blackhole 10.244.1.0/26",
	}
	if diff := cmp.Diff(wantRoutes4, ipLines(t, n.ns, "-4", "route", "show", "table", "main", "proto", "238")); diff != "" {
		t.Errorf("ip -4 route show proto 238 on the node (-want +got):\n%s", diff)
	}
	for name, pod := range map[string]ns.NetNS{"a": podA, "b": podB, "c": podC} {
		if diff := cmp.Diff([]string{"fe80::ecee:eeff:feee:eeee lladdr ee:ee:ee:ee:ee:ee PERMANENT"}, ipLines(t, pod, "-6", "neigh", "show", "dev", "eth0")); diff != "" {
			t.Errorf("ip -6 neigh in pod %s (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff([]string{"default via fe80::ecee:eeff:feee:eeee dev eth0"}, ipLines(t, pod, "-6", "route", "show", "table", "main", "default")); diff != "" {
			t.Errorf("ip -6 route default in pod %s (-want +got):\n%s", name, diff)
		}
		if v := sysctlIn(t, pod, sysctl.Forwarding6); v != "0" {
			t.Errorf("pod %s forwards IPv6: %s = %s", name, sysctl.Forwarding6, v)
		}
	}
	addrs6 := ipLines(t, podC, "-6", "addr", "show", "dev", "eth0", "scope", "global")
	if !slices.ContainsFunc(addrs6, func(l string) bool { return strings.HasPrefix(l, "inet6 fd00:10:244::3/128 scope global nodad") }) {
		t.Errorf("pod c's IPv6 address: %q, want fd00:10:244::3/128 nodad", addrs6)
	}
	if diff := cmp.Diff([]string{"169.254.1.1 dev eth0 lladdr ee:ee:ee:ee:ee:ee PERMANENT"}, ipLines(t, podD, "-4", "neigh", "show", "169.254.1.1")); diff != "" {
		t.Errorf("ip -4 neigh in dual-stack pod d (-want +got):\n%s", diff)
	}
	for _, s := range n.specs {
		for key, want := range map[string]string{sysctl.AcceptDAD(s.HostVeth): "0", sysctl.AddrGenMode(s.HostVeth): "0", sysctl.DisableIPv6(s.HostVeth): "0"} {
			if v := sysctlIn(t, n.ns, key); v != want {
				t.Errorf("node %s = %s, want %s", key, v, want)
			}
		}
	}
	n.checkPods(t)

	// Idempotent: a pass over what ADD made changes nothing.
	if p := n.plan(t); !p.Empty() {
		t.Errorf("Read+Diff after the ADDs = %+v, want an empty plan", p)
	}
	if changes := n.pass(t); len(changes) != 0 {
		t.Errorf("a pass after the ADDs changed sysctls: %v", changes)
	}

	// Drift: a pod's /128 deleted, and IPv6 turned off and on again on
	// another's veth, which takes its routes and link-local with it.
	netnstest.Run(t, n.ns, "ip", "-6", "route", "del", "fd00:10:244::1/128", "dev", a.HostVeth)
	writeSysctlIn(t, n.ns, sysctl.DisableIPv6(b.HostVeth), "1")
	writeSysctlIn(t, n.ns, sysctl.AcceptDAD(b.HostVeth), "1")
	for _, s := range []veth.Spec{a, b} {
		if err := in(t, n.ns, func() error { return veth.Check(s) }); err == nil {
			t.Errorf("veth.Check %v after the drift = nil, want what is missing", s.IPs)
		}
	}
	if err := in(t, n.ns, func() error { return veth.Check(b) }); err == nil || !strings.Contains(err.Error(), "fe80::ecee:eeff:feee:eeee") {
		t.Errorf("veth.Check of pod b with IPv6 off on its veth = %v, want the link-local named", err)
	}
	changes := n.pass(t)
	wantChanges := []sysctl.Change{
		{Setting: sysctl.Setting{Key: sysctl.AcceptDAD(b.HostVeth), Value: "0"}, Was: "1"},
		{Setting: sysctl.Setting{Key: sysctl.DisableIPv6(b.HostVeth), Value: "0"}, Was: "1"},
	}
	if diff := cmp.Diff(wantChanges, changes); diff != "" {
		t.Errorf("the pass's sysctl repairs (-want +got):\n%s", diff)
	}
	if p := n.plan(t); !p.Empty() {
		t.Errorf("Read+Diff after the repair = %+v, want an empty plan", p)
	}
	n.checkPods(t)
	ping(t, podA, "pod a", "fd00:10:244::2")
	ping(t, n.ns, "the node", "fd00:10:244::1")

	// DEL: the pods' veths, routes and interfaces go; the blocks stay.
	for _, s := range n.specs {
		if err := in(t, n.ns, func() error { return cniPods(n.owner).Down(s.HostVeth, nil) }); err != nil {
			t.Errorf("Down %s: %v", s.HostVeth, err)
		}
		if _, err := netnsHandle(t, s.Netns).LinkByName("eth0"); err == nil {
			t.Errorf("pod %v still has eth0 after Down", s.IPs)
		}
	}
	if diff := cmp.Diff([]string{"blackhole fd00:10:244::/122 dev lo"}, ipLines(t, n.ns, "-6", "route", "show", "table", "main", "proto", "238")); diff != "" {
		t.Errorf("ip -6 route show proto 238 after the DELs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"eth0", "lo", "uplink1"}, linkNames(t, netnsHandle(t, n.ns.Path()))); diff != "" {
		t.Errorf("links on the node after the DELs (-want +got):\n%s", diff)
	}
	n.specs = nil
	if p := n.plan(t); !p.Empty() {
		t.Errorf("Read+Diff after the DELs = %+v, want an empty plan", p)
	}
}

// converge applies what Diff finds between want and the kernel, and fails
// t unless the kernel then reads back as want (an empty Diff). It returns
// what it read last.
func converge(t *testing.T, k *Kernel, want State) State {
	t.Helper()
	have, err := k.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if err := k.Apply(Diff(want, have)); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if have, err = k.Read(); err != nil {
		t.Fatalf("Read after Apply: %v", err)
	}
	if p := Diff(want, have); !p.Empty() {
		t.Errorf("Diff after Apply = %+v, want empty", p)
	}
	return have
}

// Reef's IPv6 routes on the node, without pods: Read finds exactly those
// of protocol 238 in either family, Apply writes blackholes and the other
// nodes' blocks (onlink, or through the router of the node's own route to
// the owner) and deletes what no one wants, and leaves the rest alone.
func TestKernelReadApplyIPv6(t *testing.T) {
	requireRoot(t)
	n := newV6Node(t)
	ip := func(args ...string) { netnstest.Run(t, n.ns, append([]string{"ip"}, args...)...) }
	// Not ours.
	ip("-6", "route", "add", "2001:db8:99::/64", "via", "2001:db8:1::fe", "dev", "eth0", "proto", "static")
	ip("-6", "route", "add", "blackhole", "fd00:98::/64", "proto", "static")
	// Ours, nobody's: a /128, a block through a gateway, one of a shape
	// reef never writes.
	ip("-6", "route", "add", "fd00:10:244::99/128", "dev", "eth0", "proto", "238")
	ip("-6", "route", "add", "fd00:10:244::140/122", "via", "2001:db8:1::2", "dev", "eth0", "proto", "238")
	ip("-6", "route", "add", "unreachable", "fd00:10:244::180/122", "proto", "238")
	ip("route", "add", "blackhole", "10.244.9.0/26", "proto", "238")

	have, err := n.k.Read()
	if err != nil {
		t.Fatal(err)
	}
	wantHave := state(nil,
		podRt("fd00:10:244::99/128", "eth0"),
		Route{Dst: pfx("fd00:10:244::140/122"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("2001:db8:1::2")},
		podRt("fd00:10:244::180/122", "?lo"),
		hole("10.244.9.0/26"))
	if diff := cmp.Diff(wantHave, have, stateCmpOpts); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}

	owner := netip.MustParseAddr("2001:db8:99::21")
	hop, err := n.k.HopTo(owner)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Hop{Gateway: netip.MustParseAddr("2001:db8:1::fe"), Dev: "eth0"}); hop != want {
		t.Errorf("HopTo(%s) = %+v, want %+v", owner, hop, want)
	}
	remote := []RemoteBlock{
		{Block: pfx("fd00:10:244::40/122"), Node: netip.MustParseAddr("2001:db8:1::12"), Dev: "eth0"},
		{Block: pfx("fd00:10:244::80/122"), Node: owner, Dev: hop.Dev, Gateway: hop.Gateway},
	}
	converge(t, n.k, Desired(nil, []netip.Prefix{pfx("fd00:10:244::/122")}, remote, nil))
	wantAll := []string{
		"2001:db8:1::/64 dev eth0 proto kernel",
		"2001:db8:99::/64 via 2001:db8:1::fe dev eth0 proto static",
		"blackhole fd00:10:244::/122 dev lo proto 238",
		"blackhole fd00:98::/64 dev lo proto static",
		"fd00:10:244::40/122 via 2001:db8:1::12 dev eth0 proto 238 onlink",
		"fd00:10:244::80/122 via 2001:db8:1::fe dev eth0 proto 238",
	}
	got := slices.DeleteFunc(ipLines(t, n.ns, "-6", "route", "show", "table", "main"), func(l string) bool { return strings.HasPrefix(l, "fe80::/64") })
	for i := range got {
		got[i] = strings.Replace(got[i], "proto reef", "proto 238", 1) // with or without rt_protos.d
	}
	if diff := cmp.Diff(wantAll, got); diff != "" {
		t.Errorf("ip -6 route after Apply (-want +got):\n%s", diff)
	}
	// A gateway of another family is refused by name, and nothing is
	// written.
	mixed := Route{Dst: pfx("fd00:10:244::c0/122"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.0.2.12"), OnLink: true}
	if err := n.k.Apply(Plan{Replace: []Route{mixed}}); err == nil || !strings.Contains(err.Error(), "fd00:10:244::c0/122") {
		t.Errorf("Apply of %s = %v, want a refusal naming it", mixed, err)
	}
	if rs, _ := netnsHandle(t, n.ns.Path()).RouteListFiltered(unix.AF_INET6, &netlink.Route{Dst: nl.IPNet(mixed.Dst)}, netlink.RT_FILTER_DST); len(rs) != 0 {
		t.Errorf("a route of mixed families was written: %v", rs)
	}
}
