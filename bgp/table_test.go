package bgp

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/internal/poll"
)

// syncBuffer collects the speakers' logs, which GoBGP's goroutines may
// write after the test has ended (when t.Log would panic).
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// freePort finds a TCP port free on both 127.0.0.1 and 127.0.0.2.
func freePort(t testing.TB) int {
	t.Helper()
	for range 20 {
		l1, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Skipf("no loopback: %v", err)
		}
		port := l1.Addr().(*net.TCPAddr).Port
		l2, err := net.Listen("tcp4", "127.0.0.2:"+strconv.Itoa(port))
		l1.Close()
		if err == nil {
			l2.Close()
			return port
		}
	}
	t.Skip("no port free on both 127.0.0.1 and 127.0.0.2 (is 127.0.0.2 not a loopback address here?)")
	return 0
}

// Two real speakers in one process, on 127.0.0.1 and 127.0.0.2: what one
// announces with AnnounceTable, the other learns with LearnedTable,
// exactly, and withdrawals and replacements go through. B takes A as a
// configured neighbour, or as a dynamic one (the peer group).
func TestTwoSpeakers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two BGP speakers")
	}
	t.Run("neighbours", func(t *testing.T) { testTwoSpeakers(t, false) })
	t.Run("dynamic", func(t *testing.T) { testTwoSpeakers(t, true) })
}

// startPair starts speakers A on 127.0.0.1 and B on 127.0.0.2, A with B
// as a configured neighbour, B with A as one or (dynamic) accepting it
// from a peer prefix; both stop when the test ends.
func startPair(tb testing.TB, dynamic bool) (a, b *Speaker, ctx context.Context) {
	port := freePort(tb)
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	var logs syncBuffer
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("speaker logs:\n%s", logs.String())
		}
	})
	start := func(self, peer netip.Addr, accept bool) *Speaker {
		log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("speaker", self)
		cfg := Config{
			ASN: testASN, Port: port, RouterID: self, ListenAddress: self, Peers: []netip.Addr{self, peer},
			Keepalive: time.Second, Hold: 3 * time.Second, RestartTime: 10 * time.Second,
			Pools: testPools, LogLevel: slog.LevelWarn,
		}
		if accept {
			cfg.Peers, cfg.PeerPrefixes = nil, []netip.Prefix{netip.PrefixFrom(peer, 32)}
		}
		sp, err := Start(ctx, cfg, log, func() {})
		if err != nil {
			tb.Fatal(err)
		}
		stopAtCleanup(tb, sp, self)
		return sp
	}
	return start(addrA, addrB, false), start(addrB, addrA, dynamic), ctx
}

var addrA, addrB = netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")

