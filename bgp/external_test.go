package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/internal/poll"
)

func TestSplitCommunities(t *testing.T) {
	std, large, err := SplitCommunities([]string{"65000:100", "65000:1:2", "0:0"})
	if err != nil || !slices.Equal(std, []string{"65000:100", "0:0"}) || !slices.Equal(large, []string{"65000:1:2"}) {
		t.Errorf("SplitCommunities = %v, %v, %v", std, large, err)
	}
	for _, bad := range []string{"65536:1", "1", "a:b", "1:2:3:4", "1:4294967296:0", ""} {
		if _, _, err := SplitCommunities([]string{bad}); err == nil {
			t.Errorf("SplitCommunities(%q) took it", bad)
		}
	}
}

func TestExternalDropReason(t *testing.T) {
	nodes := []netip.Prefix{netip.MustParsePrefix("192.168.77.0/24"), netip.MustParsePrefix("192.168.78.11/32")}
	for prefix, want := range map[string]string{
		"0.0.0.0/0":         DropDefault,
		"10.0.0.0/8":        DropPoolAggregate, // covers pools
		"10.244.0.0/16":     DropPoolAggregate,
		"10.244.16.0/20":    DropPoolAggregate,
		"10.244.7.0/26":     DropBlock,
		"10.250.0.16/28":    DropBlock,
		"10.244.7.5/32":     DropInsideBlock,
		"10.250.0.16/29":    DropInsideBlock,
		"192.168.77.12/32":  DropNodeAddress,
		"192.168.0.0/16":    DropNodeAddress,
		"192.168.78.11/32":  DropNodeAddress,
		"192.168.78.12/32":  DropOther,
		"203.0.113.0/24":    DropOther,
		"10.244.7.0/26 bad": "",
	} {
		p, err := netip.ParsePrefix(prefix)
		if err != nil {
			continue
		}
		if got := ExternalDropReason(p, testPools, nodes); got != want {
			t.Errorf("ExternalDropReason(%s) = %s, want %s", p, got, want)
		}
	}
}

// A node with a mesh peer and an external peer (a plain GoBGP server in
// another AS, the router): the router gets the node's confirmed block and
// nothing else (not the mesh peer's block, not the block protocol's VPN
// paths), with the node as next hop and the peer's communities; the node
// installs nothing the router sends and counts it by reason; a block the
// node stops owning is withdrawn at the router.
func TestExternalPeerExportsOwnBlocksOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	ctx, _, a, c, router := nodeWithRouter(t, Config{}, []string{"65000:100", "65000:7:8"})
	addrA, addrR := a.cfg.RouterID, a.cfg.ExternalPeers[0].Address

	ownA, ownC := netip.MustParsePrefix("10.244.7.0/26"), netip.MustParsePrefix("10.244.8.0/26")
	pendingA := netip.MustParsePrefix("10.244.9.0/26")
	// Owners at lab addresses: the wire refuses loopback owners. (A real
	// node's owner address is its router ID, the session's local address,
	// so the next hop the router sees is the owner in both.)
	claim := blockproto.Table{Claims: []blockproto.Claim{{Block: pendingA, Owner: blockproto.Node{Addr: nodeA, Inc: 1}, State: blockproto.Pending}}}
	if err := a.AnnounceTable(claim, []UnicastBlock{{Block: ownA, Owner: blockproto.Node{Addr: nodeA, Inc: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: ownC, Owner: blockproto.Node{Addr: nodeC, Inc: 2}}}); err != nil {
		t.Fatal(err)
	}
	// The router announces what a router may: the routes it re-advertises
	// and worse.
	hostile := []string{"0.0.0.0/0", "10.244.0.0/16", "10.244.8.0/26", "10.244.7.9/32", "127.0.0.2/32", "203.0.113.0/24"}
	for _, h := range hostile {
		p, err := unicastPath(netip.MustParsePrefix(h), addrR, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := router.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}}); err != nil {
			t.Fatal(err)
		}
	}

	routerHas := func() map[netip.Prefix]string { return routerLearned(router, bgppkt.RF_IPv4_UC) }
	// A has C's block and its own claim to offer: what the router gets
	// is checked against a table that holds them.
	eventually(t, "A learns C's block", func() string {
		counts, err := a.CountPaths()
		if err != nil {
			t.Fatal(err)
		}
		if got := counts.Unicast; got.Received != 1 || got.Accepted != 1 {
			return "A's unicast table: " + cmp.Diff(PathCounts{Received: 1, Accepted: 1}, got)
		}
		return ""
	})
	want := learnedLine(addrA, nodeA, []uint32{65000<<16 | 100}, append(mustEncodeUnicast(t, nodeA), LargeCommunity{65000, 7, 8}))
	eventually(t, "the router learns A's confirmed block only", func() string {
		got := routerHas()
		if len(got) == 1 && got[ownA] == want {
			return ""
		}
		return cmp.Diff(map[netip.Prefix]string{ownA: want}, got)
	})

	// A takes none of the router's routes, and counts them.
	importsNothing(t, ctx, a, addrR, 1, map[string]uint64{DropDefault: 1, DropPoolAggregate: 1, DropBlock: 1, DropInsideBlock: 1, DropNodeAddress: 1, DropOther: 1})

	// A loses its block: the router hears the withdrawal.
	if err := a.AnnounceTable(blockproto.Table{}, nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the router drops A's block", func() string {
		if got := routerHas(); len(got) != 0 {
			return cmp.Diff(map[netip.Prefix]string{}, got)
		}
		return ""
	})
}

