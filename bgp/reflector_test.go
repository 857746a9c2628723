package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/internal/poll"
)

func TestPrefixLimits(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name  string
		pools []Pool
		want  Limits
	}{
		{"no pools", nil, Limits{Unicast: 16384, VPN: 131072, VPNv6: 131072}},
		{"default pool: 1,024 blocks", []Pool{{pfx("10.244.0.0/16"), 26}}, Limits{Unicast: 16384, VPN: 131072, VPNv6: 131072}},
		{"a /12 of /26: 16,384 blocks", []Pool{{pfx("10.240.0.0/12"), 26}}, Limits{Unicast: 32768, VPN: 262144, VPNv6: 131072}},
		{"two pools add up", []Pool{{pfx("10.240.0.0/12"), 26}, {pfx("10.0.0.0/12"), 26}}, Limits{Unicast: 65536, VPN: 524288, VPNv6: 131072}},
		{"a /8 of /32", []Pool{{pfx("10.0.0.0/8"), 32}}, Limits{Unicast: 1 << 25, VPN: 1 << 28, VPNv6: 131072}},
		{"all of IPv4 in /32s saturates", []Pool{{pfx("0.0.0.0/0"), 32}}, Limits{Unicast: 1<<32 - 1, VPN: 1<<32 - 1, VPNv6: 131072}},
		{"block shorter than the pool counts nothing", []Pool{{pfx("10.0.0.0/24"), 16}}, Limits{Unicast: 16384, VPN: 131072, VPNv6: 131072}},
		// An IPv6 pool counts in VPN-IPv6 only; IPv4 unicast and VPN-IPv4
		// carry none of its paths. Its blocks count up to 65,536: an IPv6
		// pool's size says nothing about how many blocks a cluster uses.
		{"an IPv6 /108 of /122: 16,384 blocks", []Pool{{pfx("fd00:10:244::/108"), 122}}, Limits{Unicast: 16384, VPN: 131072, VPNv6: 1 << 18}},
		{"an IPv6 /100 of /122 counts 65,536", []Pool{{pfx("fd00:10:244::/100"), 122}}, Limits{Unicast: 16384, VPN: 131072, VPNv6: 1 << 20}},
		{"IPv6 pools add up, to the same cap", []Pool{{pfx("fd00:10:244::/106"), 122}, {pfx("fd00:10:245::/106"), 122}}, Limits{Unicast: 16384, VPN: 131072, VPNv6: 1 << 20}},
		{"dual stack", []Pool{{pfx("10.240.0.0/12"), 26}, {pfx("fd00:10:244::/100"), 122}}, Limits{Unicast: 32768, VPN: 262144, VPNv6: 1 << 20}},
		{"a small IPv6 pool gets the floor", []Pool{{pfx("fd00:10:244::/112"), 122}}, Limits{Unicast: 16384, VPN: 131072, VPNv6: 131072}},
		{"an IPv6 /56 of /122 (2^32 blocks used) counts 65,536", []Pool{{pfx("fd00:10:244::/56"), 122}}, Limits{Unicast: 16384, VPN: 131072, VPNv6: 1 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PrefixLimits(tt.pools); got != tt.want {
				t.Errorf("PrefixLimits() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestPeerType(t *testing.T) {
	rr := netip.MustParseAddr("10.0.0.1")
	tests := []struct {
		name    string
		cfg     Config
		dynamic bool
		want    PeerType
	}{
		{"mesh peer", Config{Peers: []netip.Addr{rr}}, false, PeerMesh},
		{"mesh peer through peerPrefixes", Config{Peers: []netip.Addr{rr}}, true, PeerMesh},
		{"a client's reflector", Config{RouteReflectors: []netip.Addr{rr}}, false, PeerReflector},
		{"a reflector's client", Config{RouteReflector: true}, true, PeerClient},
		{"a reflector's other reflector", Config{RouteReflector: true, Peers: []netip.Addr{rr}}, false, PeerReflector},
		{"a router", Config{ExternalPeers: []ExternalPeer{{Address: rr}}}, false, PeerExternal},
		{"a router's address taken in through peerPrefixes", Config{ExternalPeers: []ExternalPeer{{Address: rr}}}, true, PeerMesh},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.peerType(rr, tt.dynamic); got != tt.want {
				t.Errorf("peerType(%v) = %q, want %q", tt.dynamic, got, tt.want)
			}
		})
	}
}

// freePortOn finds a TCP port free on every one of addrs.
func freePortOn(t testing.TB, addrs ...netip.Addr) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp4", addrs[0].String()+":0")
		if err != nil {
			t.Skipf("no loopback: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		ok := true
		for _, a := range addrs[1:] {
			l2, err := net.Listen("tcp4", a.String()+":"+strconv.Itoa(port))
			if err != nil {
				ok = false
				break
			}
			l2.Close()
		}
		l.Close()
		if ok {
			return port
		}
	}
	t.Skipf("no port free on all of %v (are they not loopback addresses here?)", addrs)
	return 0
}

// testSpeakers prepares speakers on the loopback addresses addrs, on one
// free port: start makes one (listening, not yet connected; see listen)
// with the test timers, pools and a log that the test prints if it fails.
//
// No test of this package may call t.Parallel(): GoBGP's StartBgp writes
// the package variables table.SelectionOptions and UseMultiplePaths
// (upstream GoBGP, pkg/server/server.go; not from gobgp.diff), and every
// server in the process reads them when it picks best paths, so two
// tests' speakers (or newGoBGP's servers) at once are a data race under
// -race. Within a test, start every speaker before any connects.
func testSpeakers(t *testing.T, addrs ...netip.Addr) (context.Context, *syncBuffer, func(self netip.Addr, cfg Config) *Speaker) {
	t.Helper()
	port := freePortOn(t, addrs...)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("speaker logs:\n%s", logs.String())
		}
	})
	return ctx, logs, func(self netip.Addr, cfg Config) *Speaker {
		cfg.ASN, cfg.Port, cfg.RouterID, cfg.ListenAddress = testASN, port, self, self
		// A hold time well above the lab's 3 s: four speakers under -race
		// on a loaded machine miss keepalives, and a session that drops
		// takes GoBGP through graceful restart (where GoBGP itself races
		// with its event watcher).
		cfg.Keepalive, cfg.Hold, cfg.RestartTime = 3*time.Second, 10*time.Second, 10*time.Second
		cfg.Pools, cfg.LogLevel = testPools, slog.LevelWarn
		log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("speaker", self)
		sp, err := listen(ctx, cfg, log, func() {})
		if err != nil {
			t.Fatal(err)
		}
		stopAtCleanup(t, sp, self)
		return sp
	}
}

