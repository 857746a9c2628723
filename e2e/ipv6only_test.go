package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/internal/lab"
)

// pool6Only is the pool of the IPv6-only nodes: /122 blocks, routed
// directly (TestVXLANIPv6Underlay has them through VXLAN).
const pool6Only = "pools:\n  - cidr: fd00:10:247::/56\n    vxlanMode: Never\n"

// TestIPv6OnlyNodes: three nodes with no IPv4 address (eth0 has only its
// IPv6 address; docs/design.md, "IPv6-only nodes"), each known in the
// block protocol by its bgp.routerID, meshed over IPv6 with bgp.peers,
// peerPrefixes and voters written as IPv6 addresses.
//
// Fail closed with the default config: while node3, a voter, has never
// run, node1 and node2, two of the three voters (a majority), have their
// session up, but neither can name node3 (no record announces its
// address), so an ADD on node1 waits and no claim is made, which `reef
// status` explains. Once
// node3 starts, the same ADD gets its address. Then each node's IPv6
// blocks are routed `via <owner's IPv6 address> dev eth0 onlink` on the
// others (reef status: each peer reached "direct over IPv6"), and pods
// ping each other and the nodes across nodes. node2
// restarted keeps its identity (from its store) and its block. Then
// natIPv6Only: masquerade to an outside server, hostPorts from it and a
// drift repair of table inet reef-nat, over IPv6.
func TestIPv6OnlyNodes(t *testing.T) {
	l := newLab(t)
	nodes, err := l.AddMeshWith(3, lab.NodeOptions{IPv6Only: true, Extra: pool6Only})
	if err != nil {
		t.Fatal(err)
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		if out := run(t, l, n.Netns, "ip", "-4", "-o", "addr", "show", "dev", "eth0"); strings.TrimSpace(out) != "" {
			t.Fatalf("%s's eth0 has IPv4 addresses: %s", n.Name, out)
		}
	}
	if err := lab.StartAll([]*lab.Node{n1, n2}); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan error, 1)
	var a *lab.Pod
	go func() {
		var err error
		a, err = n1.NewPod("default", "a")
		waiting <- err
	}()
	unresolved := n3.PeerAddress().String() + " (no record announces it yet"
	for _, n := range []*lab.Node{n1, n2} {
		eventually(t, 20*time.Second, func() string {
			st := mustStatus(t, n)
			u := st.GetVotersUnresolved()
			if len(u) != 1 || !strings.HasPrefix(u[0], unresolved) || !strings.Contains(st.GetClaimBlocked(), "does not know which node "+unresolved) {
				return fmt.Sprintf("%s: voters unresolved %q, claim blocked %q; want %q", n.Name, u, st.GetClaimBlocked(), unresolved)
			}
			other := n2
			if n == n2 {
				other = n1
			}
			for _, p := range st.GetPeers() {
				if p.GetAddress() == other.PeerAddress().String() && p.GetState() == "established" {
					return ""
				}
			}
			return fmt.Sprintf("%s has no established session to %s: %v", n.Name, other.Name, st.GetPeers())
		})
	}
	// Two whole passes (each with a block step) after node1 said so, with
	// the ADD waiting: no claim, pending or confirmed, on either node.
	waitPass(t, n1, n2)
	waitPass(t, n1, n2)
	for _, n := range []*lab.Node{n1, n2} {
		st := mustStatus(t, n)
		if len(st.GetBlocks()) != 0 || len(st.GetPendingClaims()) != 0 {
			t.Fatalf("%s claimed while a voter is unnamed: blocks %v, pending %v", n.Name, st.GetBlocks(), st.GetPendingClaims())
		}
	}
	select {
	case err := <-waiting:
		t.Fatalf("node1's ADD returned before node3 ran: %v", err)
	default:
	}
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("node1's ADD, once node3 runs: %v", err)
	}
	b, c := newPod(t, n2, "b"), newPod(t, n3, "c")
	converge(t, nodes...)
	checkRoutes6(t, nodes, "eth0", lab.NodeAddress6)

	for _, n := range nodes {
		st := mustStatus(t, n)
		if st.GetNodeAddress() != "" || st.GetIdentity() != n.Address.String() || st.GetNodeAddressV6() != lab.NodeAddress6(n).String() {
			t.Errorf("%s: reef status says address %q, identity %q, IPv6 %q; want none, %s, %s", n.Name, st.GetNodeAddress(), st.GetIdentity(), st.GetNodeAddressV6(), n.Address, lab.NodeAddress6(n))
		}
		if len(st.GetVotersUnresolved()) != 0 {
			t.Errorf("%s still cannot name voters %q", n.Name, st.GetVotersUnresolved())
		}
		for _, p := range st.GetPeers() {
			if p.GetReached() != "direct over IPv6" {
				t.Errorf("%s says peer %s is reached %q, want direct over IPv6", n.Name, p.GetAddress(), p.GetReached())
			}
		}
		if got, want := strings.Join(st.GetVoters(), " "), fmt.Sprintf("%s %s %s", n1.Address, n2.Address, n3.Address); got != want {
			t.Errorf("%s's voters by identity: %s, want %s", n.Name, got, want)
		}
	}
	for _, p := range []*lab.Pod{a, b, c} {
		if !p.IP.Is6() {
			t.Fatalf("pod %s on %s got %s, not IPv6", p.Name, p.Node.Name, p.IP)
		}
	}
	for _, c := range []struct {
		from string
		to   netip.Addr
	}{{a.Netns, b.IP}, {b.Netns, c.IP}, {c.Netns, a.IP}, {n1.Netns, b.IP}, {n3.Netns, a.IP}, {b.Netns, lab.NodeAddress6(n3)}} {
		if out, err := l.Run(c.from, "ping", "-6", "-c", "1", "-W", "2", c.to.String()); err != nil {
			t.Errorf("ping -6 %s from %s: %v\n%s", c.to, c.from, err, out)
		}
	}
	if st, err := n1.Reef("status"); err != nil || !strings.Contains(st, "node1  "+lab.NodeAddress6(n1).String()+" (identity "+n1.Address.String()+") on eth0") {
		t.Errorf("node1's reef status lacks its IPv6 address and identity: %v\n%s", err, st)
	}
	uniqueAddresses(t, []*lab.Pod{a, b, c})

	// node2 restarted (SIGTERM, start): its store keeps its identity, and
	// it keeps its block and its routes.
	before := blocksOf(t, n2)
	if err := n2.Restart(); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes...)
	if after := blocksOf(t, n2); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("node2's blocks changed across its restart: %v -> %v", before, after)
	}
	if st := mustStatus(t, n2); st.GetIdentity() != n2.Address.String() || len(st.GetVotersUnresolved()) != 0 {
		t.Errorf("node2 after its restart: identity %q, voters unresolved %q", st.GetIdentity(), st.GetVotersUnresolved())
	}
	if out, err := l.Run(a.Netns, "ping", "-6", "-c", "1", "-W", "2", b.IP.String()); err != nil {
		t.Errorf("ping -6 %s after node2's restart: %v\n%s", b.IP, err, out)
	}
	noWarnings(t, nodes, gobgpIdleRefused, gobgpSendOnClosed)
	t.Logf("masquerade, hostPorts and a drift repair over IPv6: %s", natIPv6Only(t, l, nodes, a, b).Round(time.Millisecond))

	// node3's state dir wiped (a reinstall at the same IPv6 address): its
	// new incarnation learns of the old one from node1's and node2's Seen
	// paths, which carry the IPv6 address the old one announced, takes it
	// for its own earlier incarnation and names it, and the others free
	// its block, as for a node known by an IPv4 address.
	oldInc, oldBlocks := mustStatus(t, n3).GetIncarnation(), blocksOf(t, n3)
	if len(oldBlocks) == 0 || ownerIncarnations(t, n1)[oldBlocks[0]] != n3.Address.String()+"#"+oldInc {
		t.Fatalf("node1 does not show node3's block %v as node3#%s's: %v", oldBlocks, oldInc, ownerIncarnations(t, n1))
	}
	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(n3.StateDir); err != nil {
		t.Fatal(err)
	}
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	if inc := mustStatus(t, n3).GetIncarnation(); inc == oldInc || len(oldBlocks) == 0 {
		t.Fatalf("node3's incarnation %s after the wipe (was %s), blocks before %v", inc, oldInc, oldBlocks)
	}
	for _, n := range []*lab.Node{n1, n2} {
		eventually(t, 20*time.Second, func() string {
			if o, ok := ownerIncarnations(t, n)[oldBlocks[0]]; ok && strings.HasSuffix(o, "#"+oldInc) {
				return fmt.Sprintf("%s still holds %s for node3's old incarnation %s", n.Name, oldBlocks[0], oldInc)
			}
			return ""
		})
	}
	if c := mustStatus(t, n3).GetConflicts(); len(c) != 0 {
		t.Errorf("node3 after its wipe reports conflicts: %q", c)
	}

	dupRouterID(t, l, nodes, a, b)
}

