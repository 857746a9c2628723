package daemon

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/nat/ndpfilter"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/routes/veth"
	"github.com/reefcni/reef/store"
)

// The reconciler's state tests, after tailscale's TestRouterStates: a
// node walks through states of its pods in random orders, from random
// drift, with ADDs and DELs half-way while a pass runs, and after each
// pass the fake kernel's text must be what the state says. They run
// without root: the kernel is fakeKernel, the store the real bbolt file.

var (
	statePool  = netip.MustParsePrefix("10.244.0.0/16")
	ownBlock   = netip.MustParsePrefix("10.244.0.0/26")
	otherBlock = netip.MustParsePrefix("10.244.0.64/26")
	otherNode  = netip.MustParseAddr("192.168.10.21")
)

// statePod is a pod of the walk; its veth is "reef" + its name.
type statePod struct {
	fam   family
	ports []store.PortMapping
	bw    *store.Bandwidth
}

// family is which addresses a pod has.
type family int

const (
	ipv4 family = iota
	ipv6        // IPv6 alone
	dual        // one of each
)

var statePods = map[string]statePod{
	"web":   {},
	"db":    {ports: []store.PortMapping{{Protocol: "tcp", HostPort: 5432, ContainerPort: 5432}}},
	"cache": {bw: &store.Bandwidth{EgressRate: 1e6, EgressBurst: 1e5}},
	"api":   {ports: []store.PortMapping{{Protocol: "udp", HostPort: 8053, ContainerPort: 53}}, bw: &store.Bandwidth{IngressRate: 2e6, IngressBurst: 2e5, EgressRate: 3e6, EgressBurst: 3e5}},
	// The dual-stack walk's (states6): IPv6 alone, and one of each.
	"log": {fam: ipv6},
	"dns": {fam: ipv6, ports: []store.PortMapping{{Protocol: "udp", HostPort: 1053, ContainerPort: 53}}, bw: &store.Bandwidth{IngressRate: 4e6, IngressBurst: 4e5}},
	"app": {fam: dual, ports: []store.PortMapping{{Protocol: "tcp", HostPort: 8080, ContainerPort: 80}}},
	"mq":  {fam: dual, bw: &store.Bandwidth{EgressRate: 5e6, EgressBurst: 5e5}},
}

// podText is what the kernel holds of each pod, with <name> for its
// address and <mtu> for the pods' MTU.
var podText = map[string]string{
	"web": `elem arp reef pod-addrs "reefweb" . <web>
link reefweb mtu <mtu>
peer reefweb eth0 in /run/netns/web mtu <mtu>
route <web>/32 dev reefweb scope link proto reef
sysctl net/ipv4/conf/reefweb/proxy_arp = 1
`,
	"db": `elem arp reef pod-addrs "reefdb" . <db>
elem inet reef-hostport hairpin4 <db>
elem inet reef-hostport hostports4 tcp . 5432 : <db> . 5432
link reefdb mtu <mtu>
peer reefdb eth0 in /run/netns/db mtu <mtu>
route <db>/32 dev reefdb scope link proto reef
sysctl net/ipv4/conf/reefdb/proxy_arp = 1
sysctl net/ipv4/conf/reefdb/route_localnet = 1
`,
	"cache": `elem arp reef pod-addrs "reefcache" . <cache>
ifb reefbcache of reefcache
link reefcache mtu <mtu>
peer reefcache eth0 in /run/netns/cache mtu <mtu>
route <cache>/32 dev reefcache scope link proto reef
sysctl net/ipv4/conf/reefcache/proxy_arp = 1
tc reefcache in 0/0 out 1000000/100000
`,
	"api": `elem arp reef pod-addrs "reefapi" . <api>
elem inet reef-hostport hairpin4 <api>
elem inet reef-hostport hostports4 udp . 8053 : <api> . 53
ifb reefbapi of reefapi
link reefapi mtu <mtu>
peer reefapi eth0 in /run/netns/api mtu <mtu>
route <api>/32 dev reefapi scope link proto reef
sysctl net/ipv4/conf/reefapi/proxy_arp = 1
sysctl net/ipv4/conf/reefapi/route_localnet = 1
tc reefapi in 2000000/200000 out 3000000/300000
`,
	// IPv6 pods: a /128, an element in the NDP filter, IPv6 on their
	// veths with the EUI-64 link-local and no DAD (the node's default has
	// them off: newDualNode); hostPorts of each address's family.
	"log": `elem ip6 reef-ndp pod-addrs "reeflog" . <log:6>
link reeflog mtu <mtu>
peer reeflog eth0 in /run/netns/log mtu <mtu>
route <log:6>/128 dev reeflog proto reef
sysctl net/ipv4/conf/reeflog/proxy_arp = 1
sysctl net/ipv6/conf/reeflog/accept_dad = 0
sysctl net/ipv6/conf/reeflog/addr_gen_mode = 0
sysctl net/ipv6/conf/reeflog/disable_ipv6 = 0
`,
	"dns": `elem inet reef-hostport hairpin6 <dns:6>
elem inet reef-hostport hostports6 udp . 1053 : <dns:6> . 53
elem ip6 reef-ndp pod-addrs "reefdns" . <dns:6>
link reefdns mtu <mtu>
peer reefdns eth0 in /run/netns/dns mtu <mtu>
route <dns:6>/128 dev reefdns proto reef
sysctl net/ipv4/conf/reefdns/proxy_arp = 1
sysctl net/ipv4/conf/reefdns/route_localnet = 1
sysctl net/ipv6/conf/reefdns/accept_dad = 0
sysctl net/ipv6/conf/reefdns/addr_gen_mode = 0
sysctl net/ipv6/conf/reefdns/disable_ipv6 = 0
tc reefdns in 4000000/400000 out 0/0
`,
	"app": `elem arp reef pod-addrs "reefapp" . <app>
elem inet reef-hostport hairpin4 <app>
elem inet reef-hostport hairpin6 <app:6>
elem inet reef-hostport hostports4 tcp . 8080 : <app> . 80
elem inet reef-hostport hostports6 tcp . 8080 : <app:6> . 80
elem ip6 reef-ndp pod-addrs "reefapp" . <app:6>
link reefapp mtu <mtu>
peer reefapp eth0 in /run/netns/app mtu <mtu>
route <app:6>/128 dev reefapp proto reef
route <app>/32 dev reefapp scope link proto reef
sysctl net/ipv4/conf/reefapp/proxy_arp = 1
sysctl net/ipv4/conf/reefapp/route_localnet = 1
sysctl net/ipv6/conf/reefapp/accept_dad = 0
sysctl net/ipv6/conf/reefapp/addr_gen_mode = 0
sysctl net/ipv6/conf/reefapp/disable_ipv6 = 0
`,
	"mq": `elem arp reef pod-addrs "reefmq" . <mq>
elem ip6 reef-ndp pod-addrs "reefmq" . <mq:6>
ifb reefbmq of reefmq
link reefmq mtu <mtu>
peer reefmq eth0 in /run/netns/mq mtu <mtu>
route <mq:6>/128 dev reefmq proto reef
route <mq>/32 dev reefmq scope link proto reef
sysctl net/ipv4/conf/reefmq/proxy_arp = 1
sysctl net/ipv6/conf/reefmq/accept_dad = 0
sysctl net/ipv6/conf/reefmq/addr_gen_mode = 0
sysctl net/ipv6/conf/reefmq/disable_ipv6 = 0
tc reefmq in 0/0 out 5000000/500000
`,
}