// Two route reflectors that peer with each other, two clients that peer
// with both: what a client announces reaches the other client, exactly,
// with the next hops unchanged, from both reflectors, in VPN-IPv4 and
// VPN-IPv6 alike; a replaced path (a grant that changes its grantee: same
// NLRI, new communities) and a withdrawal go through too; a client does not
// learn its own paths back (GoBGP drops them by ORIGINATOR_ID, else
// LearnedTable would list them as the reflector's); a reflector's own
// paths, of both families, reach the other reflector and the clients, and
// the clients' paths as the other reflector reflects them are not taken
// (acceptOwnPathsOnly); every session has a prefix limit on each family.
func TestRouteReflectors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four BGP speakers")
	}
	c1, c2 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	rr1, rr2 := netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")
	ctx, _, start := testSpeakers(t, c1, c2, rr1, rr2)
	clients := []netip.Prefix{netip.PrefixFrom(c1, 32), netip.PrefixFrom(c2, 32)}
	r1 := start(rr1, Config{RouteReflector: true, Peers: []netip.Addr{rr2}, PeerPrefixes: clients})
	r2 := start(rr2, Config{RouteReflector: true, Peers: []netip.Addr{rr1}, PeerPrefixes: clients})
	s1 := start(c1, Config{RouteReflectors: []netip.Addr{rr1, rr2}})
	s2 := start(c2, Config{RouteReflectors: []netip.Addr{rr1, rr2}})
	// Connect only once all four listen (see listen).
	for _, sp := range []*Speaker{r1, r2, s1, s2} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}

	t1 := blockproto.Table{Records: []blockproto.Record{testRecord()}, Claims: []blockproto.Claim{testClaim(), testClaim6()}}
	u1 := []UnicastBlock{{Block: netip.MustParsePrefix("10.244.7.0/26"), Owner: blockproto.Node{Addr: nodeA, Inc: 7}}}
	t2 := blockproto.Table{Grants: []blockproto.Grant{testGrant(), testGrant6()}, Forgets: []blockproto.Forget{testForget()}}
	u2 := []UnicastBlock{{Block: netip.MustParsePrefix("10.244.8.0/26"), Owner: blockproto.Node{Addr: nodeB, Inc: 8}}}
	rrGrant6 := testGrant6() // the reflector is a voter too: its own VPN-IPv6 path
	rrGrant6.Voter = blockproto.Node{Addr: nodeC, Inc: 9}
	tr := blockproto.Table{Records: []blockproto.Record{{Node: blockproto.Node{Addr: nodeC, Inc: 9}, Born: 3, VoterHash: 0x01020304, Voters: []netip.Addr{nodeA, nodeB, nodeC}}},
		Grants: []blockproto.Grant{rrGrant6}}
	for _, a := range []struct {
		sp *Speaker
		t  blockproto.Table
		u  []UnicastBlock
	}{{s1, t1, u1}, {s2, t2, u2}, {r1, tr, nil}} {
		if err := a.sp.AnnounceTable(a.t, a.u); err != nil {
			t.Fatal(err)
		}
	}

	// learns waits until sp's table is want and its counts per peer are
	// from (VPN, unicast paths).
	learns := func(name string, sp *Speaker, want blockproto.Table, from map[netip.Addr][2]int) {
		t.Helper()
		want.Sort()
		wantPeers := map[netip.Addr]PeerCounts{}
		for a, n := range from {
			wantPeers[a] = PeerCounts{VPN: PathCounts{Received: uint64(n[0]), Accepted: uint64(n[0])},
				Unicast: PathCounts{Received: uint64(n[1]), Accepted: uint64(n[1])}}
		}
		if err := poll.Until(30*time.Second, func() error {
			got, err := sp.LearnedTable()
			if err != nil {
				return poll.Stop(err)
			}
			c, err := sp.CountPaths()
			if err != nil {
				return poll.Stop(err)
			}
			got.Sort()
			// Two copies (one per reflector) of each path: compare the set.
			got = dedup(got)
			diff, countsDiff := cmp.Diff(want, got, cmpOpts...), cmp.Diff(wantPeers, c.Peers, cmpOpts...)
			if diff != "" || countsDiff != "" {
				return fmt.Errorf("(-want +got):\n%s\ncounts per peer (-want +got):\n%s", diff, countsDiff)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s's table: %v\nsessions: %+v", name, err, sp.Status(ctx))
		}
	}
	with := func(a, b blockproto.Table) blockproto.Table {
		return blockproto.Table{Records: append(slices.Clone(a.Records), b.Records...), Claims: append(slices.Clone(a.Claims), b.Claims...),
			Grants: append(slices.Clone(a.Grants), b.Grants...), Forgets: append(slices.Clone(a.Forgets), b.Forgets...)}
	}
	// A client hears the other client from both reflectors, and rr1's own
	// paths from rr1 (directly) and from rr2 (reflected from a non-client
	// to a client).
	learns("client 2", s2, with(t1, tr), map[netip.Addr][2]int{rr1: {5, 1}, rr2: {5, 1}})
	learns("client 1", s1, with(t2, tr), map[netip.Addr][2]int{rr1: {5, 1}, rr2: {5, 1}})
	// rr2 takes the clients' paths from the clients only, and rr1's own
	// from rr1.
	learns("reflector 2", r2, with(with(t1, t2), tr), map[netip.Addr][2]int{c1: {3, 1}, c2: {3, 1}, rr1: {2, 0}})

	// VPN-IPv6 went as VPN-IPv6, its next hop the announcer's router ID
	// (IPv4-mapped) through both reflectors.
	for _, c := range []struct {
		sp   *Speaker
		want map[netip.Prefix]map[netip.Addr]bool // prefix: next hops
	}{
		{s2, map[netip.Prefix]map[netip.Addr]bool{block6: {mapped(c1): true, mapped(rr1): true}}},
		{s1, map[netip.Prefix]map[netip.Addr]bool{block6: {mapped(c2): true, mapped(rr1): true}}},
	} {
		got := map[netip.Prefix]map[netip.Addr]bool{}
		err := c.sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv6_VPN}, func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
			for _, p := range paths {
				if c.sp.own(p) {
					continue
				}
				_, nh := pathAttrs(nil, p.Attrs)
				pfx := nlri.(*bgppkt.LabeledVPNIPAddrPrefix).Prefix
				if got[pfx] == nil {
					got[pfx] = map[netip.Addr]bool{}
				}
				got[pfx][nh] = true
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(c.want, got, cmpOpts...); d != "" {
			t.Errorf("%s's VPN-IPv6 table, prefixes and next hops (-want +got):\n%s", c.sp.cfg.RouterID, d)
		}
	}

	// Next hops unchanged: the owner's, as announced.
	for _, c := range []struct {
		sp   *Speaker
		want map[netip.Prefix]netip.Addr
	}{{s2, map[netip.Prefix]netip.Addr{u1[0].Block: nodeA}}, {s1, map[netip.Prefix]netip.Addr{u2[0].Block: nodeB}}} {
		for _, p := range unicastPaths(t, c.sp) {
			if want := c.want[p.prefix]; p.nh != want {
				t.Errorf("%s learned %s with next hop %s, want the owner %s", c.sp.cfg.RouterID, p.prefix, p.nh, want)
			}
		}
	}

	// A replaced path: client 2's grant now goes to another node, several
	// times over, as a voter's grant does when claims compete.
	for i, to := range []blockproto.Node{{Addr: nodeC, Inc: 9}, {Addr: nodeA, Inc: 7}, {Addr: nodeB, Inc: 8}, {Addr: nodeC, Inc: 9}} {
		g := testGrant()
		g.To = to
		t2 = blockproto.Table{Grants: []blockproto.Grant{g}, Forgets: t2.Forgets}
		if err := s2.AnnounceTable(t2, u2); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			time.Sleep(time.Duration(i) * 5 * time.Millisecond) // the replacements' spacing: the race under test
		}
	}
	// The VPN-IPv6 grant is withdrawn meanwhile.
	learns("client 1 after a replaced grant", s1, with(t2, tr), map[netip.Addr][2]int{rr1: {4, 1}, rr2: {4, 1}})

	// Peer types, as reef status shows them.
	types := func(sp *Speaker) map[netip.Addr]PeerType {
		m := map[netip.Addr]PeerType{}
		for _, p := range sp.Status(ctx) {
			m[p.Address] = p.Type
		}
		return m
	}
	for _, c := range []struct {
		sp   *Speaker
		want map[netip.Addr]PeerType
	}{
		{s1, map[netip.Addr]PeerType{rr1: PeerReflector, rr2: PeerReflector}},
		{r1, map[netip.Addr]PeerType{rr2: PeerReflector, c1: PeerClient, c2: PeerClient}},
	} {
		if d := cmp.Diff(c.want, types(c.sp), cmpOpts...); d != "" {
			t.Errorf("peer types of %s (-want +got):\n%s", c.sp.cfg.RouterID, d)
		}
	}

	// Every session, configured or accepted, has a prefix limit on each
	// of its three families.
	lim := PrefixLimits(testPools)
	for _, sp := range []*Speaker{s1, s2, r1, r2} {
		checkLimits(t, ctx, sp, func(netip.Addr) map[string]uint32 {
			return map[string]uint32{"IPv4 unicast": lim.Unicast, "IPv4 VPN": lim.VPN, "IPv6 VPN": lim.VPNv6}
		})
	}

	// The learned table is the best copy of each path, the same content as
	// every copy (allTable) less the repeats. Once a session that was up
	// goes down (GoBGP keeps its paths, stale, over a graceful restart),
	// it is every copy, until the restart time and a hold time have passed.
	mirror, err := s2.LearnedTable()
	if err != nil {
		t.Fatal(err)
	}
	all, err := s2.allTable()
	if err != nil {
		t.Fatal(err)
	}
	mirror.Sort()
	all.Sort()
	if all.Len() != 2*mirror.Len() || !cmp.Equal(dedup(all), mirror, cmpOpts...) {
		t.Errorf("client 2: learned table (the best copies) %+v, every copy %+v: want each path twice in every copy, once in the table", mirror, all)
	}
	down := &apiutil.WatchEventMessage_PeerEvent{Type: apiutil.PEER_EVENT_STATE}
	down.Peer.State.NeighborAddress, down.Peer.State.SessionState = rr1, bgppkt.BGP_FSM_IDLE
	s2.notePeer(down, time.Now())
	if got, err := s2.LearnedTable(); err != nil {
		t.Fatal(err)
	} else if got.Len() != all.Len() {
		t.Errorf("client 2 after its session to rr1 went down: learned table of %d entries, want every copy (%d)", got.Len(), all.Len())
	}
	s2.mu.Lock()
	s2.copiesUntil = time.Time{} // as once the restart time has passed
	s2.mu.Unlock()
	if got, err := s2.LearnedTable(); err != nil {
		t.Fatal(err)
	} else if got.Len() != mirror.Len() {
		t.Errorf("client 2 after the restart time: learned table of %d entries, want the best copies (%d)", got.Len(), mirror.Len())
	}

	// A withdrawal goes through the reflectors too.
	if err := s1.AnnounceTable(blockproto.Table{Records: t1.Records}, nil); err != nil {
		t.Fatal(err)
	}
	learns("client 2 after a withdrawal", s2, with(blockproto.Table{Records: t1.Records}, tr), map[netip.Addr][2]int{rr1: {3, 0}, rr2: {3, 0}})
}

