package bgp

import (
	"context"
	"fmt"
	"maps"
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
)

// Which routers a node stands in toward: eBGP ones with BFD at IPv4
// addresses, directly connected; none without an IPv4 pool.
func TestStandInPolicy(t *testing.T) {
	bfd := &BFD{MinInterval: 300 * time.Millisecond, Multiplier: 3}
	r1, r2, r3, r4, r6 := netip.MustParseAddr("192.168.77.1"), netip.MustParseAddr("192.168.77.2"), netip.MustParseAddr("192.168.77.3"), netip.MustParseAddr("192.168.77.4"), netip.MustParseAddr("fd77::1")
	cfg := Config{ASN: testASN, Pools: testPools, ExternalPeers: []ExternalPeer{
		{Address: r1, ASN: 65000, BFD: bfd, Communities: []string{"65000:100", "65000:7:8"}},
		{Address: r2, ASN: 65000},             // no BFD: graceful restart keeps the owner's routes
		{Address: r3, ASN: testASN, BFD: bfd}, // iBGP: GoBGP sends it nothing learned over iBGP
		{Address: r6, ASN: 65000, BFD: bfd},   // IPv6: no IPv4 block travels to it
		{Address: r4, ASN: 65001, BFD: bfd},   // a second eBGP router with BFD, no communities
	}}
	var got []netip.Addr
	for _, p := range StandInPeers(&cfg) {
		got = append(got, p.Address)
	}
	if want := []netip.Addr{r1, r4}; !slices.Equal(got, want) {
		t.Errorf("StandInPeers = %v, want %v", got, want)
	}
	// A node marks its blocks only with an IPv4 address and such a router.
	cfg.NodeAddress = nodeA
	for _, c := range []struct {
		peers []ExternalPeer
		addr  netip.Addr
		want  bool
	}{{cfg.ExternalPeers, nodeA, true}, {cfg.ExternalPeers[1:4], nodeA, false}, {cfg.ExternalPeers, netip.Addr{}, false}} {
		cfg := cfg
		cfg.ExternalPeers, cfg.NodeAddress = c.peers, c.addr
		if got := cfg.standsIn(); got != c.want {
			t.Errorf("standsIn with %d external peers, node address %v = %v, want %v", len(c.peers), c.addr, got, c.want)
		}
	}

	stmts, sets := standInPolicy(&cfg)
	var lines []string
	for _, s := range sets {
		switch s.DefinedType {
		case api.DefinedType_DEFINED_TYPE_PREFIX:
			for _, p := range s.Prefixes {
				lines = append(lines, fmt.Sprintf("set %s: %s %d..%d", s.Name, p.IpPrefix, p.MaskLengthMin, p.MaskLengthMax))
			}
		default:
			lines = append(lines, fmt.Sprintf("set %s: %v", s.Name, s.List))
		}
	}
	for _, s := range stmts {
		c, a := s.Conditions, s.Actions
		var fams []string
		for _, f := range c.AfiSafiIn {
			fams = append(fams, f.Afi.String()+"/"+f.Safi.String())
		}
		line := fmt.Sprintf("%s: to %s, %s, prefixes %s, communities %s, %v -> %s, next hop unchanged %v, prepend %d x%d, communities %s %v",
			s.Name, c.NeighborSet.Name, c.RouteType, c.PrefixSet.Name, c.CommunitySet.Name, fams, a.RouteAction, a.Nexthop.Unchanged, a.AsPrepend.Asn, a.AsPrepend.Repeat, a.Community.Type, a.Community.Communities)
		if a.LargeCommunity != nil {
			line += fmt.Sprintf(", large %s %v", a.LargeCommunity.Type, a.LargeCommunity.Communities)
		}
		lines = append(lines, line)
	}
	want := []string{
		"set reef-stand-in-blocks: 10.244.0.0/16 26..26",
		"set reef-stand-in-blocks: 10.250.0.0/24 28..28",
		"set reef-stand-in-marked: [65535:0]",
		"set reef-stand-in-peer-0: [192.168.77.1/32]",
		"set reef-stand-in-peer-1: [192.168.77.4/32]",
		"reef-external-export-for-0: to reef-stand-in-peer-0, ROUTE_TYPE_INTERNAL, prefixes reef-stand-in-blocks, communities reef-stand-in-marked, [AFI_IP/SAFI_UNICAST] -> ROUTE_ACTION_ACCEPT, next hop unchanged true, prepend 64512 x1, communities TYPE_REPLACE [65000:100], large TYPE_ADD [65000:7:8]",
		"reef-external-export-for-1: to reef-stand-in-peer-1, ROUTE_TYPE_INTERNAL, prefixes reef-stand-in-blocks, communities reef-stand-in-marked, [AFI_IP/SAFI_UNICAST] -> ROUTE_ACTION_ACCEPT, next hop unchanged true, prepend 64512 x1, communities TYPE_REMOVE [65535:0]",
	}
	if d := cmp.Diff(want, lines); d != "" {
		t.Errorf("standInPolicy (-want +got):\n%s", d)
	}

	cfg.Pools = []Pool{{netip.MustParsePrefix("fd00:10:244::/56"), 122}}
	if stmts, sets := standInPolicy(&cfg); stmts != nil || sets != nil {
		t.Errorf("standInPolicy without an IPv4 pool = %v, %v; want nothing", stmts, sets)
	}
}

