package daemon

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/store"
)

// The IPv6 pool of the VXLAN state test, its own block and the other
// node's, whose record gave no IPv6 address.
var (
	vxPool6       = netip.MustParsePrefix("fd00:10:244::/56")
	vxOwnBlock6   = netip.MustParsePrefix("fd00:10:244::/122")
	vxOtherBlock6 = netip.MustParsePrefix("fd00:10:244::40/122")
)

// vxNode is the state tests' node with an IPv6 pool beside the IPv4 one,
// an own block of each family and the other node's blocks of each.
func vxNode(t *testing.T) *node {
	t.Helper()
	n := newNode(t)
	err := n.st.ApplyProtocol(blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: vxOwnBlock6, Pool: vxPool6}}, Confirm: []netip.Prefix{vxOwnBlock6},
		Remember: []blockproto.RemoteBlock{{Block: vxOtherBlock6, Pool: vxPool6, Owner: blockproto.Node{Addr: otherNode, Inc: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// vxModes configures the node's pools: the IPv4 pool with vxlanMode v4,
// the IPv6 pool with v6.
func (n *node) vxModes(v4, v6 EncapMode) {
	n.rec.net.pools = []PoolConfig{{CIDR: statePool, BlockSize: 26, VXLANMode: v4, IPIPMode: EncapNever, NATOutgoing: true},
		{CIDR: vxPool6, BlockSize: 122, VXLANMode: v6, IPIPMode: EncapNever, NATOutgoing: true}}
}

// tunnelAddrOf is the address the store holds under handle (invalid:
// none).
func (n *node) tunnelAddrOf(handle string) netip.Addr {
	n.t.Helper()
	ep, ok, err := n.st.Endpoint(handle)
	if err != nil {
		n.t.Fatal(err)
	}
	if !ok {
		return netip.Addr{}
	}
	return ep.IP
}

// vxlanText is the fake kernel's vxlan.reef, its routes and sysctls.
func (n *node) vxlanText() string {
	var out []string
	for _, l := range strings.Split(n.k.String(), "\n") {
		if strings.Contains(l, tunnel.VXLANDevice) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestVXLAN6States: a pass builds vxlan.reef for both families — the IPv6
// block of the other node via its VTEP link-local, a neighbour of each
// family, one fdb entry, both tunnel addresses from the store, IPv6 on
// (the node's default has it off) — repairs a deleted IPv6 neighbour and
// IPv6 turned off on the device in one pass, removes the other node's
// neighbours, fdb entry and routes when its blocks go, takes the IPv6 side off when
// the IPv6 pool stops using VXLAN, and the device when no pool uses it.
func TestVXLAN6States(t *testing.T) {
	n := vxNode(t)
	n.k.vxlanIPv6Off = true
	n.vxModes(EncapAlways, EncapAlways)
	n.pass()
	tun, tun6 := n.tunnelAddrOf(VXLANTunnelHandle("n1")), n.tunnelAddrOf(VXLANTunnelHandle6("n1"))
	if !ownBlock.Contains(tun) || !vxOwnBlock6.Contains(tun6) {
		t.Fatalf("tunnel addresses %s and %s, want one of %s and one of %s", tun, tun6, ownBlock, vxOwnBlock6)
	}
	ll, other := tunnel.VTEPLinkLocal, otherNode
	mac := tunnel.VTEPMAC(other).String()
	want := strings.Join([]string{
		"addr " + tun.String() + "/32 dev vxlan.reef",
		"addr " + ll(netip.MustParseAddr("192.168.10.20")).String() + "/64 dev vxlan.reef scope link",
		"addr " + tun6.String() + "/128 dev vxlan.reef",
		"fdb " + mac + " dst " + other.String() + " dev vxlan.reef",
		"link vxlan.reef local 192.168.10.20 mac " + tunnel.VTEPMAC(netip.MustParseAddr("192.168.10.20")).String() + " mtu 1450 up true",
		"neigh " + other.String() + " lladdr " + mac + " dev vxlan.reef PERMANENT",
		"neigh " + ll(other).String() + " lladdr " + mac + " dev vxlan.reef PERMANENT",
		"route " + otherBlock.String() + " via " + other.String() + " dev vxlan.reef onlink proto reef",
		"route " + vxOtherBlock6.String() + " via " + ll(other).String() + " dev vxlan.reef proto reef",
	}, "\n")
	if got := n.vxlanText(); sortedText(got) != sortedText(want) {
		t.Fatalf("after the first pass:\n%s\nwant:\n%s", got, want)
	}
	n.pass()
	if got := n.vxlanText(); sortedText(got) != sortedText(want) {
		t.Errorf("a second pass changed it:\n%s", got)
	}

	// Drift: the IPv6 neighbour deleted by hand; IPv6 turned off on the
	// device (which takes its IPv6 address, neighbours and routes).
	for _, drift := range []func(){
		func() { delete(n.k.vxlan.neigh6, other) },
		func() { n.k.sys.Put("net/ipv6/conf/vxlan.reef/disable_ipv6", "1") },
	} {
		drift()
		n.pass()
		if got := n.vxlanText(); sortedText(got) != sortedText(want) {
			t.Errorf("after a repair:\n%s\nwant:\n%s", got, want)
		}
	}

	// The other node's blocks go (its claims withdrawn): its neighbours of
	// both families, its fdb entry and its routes go, the device and this
	// node's own addresses stay. Then they come back.
	forget := blockproto.Changes{Unremember: []netip.Prefix{otherBlock, vxOtherBlock6}}
	if err := n.st.ApplyProtocol(forget); err != nil {
		t.Fatal(err)
	}
	n.pass()
	got := n.vxlanText()
	for _, gone := range []string{"neigh " + other.String(), "neigh " + ll(other).String(), "fdb " + mac, "route "} {
		if strings.Contains(got, gone) {
			t.Errorf("%q stayed after the other node's blocks went:\n%s", gone, got)
		}
	}
	for _, kept := range []string{"addr " + tun.String() + "/32", "addr " + tun6.String() + "/128", "link vxlan.reef"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q went with the other node's blocks:\n%s", kept, got)
		}
	}
	back := blockproto.Changes{Remember: []blockproto.RemoteBlock{{Block: otherBlock, Pool: statePool, Owner: blockproto.Node{Addr: otherNode, Inc: 1}},
		{Block: vxOtherBlock6, Pool: vxPool6, Owner: blockproto.Node{Addr: otherNode, Inc: 1}}}}
	if err := n.st.ApplyProtocol(back); err != nil {
		t.Fatal(err)
	}
	n.pass()
	if got := n.vxlanText(); sortedText(got) != sortedText(want) {
		t.Errorf("after the other node's blocks came back:\n%s\nwant:\n%s", got, want)
	}

	// The IPv6 pool no longer uses VXLAN: its side of the device goes, its
	// tunnel address is released, and the other node's IPv6 block, whose
	// record gave no IPv6 address, gets no route, which the pass says.
	n.vxModes(EncapAlways, EncapNever)
	if err := n.rec.pass(nil, wholePass); err == nil || !strings.Contains(err.Error(), "IPv6 blocks of node 192.168.10.21 get no route") {
		t.Errorf("pass with the IPv6 pool routed directly: %v, want its owner named", err)
	}
	if a := n.tunnelAddrOf(VXLANTunnelHandle6("n1")); a.IsValid() {
		t.Errorf("IPv6 tunnel address %s still reserved", a)
	}
	got = n.vxlanText()
	for _, gone := range []string{tun6.String(), ll(other).String()} {
		if strings.Contains(got, gone) {
			t.Errorf("%s stayed:\n%s", gone, got)
		}
	}
	for _, kept := range []string{"neigh " + other.String(), "fdb " + mac, "addr " + tun.String()} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q went:\n%s", kept, got)
		}
	}

	// Only the IPv6 pool uses VXLAN: the device stays, for IPv6 alone.
	n.vxModes(EncapNever, EncapAlways)
	n.pass()
	tun6 = n.tunnelAddrOf(VXLANTunnelHandle6("n1"))
	got = n.vxlanText()
	if strings.Contains(got, "neigh "+other.String()) || strings.Contains(got, "addr "+tun.String()) || !strings.Contains(got, "addr "+tun6.String()+"/128") ||
		!strings.Contains(got, "neigh "+ll(other).String()) || !strings.Contains(got, "fdb "+mac) {
		t.Errorf("IPv6 alone through VXLAN:\n%s", got)
	}
	if a := n.tunnelAddrOf(VXLANTunnelHandle("n1")); a.IsValid() {
		t.Errorf("IPv4 tunnel address %s still reserved", a)
	}

	// No pool uses VXLAN: the device goes, and its sysctls with it.
	n.vxModes(EncapNever, EncapNever)
	_ = n.rec.pass(nil, wholePass) // the IPv6 block without a route, as above
	if got := n.vxlanText(); got != "" {
		t.Errorf("without VXLAN:\n%s", got)
	}
	if a := n.tunnelAddrOf(VXLANTunnelHandle6("n1")); a.IsValid() {
		t.Errorf("IPv6 tunnel address %s still reserved", a)
	}
}

// v6onlyNode is vxNode as an IPv6-only node: no IPv4 address (its
// identity, 192.168.10.20, is its bgp.routerID), its IPv6 uplink
// fd77::20/64, the IPv6 pool alone with vxlanMode mode; the other node,
// 192.168.10.21, at owner6, and a third, 192.168.10.22, whose record gave
// no IPv6 address.
func v6onlyNode(t *testing.T, mode EncapMode, owner6 netip.Addr) *node {
	t.Helper()
	n := vxNode(t)
	err := n.st.ApplyProtocol(blockproto.Changes{Remember: []blockproto.RemoteBlock{{Block: vxThirdBlock6, Pool: vxPool6, Owner: blockproto.Node{Addr: thirdNode, Inc: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	n.setOwner6(owner6)
	n.rec.net.v6only, n.rec.net.identity = true, netip.MustParseAddr("192.168.10.20")
	n.rec.net.uplink = Uplink{Interface: "eth0", Index: 2, MTU: 1500}
	n.rec.net.uplink6 = Uplink6{Address: netip.MustParseAddr("fd77::20"), Prefix: netip.MustParsePrefix("fd77::20/64")}
	n.rec.net.pools = []PoolConfig{{CIDR: vxPool6, BlockSize: 122, VXLANMode: mode, IPIPMode: EncapNever, NATOutgoing: true}}
	return n
}

var (
	thirdNode     = netip.MustParseAddr("192.168.10.22")
	vxThirdBlock6 = netip.MustParsePrefix("fd00:10:244::80/122")
)

// setOwner6 records a as the other node's IPv6 address, as its record
// would give it.
func (n *node) setOwner6(a netip.Addr) {
	n.t.Helper()
	if err := n.st.SetBlockOwnerAddrs6(map[blockproto.Node]store.Owner6{{Addr: otherNode, Inc: 1}: {Addr: a, IPv6Only: true}}); err != nil {
		n.t.Fatal(err)
	}
}

// TestVXLANIPv6UnderlayStates: on an IPv6-only node, vxlan.reef's local is
// the node's IPv6 address, its MAC that of its identity, its MTU the
// uplink's less 70; the other node's IPv6 block goes via its VTEP
// link-local, whose fdb entry points at its IPv6 address. An owner whose
// record gave no IPv6 address gets no route, and the pass says so. A
// changed IPv6 address of the owner, or an fdb entry rewritten by hand,
// is brought back in one pass; CrossSubnet routes an owner on the uplink's
// IPv6 subnet directly and one outside it through the tunnel.
func TestVXLANIPv6UnderlayStates(t *testing.T) {
	other6, moved6 := netip.MustParseAddr("fd77::21"), netip.MustParseAddr("fd78::21")
	n := v6onlyNode(t, EncapAlways, other6)
	if err := n.rec.pass(nil, wholePass); err == nil || !strings.Contains(err.Error(), "IPv6 blocks of node 192.168.10.22 get no route: its record gives no IPv6 address") {
		t.Errorf("pass: %v, want the owner without an IPv6 address named", err)
	}
	tun6 := n.tunnelAddrOf(VXLANTunnelHandle6("n1"))
	if !vxOwnBlock6.Contains(tun6) || n.tunnelAddrOf(VXLANTunnelHandle("n1")).IsValid() {
		t.Fatalf("tunnel addresses: IPv6 %s, want one of %s; IPv4 %s, want none", tun6, vxOwnBlock6, n.tunnelAddrOf(VXLANTunnelHandle("n1")))
	}
	ll, self := tunnel.VTEPLinkLocal, netip.MustParseAddr("192.168.10.20")
	mac := tunnel.VTEPMAC(otherNode).String()
	want := func(dst netip.Addr) string {
		return strings.Join([]string{
			"addr " + ll(self).String() + "/64 dev vxlan.reef scope link",
			"addr " + tun6.String() + "/128 dev vxlan.reef",
			"fdb " + mac + " dst " + dst.String() + " dev vxlan.reef",
			"link vxlan.reef local fd77::20 mac " + tunnel.VTEPMAC(self).String() + " mtu 1430 up true",
			"neigh " + ll(otherNode).String() + " lladdr " + mac + " dev vxlan.reef PERMANENT",
			"route " + vxOtherBlock6.String() + " via " + ll(otherNode).String() + " dev vxlan.reef proto reef",
		}, "\n")
	}
	check := func(what string, dst netip.Addr) {
		t.Helper()
		_ = n.rec.pass(nil, wholePass) // the third node's block, as above
		if got := n.vxlanText(); sortedText(got) != sortedText(want(dst)) {
			t.Errorf("%s:\n%s\nwant:\n%s", what, got, want(dst))
		}
	}
	check("after the first pass", other6)
	check("after a second pass", other6)
	if s := n.rec.net.vxlanStatus(); s != "IPv6, local fd77::20" {
		t.Errorf("reef status's vxlan: %q", s)
	}

	// The owner's record gives another IPv6 address: its fdb entry
	// follows. An entry rewritten by hand is put back.
	n.setOwner6(moved6)
	check("after the owner's address changed", moved6)
	n.k.vxlan.fdb[otherNode] = other6
	check("after the fdb entry was rewritten by hand", moved6)

	// CrossSubnet: the owner outside fd77::/64 through the tunnel, inside
	// it directly, via its IPv6 address onlink on the uplink.
	n.rec.net.pools[0].VXLANMode = EncapCrossSubnet
	check("CrossSubnet, the owner in another subnet", moved6)
	n.setOwner6(other6)
	_ = n.rec.pass(nil, wholePass)
	got := n.k.String()
	if !strings.Contains(got, "route "+vxOtherBlock6.String()+" via "+other6.String()+" dev eth0 onlink proto reef") ||
		strings.Contains(n.vxlanText(), "fdb ") || strings.Contains(n.vxlanText(), "neigh ") {
		t.Errorf("CrossSubnet, the owner in the uplink's IPv6 subnet: want a direct route and no VXLAN peer:\n%s", got)
	}
}

// TestVXLANMixedUnderlays: between an IPv6-only node and one with an IPv4
// address, VXLAN is not built. With vxlanMode Always the owner's IPv6
// block gets no route, nothing of it is on vxlan.reef, and the pass says
// why, on either side; with CrossSubnet and both in one IPv6 subnet the
// block is routed directly, over IPv6.
func TestVXLANMixedUnderlays(t *testing.T) {
	other6 := netip.MustParseAddr("fd77::21")
	const notBuilt = "VXLAN between nodes whose underlays differ in family is not built"
	check := func(t *testing.T, n *node, why string) {
		t.Helper()
		n.rec.net.pools[len(n.rec.net.pools)-1].VXLANMode = EncapAlways
		err := n.rec.pass(nil, wholePass)
		if err == nil || !strings.Contains(err.Error(), "blocks of node "+other6.String()+" get no route: pool "+vxPool6.String()+" has vxlanMode Always, but "+why) ||
			!strings.Contains(err.Error(), notBuilt) {
			t.Errorf("pass with Always: %v; want the owner named, %q", err, why)
		}
		if got := n.k.String(); strings.Contains(got, vxOtherBlock6.String()) || strings.Contains(got, tunnel.VTEPMAC(otherNode).String()) {
			t.Errorf("with Always, the other node's IPv6 block or VTEP is in the kernel:\n%s", got)
		}
		blocks, err := n.st.Blocks()
		if err != nil {
			t.Fatal(err)
		}
		if nb := n.rec.net.vxlanNotBuilt(n.rec.net.ofPools(blocks)); len(nb) != 1 || nb[0].node != other6.String() || !strings.Contains(nb[0].why, why) {
			t.Errorf("vxlanNotBuilt (reef status) = %+v, want %s: %s", nb, other6, why)
		}
		n.rec.net.pools[len(n.rec.net.pools)-1].VXLANMode = EncapCrossSubnet
		if err := n.rec.pass(nil, wholePass); err != nil && strings.Contains(err.Error(), notBuilt) {
			t.Errorf("pass with CrossSubnet in one IPv6 subnet: %v", err)
		}
		if got := n.k.String(); !strings.Contains(got, "route "+vxOtherBlock6.String()+" via "+other6.String()+" dev eth0 onlink proto reef") {
			t.Errorf("with CrossSubnet in one IPv6 subnet, want a direct route to %s:\n%s", vxOtherBlock6, got)
		}
	}
	t.Run("IPv6-only node, owner with an IPv4 address", func(t *testing.T) {
		n := v6onlyNode(t, EncapAlways, other6)
		if err := n.st.SetBlockOwnerAddrs6(map[blockproto.Node]store.Owner6{{Addr: otherNode, Inc: 1}: {Addr: other6}}); err != nil {
			t.Fatal(err)
		}
		check(t, n, "this node is IPv6-only and its VXLAN runs over IPv6, but that node has an IPv4 address")
	})
	t.Run("node with an IPv4 address, IPv6-only owner", func(t *testing.T) {
		n := vxNode(t)
		n.vxModes(EncapAlways, EncapAlways)
		n.rec.net.pools = n.rec.net.pools[1:] // an IPv6-only owner has no IPv4 block
		n.rec.net.uplink6 = Uplink6{Address: netip.MustParseAddr("fd77::20"), Prefix: netip.MustParsePrefix("fd77::20/64")}
		n.setOwner6(other6) // IPv6-only
		check(t, n, "it is IPv6-only (no IPv4 address) and this node's VXLAN runs over IPv4")
		// This node's own vxlan.reef, over IPv4, stays.
		if got := n.vxlanText(); !strings.Contains(got, "link vxlan.reef local 192.168.10.20") {
			t.Errorf("vxlan.reef went:\n%s", got)
		}
	})
}

// TestVXLANModeSwitchMakesBeforeBreak: a restart into another vxlanMode
// changes the routes to the other node's blocks (through vxlan.reef or
// straight over the uplink) and the device's peers in one pass, without a
// moment where a route goes through vxlan.reef to a next hop the device
// has no neighbour or fdb entry for: a peer comes before the routes
// through it, and goes (with the device, on Never) after them. The
// tunnels' owner used to drop the peer first, and a ping across the
// switch was lost now and then (TestEncapModeSwitchRolling).
func TestVXLANModeSwitchMakesBeforeBreak(t *testing.T) {
	n := newNode(t)
	mode := func(m EncapMode) {
		n.rec.net.pools = []PoolConfig{{CIDR: statePool, BlockSize: 26, VXLANMode: m, IPIPMode: EncapNever, NATOutgoing: true}}
	}
	for i, m := range []EncapMode{EncapAlways, EncapCrossSubnet, EncapAlways, EncapNever, EncapAlways} {
		mode(m)
		n.pass()
		if len(n.k.holes) > 0 {
			t.Errorf("switch %d, into %s: routes through %s lost their next hop:\n%s\n%s", i, m, tunnel.VXLANDevice, strings.Join(n.k.holes, "\n"), n.vxlanText())
			n.k.holes = nil
		}
		through := strings.Contains(n.vxlanText(), otherBlock.String())
		if want := m == EncapAlways; through != want {
			t.Errorf("into %s: the other node's block through %s: %v, want %v:\n%s", m, tunnel.VXLANDevice, through, want, n.k)
		}
	}
}

// TestUplinkCreatedAgain: the uplink deleted (which takes vxlan.reef with
// it) fails the pass with a line naming it, and created again under its
// name, with another index, the next pass finds it by name: vxlan.reef is
// back over it and the node's addresses are checked on it. With the index
// read at start, vxlan.reef failed with "no such device" and the address
// check with "Link not found" until a restart.
func TestUplinkCreatedAgain(t *testing.T) {
	n := vxNode(t)
	n.vxModes(EncapAlways, EncapAlways)
	n.rec.net.uplink6 = Uplink6{Interface: "eth0", Index: 2, Address: netip.MustParseAddr("fd77::20"), Prefix: netip.MustParsePrefix("fd77::20/64"), MTU: 1500}
	n.pass()
	want := n.vxlanText()

	n.k.mu.Lock()
	n.k.uplinkIndex = map[string]int{"eth0": 0}
	n.k.delVXLANLocked()
	n.k.mu.Unlock()
	err := n.rec.pass(nil, wholePass)
	if err == nil || !strings.Contains(err.Error(), "the node's uplink eth0 is gone") || strings.Contains(err.Error(), "the node's address") {
		t.Errorf("a pass with the uplink gone: %v, want a line saying the node's uplink eth0 is gone, and none on its addresses", err)
	}

	n.k.mu.Lock()
	n.k.uplinkIndex["eth0"] = 7
	n.k.mu.Unlock()
	// reef status reads the uplinks (netInfo) while the pass follows the
	// new index: under -race, an index written without the lock fails.
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = n.rec.netInfo().vxlanStatus()
			}
		}
	}()
	n.pass()
	close(stop)
	<-done
	if got := n.vxlanText(); sortedText(got) != sortedText(want) {
		t.Errorf("after the uplink came back:\n%s\nwant:\n%s", got, want)
	}
	if n.k.vxlan == nil || n.k.vxlan.dev.UplinkIdx != 7 {
		t.Errorf("vxlan.reef is %+v, want it over the uplink's new index 7", n.k.vxlan)
	}
}
