package routes

import (
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/go-cmp/cmp"
	"github.com/reefcni/reef/internal/netnstest"
	"github.com/vishvananda/netlink"
)

// A block of a node in another subnet, reached without encapsulation,
// goes where the node's own route to the owner goes: HopTo reads that
// route (the operator's, untouched), and the block's route is "via the
// router", not onlink; Read gives back what Apply wrote, so the next
// pass finds nothing to do.
func TestKernelRoutedRemoteBlock(t *testing.T) {
	node, nodeH, ip := nodeWithUplink(t)
	ip("route", "add", "198.51.100.0/24", "via", "192.0.2.254", "dev", "eth0", "proto", "static")

	k := netnstest.Open(t, node, NewKernel)

	owner := netip.MustParseAddr("198.51.100.21")
	hop, err := k.HopTo(owner)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Hop{Gateway: netip.MustParseAddr("192.0.2.254"), Dev: "eth0"}); hop != want {
		t.Fatalf("HopTo(%s) = %+v, want %+v", owner, hop, want)
	}
	if hop, err := k.HopTo(netip.MustParseAddr("192.0.2.12")); err != nil || hop.Gateway != netip.MustParseAddr("192.0.2.12") {
		t.Errorf("HopTo(a neighbour on the subnet) = %+v, %v; want the neighbour itself", hop, err)
	}
	if hop, err := k.HopTo(netip.MustParseAddr("203.0.113.1")); err == nil {
		t.Errorf("HopTo(an address with no route) = %+v, want an error", hop)
	}

	have := converge(t, k, Desired(nil, nil, []RemoteBlock{{Block: pfx("10.244.7.0/26"), Node: owner, Dev: hop.Dev, Gateway: hop.Gateway}}, nil))
	if diff := cmp.Diff([]string{"10.244.7.0/26 via 192.0.2.254 dev eth0 proto 238"}, routeStrings(t, nodeH, &netlink.Route{Protocol: Protocol}, netlink.RT_FILTER_PROTOCOL)); diff != "" {
		t.Errorf("reef's routes (-want +got):\n%s", diff)
	}
	// The onlink route of the same block is another route: Diff replaces it.
	onlink := Desired(nil, nil, []RemoteBlock{{Block: pfx("10.244.7.0/26"), Node: owner, Dev: "eth0"}}, nil)
	if p := Diff(onlink, have); len(p.Replace) != 1 || !p.Replace[0].OnLink {
		t.Errorf("Diff(onlink, routed) = %+v, want the onlink route replacing it", p)
	}
}

// nodeWithUplink is a throw-away node namespace (root only) whose uplink
// is eth0, up, at 192.0.2.11/24, one end of a veth pair whose other end
// (other1) is up too. ip runs ip(8) in the namespace.
func nodeWithUplink(t *testing.T) (node ns.NetNS, nodeH netlinksafe.Handle, ip func(args ...string)) {
	t.Helper()
	return nodeWithVeth(t, "eth0", "192.0.2.11/24")
}