// nodeWithRouter starts speaker A (127.0.0.1, with cfgA's ServiceCIDRs)
// meshed with C (127.0.0.2) and with a router R (127.0.0.3, a plain GoBGP
// server in AS 65000) as its external peer, which adds communities, and
// connects them.
func nodeWithRouter(t *testing.T, cfgA Config, communities []string) (ctx context.Context, logs *syncBuffer, a, c *Speaker, router *server.BgpServer) {
	t.Helper()
	addrA, addrC, addrR := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	ctx, logs, start := testSpeakers(t, addrA, addrC, addrR)
	const routerASN = 65000
	cfgA.Peers = []netip.Addr{addrC}
	cfgA.ExternalPeers = []ExternalPeer{{Address: addrR, ASN: routerASN, Keepalive: 3 * time.Second, Hold: 10 * time.Second, MaxPrefixes: 100, Communities: communities}}
	a = start(addrA, cfgA)
	c = start(addrC, Config{Peers: []netip.Addr{addrA}})
	a.cfg.ExternalPeers[0].Port = a.cfg.Port
	router = startRouter(t, ctx, addrR, a.cfg.Port, routerASN, addrA)
	for _, sp := range []*Speaker{a, c} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return ctx, logs, a, c, router
}

// startRouter runs a plain GoBGP server at addr in asn, peering with node.
func startRouter(t *testing.T, ctx context.Context, addr netip.Addr, port int, asn uint32, node netip.Addr) *server.BgpServer {
	t.Helper()
	s := newGoBGP(t, ctx, addr, port, asn, nil)
	addGoBGPPeer(t, ctx, s, addr, port, node, nil)
	return s
}

// newGoBGP runs a plain GoBGP server at addr in asn with the families of
// its global RIB (nil: every family GoBGP knows), without peers; it stops
// when the test ends.
func newGoBGP(t *testing.T, ctx context.Context, addr netip.Addr, port int, asn uint32, families []uint32) *server.BgpServer {
	t.Helper()
	s := server.NewBgpServer()
	go s.Serve()
	if err := s.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
		Asn: asn, RouterId: addr.String(), ListenPort: int32(port), ListenAddresses: []string{addr.String()}, Families: families,
	}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.StopBgp(context.Background(), &api.StopBgpRequest{}) })
	return s
}

// addGoBGPPeer makes s, at addr, peer with a speaker at node (in
// testASN), in afiSafis (nil: GoBGP's default).
func addGoBGPPeer(t *testing.T, ctx context.Context, s *server.BgpServer, addr netip.Addr, port int, node netip.Addr, afiSafis []*api.AfiSafi) {
	t.Helper()
	if err := s.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: node.String(), PeerAsn: testASN},
		Timers:    &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 10, KeepaliveInterval: 3}},
		Transport: &api.Transport{LocalAddress: addr.String(), RemotePort: uint32(port)},
		AfiSafis:  afiSafis,
	}}); err != nil {
		t.Fatal(err)
	}
}

// routerLearned is what router learned from its peers in rf, a line per
// prefix (learnedLine).
func routerLearned(router *server.BgpServer, rf bgppkt.Family) map[netip.Prefix]string {
	out := map[netip.Prefix]string{}
	_ = router.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: rf}, func(n bgppkt.NLRI, ps []*apiutil.Path) {
		for _, p := range ps {
			if !p.PeerAddress.IsValid() || p.PeerAddress.IsUnspecified() {
				continue // the router's own
			}
			lcs, nh := pathAttrs(nil, p.Attrs)
			var comms []uint32
			for _, at := range p.Attrs {
				if c, ok := at.(*bgppkt.PathAttributeCommunities); ok {
					comms = c.Value
				}
			}
			out[n.(*bgppkt.IPAddrPrefix).Prefix] = learnedLine(p.PeerAddress, nh, comms, lcs)
		}
	})
	return out
}

