package routes

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/veth"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Kernel tests. veth.Setup, veth.Check, veth.Teardown and Kernel work in the
// caller's network namespace, so every call runs inside a throw-away "node"
// namespace (netnstest.New) through ns.Do, never in the namespace the test
// was started in.

// The throw-away namespaces' helpers (internal/netnstest).
var (
	requireRoot = netnstest.RequireRoot
	netnsHandle = netnstest.Handle
	in          = netnstest.Do
)

// nodeWithOther is a throw-away node namespace (root only) with a veth
// pair that is not reef's: other0, up, at 192.0.2.1/24, and other1, up.
// ip runs ip(8) in the namespace.
func nodeWithOther(t *testing.T) (node ns.NetNS, nodeH netlinksafe.Handle, ip func(args ...string)) {
	t.Helper()
	return nodeWithVeth(t, "other0", "192.0.2.1/24")
}

// nodeWithVeth is a throw-away node namespace (root only) with a veth
// pair that is not reef's: dev, at addr, and other1, both up.
func nodeWithVeth(t *testing.T, dev, addr string) (node ns.NetNS, nodeH netlinksafe.Handle, ip func(args ...string)) {
	t.Helper()
	requireRoot(t)
	node = netnstest.New(t)
	nodeH = netnsHandle(t, node.Path())
	ip = func(args ...string) { netnstest.Run(t, node, append([]string{"ip"}, args...)...) }
	ip("link", "add", dev, "type", "veth", "peer", "name", "other1")
	ip("link", "set", dev, "up")
	ip("link", "set", "other1", "up")
	ip("addr", "add", addr, "dev", dev)
	return node, nodeH, ip
}

// sysctlIn reads a sysctl of namespace n.
func sysctlIn(t *testing.T, n ns.NetNS, name string) string {
	t.Helper()
	var v string
	if err := in(t, n, func() (err error) { v, err = (sysctl.Proc{}).Get(name); return err }); err != nil {
		t.Fatal(err)
	}
	return v
}

func writeSysctlIn(t *testing.T, n ns.NetNS, name, value string) {
	t.Helper()
	if err := in(t, n, func() error { return (sysctl.Proc{}).Set(name, value) }); err != nil {
		t.Fatal(err)
	}
}

// routeStrings renders the IPv4 routes of the main table that match filter
// in the style of `ip route`, sorted.
func routeStrings(t *testing.T, h netlinksafe.Handle, filter *netlink.Route, mask uint64) []string {
	t.Helper()
	filter.Table = unix.RT_TABLE_MAIN
	rs, err := h.RouteListFiltered(unix.AF_INET, filter, mask|netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatalf("list routes: %v", err)
	}
	var out []string
	for _, r := range rs {
		var b strings.Builder
		if r.Type == unix.RTN_BLACKHOLE {
			b.WriteString("blackhole ")
		}
		if isDefault(r.Dst) {
			b.WriteString("default")
		} else {
			b.WriteString(r.Dst.String())
		}
		if r.Gw != nil {
			fmt.Fprintf(&b, " via %s", r.Gw)
		}
		if r.LinkIndex != 0 {
			l, err := h.LinkByIndex(r.LinkIndex)
			if err != nil {
				t.Fatalf("link %d: %v", r.LinkIndex, err)
			}
			fmt.Fprintf(&b, " dev %s", l.Attrs().Name)
		}
		if r.Scope == netlink.SCOPE_LINK {
			b.WriteString(" scope link")
		}
		fmt.Fprintf(&b, " proto %d", r.Protocol)
		out = append(out, b.String())
	}
	sort.Strings(out)
	return out
}

func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0 && dst.IP.IsUnspecified()
}

func linkNames(t *testing.T, h netlinksafe.Handle) []string {
	t.Helper()
	ls, err := h.LinkList()
	if err != nil {
		t.Fatalf("list links: %v", err)
	}
	var names []string
	for _, l := range ls {
		names = append(names, l.Attrs().Name)
	}
	sort.Strings(names)
	return names
}