func testTwoSpeakers(t *testing.T, dynamic bool) {
	a, b, ctx := startPair(t, dynamic)

	// learns waits until b's table is want and its counts of A's paths
	// vpn and uc.
	learns := func(what string, want blockproto.Table, vpn, uc PathCounts) {
		t.Helper()
		want.Sort()
		wantCounts := Counts{VPN: vpn, Unicast: uc, Peers: map[netip.Addr]PeerCounts{addrA: {VPN: vpn, Unicast: uc}}}
		if vpn == (PathCounts{}) && uc == (PathCounts{}) {
			wantCounts.Peers = map[netip.Addr]PeerCounts{}
		}
		if err := poll.Until(30*time.Second, func() error {
			got, err := b.LearnedTable()
			if err != nil {
				return poll.Stop(err)
			}
			counts, err := b.CountPaths()
			if err != nil {
				return poll.Stop(err)
			}
			got.Sort()
			diff := cmp.Diff(want, got, cmpOpts...)
			countsDiff := cmp.Diff(wantCounts, counts, cmpOpts...)
			if diff != "" || countsDiff != "" {
				return fmt.Errorf("(-want +got):\n%s\ncounts (-want +got):\n%s", diff, countsDiff)
			}
			return nil
		}); err != nil {
			t.Fatalf("%s: B's table: %v\nsessions: %+v", what, err, b.Status(ctx))
		}
	}

	tbl := blockproto.Table{
		Records: []blockproto.Record{testRecord()},
		Claims:  []blockproto.Claim{testClaim()},
		Grants:  []blockproto.Grant{testGrant()},
		Forgets: []blockproto.Forget{testForget()},
	}
	confirmed := []UnicastBlock{{Block: netip.MustParsePrefix("10.244.7.0/26"), Owner: blockproto.Node{Addr: nodeA, Inc: 7}}}
	if err := a.AnnounceTable(tbl, confirmed); err != nil {
		t.Fatal(err)
	}
	learns("one of each kind", tbl, PathCounts{Received: 4, Accepted: 4}, PathCounts{Received: 1, Accepted: 1})

	// On the wire: label 0, next hop A's router ID, no route target; in
	// IPv4 unicast, next hop the owner.
	err := b.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_VPN}, func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
		vpn := nlri.(*bgppkt.LabeledVPNIPAddrPrefix)
		if !slices.Equal(vpn.Labels.Labels, []uint32{0}) {
			t.Errorf("%s: labels %v, want [0]", nlri, vpn.Labels.Labels)
		}
		for _, p := range paths {
			if _, nh := pathAttrs(nil, p.Attrs); nh != addrA {
				t.Errorf("%s: next hop %s, want A's router ID %s", nlri, nh, addrA)
			}
			for _, at := range p.Attrs {
				if ec, ok := at.(*bgppkt.PathAttributeExtendedCommunities); ok {
					t.Errorf("%s: extended communities %v, want none (no route target)", nlri, ec.Value)
				}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	err = b.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC}, func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
		for _, p := range paths {
			if _, nh := pathAttrs(nil, p.Attrs); nh != nodeA {
				t.Errorf("%s: next hop %s, want the owner %s", nlri, nh, nodeA)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	// The same again changes nothing.
	before := maps.Clone(a.ownVPN)
	if err := a.AnnounceTable(tbl, confirmed); err != nil {
		t.Fatal(err)
	}
	for k, p := range a.ownVPN {
		if before[k].path != p.path {
			t.Errorf("announcing the same table again announced %s:%s again", k.rd, k.prefix)
		}
	}

	// The grant withdrawn, the claim confirmed (a new path of the same
	// NLRI: B keeps one claim, not two), a second record.
	next := blockproto.Table{
		Records: []blockproto.Record{testRecord(), {Node: blockproto.Node{Addr: nodeB, Inc: 8}, Born: 5, VoterHash: 0x01020304, Voters: []netip.Addr{nodeA, nodeB, nodeC}}},
		Claims:  []blockproto.Claim{testClaim()},
		Forgets: tbl.Forgets,
	}
	next.Claims[0].State = blockproto.Confirmed
	if err := a.AnnounceTable(next, confirmed); err != nil {
		t.Fatal(err)
	}
	learns("grant withdrawn, claim confirmed", next, PathCounts{Received: 4, Accepted: 4}, PathCounts{Received: 1, Accepted: 1})

	// What A refuses to announce: it says so and announces the rest.
	bad := next
	bad.Claims = append(slices.Clone(next.Claims), blockproto.Claim{Block: netip.MustParsePrefix("10.99.0.0/26"), Owner: blockproto.Node{Addr: nodeA, Inc: 7}, State: blockproto.Pending})
	if err := a.AnnounceTable(bad, confirmed); err == nil {
		t.Error("AnnounceTable took a claim outside every pool without an error")
	} else if want := "announce claim of 10.99.0.0/26 by 192.168.77.11#00000007 (pending): every peer would drop it"; !strings.Contains(err.Error(), want) {
		t.Errorf("AnnounceTable error %q, want it to mention %q", err, want)
	}

	// What B refuses to take: a VPN path past A's checks, and an IPv4
	// unicast path of the old protocol. Both are counted as dropped.
	rt := must(EncodeClaim(testASN, blockproto.Claim{Block: netip.MustParsePrefix("10.99.0.0/26"), Owner: blockproto.Node{Addr: nodeA, Inc: 7}, State: blockproto.Pending}))
	nh, err := bgppkt.NewPathAttributeNextHop(addrA)
	if err != nil {
		t.Fatal(err)
	}
	p, err := vpnPath(rt, nh)
	if err != nil {
		t.Fatal(err)
	}
	old, err := unicastPath(netip.MustParsePrefix("10.244.8.0/26"), nodeA, []LargeCommunity{ // a confirmed claim as reef announced it before blockproto
		{testASN, 100, 0}, {testASN, 101, 1_790_000_000}, {testASN, 102, 0}, {testASN, 103, addrUint(nodeA)}, {testASN, 104, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.s.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p, old}}); err != nil {
		t.Fatal(err)
	}
	learns("with invalid paths", next, PathCounts{Received: 5, Accepted: 4, Dropped: 1}, PathCounts{Received: 2, Accepted: 1, Dropped: 1})
	if got := b.Dropped(); got != 2 {
		t.Errorf("B dropped %d distinct paths, want 2", got)
	}
	var st *PeerStatus
	for _, s := range b.Status(ctx) {
		if s.Address == addrA {
			st = &s
		}
	}
	if st == nil || !st.Established || st.Dynamic != dynamic || st.Received != 7 || st.Accepted != 5 {
		t.Errorf("B's status of A: %+v, want established, dynamic %v, 7 received, 5 accepted", st, dynamic)
	}

	// A's own paths are not in what A learns.
	own, err := a.LearnedTable()
	if err != nil {
		t.Fatal(err)
	}
	ownCounts, err := a.CountPaths()
	if err != nil {
		t.Fatal(err)
	}
	if own.Len() != 0 || len(ownCounts.Peers) != 0 {
		t.Errorf("A learned %+v (counts %+v) from a peer that announces nothing", own, ownCounts)
	}

	// Withdrawing everything.
	if err = a.s.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{p, old}}); err != nil {
		t.Fatal(err)
	}
	if err := a.AnnounceTable(blockproto.Table{}, nil); err != nil {
		t.Fatal(err)
	}
	learns("nothing", blockproto.Table{}, PathCounts{}, PathCounts{})
	if len(a.ownVPN) != 0 || len(a.ownUnicast) != 0 {
		t.Errorf("A still remembers paths it withdrew: %v %v", a.ownVPN, a.ownUnicast)
	}
}