// A planned stop of C, meshed with A, whose router R has BFD: C's block
// reaches R from A, as a stand-in (next hop C, AS path prepended, without
// 65535:0, with R's communities), only while C announces it marked; A's
// own block is untouched, and C's unmarked block never goes to R from A.
func TestStandInForPlannedStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	addrA, addrC, addrR := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	ctx, _, start := testSpeakers(t, addrA, addrC, addrR)
	const routerASN = 65000
	// BFD toward R: R (plain GoBGP) never answers it, so A's BFD session
	// stays down, which GoBGP does not hold against a BGP session that
	// never had BFD up.
	a := start(addrA, Config{Peers: []netip.Addr{addrC}, ExternalPeers: []ExternalPeer{{Address: addrR, ASN: routerASN, Keepalive: 3 * time.Second, Hold: 10 * time.Second,
		MaxPrefixes: 100, Communities: []string{"65000:100"}, BFD: &BFD{MinInterval: time.Second, Multiplier: 3}}}})
	// C has a BFD router of its own, as the nodes of a rack do (one
	// that never answers): without one it would ask nobody (standsIn).
	c := start(addrC, Config{Peers: []netip.Addr{addrA}, ExternalPeers: []ExternalPeer{{Address: netip.MustParseAddr("127.0.0.4"), ASN: routerASN,
		Keepalive: 3 * time.Second, Hold: 10 * time.Second, MaxPrefixes: 100, BFD: &BFD{MinInterval: time.Second, Multiplier: 3}}}})
	a.cfg.ExternalPeers[0].Port = a.cfg.Port
	router := startRouter(t, ctx, addrR, a.cfg.Port, routerASN, addrA)
	for _, sp := range []*Speaker{a, c} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ownA, ownC := netip.MustParsePrefix("10.244.7.0/26"), netip.MustParsePrefix("10.244.8.0/26")
	if err := a.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: ownA, Owner: blockproto.Node{Addr: nodeA, Inc: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := c.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: ownC, Owner: blockproto.Node{Addr: nodeC, Inc: 2}}}); err != nil {
		t.Fatal(err)
	}
	const peerComm = "65000:100"
	ownLine := fmt.Sprintf("from %s via %s as [64512] communities [%s]", addrA, nodeA, peerComm)
	routerHas := func() map[netip.Prefix]string { return routerPaths(router) }
	eventually(t, "the router learns A's block, and C's block reaches A", func() string {
		counts, err := a.CountPaths()
		if err != nil {
			t.Fatal(err)
		}
		if counts.Unicast.Accepted != 1 {
			return fmt.Sprintf("A has %d of C's blocks", counts.Unicast.Accepted)
		}
		return cmp.Diff(map[netip.Prefix]string{ownA: ownLine}, routerHas())
	})

	peers, err := c.PlannedStop(ctx)
	if err != nil || !slices.Equal(peers, []netip.Addr{addrA}) {
		t.Fatalf("C's PlannedStop() = %v, %v; want A, nil", peers, err)
	}
	standIn := fmt.Sprintf("from %s via %s as [64512 64512] communities [%s]", addrA, nodeC, peerComm)
	eventually(t, "A stands in for C's block at the router", func() string {
		return cmp.Diff(map[netip.Prefix]string{ownA: ownLine, ownC: standIn}, routerHas())
	})
	// What reef status shows.
	if got, want := a.StandIns(ctx), []StandIn{{Block: ownC, Owner: nodeC, Router: addrR}}; !slices.Equal(got, want) {
		t.Errorf("A's StandIns() = %v, want %v", got, want)
	}
	if !c.BlocksMarked() || a.BlocksMarked() {
		t.Errorf("BlocksMarked() = %v on C, %v on A; want true, false", c.BlocksMarked(), a.BlocksMarked())
	}
	// What the metrics show (reef_bgp_blocks_marked, reef_bgp_stand_ins).
	counts := func() string {
		c4, c6 := c.MarkedBlocks()
		a4, a6 := a.StandInBlocks(ctx)
		return fmt.Sprintf("C marks %d IPv4 and %d IPv6 blocks, A stands in for %d and %d", c4, c6, a4, a6)
	}
	if got, want := counts(), "C marks 1 IPv4 and 0 IPv6 blocks, A stands in for 1 and 0"; got != want {
		t.Errorf("during C's stop: %s; want %s", got, want)
	}

	// C's new daemon with its router's path: the mark off ends it.
	if _, err := c.mark(false); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A's stand-in for C's block is withdrawn", func() string {
		return cmp.Diff(map[netip.Prefix]string{ownA: ownLine}, routerHas())
	})
	if got := a.StandIns(ctx); len(got) != 0 || c.BlocksMarked() {
		t.Errorf("after the mark is off: A's StandIns() = %v, C's BlocksMarked() = %v; want none, false", got, c.BlocksMarked())
	}
	if got, want := counts(), "C marks 0 IPv4 and 0 IPv6 blocks, A stands in for 0 and 0"; got != want {
		t.Errorf("after the mark is off: %s; want %s", got, want)
	}
	if _, err := a.mark(true); err != nil {
		t.Fatal(err)
	}

	eventually(t, "A's own block marked at the router: A does not stand in for itself", func() string {
		return cmp.Diff(map[netip.Prefix]string{ownA: fmt.Sprintf("from %s via %s as [64512] communities [%s %s]", addrA, nodeA, "65535:0", peerComm)}, routerHas())
	})
}