func TestPodLifecycle(t *testing.T) {
	requireRoot(t)
	node, pod := netnstest.New(t), netnstest.New(t)
	nodeH, podH := netnsHandle(t, node.Path()), netnsHandle(t, pod.Path())

	// A new netns may inherit forwarding; veth.Setup must turn it off.
	writeSysctlIn(t, pod, "net/ipv4/ip_forward", "1")

	spec := veth.Spec{
		Netns:    pod.Path(),
		IfName:   "eth0",
		HostVeth: HostVethName("default", "web-1", "3f1c0a9e2b7d"),
		IPs:      addrs("10.244.1.5"),
		MTU:      1400,
	}
	var links veth.Pair
	if err := in(t, node, func() (err error) { links, err = cniPods(sysctl.New(sysctl.Proc{})).Up(spec); return err }); err != nil {
		t.Fatalf("Up: %v", err)
	}

	// Node side.
	host, err := nodeH.LinkByName(spec.HostVeth)
	if err != nil {
		t.Fatalf("node-side veth %s: %v", spec.HostVeth, err)
	}
	if host.Type() != "veth" {
		t.Errorf("%s is a %s, want veth", spec.HostVeth, host.Type())
	}
	a := host.Attrs()
	if a.HardwareAddr.String() != "ee:ee:ee:ee:ee:ee" {
		t.Errorf("%s MAC = %s, want ee:ee:ee:ee:ee:ee", spec.HostVeth, a.HardwareAddr)
	}
	if a.MTU != 1400 {
		t.Errorf("%s MTU = %d, want 1400", spec.HostVeth, a.MTU)
	}
	if a.Flags&net.FlagUp == 0 {
		t.Errorf("%s is down", spec.HostVeth)
	}
	if a.HardwareAddr.String() != links.HostMAC.String() {
		t.Errorf("veth.Pair.HostMAC = %s, kernel has %s", links.HostMAC, a.HardwareAddr)
	}
	if v := sysctlIn(t, node, sysctl.ProxyARP(spec.HostVeth)); v != "1" {
		t.Errorf("proxy_arp on %s = %q, want 1", spec.HostVeth, v)
	}
	wantNode := []string{"10.244.1.5/32 dev " + spec.HostVeth + " scope link proto 238"}
	if diff := cmp.Diff(wantNode, routeStrings(t, nodeH, &netlink.Route{Protocol: Protocol}, netlink.RT_FILTER_PROTOCOL)); diff != "" {
		t.Errorf("node routes proto 238 (-want +got):\n%s", diff)
	}

	// Pod side.
	eth0, err := podH.LinkByName("eth0")
	if err != nil {
		t.Fatalf("eth0 in the pod: %v", err)
	}
	if eth0.Attrs().MTU != 1400 {
		t.Errorf("pod eth0 MTU = %d, want 1400", eth0.Attrs().MTU)
	}
	if eth0.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("pod eth0 is down")
	}
	if eth0.Attrs().HardwareAddr.String() != links.PodMAC.String() {
		t.Errorf("veth.Pair.PodMAC = %s, kernel has %s", links.PodMAC, eth0.Attrs().HardwareAddr)
	}
	addrs, err := podH.AddrList(eth0, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	var gotAddrs []string
	for _, ad := range addrs {
		gotAddrs = append(gotAddrs, ad.IPNet.String())
	}
	if diff := cmp.Diff([]string{"10.244.1.5/32"}, gotAddrs); diff != "" {
		t.Errorf("pod eth0 addresses (-want +got):\n%s", diff)
	}
	wantPod := []string{
		"169.254.1.1/32 dev eth0 scope link proto 3",
		"default via 169.254.1.1 dev eth0 proto 3",
	}
	if diff := cmp.Diff(wantPod, routeStrings(t, podH, &netlink.Route{}, 0)); diff != "" {
		t.Errorf("pod routes (-want +got):\n%s", diff)
	}
	neighs, err := podH.NeighList(eth0.Attrs().Index, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	var gotNeigh []string
	for _, n := range neighs {
		gotNeigh = append(gotNeigh, fmt.Sprintf("%s lladdr %s permanent=%v", n.IP, n.HardwareAddr, n.State == netlink.NUD_PERMANENT))
	}
	if diff := cmp.Diff([]string{"169.254.1.1 lladdr ee:ee:ee:ee:ee:ee permanent=true"}, gotNeigh); diff != "" {
		t.Errorf("pod neighbours (-want +got):\n%s", diff)
	}
	if v := sysctlIn(t, pod, "net/ipv4/ip_forward"); v != "0" {
		t.Errorf("pod net.ipv4.ip_forward = %q, want 0", v)
	}

	// CHECK finds everything in place, then a missing route.
	if err := in(t, node, func() error { return veth.Check(spec) }); err != nil {
		t.Errorf("veth.Check after veth.Setup: %v", err)
	}
	netnstest.Run(t, node, "ip", "route", "del", "10.244.1.5/32", "dev", spec.HostVeth)
	err = in(t, node, func() error { return veth.Check(spec) })
	if err == nil || !strings.Contains(err.Error(), "route") || !strings.Contains(err.Error(), "10.244.1.5") {
		t.Errorf("veth.Check without the node route = %v, want an error naming the route", err)
	}

	// A repeated Up (a new sandbox of the same pod) replaces the stale
	// pair and restores what was lost.
	pods := cniPods(sysctl.New(sysctl.Proc{}))
	if err := in(t, node, func() (err error) { _, err = pods.Up(spec); return err }); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if err := in(t, node, func() error { return veth.Check(spec) }); err != nil {
		t.Errorf("veth.Check after second Up: %v", err)
	}

	// Down removes the pair and its route, and may be repeated.
	if err := in(t, node, func() error { return pods.Down(spec.HostVeth, nil) }); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if _, err := nodeH.LinkByName(spec.HostVeth); err == nil {
		t.Errorf("%s still exists after Down", spec.HostVeth)
	}
	if _, err := podH.LinkByName("eth0"); err == nil {
		t.Errorf("pod eth0 still exists after Down")
	}
	if got := routeStrings(t, nodeH, &netlink.Route{Protocol: Protocol}, netlink.RT_FILTER_PROTOCOL); len(got) != 0 {
		t.Errorf("node routes proto 238 after Down: %v", got)
	}
	if err := in(t, node, func() error { return pods.Down(spec.HostVeth, nil) }); err != nil {
		t.Errorf("second Down = %v, want nil", err)
	}
	if err := in(t, node, func() error { return veth.Check(spec) }); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("veth.Check after Down = %v, want an error naming what is missing", err)
	}
	if err := in(t, node, func() error { return pods.Down("eth0", nil) }); err == nil {
		t.Errorf("Down(eth0) = nil, want a refusal: not a reef link")
	}
}