// nodeText is what the kernel holds with no pod: the own block's
// blackhole, the other node's block on <dev>, forwarding, reef's tables,
// and the address on tunl0 that is not reef's.
const nodeText = `addr 192.168.99.1/32 dev tunl0
elem inet reef-nat all-pools4 10.244.0.0/16
elem inet reef-nat masq-pools4 10.244.0.0/16
route 10.244.0.64/26 via 192.168.10.21 dev <dev> onlink proto reef
route blackhole 10.244.0.0/26 proto reef
sysctl net/ipv4/ip_forward = 1
table arp reef
table inet reef-hostport
table inet reef-nat
`

// ipipText is what a pool with ipipMode adds: tunl0 up at the uplink's
// MTU less 20, with the node's tunnel address, reserved in the own block.
const ipipText = `addr <ipip-tunnel-addr-n1>/32 dev tunl0 label tunl0:reef
link tunl0 mtu 1480 up true
`

// node6Text is what a dual-stack node (nodeState.dual) holds beside
// nodeText with no pod: the IPv6 pool's masquerade, the own IPv6 block's
// blackhole, the other node's IPv6 block via the IPv6 address its record
// gave, IPv6 forwarding and the NDP filter's table.
const node6Text = `elem inet reef-nat all-pools6 fd00:10:244::/56
elem inet reef-nat masq-pools6 fd00:10:244::/56
route blackhole fd00:10:244::/122 proto reef
route fd00:10:244::40/122 via fd77::21 dev eth0 onlink proto reef
sysctl net/ipv6/conf/all/forwarding = 1
table ip6 reef-ndp
`

// nodeState is a state of the walk: the pods the node has, and its
// configuration: mtu (0: derived from the uplink), whether the IPv4 pool
// uses IPIP (ipipMode: Always; vxlanMode is Never throughout), and dual,
// whether the node has an IPv6 pool beside it (states6; vxlanMode and
// ipipMode Never).
type nodeState struct {
	pods []string
	mtu  int
	ipip bool
	dual bool
}

func (s nodeState) String() string {
	return fmt.Sprintf("%v mtu %d ipip %v dual-stack %v", s.pods, s.mtu, s.ipip, s.dual)
}

// states are the walk's states.
var states = []nodeState{
	{},
	{pods: []string{"web"}},
	{pods: []string{"web", "db"}},
	{pods: []string{"db", "cache"}, mtu: 1400},
	{pods: []string{"web", "db", "cache", "api"}},
	{pods: []string{"api"}},
	{pods: []string{"web", "cache"}, ipip: true},
	{pods: []string{"db", "api"}, mtu: 1450, ipip: true},
}