// learnedLine says where a route came from, its next hop and its standard
// and large communities.
func learnedLine(from, nh netip.Addr, comms []uint32, lcs []LargeCommunity) string {
	return fmt.Sprintf("from %s via %s communities %v large %s", from, nh, comms, lcString(lcs))
}

// importsNothing waits until sp's one external peer, router, is
// established with sent blocks exported to it and its routes counted, all
// dropped, by reason; then checks that none reached sp's table.
func importsNothing(t *testing.T, ctx context.Context, sp *Speaker, router netip.Addr, sent uint64, dropped map[string]uint64) {
	t.Helper()
	var received uint64
	for _, n := range dropped {
		received += n
	}
	eventually(t, sp.cfg.RouterID.String()+" counts the router's routes", func() string {
		st := sp.ExternalStatus(ctx)
		if len(st) == 1 && st[0].Established && st[0].Type == PeerExternal && st[0].Received == received && st[0].Sent == sent && cmp.Equal(st[0].Dropped, dropped) {
			return ""
		}
		return cmp.Diff([]ExternalStatus{{Dropped: dropped}}, st, cmpOpts...)
	})
	// Nor did the router's routes reach the table, once they were all in.
	counts, err := sp.CountPaths()
	if err != nil {
		t.Fatal(err)
	}
	if n := counts.Peers[router]; n != (PeerCounts{}) {
		t.Errorf("%s's table holds the router's paths: %+v", sp.cfg.RouterID, n)
	}
}

func mustEncodeUnicast(t *testing.T, owner netip.Addr) []LargeCommunity {
	t.Helper()
	return EncodeUnicast(testASN, UnicastBlock{Owner: blockproto.Node{Addr: owner, Inc: 1}})
}

func lcString(lcs []LargeCommunity) string {
	slices.SortFunc(lcs, func(a, b LargeCommunity) int {
		if a.ASN != b.ASN {
			return int(a.ASN) - int(b.ASN)
		}
		if a.Data1 != b.Data1 {
			return int(a.Data1) - int(b.Data1)
		}
		return int(a.Data2) - int(b.Data2)
	})
	return cmp.Diff(nil, lcs)
}

// eventually polls cond, which describes what it still misses ("" when
// nothing), until it returns "" (poll.Until), or fails the test after 30s.
func eventually(t *testing.T, what string, cond func() string) {
	t.Helper()
	if err := poll.Until(30*time.Second, func() error {
		if missing := cond(); missing != "" {
			return errors.New(missing)
		}
		return nil
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestExternalFamilies: a router at an IPv4 address gets IPv4 unicast, and
// IPv6 unicast beside it when the node has an IPv6 address; a router at an
// IPv6 address gets IPv6 unicast alone, from the node's IPv6 address.
func TestExternalFamilies(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.168.10.1"), netip.MustParseAddr("fd77::1")
	node4, node6, id := netip.MustParseAddr("192.168.10.11"), netip.MustParseAddr("fd77::11"), netip.MustParseAddr("10.255.0.1")
	for _, tc := range []struct {
		name  string
		cfg   Config
		peer  netip.Addr
		want  []bgppkt.Family
		local netip.Addr
	}{
		{"IPv4 node, IPv4 router", Config{NodeAddress: node4}, v4, []bgppkt.Family{bgppkt.RF_IPv4_UC}, node4},
		{"dual-stack node, IPv4 router", Config{NodeAddress: node4, NodeAddressV6: node6}, v4, []bgppkt.Family{bgppkt.RF_IPv4_UC, bgppkt.RF_IPv6_UC}, node4},
		{"dual-stack node, IPv6 router", Config{NodeAddress: node4, NodeAddressV6: node6}, v6, []bgppkt.Family{bgppkt.RF_IPv6_UC}, node6},
		{"IPv6-only node, IPv6 router", Config{RouterID: id, IPv6Only: true, NodeAddressV6: node6}, v6, []bgppkt.Family{bgppkt.RF_IPv6_UC}, node6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.cfg.externalFamilies(tc.peer); !slices.Equal(got, tc.want) {
				t.Errorf("families %v, want %v", got, tc.want)
			}
			if got := tc.cfg.local(tc.peer); got != tc.local {
				t.Errorf("local address %s, want %s", got, tc.local)
			}
		})
	}
}