// A node that restarts after a planned stop (Restarting: GoBGP holds its
// updates back until every peer's End-of-RIB is in, or the deferral timer
// ends) while its BFD router is not up yet: reef offers such a router no
// graceful restart, so GoBGP must not wait for its End-of-RIB either. C's
// block reaches A once A's End-of-RIB is in, not when the deferral timer
// ends (an hour here). Before, GoBGP counted the router among the peers
// to wait for, and nothing checked again when it came up: in the lab the
// stand-ins behind a reflector ended 10 s late whenever the restarted
// node's session with the reflector came up before the one with its
// router (docs/bgp.md, "Route reflectors" under "Stand-ins").
func TestRestartingSendsOnEndOfRIBWithBFDRouterDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two BGP speakers")
	}
	// The router never answers, BGP or BFD: its session stays down.
	restartWithRouterDown(t, ExternalPeer{Address: netip.MustParseAddr("127.0.0.4"), ASN: 65000, Keepalive: 3 * time.Second, Hold: 10 * time.Second,
		MaxPrefixes: 100, BFD: &BFD{MinInterval: time.Second, Multiplier: 3}})
}

// restartWithRouterDown starts A and C, meshed, C restarting after a
// planned stop (deferral an hour) with the router r, whose session is
// down; C announces its block, which must reach A. It returns the
// context, C's speaker and C's block. more: addresses of other speakers
// the test starts.
func restartWithRouterDown(t *testing.T, r ExternalPeer, more ...netip.Addr) (context.Context, *Speaker, netip.Prefix) {
	t.Helper()
	addrA, addrC := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	ctx, _, start := testSpeakers(t, append([]netip.Addr{addrA, addrC}, more...)...)
	a := start(addrA, Config{Peers: []netip.Addr{addrC}})
	c := start(addrC, Config{Peers: []netip.Addr{addrA}, Restarting: true, deferral: time.Hour, ExternalPeers: []ExternalPeer{r}})
	c.cfg.ExternalPeers[0].Port = c.cfg.Port // where a router of the test listens
	for _, sp := range []*Speaker{a, c} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ownC := netip.MustParsePrefix("10.244.8.0/26")
	if err := c.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: ownC, Owner: blockproto.Node{Addr: nodeC, Inc: 2}}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted C's block reaches A with C's router down", func() string {
		counts, err := a.CountPaths()
		if err != nil {
			t.Fatal(err)
		}
		if counts.Unicast.Accepted != 1 {
			return fmt.Sprintf("A has %d of C's blocks", counts.Unicast.Accepted)
		}
		return ""
	})
	return ctx, c, ownC
}