// LearnedTable over a 50-node cluster's worth of paths: 50 records, 1000
// claims (20 per node), 3 grants for each (3 voters), 50 forgets.
func BenchmarkLearnedTable(b *testing.B) {
	a, sb, _ := startPair(b, false)
	var tbl blockproto.Table
	node := func(i int) blockproto.Node {
		return blockproto.Node{Addr: netip.AddrFrom4([4]byte{192, 168, 78, byte(i + 1)}), Inc: uint32(i)}
	}
	voters := []netip.Addr{node(0).Addr, node(1).Addr, node(2).Addr}
	for i := range 50 {
		tbl.Records = append(tbl.Records, blockproto.Record{Node: node(i), Born: 1, VoterHash: 1, Voters: voters})
		tbl.Forgets = append(tbl.Forgets, blockproto.Forget{Node: blockproto.Node{Addr: node(i).Addr, Inc: uint32(1000 + i)}})
		for j := range 20 {
			n := i*20 + j
			blk := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(n / 4), byte(n%4) * 64}), 26)
			tbl.Claims = append(tbl.Claims, blockproto.Claim{Block: blk, Owner: node(i), State: blockproto.Confirmed, VoterHash: 1})
			for v := range 3 {
				tbl.Grants = append(tbl.Grants, blockproto.Grant{Block: blk, Voter: node(v), To: node(i), VoterHash: 1})
			}
		}
	}
	if err := a.AnnounceTable(tbl, nil); err != nil {
		b.Fatal(err)
	}
	poll.For(b, 60*time.Second, func() error {
		got, err := sb.LearnedTable()
		if err != nil {
			return poll.Stop(err)
		}
		if got.Len() != tbl.Len() {
			return fmt.Errorf("B has %d of %d paths", got.Len(), tbl.Len())
		}
		return nil
	})
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := sb.LearnedTable(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tbl.Len()), "paths")
}

// stopAtCleanup stops a test speaker when the test ends.
func stopAtCleanup(tb testing.TB, sp *Speaker, self netip.Addr) {
	tb.Cleanup(func() {
		stop, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		if err := sp.Stop(stop); err != nil {
			tb.Errorf("stop %s: %v", self, err)
		}
	})
}