// states6 are the dual-stack walk's: a node with an IPv6 pool beside the
// IPv4 one, whose pods are IPv4 alone, IPv6 alone or of both.
var states6 = []nodeState{
	{dual: true},
	{pods: []string{"log"}, dual: true},
	{pods: []string{"web", "app"}, dual: true},
	{pods: []string{"app", "mq", "log"}, mtu: 1400, dual: true},
	{pods: []string{"web", "db", "app", "mq", "log", "dns"}, dual: true},
	{pods: []string{"dns", "mq"}, dual: true},
	{pods: []string{"log", "app", "cache"}, ipip: true, dual: true},
	{pods: []string{"db", "dns", "mq"}, mtu: 1450, ipip: true, dual: true},
}

// walk is a walk of the state tests: its states, the node they are of,
// and how many random orders it takes.
type walk struct {
	name   string
	states []nodeState
	dual   bool
	seeds  uint64
}

// walks are the state tests' walks: an IPv4 node's, and a dual-stack
// node's in fewer orders (each step of its has more pods).
var walks = []walk{{name: "IPv4", states: states, seeds: 20}, {name: "dual-stack", states: states6, dual: true, seeds: 10}}

// config is the node's configuration in s.
func (s nodeState) config() Config {
	ipip := EncapMode(tunnel.ModeNever)
	if s.ipip {
		ipip = EncapMode(tunnel.ModeAlways)
	}
	pools := []PoolConfig{{CIDR: statePool, BlockSize: 26, VXLANMode: EncapMode(tunnel.ModeNever), IPIPMode: ipip, NATOutgoing: true}}
	if s.dual {
		pools = append(pools, PoolConfig{CIDR: vxPool6, BlockSize: 122, VXLANMode: EncapNever, IPIPMode: EncapNever, NATOutgoing: true})
	}
	return Config{MTU: s.mtu, Pools: pools}
}

// podMTU is the pods' MTU in s, on a 1500 uplink.
func (s nodeState) podMTU() int { return DeriveMTU(s.config(), 1500, false) }