// dupRouterID: node4 starts with node1's bgp.routerID (a mistake the
// operator made). BGP refuses their session ("bad BGP identifier"), and
// the other nodes see two incarnations of one identity. Before reef bound
// a router ID to the node's IPv6 address, node4 took node1's incarnation
// for an earlier one of its own (it learned of it from node2's Seen path)
// and named it, and the cluster freed node1's blocks while its pods held
// their addresses. Now neither names the other: node1 keeps its
// incarnation and its block on every node, its pod keeps its traffic,
// and node1, node4 and node2 say what is wrong in reef status.
func dupRouterID(t *testing.T, l *lab.Lab, nodes []*lab.Node, a, b *lab.Pod) {
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	var peers []netip.Addr
	for _, n := range nodes {
		peers = append(peers, n.PeerAddress())
	}
	n4, err := l.AddNode("node4", lab.NodeOptions{IPv6Only: true, Extra: pool6Only, Peers: peers, PeerPrefixes: []netip.Prefix{lab.Underlay6},
		BGPExtra: "  routerID: " + n1.Address.String() + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	inc1 := mustStatus(t, n1).GetIncarnation()
	owners := map[string]map[string]string{n2.Name: ownerIncarnations(t, n2), n3.Name: ownerIncarnations(t, n3)}
	for _, n := range []*lab.Node{n2, n3} {
		if b := blocksOf(t, n1); len(b) == 0 || owners[n.Name][b[0]] != n1.Address.String()+"#"+inc1 {
			t.Fatalf("%s does not show node1's block %v as node1#%s's: %v", n.Name, b, inc1, owners[n.Name])
		}
	}
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	// tookFor: n freed an incarnation of node1's identity as a node back
	// with an empty state dir.
	tookFor := func(n *lab.Node) bool {
		for _, line := range strings.Split(n.Log(), "\n") {
			if strings.Contains(line, "came back with an empty state dir") && strings.Contains(line, "node="+n1.Address.String()+"#") {
				return true
			}
		}
		return false
	}
	sharedBy := func(n *lab.Node, want string) func() string {
		return func() string {
			st := mustStatus(t, n)
			for _, c := range st.GetConflicts() {
				if strings.Contains(c, want) {
					return ""
				}
			}
			return fmt.Sprintf("%s's reef status names no conflict %q: %q", n.Name, want, st.GetConflicts())
		}
	}
	// node4 has learned of node1's incarnation (from the others' Seen
	// paths), whatever it made of it: it says so, or it named node1's as
	// its predecessor and node2 or node3 let node1's blocks go.
	eventually(t, 20*time.Second, func() string {
		for _, n := range []*lab.Node{n2, n3} {
			if tookFor(n) {
				return ""
			}
		}
		return sharedBy(n4, "two nodes were given one bgp.routerID")()
	})
	// Two whole passes on every node after that.
	waitPass(t, n1, n2, n3, n4)
	waitPass(t, n1, n2, n3, n4)
	if st := mustStatus(t, n1); st.GetGone() != "" || st.GetIncarnation() != inc1 {
		t.Fatalf("node1 after node4 came with its router ID: incarnation %s (was %s), gone %q", st.GetIncarnation(), inc1, st.GetGone())
	}
	for _, n := range []*lab.Node{n2, n3} {
		if got := ownerIncarnations(t, n); fmt.Sprint(got) != fmt.Sprint(owners[n.Name]) {
			t.Errorf("%s's block owners changed when node4 came with node1's router ID: %v -> %v", n.Name, owners[n.Name], got)
		}
		if tookFor(n) {
			t.Errorf("%s took node4 for a new incarnation of node1", n.Name)
		}
	}
	if st := mustStatus(t, n4); st.GetGone() != "" {
		t.Errorf("node4 gone: %q", st.GetGone())
	}
	eventually(t, 20*time.Second, sharedBy(n1, "two nodes were given one bgp.routerID"))
	// node2 and node3 each hold one record of the identity (the best of
	// the two paths of one NLRI) beside the incarnation they knew: at
	// least one of them sees the other node's, and says so.
	eventually(t, 20*time.Second, func() string {
		const want = "incarnations announce it from different IPv6 addresses"
		if sharedBy(n2, want)() == "" || sharedBy(n3, want)() == "" {
			return ""
		}
		return sharedBy(n2, want)() + "; " + sharedBy(n3, want)()
	})
	if out, err := l.Run(a.Netns, "ping", "-6", "-c", "1", "-W", "2", b.IP.String()); err != nil {
		t.Errorf("ping -6 %s from node1's pod with node4 up: %v\n%s", b.IP, err, out)
	}
}

// ownerIncarnations maps block -> owner#incarnation as node n's IPAM
// shows it.
func ownerIncarnations(t *testing.T, n *lab.Node) map[string]string {
	t.Helper()
	rep, err := n.IPAM()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, b := range rep.GetBlocks() {
		m[b.GetCidr()] = b.GetOwnerAddress() + "#" + b.GetOwnerIncarnation()
	}
	return m
}

// TestIPv6OnlyReflectors: two reef route reflectors and four clients, all
// IPv6-only (docs/design.md, "IPv6-only nodes"): the reflectors name each
// other in bgp.peers and take the clients in through bgp.peerPrefixes
// (fd77::/64), the clients list the reflectors in bgp.routeReflectors,
// all by IPv6 address; three clients are the voters. The clients' names
// make their block searches start at the same block and they ADD their
// first pods at once, so their claims compete through the reflectors.
// Then: claims are confirmed, every block has one owner and no address
// is on two pods; every node routes every other node's block via the
// owner's IPv6 address; every pod (the reflectors host pods too) pings
// every other; each node's sessions are all up, of the right type, with
// nothing dropped; and a restart of reflector rr1 loses no ping between
// pods on two clients.
//
// The reflectors send each other only the paths they originate
// (bgp.acceptOwnPathsOnly); their import policy, which named the other
// reflectors by IPv4 address only (a /32 of an IPv6 address matched
// every client too), took nothing from the clients before.
func TestIPv6OnlyReflectors(t *testing.T) {
	slowSuite(t)
	l := newLab(t)
	addr6 := func(i int) netip.Addr { return lab.NodeAddress6(&lab.Node{Address: lab.NodeAddress(i)}) }
	const clients = 4
	rrAddrs := []netip.Addr{addr6(0), addr6(1)}
	voters := []netip.Addr{addr6(2), addr6(3), addr6(4)}
	pool := blockproto.Pool{CIDR: rrPrefix6, BlockSize: 124}
	pools := "pools:\n" + rrPool6
	timers := "  keepaliveTime: 1s\n  holdTime: 3s\n"
	var rrs, cs []*lab.Node
	for i, name := range []string{"rr1", "rr2"} {
		bgpSection := fmt.Sprintf("%s  routeReflector: true\n  peers: [%s]\n  peerPrefixes: [%s]\n  voters: %s\n  routerID: %s\n",
			timers, rrAddrs[1-i], lab.Underlay6, yamlAddrs(voters), lab.NodeAddress(i))
		n, err := l.AddNode(name, lab.NodeOptions{IPv6Only: true, BGP: bgpSection, Extra: pools})
		if err != nil {
			t.Fatal(err)
		}
		rrs = append(rrs, n)
	}
	for i, name := range sameOffsetNames(t, clients, pool) {
		bgpSection := fmt.Sprintf("%s  routeReflectors: %s\n  voters: %s\n  routerID: %s\n", timers, yamlAddrs(rrAddrs), yamlAddrs(voters), lab.NodeAddress(2+i))
		n, err := l.AddNode(name, lab.NodeOptions{IPv6Only: true, BGP: bgpSection, Extra: pools})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, n)
	}
	all := append(append([]*lab.Node{}, rrs...), cs...)
	for _, n := range all {
		if n.PeerAddress() != addr6(slices.Index(all, n)) {
			t.Fatalf("%s is at %s, want %s", n.Name, n.PeerAddress(), addr6(slices.Index(all, n)))
		}
	}
	pods := reflectedClaims(t, l, rrs, cs)
	checkRoutes6(t, all, "eth0", lab.NodeAddress6)
	for _, c := range cs {
		checkPeers(t, c, map[string]string{rrAddrs[0].String(): "reflector", rrAddrs[1].String(): "reflector"})
	}
	for i, rr := range rrs {
		want := map[string]string{rrAddrs[1-i].String(): "reflector"}
		for _, c := range cs {
			want[c.PeerAddress().String()] = "client"
		}
		checkPeers(t, rr, want)
	}
	for _, n := range all {
		if st := mustStatus(t, n); len(st.GetVotersUnresolved()) != 0 || st.GetIdentity() != n.Address.String() {
			t.Errorf("%s: identity %q, voters unresolved %q", n.Name, st.GetIdentity(), st.GetVotersUnresolved())
		}
	}
	noWarnings(t, all)

	noLossAcross(t, pods[0], pods[3], "the restart of reflector rr1", func() {
		if err := rrs[0].Restart(); err != nil {
			t.Fatal(err)
		}
	})
	if err := lab.WaitReflected(all, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	checkRoutes6(t, all, "eth0", lab.NodeAddress6)
	uniqueOwners(t, all...)
	noWarnings(t, all, gobgpIdleRefused, gobgpSendOnClosed, gobgpNoRestartFlag)
}

// yamlAddrs is a YAML flow list of addresses.
func yamlAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// TestIPv6OnlyReflectorsBird is TestIPv6OnlyReflectors with two BIRD 2
// route reflectors (lab.BirdConfigAt: the configuration of docs/bgp.md,
// its sessions from the reflector's IPv6 address, the clients taken in
// from fd77::/64, gateway recursive in the VPN channels) instead of reef
// ones, and six IPv6-only clients: claims compete and are confirmed once,
// no address twice, every client routes every other's block via the
// owner's IPv6 address, every pod pings every other.
func TestIPv6OnlyReflectorsBird(t *testing.T) {
	slowSuite(t)
	testIPv6OnlyExternalReflectors(t, "bird")
}

// TestIPv6OnlyReflectorsFRR is the same with two FRR reflectors
// (lab.FRRConfig as docs/bgp.md shows it, the clients' range IPv6).
func TestIPv6OnlyReflectorsFRR(t *testing.T) { slowSuite(t); testIPv6OnlyExternalReflectors(t, "frr") }

func testIPv6OnlyExternalReflectors(t *testing.T, kind string) {
	l := newLab(t)
	var rrAddrs []netip.Addr
	var hosts []string
	for i := range 2 {
		id := lab.BirdAddress(i)
		a := lab.NodeAddress6(&lab.Node{Address: id})
		name := fmt.Sprintf("%s%d", kind, i+1)
		var dump func() string
		switch kind {
		case "bird":
			b, err := l.AddBirdAt(name, id, a, lab.Underlay6)
			if err != nil {
				t.Fatal(err)
			}
			if err := b.Start(); err != nil {
				t.Fatal(err)
			}
			dump = func() string { out, _ := b.Birdc("show", "protocols", "all"); return out + "\nlog:\n" + b.Log() }
		case "frr":
			f, err := l.AddFRRAt(name, id, a, lab.Underlay6)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Start(); err != nil {
				t.Fatal(err)
			}
			dump = func() string {
				out, _ := f.Vtysh("show bgp summary")
				r, _ := f.Vtysh("show bgp ipv4 vpn")
				return out + r + "\nlog:\n" + f.Log()
			}
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s:\n%s", name, dump())
			}
		})
		rrAddrs, hosts = append(rrAddrs, a), append(hosts, name)
	}
	addr6 := func(i int) netip.Addr { return lab.NodeAddress6(&lab.Node{Address: lab.NodeAddress(i)}) }
	voters := []netip.Addr{addr6(0), addr6(1), addr6(2)}
	var cs []*lab.Node
	for i, name := range sameOffsetNames(t, rrClients, blockproto.Pool{CIDR: rrPrefix6, BlockSize: 124}) {
		bgpSection := fmt.Sprintf("  keepaliveTime: 1s\n  holdTime: 3s\n  routeReflectors: %s\n  voters: %s\n  routerID: %s\n", yamlAddrs(rrAddrs), yamlAddrs(voters), lab.NodeAddress(i))
		n, err := l.AddNode(name, lab.NodeOptions{IPv6Only: true, BGP: bgpSection, Extra: "pools:\n" + rrPool6})
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, n)
	}
	if err := lab.StartAll(cs); err != nil {
		t.Fatal(err)
	}
	if err := lab.WaitReflected(cs, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	pods := competingPods(t, l, cs, hosts, 1)
	if err := lab.WaitReflected(cs, 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	checkUnique(t, pods, cs)
	checkRoutes6(t, cs, "eth0", lab.NodeAddress6)
	pingAll(t, pods)
	for _, c := range cs {
		checkPeers(t, c, map[string]string{rrAddrs[0].String(): "reflector", rrAddrs[1].String(): "reflector"})
	}
	noWarnings(t, cs)
}