func TestSetupPodNetnsGone(t *testing.T) {
	requireRoot(t)
	node := netnstest.New(t)
	nodeH := netnsHandle(t, node.Path())

	plain := filepath.Join(t.TempDir(), "netns")
	if err := os.WriteFile(plain, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(t.TempDir(), "no-such-netns"),
		plain, // a netns file whose bind mount is gone
	} {
		spec := veth.Spec{Netns: path, IfName: "eth0", HostVeth: "reefgone0000000", IPs: addrs("10.244.1.6"), MTU: 1400}
		err := in(t, node, func() error { _, err := veth.Setup(spec, nil); return err })
		if !errors.Is(err, veth.ErrNetnsGone) {
			t.Errorf("veth.Setup(netns %s) = %v, want veth.ErrNetnsGone", path, err)
		} else if !strings.Contains(err.Error(), path) {
			t.Errorf("veth.Setup(netns %s) = %v, want the path named", path, err)
		}
		if veth.NetnsExists(path) {
			t.Errorf("veth.NetnsExists(%s) = true", path)
		}
	}
	if diff := cmp.Diff([]string{"lo"}, linkNames(t, nodeH)); diff != "" {
		t.Errorf("links left on the node (-want +got):\n%s", diff)
	}
	if !veth.NetnsExists(node.Path()) {
		t.Errorf("veth.NetnsExists(%s) = false for a live namespace", node.Path())
	}
}