// wantText is the kernel's text in s, less tunl0's state while no pool
// uses IPIP (see text).
func wantText(s nodeState) string {
	dev := "eth0"
	text := nodeText
	if s.ipip {
		dev, text = tunnel.IPIPDevice, text+ipipText
	}
	if s.dual {
		text += node6Text
	}
	lines := strings.Split(strings.TrimSpace(strings.ReplaceAll(text, "<dev>", dev)), "\n")
	for _, p := range s.pods {
		lines = append(lines, strings.Split(strings.TrimSpace(strings.ReplaceAll(podText[p], "<mtu>", fmt.Sprint(s.podMTU()))), "\n")...)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// node is a reconciler on a fake kernel and a real store, with the CNI
// operations a test drives by hand.
type node struct {
	t    *testing.T
	st   *store.Store
	k    *fakeKernel
	ops  *activity.Log
	nat  *natDataplane
	sys  *sysctl.Owner
	own  *routes.Pods // the pods' owner: ADD, DEL and the pass ask it
	recs *fakeRecords
	rec  *reconciler
	pods map[string]bool // the pods the node has (ADD done, no DEL)
	mtu  int             // the pods' MTU, as ADD and the pass have it
	dual bool            // an IPv6 pool beside the IPv4 one (newDualNode)
	// pol, if not nil, is NetworkPolicy's dataplane on the fake API api
	// (newPolicyNode): ADD covers its pod, DEL uncovers it.
	pol *policyDataplane
	api *fakePolicyAPI
}

// newWalkNode is the node of a walk.
func newWalkNode(t *testing.T, w walk) *node {
	if w.dual {
		return newDualNode(t)
	}
	return newNode(t)
}

// newDualNode is newNode with the IPv6 pool too (vxNode), its uplink's
// IPv6 address fd77::20/64 and the other node's fd77::21, as its record
// gives it; veths are made with IPv6 off and no EUI-64 link-local, as
// the node's net.ipv6.conf.default says: reef turns them on for the
// IPv6 pods, and leaves the others'.
func newDualNode(t *testing.T) *node {
	t.Helper()
	n := vxNode(t)
	n.dual = true
	n.k.ipv6DefaultOff = true
	err := n.st.SetBlockOwnerAddrs6(map[blockproto.Node]store.Owner6{{Addr: otherNode, Inc: 1}: {Addr: netip.MustParseAddr("fd77::21")}})
	if err != nil {
		t.Fatal(err)
	}
	n.rec.net.uplink6 = Uplink6{Address: netip.MustParseAddr("fd77::20"), Prefix: netip.MustParsePrefix("fd77::20/64")}
	n.configure(nodeState{dual: true})
	return n
}

func newNode(t *testing.T) *node {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), "reef.db"), store.Options{Node: "n1", Address: netip.MustParseAddr("192.168.10.20")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	err = st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: ownBlock, Pool: statePool}}, Confirm: []netip.Prefix{ownBlock},
		Remember: []blockproto.RemoteBlock{{Block: otherBlock, Pool: statePool, Owner: blockproto.Node{Addr: otherNode, Inc: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	k := newFakeKernel()
	n := &node{t: t, st: st, k: k, ops: &activity.Log{}, sys: sysctl.New(k.sys), pods: map[string]bool{}}
	n.nat = &natDataplane{kernel: fakeNAT{k}, pools: []masq.Pool{{CIDR: statePool, NATOutgoing: true}}, log: log}
	n.own = routes.NewPods(fakePods{k}, n.sys)
	n.recs = &fakeRecords{st: st, pods: n.own, nat: n.nat, alive: map[string]bool{}}
	n.rec = newReconciler(reconcilerDeps{store: st, cni: n.recs, activity: n.ops, kernel: k, blockRoutes: routes.NewBlocks(k), pods: n.own, sysctls: n.sys, nat: n.nat,
		tunnels: newTunnels(tunnelDeps{kernel: k, store: st, sysctls: n.sys}, log),
		net: netInfo{node: "n1", uplink: Uplink{Interface: "eth0", Index: 2, Address: netip.MustParseAddr("192.168.10.20"),
			Prefix: netip.MustParsePrefix("192.168.10.20/24"), MTU: 1500},
			pools: []PoolConfig{{CIDR: statePool, BlockSize: 26, VXLANMode: EncapMode(tunnel.ModeNever), IPIPMode: EncapMode(tunnel.ModeNever), NATOutgoing: true}}, podMTU: 1500},
		pending: newPending(), interval: 1}, log)
	n.configure(nodeState{})
	return n
}

// configure gives the node s's configuration, as a restart of the daemon
// with a new config file would: ADD and the pass both see it.
func (n *node) configure(s nodeState) {
	n.mtu = s.podMTU()
	n.rec.net.podMTU = n.mtu
	n.rec.net.pools = s.config().Pools
	n.nat.pools = nil
	for _, p := range n.rec.net.pools {
		n.nat.pools = append(n.nat.pools, masq.Pool{CIDR: p.CIDR, NATOutgoing: p.NATOutgoing})
	}
}

func handleOf(pod string) string { return "reef.c-" + pod }
func netnsOf(pod string) string  { return "/run/netns/" + pod }

// addStart is an ADD up to its pending record and its kernel side, told
// to the activity log: the pods' owner's Up (veth pair, sysctls, /32) and
// Limit (tc, ifb). It is the point where a pass meets it half-way.
func (n *node) addStart(pod string) (store.Endpoint, *activity.Op) {
	n.t.Helper()
	sp := statePods[pod]
	pools := []store.Pool{{CIDR: statePool, BlockSize: 26}, {CIDR: vxPool6, BlockSize: 122}}
	switch sp.fam {
	case ipv4:
		pools = pools[:1]
	case ipv6:
		pools = pools[1:]
	}
	op := n.ops.Begin(handleOf(pod), "reef"+pod)
	ep, _, err := n.st.Allocate(store.Endpoint{Handle: handleOf(pod), Network: "reef", ContainerID: "c-" + pod, IfName: "eth0",
		Netns: netnsOf(pod), PodNamespace: "default", PodName: pod, HostVeth: "reef" + pod, MTU: n.mtu,
		PortMappings: sp.ports, Bandwidth: sp.bw}, pools...)
	if err != nil {
		n.t.Fatalf("allocate %s: %v", pod, err)
	}
	op.Pod(ep.Addrs(), ep.HostVeth)
	if n.pol != nil {
		if err := n.pol.Cover(ep); err != nil { // before the routes to the pod exist, as cniserver's ADD
			n.t.Fatalf("Cover %s: %v", pod, err)
		}
	}
	n.recs.alive[ep.Netns] = true
	spec := veth.Spec{Netns: ep.Netns, IfName: ep.IfName, HostVeth: ep.HostVeth, IPs: ep.Addrs(), MTU: n.mtu, HostPorts: len(ep.PortMappings) > 0}
	if _, err := n.own.Up(spec); err != nil {
		n.t.Fatalf("Up %s: %v", pod, err)
	}
	if ep.Bandwidth != nil {
		if _, err := n.own.Limit(ep.HostVeth, tc.Bandwidth{IngressRate: ep.Bandwidth.IngressRate, IngressBurst: ep.Bandwidth.IngressBurst,
			EgressRate: ep.Bandwidth.EgressRate, EgressBurst: ep.Bandwidth.EgressBurst}); err != nil {
			n.t.Fatalf("Limit %s: %v", pod, err)
		}
	}
	return ep, op
}

// addFinish is the rest of the ADD: elements, the record ready.
func (n *node) addFinish(ep store.Endpoint, op *activity.Op) {
	n.t.Helper()
	defer op.End()
	if err := n.nat.AddPod(ep); err != nil {
		n.t.Fatal(err)
	}
	ep.State = store.EndpointReady
	if err := n.st.SetEndpoint(ep); err != nil {
		n.t.Fatal(err)
	}
	n.pods[ep.PodName] = true
}

// delStart is a DEL up to its kernel side: elements gone, then the pods'
// owner's Down (veth pair, /32, ifb); the record still there.
func (n *node) delStart(pod string) (store.Endpoint, *activity.Op) {
	n.t.Helper()
	op := n.ops.Begin(handleOf(pod), "")
	ep, found, err := n.st.Endpoint(handleOf(pod))
	if err != nil || !found {
		n.t.Fatalf("DEL of %s: record %v, %v", pod, found, err)
	}
	op.Pod(ep.Addrs(), ep.HostVeth)
	if err := n.nat.DelPod(ep); err != nil {
		n.t.Fatal(err)
	}
	if err := n.own.Down(ep.HostVeth, nil); err != nil {
		n.t.Fatalf("Down %s: %v", pod, err)
	}
	return ep, op
}

// delFinish frees the address and, with NetworkPolicy, takes the pod
// out of its policies.
func (n *node) delFinish(ep store.Endpoint, op *activity.Op) {
	n.t.Helper()
	defer op.End()
	if _, _, err := n.st.Release(ep.Handle); err != nil {
		n.t.Fatal(err)
	}
	if n.pol != nil {
		n.pol.Uncover(ep)
	}
	delete(n.recs.alive, ep.Netns)
	delete(n.pods, ep.PodName)
}

// pass runs a whole pass; a failure fails the test.
func (n *node) pass() {
	n.t.Helper()
	if err := n.rec.pass(nil, wholePass); err != nil {
		n.t.Fatalf("pass: %v", err)
	}
}

var ipInText = regexp.MustCompile(`\b10\.244\.0\.[0-9]+(/[0-9]+)?|\bfd00:10:244::[0-9a-f]*(/[0-9]+)?`)

// text is the fake kernel's text, sorted, with each pod's address (alone,
// or as a /32 or /128) written <pod>, or <pod:6> if IPv6, from the
// store, and a reserved address <handle>; an address no record has is
// written <stray IP>.
func (n *node) text() string {
	eps, err := n.st.Endpoints()
	if err != nil {
		n.t.Fatal(err)
	}
	names := map[string]string{}
	for _, ep := range eps {
		for _, ip := range ep.Addrs() {
			name := ep.PodName
			if ep.State == store.EndpointReserved {
				name = ep.Handle
			}
			if ip.Is6() {
				name += ":6"
			}
			names[ip.String()] = "<" + name + ">"
		}
	}
	out := ipInText.ReplaceAllStringFunc(n.k.String(), func(m string) string {
		ip, bits, _ := strings.Cut(m, "/")
		if bits != "" && bits != "32" && bits != "128" {
			return m // a block or a pool
		}
		name, ok := names[ip]
		if !ok {
			name = "<stray " + ip + ">"
		}
		return strings.Replace(m, ip, name, 1)
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// textIn is text as wantText(s) has it: while no pool uses IPIP, tunl0's
// MTU and state are the module's, or what an earlier state left, and
// reef does not touch them.
func (n *node) textIn(s nodeState) string {
	lines := strings.SplitAfter(n.text(), "\n")
	if !s.ipip {
		lines = slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "link "+tunnel.IPIPDevice+" ") })
	}
	return strings.Join(lines, "")
}

// recordsAt fails the test unless every ready record says the pods' MTU:
// CHECK compares the kernel with them.
func (n *node) recordsAt(what string) {
	n.t.Helper()
	eps, err := n.st.Endpoints()
	if err != nil {
		n.t.Fatal(err)
	}
	for _, ep := range eps {
		if ep.State == store.EndpointReady && ep.MTU != n.mtu {
			n.t.Fatalf("%s: the record of %s says MTU %d, its veth has %d", what, ep.PodName, ep.MTU, n.mtu)
		}
	}
}

// moveTo brings the node's pods to want through ADDs and DELs.
func (n *node) moveTo(want []string) {
	for pod := range n.pods {
		if !slices.Contains(want, pod) {
			n.delFinish(n.delStart(pod))
		}
	}
	for _, pod := range want {
		if !n.pods[pod] {
			n.addFinish(n.addStart(pod))
		}
	}
}

// drift changes the kernel behind reef's back, as an operator or a crash
// would: what each pass must repair.
func (n *node) drift(rng *rand.Rand) string {
	cases := 12
	if n.dual {
		cases += len(drift6)
	}
	c := rng.IntN(cases)
	if c >= 12 {
		return drift6[c-12](n, rng)
	}
	return n.drift4(rng, c)
}

// drift4 is drift's case c of the drifts of every node.
func (n *node) drift4(rng *rand.Rand, c int) string {
	k := n.k
	pods := slices.Sorted(maps.Keys(n.pods))
	pick := func() string { return pods[rng.IntN(len(pods))] }
	switch {
	case c == 0 && len(pods) > 0:
		p := pick()
		ep, _, _ := n.st.Endpoint(handleOf(p))
		k.mu.Lock()
		delete(k.routes, netip.PrefixFrom(ep.IP, ep.IP.BitLen()))
		k.mu.Unlock()
		return "the route to the first address of " + p + " deleted"
	case c == 1:
		k.mu.Lock()
		delete(k.routes, ownBlock)
		k.mu.Unlock()
		return "the blackhole deleted"
	case c == 2:
		k.addLink("reefstray", 1500)
		return "a stray veth"
	case c == 3:
		k.sys.Put(sysctl.Forwarding, "0")
		return "forwarding off"
	case c == 4 && len(pods) > 0:
		p := pick()
		ep, _, _ := n.st.Endpoint(handleOf(p))
		if err := (fakeNAT{k}).DelPod(mustNATPod(n.t, ep)); err != nil {
			n.t.Fatal(err)
		}
		return "the elements of " + p + " deleted"
	case c == 5 && len(pods) > 0:
		p := pick()
		k.sys.Put(sysctl.ProxyARP("reef"+p), "0")
		return "proxy_arp of " + p + " off"
	case c == 6:
		k.mu.Lock()
		k.ifbs["reefbstray"] = "reefgone"
		k.routes[netip.MustParsePrefix("10.244.0.60/32")] = routes.Route{Dst: netip.MustParsePrefix("10.244.0.60/32"), Kind: routes.Blackhole}
		k.mu.Unlock()
		return "a stray ifb and route"
	case c == 7:
		k.mu.Lock()
		delete(k.tables, arpfilter.TableID)
		k.mu.Unlock()
		return "table arp reef deleted"
	case c == 8:
		gone := nat.Pod{Veth: "reefgone", IPs: []netip.Addr{netip.MustParseAddr("10.244.0.61")},
			Ports: []hostport.Mapping{{Proto: 6, Port: 7070, PodPort: 80}}}
		if err := (fakeNAT{k}).AddPod(gone); err != nil && !errors.Is(err, nat.ErrNoTable) {
			n.t.Fatal(err)
		}
		return "a stray pod's elements"
	case c == 9 && len(pods) > 0:
		p := pick()
		k.mu.Lock()
		k.links["reef"+p] = 9000
		k.mu.Unlock()
		return "the MTU of " + p + "'s veth changed"
	case c == 10:
		k.mu.Lock()
		k.ipip.Up, k.ipip.MTU = false, 1500
		maps.DeleteFunc(k.ipip.Addrs, func(_ netip.Addr, ours bool) bool { return ours })
		k.mu.Unlock()
		return "tunl0 down at MTU 1500, without reef's address"
	case c == 11:
		k.mu.Lock()
		k.ipip.Addrs[netip.MustParseAddr("10.244.0.62")] = true
		k.mu.Unlock()
		return "a stale reef address on tunl0"
	}
	return "none"
}

// drift6 are the dual-stack node's drifts beside drift's.
var drift6 = []func(n *node, rng *rand.Rand) string{
	func(n *node, rng *rand.Rand) string {
		ep, ok := n.pick6(rng)
		if !ok {
			return "none"
		}
		n.k.mu.Lock()
		delete(n.k.routes, netip.PrefixFrom(ep.Second.IP, 128))
		delete(n.k.routes, netip.PrefixFrom(ep.IP, 128))
		n.k.mu.Unlock()
		return "the /128 of " + ep.PodName + " deleted"
	},
	func(n *node, rng *rand.Rand) string {
		ep, ok := n.pick6(rng)
		if !ok {
			return "none"
		}
		n.k.sys.Put(sysctl.AcceptDAD(ep.HostVeth), "1")
		n.k.sys.Put(sysctl.AddrGenMode(ep.HostVeth), "1")
		n.k.sys.Put(sysctl.DisableIPv6(ep.HostVeth), "1")
		return "IPv6 off on the veth of " + ep.PodName + ", with DAD and no EUI-64 link-local"
	},
	func(n *node, _ *rand.Rand) string {
		n.k.sys.Put(sysctl.Forwarding6, "0")
		return "IPv6 forwarding off"
	},
	func(n *node, _ *rand.Rand) string {
		n.k.mu.Lock()
		delete(n.k.tables, ndpfilter.TableID)
		n.k.mu.Unlock()
		return "table ip6 reef-ndp deleted"
	},
	func(n *node, _ *rand.Rand) string {
		stray := netip.MustParseAddr("fd00:10:244::3e")
		gone := nat.Pod{Veth: "reefgone6", IPs: []netip.Addr{stray}, Ports: []hostport.Mapping{{Proto: 17, Port: 7053, PodPort: 53}}}
		if err := (fakeNAT{n.k}).AddPod(gone); err != nil && !errors.Is(err, nat.ErrNoTable) {
			n.t.Fatal(err)
		}
		n.k.mu.Lock()
		n.k.routes[netip.PrefixFrom(stray, 128)] = routes.Route{Dst: netip.PrefixFrom(stray, 128), Kind: routes.PodRoute, Dev: "reefgone6"}
		n.k.mu.Unlock()
		return "a stray IPv6 pod's elements and /128"
	},
}

// pick6 is a random pod of the node's with an IPv6 address, by its
// record.
func (n *node) pick6(rng *rand.Rand) (store.Endpoint, bool) {
	var eps []store.Endpoint
	for _, p := range slices.Sorted(maps.Keys(n.pods)) {
		ep, _, err := n.st.Endpoint(handleOf(p))
		if err != nil {
			n.t.Fatal(err)
		}
		if ep.HasIPv6() {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		return store.Endpoint{}, false
	}
	return eps[rng.IntN(len(eps))], true
}

func mustNATPod(t *testing.T, ep store.Endpoint) nat.Pod {
	p, err := natPod(ep)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReconcileStates walks the states in 20 random orders, each step from
// random drift, and checks the kernel's text after a pass, and that a
// second pass changes nothing.
func TestReconcileStates(t *testing.T) {
	for _, w := range walks {
		t.Run(w.name, func(t *testing.T) { walkStates(t, w) })
	}
}

func walkStates(t *testing.T, w walk) {
	for seed := range w.seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel() // the walks wait on the store's fsyncs, not the CPU
			rng := rand.New(rand.NewPCG(seed, 28))
			n := newWalkNode(t, w)
			n.pass()
			for step, i := range rng.Perm(len(w.states)) {
				s := w.states[i]
				n.configure(s)
				n.moveTo(s.pods)
				var drifts []string
				for range rng.IntN(3) {
					drifts = append(drifts, n.drift(rng))
				}
				n.pass()
				if got, want := n.textIn(s), wantText(s); got != want {
					t.Fatalf("step %d, state %v, after drift %q: kernel (-want +got):\n%s", step, s, drifts, textDiff(want, got))
				}
				n.recordsAt(fmt.Sprintf("step %d, state %v", step, s))
				before := n.text()
				n.pass()
				if after := n.text(); after != before {
					t.Fatalf("step %d, state %v: a second pass changed the kernel (-before +after):\n%s", step, s, textDiff(before, after))
				}
			}
		})
	}
}

// TestReconcileRacesCNI walks the states as TestReconcileStates does, but
// at each step one pod's ADD and another's DEL are half-way while the pass
// runs: begun before it, begun while it reads (after the store, before the
// kernel), or begun before and ended while it reads. The pass leaves what
// they touch alone: the ADD's pending record, veth and /32 stay, the
// DEL's veth and elements are not put back, nothing fails; once they are
// done, the next pass gives the state's text.
func TestReconcileRacesCNI(t *testing.T) {
	for _, w := range walks {
		t.Run(w.name, func(t *testing.T) { walkRaces(t, w) })
	}
}

func walkRaces(t *testing.T, w walk) {
	timings := []string{"before", "during", "in sync", "ends during"}
	for seed := range w.seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel() // the walks wait on the store's fsyncs, not the CPU
			rng := rand.New(rand.NewPCG(seed, 2828))
			n := newWalkNode(t, w)
			n.pass()
			for step, i := range rng.Perm(len(w.states)) {
				s := w.states[i]
				n.configure(s)
				x, y := n.racers(rng, s.pods) // the racing ADD and DEL
				xt, yt := timings[rng.IntN(len(timings))], timings[rng.IntN(len(timings))]
				what := fmt.Sprintf("step %d, state %v, ADD of %q %s, DEL of %q %s", step, s, x, xt, y, yt)
				finishX, finishY := n.race(x, xt, y, yt)
				n.pass()

				if got, want := n.textIn(s), raceText(s, x, xt); got != want {
					t.Fatalf("%s: after the racing pass, kernel (-want +got):\n%s", what, textDiff(want, got))
				}
				if x != "" {
					if _, found, _ := n.st.Endpoint(handleOf(x)); !found {
						t.Fatalf("%s: the pass released the record of the ADD", what)
					}
				}
				if y != "" && yt != "ends during" {
					if _, found, _ := n.st.Endpoint(handleOf(y)); !found {
						t.Fatalf("%s: the pass released the record of the DEL itself", what)
					}
				}
				finishX()
				finishY()
				n.pass()
				if got, want := n.textIn(s), wantText(s); got != want {
					t.Fatalf("%s: after the operations ended and a pass, kernel (-want +got):\n%s", what, textDiff(want, got))
				}
				n.recordsAt(what)
			}
		})
	}
}

