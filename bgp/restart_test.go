package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/reefcni/reef/blockproto"
)

// A node restarts after a planned stop (the old daemon's sessions close
// without a NOTIFICATION; its mesh peer A keeps its paths as stale) and
// its new speaker gets A's End-of-RIB before the node's own paths are in
// its table: the daemon announces them only after its first reconcile
// pass (daemon/blocks.go). GoBGP's restart sync then sent C's End-of-RIB
// with no path of C's before it, and A dropped C's stale paths (RFC 4724
// 4.2) until C's AnnounceTable brought them back: C's block and claim
// withdrawn at A, and with them A's routes to C's pods. Now the sync waits
// for the node's own paths too (restart.go, WaitLocalRoutesOption of
// third_party/gobgp.diff): A keeps the stale paths until the new ones
// replace them, and withdraws nothing.
func TestRestartEndOfRIBWaitsForOwnPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	r := startRestartBeforeOwnPaths(t, Config{deferral: time.Hour})
	eventually(t, "the new C has A's End-of-RIB of each family", func() string {
		var missing []string
		err := r.newC.s.ListPeer(r.ctx, &api.ListPeerRequest{Address: r.addrA.String()}, func(p *api.Peer) {
			if p.GetState().GetSessionState() != api.PeerState_SESSION_STATE_ESTABLISHED {
				missing = append(missing, "session not established")
				return
			}
			for _, f := range p.GetAfiSafis() {
				if !f.GetMpGracefulRestart().GetState().GetEndOfRibReceived() {
					missing = append(missing, f.GetConfig().GetFamily().String())
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(missing, "; ")
	})
	r.announceAndCheck()
}

// The same restart with the first reconcile pass longer than the deferral
// timer (1 s here, 10 s in the daemon): the timer expired and GoBGP sent
// C's End-of-RIB to A with an empty table, and A withdrew C's block and
// claim (2 withdrawals). Now the expiry holds A until C's paths are in
// (up to ownPathsWait, an hour here), and A withdraws nothing.
func TestRestartDeferralWaitsForOwnPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	r := startRestartBeforeOwnPaths(t, Config{deferral: time.Second, ownPathsWait: time.Hour})
	const held = "deferral timer expired before the local routes are in"
	eventually(t, "C's deferral timer for A expires and holds A", func() string {
		if strings.Contains(r.logs.String(), held) {
			return ""
		}
		if w := r.withdrawals(); len(w) > 0 {
			t.Fatalf("A withdrew %d of C's paths before C's table was in: %v", len(w), w)
		}
		if !r.restarting() {
			t.Fatal("A has C's End-of-RIB before C's table was in")
		}
		return "no deferral expiry held in C's log"
	})
	if !r.restarting() {
		t.Fatal("A has C's End-of-RIB before C's table was in")
	}
	r.announceAndCheck()
}

// A peer that the deferral timer's expiry held is released when C's paths
// come in, even while another peer waited for (B, configured, never up)
// keeps the restart's sync from ending: GoBGP's deferral timer would have
// released it, and the sync alone would leave it until ownPathsWait.
func TestRestartHeldPeerReleasedByOwnPaths(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	r := startRestartBeforeOwnPaths(t, Config{deferral: time.Second, ownPathsWait: time.Hour, Peers: []netip.Addr{netip.MustParseAddr("127.0.0.3")}})
	eventually(t, "C's deferral timer for A expires and holds A", func() string {
		if strings.Contains(r.logs.String(), "deferral timer expired before the local routes are in") {
			return ""
		}
		return "no deferral expiry held in C's log"
	})
	r.announceAndCheck()
}

// ownPathsWait bounds that hold: with C's table never in, A gets C's
// End-of-RIB once it has passed (2 s here), and drops C's stale paths.
func TestRestartOwnPathsWaitEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	r := startRestartBeforeOwnPaths(t, Config{deferral: time.Second, ownPathsWait: 2 * time.Second})
	eventually(t, "A has C's End-of-RIB without C's table", func() string {
		if r.restarting() {
			return "A's session with C is still restarting"
		}
		return ""
	})
	if w := r.withdrawals(); len(w) != 2 {
		t.Errorf("A withdrew %v, want C's block and claim", w)
	}
	if !strings.Contains(r.logs.String(), "the local routes are still not in") {
		t.Error("C did not log that it sent the End-of-RIB without its paths")
	}
}

// restartBeforeOwnPaths is a mesh peer A and a node C that restarts after
// a planned stop, up to the new C's connect, before its paths are in.
type restartBeforeOwnPaths struct {
	t            *testing.T
	ctx          context.Context
	logs         *syncBuffer
	addrA, addrC netip.Addr
	a, newC      *Speaker
	tableC       blockproto.Table
	blocksC      []UnicastBlock

	mu        sync.Mutex
	withdrawn []string // every withdrawal of a best path at A since the old C's stop
}

// startRestartBeforeOwnPaths starts A and the old C, waits for C's block
// and claim at A, stops the old C as a planned stop does, and starts and
// connects the new C, Restarting, with A added to newCfg's peers.
func startRestartBeforeOwnPaths(t *testing.T, newCfg Config) *restartBeforeOwnPaths {
	r := &restartBeforeOwnPaths{t: t, addrA: netip.MustParseAddr("127.0.0.1"), addrC: netip.MustParseAddr("127.0.0.2")}
	ctx, logs, start := testSpeakers(t, r.addrA, r.addrC)
	r.ctx, r.logs = ctx, logs
	r.a = start(r.addrA, Config{Peers: []netip.Addr{r.addrC}})
	// The old C, made as start makes one but stopped by the test alone,
	// with a restart time that no step of the test outlasts.
	oldCfg := Config{ASN: testASN, Port: r.a.cfg.Port, RouterID: r.addrC, ListenAddress: r.addrC, Peers: []netip.Addr{r.addrA},
		Keepalive: 3 * time.Second, Hold: 10 * time.Second, RestartTime: time.Hour, Pools: testPools, LogLevel: slog.LevelWarn}
	oldC, err := listen(ctx, oldCfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("speaker", "old "+r.addrC.String()), func() {})
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range []*Speaker{r.a, oldC} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ownC := netip.MustParsePrefix("10.244.8.0/26")
	r.tableC = blockproto.Table{Claims: []blockproto.Claim{{Block: ownC, Owner: blockproto.Node{Addr: nodeC, Inc: 2}, State: blockproto.Confirmed}}}
	r.blocksC = []UnicastBlock{{Block: ownC, Owner: blockproto.Node{Addr: nodeC, Inc: 2}}}
	if err := oldC.AnnounceTable(r.tableC, r.blocksC); err != nil {
		t.Fatal(err)
	}
	eventually(t, "C's block and claim reach A", r.hasC)

	if err := r.a.s.WatchEvent(ctx, server.WatchEventMessageCallbacks{OnBestPath: func(paths []*apiutil.Path, _ time.Time) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, p := range paths {
			if p.Withdrawal {
				r.withdrawn = append(r.withdrawn, fmt.Sprintf("%s %s from %s", p.Family, p.Nlri, p.PeerAddress))
			}
		}
	}}, server.WatchBestPath(false)); err != nil {
		t.Fatal(err)
	}

	// The old daemon exits: no NOTIFICATION, A keeps C's paths as stale.
	if err := oldC.s.StopBgp(ctx, &api.StopBgpRequest{AllowGracefulRestart: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A keeps C's paths with C restarting", func() string {
		if !r.restarting() {
			return "A's session with C is not restarting"
		}
		return r.hasC()
	})

	// The new daemon: its speaker connects, and its paths come only later.
	newCfg.Peers, newCfg.Restarting = append(newCfg.Peers, r.addrA), true
	r.newC = start(r.addrC, newCfg)
	if err := r.newC.connect(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// hasC says what A lacks of C's block and claim, or "".
func (r *restartBeforeOwnPaths) hasC() string {
	counts, err := r.a.CountPaths()
	if err != nil {
		r.t.Fatal(err)
	}
	if counts.Unicast.Accepted != 1 || counts.VPN.Accepted != 1 {
		return fmt.Sprintf("A has %d of C's blocks and %d of its claims", counts.Unicast.Accepted, counts.VPN.Accepted)
	}
	return ""
}

// restarting reports whether A's session with C is in graceful restart:
// A has not had C's End-of-RIB since the old C's stop.
func (r *restartBeforeOwnPaths) restarting() bool {
	restarting := false
	if err := r.a.s.ListPeer(r.ctx, &api.ListPeerRequest{Address: r.addrC.String()}, func(p *api.Peer) {
		restarting = p.GetGracefulRestart().GetPeerRestarting()
	}); err != nil {
		r.t.Fatal(err)
	}
	return restarting
}

func (r *restartBeforeOwnPaths) withdrawals() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.withdrawn)
}