// TestSetupBeforeRoutes: veth.Spec.BeforeRoutes runs with the pod's end
// wired (its address and default route) and no node route to the pod
// yet; its error fails Setup, and nothing of the pod is left.
func TestSetupBeforeRoutes(t *testing.T) {
	requireRoot(t)
	node, pod := netnstest.New(t), netnstest.New(t)
	nodeH, podH := netnsHandle(t, node.Path()), netnsHandle(t, pod.Path())
	ours := &netlink.Route{Protocol: Protocol}
	for _, fail := range []bool{false, true} {
		spec := veth.Spec{Netns: pod.Path(), IfName: "eth0", HostVeth: "reefbefore00000", IPs: addrs("10.244.1.7"), MTU: 1400}
		var sawNode, sawPod []string
		spec.BeforeRoutes = func() error {
			sawNode = routeStrings(t, nodeH, ours, netlink.RT_FILTER_PROTOCOL)
			sawPod = routeStrings(t, podH, &netlink.Route{}, 0)
			if fail {
				return errors.New("injected")
			}
			return nil
		}
		err := in(t, node, func() error { _, err := veth.Setup(spec, nil); return err })
		if fail != (err != nil) {
			t.Fatalf("Setup with BeforeRoutes failing %v: %v", fail, err)
		}
		if len(sawNode) != 0 {
			t.Errorf("node routes proto 238 when BeforeRoutes ran: %v, want none", sawNode)
		}
		if want := []string{"169.254.1.1/32 dev eth0 scope link proto 3", "default via 169.254.1.1 dev eth0 proto 3"}; !cmp.Equal(want, sawPod) {
			t.Errorf("pod routes when BeforeRoutes ran: %v, want %v", sawPod, want)
		}
		got := routeStrings(t, nodeH, ours, netlink.RT_FILTER_PROTOCOL)
		if fail {
			if len(got) != 0 || !cmp.Equal([]string{"lo"}, linkNames(t, nodeH)) {
				t.Errorf("after BeforeRoutes failed: node routes %v, links %v; want none, lo", got, linkNames(t, nodeH))
			}
		} else if want := []string{"10.244.1.7/32 dev reefbefore00000 scope link proto 238"}; !cmp.Equal(want, got) {
			t.Errorf("node routes proto 238 after Setup: %v, want %v", got, want)
		}
	}
}