// racers picks at random the pod whose ADD (x) and the one whose DEL (y)
// will race, on the way from the node's pods to target ("" for none), and
// brings the node to target but for them: every pod of target but x, and
// y.
func (n *node) racers(rng *rand.Rand, target []string) (x, y string) {
	var adds, dels []string
	for _, p := range target {
		if !n.pods[p] {
			adds = append(adds, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(n.pods)) {
		if !slices.Contains(target, p) {
			dels = append(dels, p)
		}
	}
	if len(adds) > 0 {
		x = adds[rng.IntN(len(adds))]
	}
	if len(dels) > 0 {
		y = dels[rng.IntN(len(dels))]
	}
	first := slices.DeleteFunc(slices.Clone(target), func(p string) bool { return p == x })
	if y != "" {
		first = append(first, y)
	}
	n.moveTo(first)
	return x, y
}

// raceText is what a pass that raced the ADD of x (timing xt) must have
// left in s: the state without x, plus x as far as its ADD got (its whole
// kernel side but the nftables elements, which come after it).
func raceText(s nodeState, x, xt string) string {
	base := s
	base.pods = slices.DeleteFunc(slices.Clone(s.pods), func(p string) bool { return p == x && xt != "ends during" })
	want := wantText(base)
	if x != "" && xt != "ends during" {
		for _, l := range strings.SplitAfter(strings.ReplaceAll(podText[x], "<mtu>", fmt.Sprint(s.podMTU())), "\n") {
			if !strings.HasPrefix(l, "elem ") {
				want += l
			}
		}
		want = sortedText(want)
	}
	return want
}

// race starts an ADD of x and a DEL of y ("" for none) as their timings
// say: "before" the pass, "during" its read (after the store, before the
// kernel), "in sync" (after the pass read the kernel, as the pods' owner
// is about to sync), or begun before and "ends during" the read. It sets
// the fake kernel's hooks for what runs in the pass, and returns what
// finishes each afterwards.
func (n *node) race(x, xt, y, yt string) (finishX, finishY func()) {
	finishX, finishY = func() {}, func() {}
	var inRead, inSync []func()
	if x != "" {
		var ep store.Endpoint
		var op *activity.Op
		switch xt {
		case "before":
			ep, op = n.addStart(x)
			finishX = func() { n.addFinish(ep, op) }
		case "during":
			inRead = append(inRead, func() { ep, op = n.addStart(x) })
			finishX = func() { n.addFinish(ep, op) }
		case "in sync":
			inSync = append(inSync, func() { ep, op = n.addStart(x) })
			finishX = func() { n.addFinish(ep, op) }
		case "ends during":
			ep, op = n.addStart(x)
			inRead = append(inRead, func() { n.addFinish(ep, op) })
		}
	}
	if y != "" {
		var ep store.Endpoint
		var op *activity.Op
		switch yt {
		case "before":
			ep, op = n.delStart(y)
			finishY = func() { n.delFinish(ep, op) }
		case "during":
			inRead = append(inRead, func() { ep, op = n.delStart(y) })
			finishY = func() { n.delFinish(ep, op) }
		case "in sync":
			inSync = append(inSync, func() { ep, op = n.delStart(y) })
			finishY = func() { n.delFinish(ep, op) }
		case "ends during":
			ep, op = n.delStart(y)
			inRead = append(inRead, func() { n.delFinish(ep, op) })
		}
	}
	all := func(fs []func()) func() {
		return func() {
			for _, f := range fs {
				f()
			}
		}
	}
	n.k.onRead, n.k.afterRead = all(inRead), all(inSync)
	return finishX, finishY
}

// textDiff is how two of the fake kernel's texts differ: the lines of
// want that got lacks, "-", and those it has beyond want, "+".
func textDiff(want, got string) string {
	count := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(want), "\n") {
		count[l]++
	}
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		count[l]--
	}
	var out []string
	for _, l := range slices.Sorted(maps.Keys(count)) {
		for ; count[l] > 0; count[l]-- {
			out = append(out, "- "+l)
		}
		for ; count[l] < 0; count[l]++ {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

func sortedText(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// TestReconcileDELNamedByHandle: a DEL begins knowing only its handle and
// learns the pod's veth and address from the record. A pass that runs in
// between leaves the pod alone whole, its /32, elements, sysctls and ifb
// (the pass read the record: activity.Mark.Know), instead of removing
// them as orphans of no live pod, which TestAddDelRacePasses once caught
// as "repairing nftables". Both at each timing: the DEL begun before the
// pass, and begun while it reads the kernel.
func TestReconcileDELNamedByHandle(t *testing.T) {
	for _, timing := range []string{"before", "during"} {
		t.Run(timing, func(t *testing.T) {
			all := nodeState{pods: []string{"web", "db", "cache", "api"}}
			n := newNode(t)
			n.configure(all)
			n.pass()
			n.moveTo(all.pods)
			n.pass()
			for _, pod := range []string{"db", "cache"} {
				var op *activity.Op
				begin := func() { op = n.ops.Begin(handleOf(pod), "") }
				if timing == "before" {
					begin()
				} else {
					n.k.onRead = begin
				}
				n.pass()
				if got, want := n.textIn(all), wantText(all); got != want {
					t.Fatalf("DEL of %s named by its handle alone: after a pass, kernel\n%s\nwant\n%s", pod, got, want)
				}
				if _, found, err := n.st.Endpoint(handleOf(pod)); err != nil || !found {
					t.Fatalf("the pass released the record of %s under its DEL: %v", pod, err)
				}
				op.End()
				n.delFinish(n.delStart(pod))
				all.pods = slices.DeleteFunc(all.pods, func(p string) bool { return p == pod })
				n.pass()
				if got, want := n.textIn(all), wantText(all); got != want {
					t.Fatalf("after the DEL of %s and a pass, kernel\n%s\nwant\n%s", pod, got, want)
				}
			}
		})
	}
}
