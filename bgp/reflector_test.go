package bgp

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

func TestPrefixLimits(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name  string
		pools []Pool
		want  Limits
	}{
		{"no pools", nil, Limits{Unicast: 16384, VPN: 131072}},
		{"default pool: 1,024 blocks", []Pool{{pfx("10.244.0.0/16"), 26}}, Limits{Unicast: 16384, VPN: 131072}},
		{"a /12 of /26: 16,384 blocks", []Pool{{pfx("10.240.0.0/12"), 26}}, Limits{Unicast: 32768, VPN: 262144}},
		{"two pools add up", []Pool{{pfx("10.240.0.0/12"), 26}, {pfx("10.0.0.0/12"), 26}}, Limits{Unicast: 65536, VPN: 524288}},
		{"a /8 of /32", []Pool{{pfx("10.0.0.0/8"), 32}}, Limits{Unicast: 1 << 25, VPN: 1 << 28}},
		{"all of IPv4 in /32s saturates", []Pool{{pfx("0.0.0.0/0"), 32}}, Limits{Unicast: 1<<32 - 1, VPN: 1<<32 - 1}},
		{"block shorter than the pool counts nothing", []Pool{{pfx("10.0.0.0/24"), 16}}, Limits{Unicast: 16384, VPN: 131072}},
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.peerType(tt.dynamic); got != tt.want {
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

// Two route reflectors, each with one client: what a client announces
// reaches the other client through both reflectors (client -> its
// reflector -> the other reflector, a non-client -> that one's client),
// exactly, with the next hops unchanged; a client does not learn its own
// paths back (GoBGP drops them by ORIGINATOR_ID, else LearnedTable would
// list them as the reflector's); and every session has a prefix limit.
func TestRouteReflectors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four BGP speakers")
	}
	c1, c2 := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	rr1, rr2 := netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")
	port := freePortOn(t, c1, c2, rr1, rr2)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("speaker logs:\n%s", logs.String())
		}
	})
	start := func(self netip.Addr, cfg Config) *Speaker {
		cfg.ASN, cfg.Port, cfg.RouterID, cfg.ListenAddress = testASN, port, self, self
		cfg.Keepalive, cfg.Hold, cfg.RestartTime = time.Second, 3*time.Second, 10*time.Second
		cfg.Pools, cfg.LogLevel = testPools, slog.LevelWarn
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("speaker", self)
		sp, err := Start(ctx, cfg, log, func() {})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			stop, done := context.WithTimeout(context.Background(), 5*time.Second)
			defer done()
			if err := sp.Stop(stop); err != nil {
				t.Errorf("stop %s: %v", self, err)
			}
		})
		return sp
	}
	r1 := start(rr1, Config{RouteReflector: true, Peers: []netip.Addr{rr2}, PeerPrefixes: []netip.Prefix{netip.PrefixFrom(c1, 32)}})
	r2 := start(rr2, Config{RouteReflector: true, Peers: []netip.Addr{rr1}, PeerPrefixes: []netip.Prefix{netip.PrefixFrom(c2, 32)}})
	s1 := start(c1, Config{RouteReflectors: []netip.Addr{rr1}})
	s2 := start(c2, Config{RouteReflectors: []netip.Addr{rr2}})

	t1 := blockproto.Table{Records: []blockproto.Record{testRecord()}, Claims: []blockproto.Claim{testClaim()}}
	u1 := []UnicastBlock{{Block: netip.MustParsePrefix("10.244.7.0/26"), Owner: blockproto.Node{Addr: nodeA, Inc: 7}}}
	t2 := blockproto.Table{Grants: []blockproto.Grant{testGrant()}, Forgets: []blockproto.Forget{testForget()}}
	u2 := []UnicastBlock{{Block: netip.MustParsePrefix("10.244.8.0/26"), Owner: blockproto.Node{Addr: nodeB, Inc: 8}}}
	if err := s1.AnnounceTable(t1, u1); err != nil {
		t.Fatal(err)
	}
	if err := s2.AnnounceTable(t2, u2); err != nil {
		t.Fatal(err)
	}

	// learns waits until sp's table is want, with uc unicast paths, all
	// from the reflector from.
	learns := func(name string, sp *Speaker, want blockproto.Table, uc int, from netip.Addr) {
		t.Helper()
		want.Sort()
		var diff string
		var counts Counts
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			got, c, err := sp.LearnedTable()
			if err != nil {
				t.Fatal(err)
			}
			got.Sort()
			diff, counts = cmp.Diff(want, got, cmpOpts...), c
			wantCounts := PeerCounts{VPN: PathCounts{Received: uint64(want.Len()), Accepted: uint64(want.Len())},
				Unicast: PathCounts{Received: uint64(uc), Accepted: uint64(uc)}}
			if diff == "" && len(c.Peers) == 1 && c.Peers[from] == wantCounts {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s's table after 30s (-want +got):\n%s\ncounts %+v (want all from %s)\nsessions: %+v", name, diff, counts, from, sp.Status(ctx))
	}
	learns("client 2", s2, t1, 1, rr2)
	learns("client 1", s1, t2, 1, rr1)

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
		{s1, map[netip.Addr]PeerType{rr1: PeerReflector}},
		{r1, map[netip.Addr]PeerType{rr2: PeerReflector, c1: PeerClient}},
		{r2, map[netip.Addr]PeerType{rr1: PeerReflector, c2: PeerClient}},
	} {
		if d := cmp.Diff(c.want, types(c.sp), cmpOpts...); d != "" {
			t.Errorf("peer types of %s (-want +got):\n%s", c.sp.cfg.RouterID, d)
		}
	}

	// Every session, configured or accepted, has a prefix limit on both
	// families.
	lim := PrefixLimits(testPools)
	for _, sp := range []*Speaker{s1, s2, r1, r2} {
		err := sp.s.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
			got := map[api.Family_Safi]uint32{}
			for _, af := range p.GetAfiSafis() {
				got[af.GetConfig().GetFamily().GetSafi()] = af.GetPrefixLimits().GetMaxPrefixes()
			}
			want := map[api.Family_Safi]uint32{api.Family_SAFI_UNICAST: lim.Unicast, api.Family_SAFI_MPLS_VPN: lim.VPN}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s: session to %s: prefix limits (-want +got):\n%s", sp.cfg.RouterID, p.GetConf().GetNeighborAddress(), d)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// A withdrawal goes through the reflectors too.
	if err := s1.AnnounceTable(blockproto.Table{Records: t1.Records}, nil); err != nil {
		t.Fatal(err)
	}
	learns("client 2 after a withdrawal", s2, blockproto.Table{Records: t1.Records}, 0, rr2)
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