func TestKernelReadApply(t *testing.T) {
	// Not ours: a veth pair with other names, an address and a static route.
	node, nodeH, ip := nodeWithOther(t)
	ip("route", "add", "10.99.0.0/24", "dev", "other0", "proto", "static")
	ip("route", "add", "blackhole", "10.98.0.0/24", "proto", "static")
	// Ours: an endpoint's veth, a stray veth, and proto 238 routes nobody
	// wants, one of a shape reef never writes.
	ip("link", "add", "reefkeep1", "type", "veth", "peer", "name", "xpeer1")
	ip("link", "set", "reefkeep1", "up")
	ip("link", "add", "reefstray1", "type", "veth", "peer", "name", "xpeer2")
	ip("link", "set", "reefstray1", "up")
	ip("route", "add", "blackhole", "10.244.9.0/26", "proto", "238")
	ip("route", "add", "10.244.1.99/32", "dev", "other0", "scope", "link", "proto", "238")
	ip("route", "add", "10.244.5.0/26", "via", "192.0.2.2", "dev", "other0", "proto", "238")
	ip("route", "add", "10.244.6.0/26", "dev", "other0", "scope", "global", "proto", "238")
	ip("route", "add", "10.244.1.7/32", "dev", "reefstray1", "scope", "link", "proto", "238")

	k := netnstest.Open(t, node, NewKernel)

	have, err := k.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	wantHave := withMTU(withMTU(state([]string{"reefkeep1", "reefstray1"},
		hole("10.244.9.0/26"),
		podRt("10.244.1.99/32", "other0"),
		Route{Dst: pfx("10.244.5.0/26"), Kind: RemoteRoute, Dev: "other0", Via: netip.MustParseAddr("192.0.2.2")},
		podRt("10.244.6.0/26", "?other0"),
		podRt("10.244.1.7/32", "reefstray1"),
	), "reefkeep1", "", 1500), "reefstray1", "", 1500)
	if diff := cmp.Diff(wantHave, have, stateCmpOpts); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}

	want := Desired(
		[]Endpoint{ep("10.244.1.7", "reefkeep1"), ep("10.244.1.8", "reefgone1")},
		[]netip.Prefix{pfx("10.244.1.0/26")},
		nil,
		have.Links,
	)
	plan := Diff(want, have)
	wantPlan := Plan{
		Replace: []Route{hole("10.244.1.0/26"), podRt("10.244.1.7/32", "reefkeep1")},
		DeleteRoute: []Route{podRt("10.244.1.99/32", "other0"), {Dst: pfx("10.244.5.0/26"), Kind: RemoteRoute, Dev: "other0", Via: netip.MustParseAddr("192.0.2.2")},
			podRt("10.244.6.0/26", "?other0"), hole("10.244.9.0/26")},
		DeleteLink: []string{"reefstray1"},
	}
	if diff := cmp.Diff(wantPlan, plan, stateCmpOpts); diff != "" {
		t.Fatalf("Diff (-want +got):\n%s", diff)
	}
	// A pass leaves alone what a CNI operation is busy with: the stray
	// veth and the /32 of 10.244.1.7 stay as they are; the rest changes.
	busy := testBusy{links: map[string]bool{"reefstray1": true}, addrs: map[netip.Addr]bool{netip.MustParseAddr("10.244.1.7"): true}}
	if err := NewPods(k, nil).apply(plan, busy); err != nil {
		t.Fatalf("Apply with busy objects: %v", err)
	}
	mid, err := k.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !mid.Links["reefstray1"] {
		t.Errorf("Apply deleted veth reefstray1, which a CNI operation was busy with")
	}
	if rt := mid.Routes[pfx("10.244.1.7/32")]; rt.Dev != "reefstray1" {
		t.Errorf("Apply changed the /32 of 10.244.1.7, which a CNI operation was busy with: now %v", rt)
	}
	if _, ok := mid.Routes[pfx("10.244.1.99/32")]; ok {
		t.Errorf("Apply with busy objects left 10.244.1.99/32, which nobody was busy with")
	}
	if err := k.Apply(plan); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	// Deletes of what is already gone are success, so a plan can be
	// applied twice.
	if err := k.Apply(Plan{DeleteRoute: plan.DeleteRoute, DeleteLink: plan.DeleteLink}); err != nil {
		t.Errorf("second Apply of the deletes: %v", err)
	}

	got, err := k.Read()
	if err != nil {
		t.Fatalf("Read after Apply: %v", err)
	}
	wantGot := withMTU(state([]string{"reefkeep1"}, hole("10.244.1.0/26"), podRt("10.244.1.7/32", "reefkeep1")), "reefkeep1", "", 1500)
	if diff := cmp.Diff(wantGot, got, stateCmpOpts); diff != "" {
		t.Errorf("Read after Apply (-want +got):\n%s", diff)
	}
	if p := Diff(want, got); !p.Empty() {
		t.Errorf("Diff after Apply = %+v, want empty", p)
	}

	// What is not ours is untouched.
	wantAll := []string{
		"10.244.1.7/32 dev reefkeep1 scope link proto 238",
		"10.99.0.0/24 dev other0 scope link proto 4",
		"192.0.2.0/24 dev other0 scope link proto 2",
		"blackhole 10.244.1.0/26 proto 238",
		"blackhole 10.98.0.0/24 proto 4",
	}
	if diff := cmp.Diff(wantAll, routeStrings(t, nodeH, &netlink.Route{}, 0)); diff != "" {
		t.Errorf("node routes after Apply (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"lo", "other0", "other1", "reefkeep1", "xpeer1"}, linkNames(t, nodeH)); diff != "" {
		t.Errorf("node links after Apply (-want +got):\n%s", diff)
	}

	// A plan that names a link without reef's prefix is refused.
	if err := k.Apply(Plan{DeleteLink: []string{"other0"}}); err == nil {
		t.Errorf("Apply deleting other0 = nil, want a refusal")
	}
	if _, err := nodeH.LinkByName("other0"); err != nil {
		t.Errorf("other0 after a refused delete: %v", err)
	}
}

// testBusy is a Busy of fixed objects.
type testBusy struct {
	links map[string]bool
	addrs map[netip.Addr]bool
}

func (b testBusy) Link(name string) bool   { return b.links[name] }
func (b testBusy) Addr(ip netip.Addr) bool { return b.addrs[ip] }

