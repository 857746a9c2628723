package daemon

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/routes"
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
		if strings.Contains(l, routes.VXLANDevice) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestVXLAN6States: a pass builds vxlan.reef for both families — the IPv6
// block of the other node via its VTEP link-local, a neighbour of each
// family, one fdb entry, both tunnel addresses from the store, IPv6 on
// (the node's default has it off) — repairs a deleted IPv6 neighbour and
// IPv6 turned off on the device in one pass, takes the IPv6 side off when
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
	ll, other := routes.VTEPLinkLocal, otherNode
	mac := routes.VTEPMAC(other).String()
	want := strings.Join([]string{
		"addr " + tun.String() + "/32 dev vxlan.reef",
		"addr " + ll(netip.MustParseAddr("192.168.10.20")).String() + "/64 dev vxlan.reef scope link",
		"addr " + tun6.String() + "/128 dev vxlan.reef",
		"fdb " + mac + " dst " + other.String() + " dev vxlan.reef",
		"link vxlan.reef mtu 1450 up true",
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

	// The IPv6 pool no longer uses VXLAN: its side of the device goes, its
	// tunnel address is released, and the other node's IPv6 block, whose
	// record gave no IPv6 address, gets no route, which the pass says.
	n.vxModes(EncapAlways, EncapNever)
	if err := n.rec.pass(nil, false); err == nil || !strings.Contains(err.Error(), "IPv6 blocks of node 192.168.10.21 get no route") {
		t.Errorf("pass with the IPv6 pool routed directly: %v, want its owner named", err)
	}
	if a := n.tunnelAddrOf(VXLANTunnelHandle6("n1")); a.IsValid() {
		t.Errorf("IPv6 tunnel address %s still reserved", a)
	}
	got := n.vxlanText()
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
	_ = n.rec.pass(nil, false) // the IPv6 block without a route, as above
	if got := n.vxlanText(); got != "" {
		t.Errorf("without VXLAN:\n%s", got)
	}
	if a := n.tunnelAddrOf(VXLANTunnelHandle6("n1")); a.IsValid() {
		t.Errorf("IPv6 tunnel address %s still reserved", a)
	}
}