// dedup drops repeated entries of a sorted table.
func dedup(t blockproto.Table) blockproto.Table {
	uniq := func(n int, same func(i, j int) bool) []int {
		var keep []int
		for i := range n {
			if i == 0 || !same(i, i-1) {
				keep = append(keep, i)
			}
		}
		return keep
	}
	var out blockproto.Table
	for _, i := range uniq(len(t.Records), func(i, j int) bool { return cmp.Equal(t.Records[i], t.Records[j], cmpOpts...) }) {
		out.Records = append(out.Records, t.Records[i])
	}
	for _, i := range uniq(len(t.Claims), func(i, j int) bool { return t.Claims[i] == t.Claims[j] }) {
		out.Claims = append(out.Claims, t.Claims[i])
	}
	for _, i := range uniq(len(t.Grants), func(i, j int) bool { return t.Grants[i] == t.Grants[j] }) {
		out.Grants = append(out.Grants, t.Grants[i])
	}
	for _, i := range uniq(len(t.Forgets), func(i, j int) bool { return t.Forgets[i] == t.Forgets[j] }) {
		out.Forgets = append(out.Forgets, t.Forgets[i])
	}
	return out
}

type learnedUnicast struct {
	prefix netip.Prefix
	nh     netip.Addr
}

// unicastPaths are the IPv4 unicast paths sp learned from others.
func unicastPaths(t *testing.T, sp *Speaker) []learnedUnicast {
	t.Helper()
	var out []learnedUnicast
	err := sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC},
		func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
			uc, _ := nlri.(*bgppkt.IPAddrPrefix)
			for _, p := range paths {
				if uc == nil || sp.own(p) {
					continue
				}
				_, nh := pathAttrs(nil, p.Attrs)
				out = append(out, learnedUnicast{uc.Prefix, nh})
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkLimits checks that every session of sp has exactly the families
// want gives for its peer, named "IPv4 unicast", "IPv6 VPN" and so on,
// each with its prefix limit.
func checkLimits(t *testing.T, ctx context.Context, sp *Speaker, want func(peer netip.Addr) map[string]uint32) {
	t.Helper()
	err := sp.s.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		// A dynamic peer's configured address reads "invalid IP".
		peer, err := netip.ParseAddr(p.GetState().GetNeighborAddress())
		if err != nil {
			t.Errorf("%s: a session to %q", sp.cfg.RouterID, p.GetState().GetNeighborAddress())
			return
		}
		got := map[string]uint32{}
		for _, af := range p.GetAfiSafis() {
			f := af.GetConfig().GetFamily()
			name := map[api.Family_Afi]string{api.Family_AFI_IP: "IPv4", api.Family_AFI_IP6: "IPv6"}[f.GetAfi()] + " " +
				map[api.Family_Safi]string{api.Family_SAFI_UNICAST: "unicast", api.Family_SAFI_MPLS_VPN: "VPN"}[f.GetSafi()]
			if f.GetAfi() != af.GetPrefixLimits().GetFamily().GetAfi() || f.GetSafi() != af.GetPrefixLimits().GetFamily().GetSafi() {
				t.Errorf("%s: session to %s: the prefix limit of %s is for another family, %v", sp.cfg.RouterID, p.GetConf().GetNeighborAddress(), name, af.GetPrefixLimits().GetFamily())
			}
			got[name] = af.GetPrefixLimits().GetMaxPrefixes()
		}
		if d := cmp.Diff(want(peer), got); d != "" {
			t.Errorf("%s: session to %s: prefix limits (-want +got):\n%s", sp.cfg.RouterID, peer, d)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
}

// mapped is a as an IPv4-mapped IPv6 address: an IPv4 next hop in VPN-IPv6.
func mapped(a netip.Addr) netip.Addr { return netip.AddrFrom16(a.As16()) }
