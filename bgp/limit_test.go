package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"

	"github.com/reefcni/reef/internal/poll"
)

// A peer that announces more IPv4 unicast paths than the session's limit
// is cut off, and one that stays at the limit while it replaces paths is
// not: the limit counts the paths the peer holds now (withdrawals lower the
// count), not every path it ever sent. GoBGP's count is the one
// third_party/gobgp.diff keeps as paths come and go; a count that missed a
// withdrawal would cut B off at the swap below, one that missed an add
// would let it past the limit.
func TestPrefixLimitCutsOffAFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two BGP speakers and sends 17,000 paths")
	}
	addrA, addrB := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	ctx, _, start := testSpeakers(t, addrA, addrB)
	a := start(addrA, Config{Peers: []netip.Addr{addrB}})
	b := start(addrB, Config{Peers: []netip.Addr{addrA}})
	for _, sp := range []*Speaker{a, b} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}
	limit := int(PrefixLimits(testPools).Unicast)

	// B's GoBGP announces /32s of 10.0.0.0/8 (what they are does not
	// matter: the limit counts what a peer sends, before any filter).
	path := func(i int) *apiutil.Path {
		p, err := unicastPath(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32), addrB, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	paths := func(from, to int) []*apiutil.Path {
		var ps []*apiutil.Path
		for i := from; i < to; i++ {
			ps = append(ps, path(i))
		}
		return ps
	}
	// received is A's count of B's unicast paths and whether the session
	// is up, from GoBGP's peer state.
	received := func() (uint64, bool, string) {
		var n uint64
		var up bool
		var admin string
		err := a.s.ListPeer(ctx, &api.ListPeerRequest{Address: addrB.String()}, func(p *api.Peer) {
			up = p.GetState().GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED
			admin = p.GetState().GetAdminState().String()
			for _, af := range p.GetAfiSafis() {
				if af.GetConfig().GetFamily().GetSafi() == api.Family_SAFI_UNICAST {
					n = af.GetState().GetReceived()
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return n, up, admin
	}
	waitFor := func(what string, ok func(n uint64, up bool, admin string) bool) {
		t.Helper()
		poll.For(t, 60*time.Second, func() error {
			if n, up, admin := received(); !ok(n, up, admin) {
				return fmt.Errorf("%s: A holds %d of B's paths, session established %v, admin state %s", what, n, up, admin)
			}
			return nil
		})
	}
	waitFor("session up", func(_ uint64, up bool, _ string) bool { return up })

	add := func(ps []*apiutil.Path) {
		t.Helper()
		if _, err := b.s.AddPath(apiutil.AddPathRequest{Paths: ps}); err != nil {
			t.Fatal(err)
		}
	}
	add(paths(0, limit))
	waitFor("B at the limit", func(n uint64, up bool, _ string) bool { return up && n == uint64(limit) })

	// Replace 1,000 paths: withdrawn (A's count drops by 1,000), then
	// 1,000 new ones: A holds the limit again, and B stays up.
	if err := b.s.DeletePath(apiutil.DeletePathRequest{Paths: paths(0, 1000)}); err != nil {
		t.Fatal(err)
	}
	waitFor("1,000 withdrawn", func(n uint64, up bool, _ string) bool { return up && n == uint64(limit-1000) })
	add(paths(limit, limit+1000))
	waitFor("1,000 others announced", func(n uint64, up bool, _ string) bool { return up && n == uint64(limit) })

	// One more: A cuts B off and keeps the session down.
	add(paths(limit+1000, limit+1001))
	waitFor("one past the limit", func(_ uint64, up bool, admin string) bool {
		return !up && admin == api.PeerState_ADMIN_STATE_PFX_CT.String()
	})
	time.Sleep(2 * time.Second) // it stays down: a duration under test, not a wait
	if _, up, admin := received(); up || admin != api.PeerState_ADMIN_STATE_PFX_CT.String() {
		t.Errorf("2 s after the cut-off: established %v, admin state %s; want down, %s", up, admin, api.PeerState_ADMIN_STATE_PFX_CT)
	}

	// reef peer reset, B back with 1,000 paths fewer than the limit: the
	// session comes up and stays. The cut-off went through graceful
	// restart, so A still holds the flood as stale paths (for the 10 s
	// restart time); a reset that only enabled the peer let B in and cut
	// it off again at its first UPDATE, by that count.
	if err := b.s.DeletePath(apiutil.DeletePathRequest{Paths: paths(limit, limit+1001)}); err != nil {
		t.Fatal(err)
	}
	if was, cut, err := a.PeerReset(ctx, addrB); err != nil || !cut || !was.CutOff {
		t.Fatalf("reset of the peer cut off: %+v, cut off %v, %v; want it cut off, and reset", was, cut, err)
	}
	waitFor("B back after the reset", func(n uint64, up bool, _ string) bool { return up && n == uint64(limit-1000) })
	if was, cut, err := a.PeerReset(ctx, addrB); err != nil || cut || !was.Established {
		t.Errorf("reset of a session that is up: %+v, cut off %v, %v; want it left alone", was, cut, err)
	}
	// The limit still holds.
	add(paths(limit+1001, limit+2002))
	waitFor("past the limit again", func(_ uint64, up bool, admin string) bool {
		return !up && admin == api.PeerState_ADMIN_STATE_PFX_CT.String()
	})
	if _, _, err := a.PeerReset(ctx, netip.MustParseAddr("127.0.0.9")); !errors.Is(err, ErrNoPeer) {
		t.Errorf("reset of an address that is no peer: %v, want %v", err, ErrNoPeer)
	}
}
