package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// A planned stop: GracefulShutdown re-announces the node's Service CIDR to
// its router with GRACEFUL_SHUTDOWN (and the router's own community, which
// the export policy adds), leaves the block as it was, returns once the
// router was sent it, and keeps the CIDR from the mesh peer still.
func TestGracefulShutdownMarksServicePrefixes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	svc := netip.MustParsePrefix("10.96.0.0/12")
	lb := netip.MustParseAddr("203.0.113.7") // a LoadBalancer address (services/)
	lb32 := netip.PrefixFrom(lb, 32)
	ctx, _, a, c, router := nodeWithRouter(t, Config{ServiceCIDRs: []netip.Prefix{svc}, ServiceAddressCIDRs: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")}}, []string{"65000:100"})
	addrA := a.cfg.RouterID
	ownA := netip.MustParsePrefix("10.244.7.0/26")
	if err := a.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: ownA, Owner: blockproto.Node{Addr: nodeA, Inc: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetServiceAddresses([]netip.Addr{lb}); err != nil {
		t.Fatal(err)
	}
	const peerComm = 65000<<16 | 100
	block := learnedLine(addrA, nodeA, []uint32{peerComm}, mustEncodeUnicast(t, nodeA))
	eventually(t, "the router learns A's block, the service CIDR and the Service address", func() string {
		return cmp.Diff(map[netip.Prefix]string{ownA: block, svc: learnedLine(addrA, addrA, []uint32{peerComm}, nil), lb32: learnedLine(addrA, addrA, []uint32{peerComm}, nil)},
			routerLearned(router, bgppkt.RF_IPv4_UC))
	})
	meshUnicast := func() string {
		counts, err := c.CountPaths()
		if err != nil {
			t.Fatal(err)
		}
		if c.Dropped() != 0 || counts.Unicast.Received != 1 {
			return fmt.Sprintf("the mesh peer has %d unicast paths and dropped %d; want A's block only", counts.Unicast.Received, c.Dropped())
		}
		return ""
	}
	eventually(t, "the mesh peer learns A's block", meshUnicast)
	peers, err := a.GracefulShutdown(ctx, 0)
	if err != nil || !slices.Equal(peers, []netip.Addr{a.cfg.ExternalPeers[0].Address}) {
		t.Fatalf("GracefulShutdown() = %v, %v; want the router, nil", peers, err)
	}
	marked := learnedLine(addrA, addrA, []uint32{GracefulShutdownCommunity, peerComm}, nil)
	eventually(t, "the router has the service CIDR and address with GRACEFUL_SHUTDOWN, the block as it was", func() string {
		return cmp.Diff(map[netip.Prefix]string{ownA: block, svc: marked, lb32: marked}, routerLearned(router, bgppkt.RF_IPv4_UC))
	})
	if why := meshUnicast(); why != "" {
		t.Errorf("%s: the marked CIDR went over the mesh?", why)
	}
}
