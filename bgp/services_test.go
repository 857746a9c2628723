package bgp

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// A node with a mesh peer and an external peer, and service CIDRs of both
// families: the router learns the IPv4 ones, next hop the node, beside the
// node's block; the IPv6 one is withheld (the node has no IPv6 address)
// and said so; the mesh peer gets the block and the node's record, and
// never a service CIDR, also where one is the prefix of the record's VPN
// NLRI (the node's /32, which the daemon's config check refuses: here the
// statement must still leave the VPN family alone).
func TestServiceCIDRsToExternalPeersOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	svc4, svc6, svcNode := netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:10:96::/112"), netip.PrefixFrom(nodeA, 32)
	_, logs, a, c, router := nodeWithRouter(t, Config{ServiceCIDRs: []netip.Prefix{svc4, svc6, svcNode}}, nil)
	addrA := a.cfg.RouterID
	if got, withheld := a.ServiceCIDRs(); !slices.Equal(got, []netip.Prefix{svc4, svcNode}) || !slices.Equal(withheld, []netip.Prefix{svc6}) {
		t.Errorf("ServiceCIDRs() = %v, %v; want [%s %s], [%s]", got, withheld, svc4, svcNode, svc6)
	}
	ownA := netip.MustParsePrefix("10.244.7.0/26")
	if err := a.AnnounceTable(blockproto.Table{Records: []blockproto.Record{testRecord()}}, []UnicastBlock{{Block: ownA, Owner: blockproto.Node{Addr: nodeA, Inc: 1}}}); err != nil {
		t.Fatal(err)
	}
	want := map[netip.Prefix]string{
		ownA:    learnedLine(addrA, nodeA, nil, mustEncodeUnicast(t, nodeA)),
		svc4:    learnedLine(addrA, addrA, nil, nil),
		svcNode: learnedLine(addrA, addrA, nil, nil),
	}
	eventually(t, "the router learns A's block and the service CIDR", func() string {
		return cmp.Diff(want, routerLearned(router, bgppkt.RF_IPv4_UC))
	})
	// C has A's block, which A announced after the service CIDR: had the
	// CIDR gone to C, it would have come first, or with it.
	eventually(t, "C learns A's block and record only", func() string {
		counts, err := c.CountPaths()
		if err != nil {
			t.Fatal(err)
		}
		if got := counts.Unicast; got != (PathCounts{Received: 1, Accepted: 1}) {
			return "C's unicast table: " + cmp.Diff(PathCounts{Received: 1, Accepted: 1}, got)
		}
		if got := counts.VPN; got != (PathCounts{Received: 1, Accepted: 1}) {
			return "C's VPN table (A's record): " + cmp.Diff(PathCounts{Received: 1, Accepted: 1}, got)
		}
		return ""
	})
	if c.Dropped() != 0 {
		t.Errorf("C dropped %d paths: A sent it what is not a block", c.Dropped())
	}
	if !strings.Contains(logs.String(), "service CIDR not announced: the node has no IPv6 address") {
		t.Errorf("no log line about the withheld IPv6 service CIDR:\n%s", logs.String())
	}
}