// announceAndCheck is the daemon's first pass done: C's table goes in. A's
// stale paths are replaced, C's End-of-RIB follows them, and A withdrew
// nothing.
func (r *restartBeforeOwnPaths) announceAndCheck() {
	t := r.t
	if err := r.newC.AnnounceTable(r.tableC, r.blocksC); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A has C's End-of-RIB, and C's paths", func() string {
		if r.restarting() {
			return "A's session with C is still restarting"
		}
		return r.hasC()
	})
	if w := r.withdrawals(); len(w) > 0 {
		t.Errorf("A withdrew %d of C's paths over C's restart, before C's table was in: %v", len(w), w)
	}
}

// With Service addresses configured, the node's own paths are in only
// once the Service announcer's first SetServiceAddresses is done as well
// (it comes once the informers have listed): before, a router with
// graceful restart would drop the node's Service addresses on its
// End-of-RIB. A refused address does not hold it back.
func TestRestartOwnPathsWaitForServiceAddresses(t *testing.T) {
	// One router with BFD beside the one without: the one without keeps
	// the addresses, so they are waited for.
	c, logs := restartWithServiceAddresses(t, nil, &BFD{MinInterval: 300 * time.Millisecond, Multiplier: 3})
	const in = "the node's own paths are in"
	if strings.Contains(logs.String(), in) {
		t.Fatalf("own paths in after the blocks alone, with Service addresses configured")
	}
	if _, err := c.SetServiceAddresses([]netip.Addr{netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("203.0.113.1")}); err == nil {
		t.Fatal("SetServiceAddresses took an address outside the CIDRs")
	}
	if n := strings.Count(logs.String(), in); n != 1 {
		t.Errorf("%q logged %d times after the blocks and the Service addresses, want once", in, n)
	}
}