// TestApplyPodMTU: a pod's veth pair at another MTU than the desired one
// gets it on both ends, unless a CNI operation is busy with the veth; a
// pod whose netns is gone is left alone, as is a pod route or MTU on a
// veth that vanished since the pass read the kernel: neither fails.
func TestApplyPodMTU(t *testing.T) {
	requireRoot(t)
	node, pod := netnstest.New(t), netnstest.New(t)
	nodeH, podH := netnsHandle(t, node.Path()), netnsHandle(t, pod.Path())
	spec := veth.Spec{Netns: pod.Path(), IfName: "eth0", HostVeth: "reefmtu0000000", IPs: addrs("10.244.1.5"), MTU: 1500}
	if err := in(t, node, func() (err error) { _, err = veth.Setup(spec, nil); return err }); err != nil {
		t.Fatalf("veth.Setup: %v", err)
	}
	k := netnstest.Open(t, node, NewKernel)
	mtus := func() (host, pod int) {
		t.Helper()
		h, err := nodeH.LinkByName(spec.HostVeth)
		if err != nil {
			t.Fatal(err)
		}
		p, err := podH.LinkByName("eth0")
		if err != nil {
			t.Fatal(err)
		}
		return h.Attrs().MTU, p.Attrs().MTU
	}

	have, err := k.Read()
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if got := have.MTUs[spec.HostVeth].MTU; got != 1500 {
		t.Fatalf("Read: %s has MTU %d, want 1500", spec.HostVeth, got)
	}
	want := Desired([]Endpoint{{IPs: spec.IPs, HostVeth: spec.HostVeth, Netns: spec.Netns, IfName: "eth0", MTU: 1400}}, nil, nil, have.Links)
	plan := Diff(want, have)
	wantPlan := Plan{SetMTU: []PodMTU{{HostVeth: spec.HostVeth, Netns: spec.Netns, IfName: "eth0", MTU: 1400}}}
	if diff := cmp.Diff(wantPlan, plan, stateCmpOpts); diff != "" {
		t.Fatalf("Diff (-want +got):\n%s", diff)
	}

	busy := testBusy{links: map[string]bool{spec.HostVeth: true}}
	if p := plan.Without(busy); !p.Empty() {
		t.Errorf("Without(busy veth) = %+v, want empty", p)
	}
	if err := NewPods(k, nil).apply(plan, busy); err != nil {
		t.Fatalf("Apply with the veth busy: %v", err)
	}
	if h, p := mtus(); h != 1500 || p != 1500 {
		t.Errorf("Apply changed the MTU of a veth a CNI operation was busy with: node %d, pod %d", h, p)
	}

	if err := k.Apply(plan); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if h, p := mtus(); h != 1400 || p != 1400 {
		t.Errorf("after Apply: node %d, pod %d, want 1400 on both ends", h, p)
	}
	if have, err = k.Read(); err != nil {
		t.Fatalf("Read: %v", err)
	}
	if p := Diff(want, have); !p.Empty() {
		t.Errorf("Diff after Apply = %+v, want empty", p)
	}
	// Again, with the node's end already right: the pod's end is still
	// brought in line, and nothing fails.
	netnstest.Run(t, pod, "ip", "link", "set", "eth0", "mtu", "1500")
	if err := k.Apply(plan); err != nil {
		t.Fatalf("second Apply: %v", err)
	}
	if h, p := mtus(); h != 1400 || p != 1400 {
		t.Errorf("after the second Apply: node %d, pod %d, want 1400 on both ends", h, p)
	}

	gone := plan.SetMTU[0]
	gone.MTU, gone.Netns = 1300, filepath.Join(t.TempDir(), "no-such-netns")
	if err := k.Apply(Plan{SetMTU: []PodMTU{gone}}); err != nil {
		t.Errorf("Apply with the pod's netns gone = %v, want nothing done (the pass releases the pod)", err)
	}
	if h, _ := mtus(); h != 1400 {
		t.Errorf("Apply with the pod's netns gone changed the node's end to %d", h)
	}

	// A sandbox removed without a DEL takes its veth pair along while a
	// pass runs: the plan it made from the kernel before names the veth.
	vanishedPod := netip.MustParseAddr("10.244.1.6")
	stale := Plan{Replace: []Route{{Dst: netip.PrefixFrom(vanishedPod, 32), Kind: PodRoute, Dev: "reefvanished00"}},
		SetMTU: []PodMTU{{HostVeth: "reefvanished00", Netns: pod.Path(), IfName: "eth0", MTU: 1300}}}
	if err := k.Apply(stale); err != nil {
		t.Errorf("Apply for a veth that vanished = %v, want nothing done", err)
	}
	if have, err = k.Read(); err != nil {
		t.Fatalf("Read: %v", err)
	}
	if _, ok := have.Routes[netip.PrefixFrom(vanishedPod, 32)]; ok {
		t.Errorf("Apply routed %s on a veth that does not exist", vanishedPod)
	}
	if h, p := mtus(); h != 1400 || p != 1400 {
		t.Errorf("Apply for a vanished veth changed another pair's MTU: node %d, pod %d", h, p)
	}
}

// cniPods is the pods' owner as the CNI path uses it, on the kernel of
// the caller's network namespace: Wire and Unwire open netlink handles of
// their own, so the Kernel needs none.
func cniPods(sys *sysctl.Owner) *Pods { return NewPods(&Kernel{}, sys) }