// The same restart with a router without BFD, which reef offers graceful
// restart (so that it keeps the node's routes while the daemon is away),
// down at first. GoBGP waited for the End-of-RIB of every peer with
// graceful restart, one not yet established among them, so C's block
// reached A only when the router came up and sent its End-of-RIB, or when
// the deferral timer ended (an hour here, 10 s in the daemon): never while
// the router stayed down. reef learns nothing from a router, so its
// End-of-RIB cannot change what C sends anyone, and C no longer waits for
// it (restartWaitsFor). The router, once up, still gets C's block, and
// C's OPEN still offers it graceful restart: the Restart State bit and
// IPv4 unicast with forwarding state kept.
func TestRestartingSendsWithGracefulRestartRouterDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	addrC, addrR := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	const routerASN = 65000
	ctx, c, ownC := restartWithRouterDown(t, ExternalPeer{Address: addrR, ASN: routerASN, Keepalive: 3 * time.Second, Hold: 10 * time.Second, MaxPrefixes: 100}, addrR)

	// The router comes up, with graceful restart as BIRD's "graceful
	// restart on" and FRR's helper mode have it.
	router := newGoBGP(t, ctx, addrR, c.cfg.Port, routerASN, nil)
	if err := router.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:            &api.PeerConf{NeighborAddress: addrC.String(), PeerAsn: testASN},
		Timers:          &api.Timers{Config: &api.TimersConfig{ConnectRetry: 1, HoldTime: 10, KeepaliveInterval: 3}},
		Transport:       &api.Transport{LocalAddress: addrR.String(), RemotePort: uint32(c.cfg.Port)},
		GracefulRestart: &api.GracefulRestart{Enabled: true, RestartTime: 120},
		AfiSafis:        []*api.AfiSafi{afiSafi(api.Family_AFI_IP, api.Family_SAFI_UNICAST, 0)},
	}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the router learns C's block", func() string {
		if _, ok := routerPaths(router)[ownC]; !ok {
			return fmt.Sprintf("the router has %v", routerPaths(router))
		}
		return ""
	})
	var offered *api.GracefulRestartCapability
	if err := router.ListPeer(ctx, &api.ListPeerRequest{Address: addrC.String()}, func(p *api.Peer) {
		for _, cp := range p.GetState().GetRemoteCap() {
			if g := cp.GetGracefulRestart(); g != nil {
				offered = g
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	var tuples []string
	for _, tu := range offered.GetTuples() {
		tuples = append(tuples, fmt.Sprintf("%s/%s forwarding %v", tu.GetFamily().GetAfi(), tu.GetFamily().GetSafi(), tu.GetFlags()&0x80 != 0))
	}
	if got, want := fmt.Sprintf("restarting %v, time %d, %v", offered.GetFlags()&0x08 != 0, offered.GetTime(), tuples), "restarting true, time 10, [AFI_IP/SAFI_UNICAST forwarding true]"; got != want {
		t.Errorf("C's graceful restart capability at the router: %s, want %s", got, want)
	}
}

// routerPaths is what router learned in IPv4 unicast, a line per prefix:
// from, next hop, AS path, standard communities.
func routerPaths(router *server.BgpServer) map[netip.Prefix]string {
	out := map[netip.Prefix]string{}
	_ = router.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC}, func(n bgppkt.NLRI, ps []*apiutil.Path) {
		for _, p := range ps {
			if !p.PeerAddress.IsValid() || p.PeerAddress.IsUnspecified() {
				continue
			}
			_, nh := pathAttrs(nil, p.Attrs)
			var as []uint32
			var comms []string
			for _, at := range p.Attrs {
				switch at := at.(type) {
				case *bgppkt.PathAttributeAsPath:
					for _, seg := range at.Value {
						as = append(as, seg.GetAS()...)
					}
				case *bgppkt.PathAttributeCommunities:
					for _, c := range at.Value {
						comms = append(comms, fmt.Sprintf("%d:%d", c>>16, c&0xffff))
					}
				}
			}
			out[n.(*bgppkt.IPAddrPrefix).Prefix] = fmt.Sprintf("from %s via %s as %v communities %v", p.PeerAddress, nh, as, comms)
		}
	})
	return out
}

// A dual-stack node whose only BFD router is at an IPv6 address (its
// session carries IPv6 unicast only) marks no IPv4 block on a planned
// stop: no router of its would take an IPv4 stand-in, and its IPv4
// router without BFD keeps its blocks over graceful restart (standsIn4).
// The IPv4 block goes on unmarked, and stays so when the table is
// announced again.
func TestNoIPv4MarkWithIPv6BFDRoutersOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a BGP speaker")
	}
	addrA := netip.MustParseAddr("127.0.0.1")
	_, _, start := testSpeakers(t, addrA)
	bfd := &BFD{MinInterval: time.Second, Multiplier: 3}
	a := start(addrA, Config{NodeAddressV6: netip.MustParseAddr("fd77::11"), ExternalPeers: []ExternalPeer{
		{Address: netip.MustParseAddr("fd77::1"), ASN: 65000, BFD: bfd, MaxPrefixes: 100, Keepalive: 3 * time.Second, Hold: 10 * time.Second},
		{Address: netip.MustParseAddr("127.0.0.9"), ASN: 65000, MaxPrefixes: 100, Keepalive: 3 * time.Second, Hold: 10 * time.Second},
	}})
	if !a.cfg.standsIn() || a.cfg.standsIn4() || !a.cfg.standsIn6() {
		t.Fatalf("standsIn %v, standsIn4 %v, standsIn6 %v; want true, false, true", a.cfg.standsIn(), a.cfg.standsIn4(), a.cfg.standsIn6())
	}
	own := netip.MustParsePrefix("10.244.7.0/26")
	table := []UnicastBlock{{Block: own, Owner: blockproto.Node{Addr: nodeA, Inc: 1}}}
	if err := a.AnnounceTable(blockproto.Table{}, table); err != nil {
		t.Fatal(err)
	}
	blocks, err := a.mark(true)
	if err != nil || len(blocks) != 0 {
		t.Fatalf("mark(true) = %v, %v; want no block, nil", blocks, err)
	}
	if err := a.AnnounceTable(blockproto.Table{}, table); err != nil {
		t.Fatal(err)
	}
	marked := map[netip.Prefix]bool{}
	_ = a.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC}, func(n bgppkt.NLRI, ps []*apiutil.Path) {
		for _, p := range ps {
			marked[n.(*bgppkt.IPAddrPrefix).Prefix] = hasCommunity(p.Attrs, GracefulShutdownCommunity)
		}
	})
	if want := map[netip.Prefix]bool{own: false}; !maps.Equal(marked, want) {
		t.Errorf("GoBGP's IPv4 unicast, block -> marked: %v, want %v", marked, want)
	}
	if v4, v6 := a.MarkedBlocks(); v4 != 0 || v6 != 0 || !a.BlocksMarked() {
		t.Errorf("MarkedBlocks() = %d, %d, BlocksMarked() = %v; want 0, 0 (no IPv6 claim), true", v4, v6, a.BlocksMarked())
	}
}
