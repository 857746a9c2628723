package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/reefcni/reef/blockproto"
)

// A route reflector with an external peer holds the policies of both on
// GoBGP's global RIB: the reflector's (acceptOwnPathsOnly) and the
// external peers' (addExternalPeers), beside the service CIDRs' import
// policy. GoBGP appends each assignment to the direction's list and runs
// the list in order until a policy gives a verdict, so the test checks
// what each kind of neighbour of the reflector R1 gets and what R1 takes:
//
//   - the router: R1's own block and its service CIDR, nothing reflected;
//   - the client C1: R1's own paths and what the other reflector
//     originates, never the service CIDR;
//   - the other reflector R2 (a plain GoBGP server, as a BIRD or FRR
//     reflector beside reef would be): R1's own paths only, not C1's, not
//     the service CIDR;
//   - from R2, R1 takes what R2 originates (next hop R2), not what R2
//     reflects, and not a path inside the service CIDRs even with R2 as
//     its next hop: a Service address is never believed from a peer.
func TestReflectorWithExternalPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four BGP speakers")
	}
	addrR1, addrR2, addrC1, addrRouter := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")
	ctx, _, start := testSpeakers(t, addrR1, addrR2, addrC1, addrRouter)
	svc := netip.MustParsePrefix("10.96.0.0/12")
	const routerASN = 65000
	r1 := start(addrR1, Config{RouteReflector: true, Peers: []netip.Addr{addrR2}, PeerPrefixes: []netip.Prefix{netip.PrefixFrom(addrC1, 32)},
		ServiceCIDRs: []netip.Prefix{svc},
		ExternalPeers: []ExternalPeer{{Address: addrRouter, ASN: routerASN, Keepalive: 3 * time.Second, Hold: 10 * time.Second, MaxPrefixes: 100,
			Communities: []string{"65000:100"}}}})
	r1.cfg.ExternalPeers[0].Port = r1.cfg.Port
	c1 := start(addrC1, Config{RouteReflectors: []netip.Addr{addrR1}})
	lim := PrefixLimits(testPools)
	r2 := newGoBGP(t, ctx, addrR2, r1.cfg.Port, testASN, []uint32{
		uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
		uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_L3VPN_IPV4_UNICAST]),
	})
	addGoBGPPeer(t, ctx, r2, addrR2, r1.cfg.Port, addrR1, []*api.AfiSafi{
		afiSafi(api.Family_AFI_IP, api.Family_SAFI_UNICAST, lim.Unicast), afiSafi(api.Family_AFI_IP, api.Family_SAFI_MPLS_VPN, lim.VPN),
	})
	router := startRouter(t, ctx, addrRouter, r1.cfg.Port, routerASN, addrR1)
	// Connect only once all listen (see listen).
	for _, sp := range []*Speaker{r1, c1} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}

	ownC1, ownR2, reflectedR2, ownR1 := netip.MustParsePrefix("10.244.7.0/26"), netip.MustParsePrefix("10.244.8.0/26"),
		netip.MustParsePrefix("10.244.10.0/26"), netip.MustParsePrefix("10.244.9.0/26")
	if err := c1.AnnounceTable(blockproto.Table{Records: []blockproto.Record{testRecord()}}, []UnicastBlock{{Block: ownC1, Owner: blockproto.Node{Addr: nodeA, Inc: 1}}}); err != nil {
		t.Fatal(err)
	}
	// R2's own block last: once R1 has it, it has had the others.
	for _, p := range []struct {
		prefix netip.Prefix
		nh     netip.Addr
	}{{svc, addrR2}, {reflectedR2, nodeB}, {ownR2, addrR2}} {
		path, err := unicastPath(p.prefix, p.nh, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r2.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}}); err != nil {
			t.Fatal(err)
		}
	}
	from := func(p netip.Prefix, peer netip.Addr) string { return fmt.Sprintf("%s from %s", p, peer) }
	rec := func(n netip.Addr) string { return from(netip.PrefixFrom(n, 32), addrR1) } // a record's VPN NLRI: the node's /32
	eventually(t, "R1 takes C1's block and R2's own, not R2's reflected one nor a Service address", func() string {
		return cmp.Diff([]string{from(ownC1, addrC1), from(ownR2, addrR2)}, heldFrom(r1.s, bgppkt.RF_IPv4_UC))
	})

	// R1's own paths last: once a neighbour has them, it has had whatever
	// R1 would send it of the others.
	rrRec := testRecord()
	rrRec.Node = blockproto.Node{Addr: nodeC, Inc: 9}
	if err := r1.AnnounceTable(blockproto.Table{Records: []blockproto.Record{rrRec}}, []UnicastBlock{{Block: ownR1, Owner: blockproto.Node{Addr: nodeC, Inc: 9}}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		s       *server.BgpServer
		unicast []string
		vpn     []string
	}{
		{"the router", router, []string{from(ownR1, addrR1), from(svc, addrR1)}, nil},
		{"the client C1", c1.s, []string{from(ownR2, addrR1), from(ownR1, addrR1)}, []string{rec(nodeC)}},
		{"the other reflector R2", r2, []string{from(ownR1, addrR1)}, []string{rec(nodeC)}},
	} {
		eventually(t, c.name+" gets what R1 may send it", func() string {
			return cmp.Diff(c.unicast, heldFrom(c.s, bgppkt.RF_IPv4_UC)) + cmp.Diff(c.vpn, heldFrom(c.s, bgppkt.RF_IPv4_VPN))
		})
	}
	// The router's copy of R1's block carries the router's community.
	if got, want := routerLearned(router, bgppkt.RF_IPv4_UC)[ownR1], learnedLine(addrR1, nodeC, []uint32{65000<<16 | 100}, EncodeUnicast(testASN, UnicastBlock{Owner: blockproto.Node{Addr: nodeC, Inc: 9}})); got != want {
		t.Errorf("the router's copy of R1's block: %s, want %s", got, want)
	}
}

// heldFrom lists the paths of family rf that s learned from its peers, a
// line "prefix from peer" each (a VPN path by the prefix inside it),
// sorted; nil when none.
func heldFrom(s *server.BgpServer, rf bgppkt.Family) []string {
	var out []string
	_ = s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: rf}, func(n bgppkt.NLRI, ps []*apiutil.Path) {
		var pfx netip.Prefix
		switch n := n.(type) {
		case *bgppkt.IPAddrPrefix:
			pfx = n.Prefix
		case *bgppkt.LabeledVPNIPAddrPrefix:
			pfx = n.Prefix
		}
		for _, p := range ps {
			if p.PeerAddress.IsValid() && !p.PeerAddress.IsUnspecified() {
				out = append(out, fmt.Sprintf("%s from %s", pfx, p.PeerAddress))
			}
		}
	})
	slices.Sort(out)
	return out
}
