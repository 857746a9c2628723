package bgp

import (
	"fmt"
	"log/slog"
	"net/netip"
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
	addrA, addrC := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	ctx, logs, start := testSpeakers(t, addrA, addrC)
	a := start(addrA, Config{Peers: []netip.Addr{addrC}})
	// The old C, made as start makes one but stopped by the test alone,
	// with a restart time that no step of the test outlasts.
	oldCfg := Config{ASN: testASN, Port: a.cfg.Port, RouterID: addrC, ListenAddress: addrC, Peers: []netip.Addr{addrA},
		Keepalive: 3 * time.Second, Hold: 10 * time.Second, RestartTime: time.Hour, Pools: testPools, LogLevel: slog.LevelWarn}
	oldC, err := listen(ctx, oldCfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})).With("speaker", "old "+addrC.String()), func() {})
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range []*Speaker{a, oldC} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ownC := netip.MustParsePrefix("10.244.8.0/26")
	tableC := blockproto.Table{Claims: []blockproto.Claim{{Block: ownC, Owner: blockproto.Node{Addr: nodeC, Inc: 2}, State: blockproto.Confirmed}}}
	blocksC := []UnicastBlock{{Block: ownC, Owner: blockproto.Node{Addr: nodeC, Inc: 2}}}
	if err := oldC.AnnounceTable(tableC, blocksC); err != nil {
		t.Fatal(err)
	}
	hasC := func() string {
		counts, err := a.CountPaths()
		if err != nil {
			t.Fatal(err)
		}
		if counts.Unicast.Accepted != 1 || counts.VPN.Accepted != 1 {
			return fmt.Sprintf("A has %d of C's blocks and %d of its claims", counts.Unicast.Accepted, counts.VPN.Accepted)
		}
		return ""
	}
	eventually(t, "C's block and claim reach A", hasC)

	// Every withdrawal of a best path at A from now on.
	var mu sync.Mutex
	var withdrawn []string
	if err := a.s.WatchEvent(ctx, server.WatchEventMessageCallbacks{OnBestPath: func(paths []*apiutil.Path, _ time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range paths {
			if p.Withdrawal {
				withdrawn = append(withdrawn, fmt.Sprintf("%s %s from %s", p.Family, p.Nlri, p.PeerAddress))
			}
		}
	}}, server.WatchBestPath(false)); err != nil {
		t.Fatal(err)
	}

	// The old daemon exits: no NOTIFICATION, A keeps C's paths as stale.
	if err := oldC.s.StopBgp(ctx, &api.StopBgpRequest{AllowGracefulRestart: true}); err != nil {
		t.Fatal(err)
	}
	peerC := func(f func(*api.Peer) string) string {
		out := "A has no peer " + addrC.String()
		if err := a.s.ListPeer(ctx, &api.ListPeerRequest{Address: addrC.String(), EnableAdvertised: false}, func(p *api.Peer) { out = f(p) }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	eventually(t, "A keeps C's paths with C restarting", func() string {
		return peerC(func(p *api.Peer) string {
			if !p.GetGracefulRestart().GetPeerRestarting() {
				return "A's session with C is not restarting"
			}
			return hasC()
		})
	})

	// The new daemon: its speaker connects, and its paths come only later.
	newC := start(addrC, Config{Peers: []netip.Addr{addrA}, Restarting: true, deferral: time.Hour})
	if err := newC.connect(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new C has A's End-of-RIB of each family", func() string {
		var missing []string
		err := newC.s.ListPeer(ctx, &api.ListPeerRequest{Address: addrA.String()}, func(p *api.Peer) {
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
	// The daemon's first pass is done: its table goes in. A's stale paths
	// are replaced, and C's End-of-RIB follows them.
	if err := newC.AnnounceTable(tableC, blocksC); err != nil {
		t.Fatal(err)
	}
	eventually(t, "A has C's End-of-RIB, and C's paths", func() string {
		return peerC(func(p *api.Peer) string {
			if p.GetGracefulRestart().GetPeerRestarting() {
				return "A's session with C is still restarting"
			}
			return hasC()
		})
	})
	mu.Lock()
	defer mu.Unlock()
	if len(withdrawn) > 0 {
		t.Errorf("A withdrew %d of C's paths over C's restart, before C's table was in: %v", len(withdrawn), withdrawn)
	}
}

// With Service addresses configured, the node's own paths are in only
// once the Service announcer's first SetServiceAddresses is done as well
// (it comes once the informers have listed): before, a router with
// graceful restart would drop the node's Service addresses on its
// End-of-RIB. A refused address does not hold it back.
func TestRestartOwnPathsWaitForServiceAddresses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a BGP speaker")
	}
	addrC := netip.MustParseAddr("127.0.0.2")
	_, logs, start := testSpeakers(t, addrC)
	svc := netip.MustParsePrefix("198.51.100.0/24")
	c := start(addrC, Config{Restarting: true, deferral: time.Hour, NodeAddress: nodeC, ServiceAddressCIDRs: []netip.Prefix{svc},
		ExternalPeers: []ExternalPeer{{Address: netip.MustParseAddr("127.0.0.4"), ASN: 65000, Keepalive: 3 * time.Second, Hold: 10 * time.Second, MaxPrefixes: 100}}})
	const in = "the node's own paths are in"
	if err := c.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: netip.MustParsePrefix("10.244.8.0/26"), Owner: blockproto.Node{Addr: nodeC, Inc: 2}}}); err != nil {
		t.Fatal(err)
	}
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