// With Service addresses configured but every router on BFD (offered no
// graceful restart, so none keeps the node's paths over a restart), the
// blocks alone are the node's own paths: the sync does not wait for the
// Kubernetes API, which may be slow or away, for addresses no peer kept.
func TestRestartOwnPathsBFDRoutersOnly(t *testing.T) {
	_, logs := restartWithServiceAddresses(t, &BFD{MinInterval: 300 * time.Millisecond, Multiplier: 3})
	if n := strings.Count(logs.String(), "the node's own paths are in"); n != 1 {
		t.Errorf("own paths logged in %d times after the blocks, with BFD routers alone, want once", n)
	}
}

// restartWithServiceAddresses starts a restarting speaker with Service
// address CIDRs and a router for each of bfds (with that BFD; nil: none),
// and announces its table: one block of its own.
func restartWithServiceAddresses(t *testing.T, bfds ...*BFD) (*Speaker, *syncBuffer) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a BGP speaker")
	}
	addrC := netip.MustParseAddr("127.0.0.2")
	_, logs, start := testSpeakers(t, addrC)
	svc := netip.MustParsePrefix("198.51.100.0/24")
	var routers []ExternalPeer
	for i, bfd := range bfds {
		routers = append(routers, ExternalPeer{Address: netip.AddrFrom4([4]byte{127, 0, 0, byte(4 + i)}), ASN: 65000, Keepalive: 3 * time.Second, Hold: 10 * time.Second, MaxPrefixes: 100, BFD: bfd})
	}
	c := start(addrC, Config{Restarting: true, deferral: time.Hour, NodeAddress: nodeC, ServiceAddressCIDRs: []netip.Prefix{svc}, ExternalPeers: routers})
	if err := c.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: netip.MustParsePrefix("10.244.8.0/26"), Owner: blockproto.Node{Addr: nodeC, Inc: 2}}}); err != nil {
		t.Fatal(err)
	}
	return c, logs
}

// A call counts for the node's own paths only when GoBGP refused none of
// its paths: those are tried again at the next call, and an End-of-RIB
// sent before it would make the peers drop them (restart.go). Here GoBGP
// refuses every path: its BGP is stopped.
func TestOwnPathsNotInWhenGoBGPRefuses(t *testing.T) {
	addrC := netip.MustParseAddr("127.0.0.2")
	logs := &syncBuffer{}
	cfg := Config{ASN: testASN, Port: freePortOn(t, addrC), RouterID: addrC, ListenAddress: addrC, Keepalive: 3 * time.Second, Hold: 10 * time.Second,
		RestartTime: 10 * time.Second, Restarting: true, Pools: testPools, LogLevel: slog.LevelWarn, NodeAddress: nodeC,
		ServiceAddressCIDRs: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")},
		ExternalPeers:       []ExternalPeer{{Address: netip.MustParseAddr("127.0.0.4"), ASN: 65000, Keepalive: 3 * time.Second, Hold: 10 * time.Second, MaxPrefixes: 100}}}
	c, err := listen(t.Context(), cfg, slog.New(slog.NewTextHandler(logs, nil)), func() {})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.s.StopBgp(t.Context(), &api.StopBgpRequest{}); err != nil {
		t.Fatal(err)
	}
	own := netip.MustParsePrefix("10.244.8.0/26")
	if err := c.AnnounceTable(blockproto.Table{Claims: []blockproto.Claim{{Block: own, Owner: blockproto.Node{Addr: nodeC, Inc: 2}, State: blockproto.Confirmed}}},
		[]UnicastBlock{{Block: own, Owner: blockproto.Node{Addr: nodeC, Inc: 2}}}); err == nil {
		t.Fatal("AnnounceTable: GoBGP took the paths with its BGP stopped")
	}
	if _, err := c.SetServiceAddresses([]netip.Addr{netip.MustParseAddr("198.51.100.7")}); err == nil {
		t.Fatal("SetServiceAddresses: GoBGP took the address with its BGP stopped")
	}
	c.ownPaths.mu.Lock()
	defer c.ownPaths.mu.Unlock()
	if c.ownPaths.blocks || c.ownPaths.addr {
		t.Errorf("refused by GoBGP, yet counted in: blocks %v, Service addresses %v", c.ownPaths.blocks, c.ownPaths.addr)
	}
}
