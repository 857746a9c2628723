package bgp

import (
	"log/slog"
	"net/netip"
	"testing"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// The mirror changes, and so wakes the step, only when what a path says
// changes: a copy with the same content through the other reflector, an
// IPv4 unicast path, the withdrawal of what it does not hold and the
// speaker's own path leave it as it was.
func TestOnBestPathReportsChanges(t *testing.T) {
	self, rr1, rr2 := netip.MustParseAddr("192.168.77.20"), netip.MustParseAddr("192.168.77.11"), netip.MustParseAddr("192.168.77.12")
	sp := &Speaker{cfg: Config{ASN: testASN, Pools: testPools, RouterID: self}, badSeen: droppedPaths{}}
	sp.log = slog.New(slog.DiscardHandler)
	nh, _ := bgppkt.NewPathAttributeNextHop(nodeA)
	claim := func(c blockproto.Claim, from netip.Addr, withdraw bool) *apiutil.Path {
		t.Helper()
		rt, err := EncodeClaim(testASN, c)
		if err != nil {
			t.Fatal(err)
		}
		p, err := vpnPath(rt, nh)
		if err != nil {
			t.Fatal(err)
		}
		p.PeerAddress, p.Withdrawal = from, withdraw
		return p
	}
	pending := testClaim()
	pending.State = blockproto.Pending
	confirmed := pending
	confirmed.State = blockproto.Confirmed
	uc, err := unicastPath(netip.MustParsePrefix("10.244.7.0/26"), nodeA, nil)
	if err != nil {
		t.Fatal(err)
	}
	uc.PeerAddress = rr1
	for _, step := range []struct {
		what string
		p    *apiutil.Path
		want bool
	}{
		{"a new claim through rr2", claim(pending, rr2, false), true},
		{"the same claim through rr1", claim(pending, rr1, false), false},
		{"the claim confirmed", claim(confirmed, rr1, false), true},
		{"an IPv4 unicast path", uc, false},
		{"the speaker's own path", claim(confirmed, self, false), true}, // its own shadows what it learned
		{"the claim again", claim(confirmed, rr2, false), true},
		{"withdrawn", claim(confirmed, rr2, true), true},
		{"withdrawn again", claim(confirmed, rr1, true), false},
	} {
		if got := sp.onBestPath([]*apiutil.Path{step.p}); got != step.want {
			t.Errorf("%s: changed = %v, want %v", step.what, got, step.want)
		}
	}
	if tbl, _ := sp.LearnedTable(); tbl.Len() != 0 {
		t.Errorf("after the withdrawal the table holds %+v", tbl)
	}
}

// A path the import filter drops is logged and counted once while it is
// in the table, and forgotten when it is withdrawn: a peer that announces
// and withdraws ever new bad paths (a flap storm of them, a rogue or
// newer speaker) leaves nothing behind, where every one it ever sent used
// to stay in memory until the daemon restarted.
func TestDroppedPathsForgottenOnWithdrawal(t *testing.T) {
	self, peer := netip.MustParseAddr("192.168.77.20"), netip.MustParseAddr("192.168.77.60")
	sp := &Speaker{cfg: Config{ASN: testASN, Pools: testPools, RouterID: self}, badSeen: droppedPaths{}}
	sp.log = slog.New(slog.DiscardHandler)
	nh, _ := bgppkt.NewPathAttributeNextHop(peer)
	bad := func(i int, withdraw bool) *apiutil.Path {
		t.Helper()
		// A claim outside every pool: well formed, but no reef block.
		rt, err := EncodeClaim(testASN, blockproto.Claim{Block: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 99, byte(i >> 2), byte(i&3) << 6}), 26), Owner: blockproto.Node{Addr: peer, Inc: 7}, State: blockproto.Pending})
		if err != nil {
			t.Fatal(err)
		}
		p, err := vpnPath(rt, nh)
		if err != nil {
			t.Fatal(err)
		}
		p.PeerAddress, p.Withdrawal = peer, withdraw
		return p
	}
	const n = 1000
	for i := range n {
		sp.onBestPath([]*apiutil.Path{bad(i, false)})
		sp.onBestPath([]*apiutil.Path{bad(i, false)}) // sent again: already counted
		sp.onBestPath([]*apiutil.Path{bad(i, true)})
	}
	if got := sp.Dropped(); got != n {
		t.Errorf("dropped %d paths, want %d (each once while it was in the table)", got, n)
	}
	if len(sp.badSeen) != 0 {
		t.Errorf("%d withdrawn paths are still remembered as dropped", len(sp.badSeen))
	}
	// Sent again after its withdrawal: a new path, logged and counted.
	sp.onBestPath([]*apiutil.Path{bad(0, false)})
	if got := sp.Dropped(); got != n+1 {
		t.Errorf("dropped %d paths after one came back, want %d", got, n+1)
	}

	// IPv4 unicast paths are dropped by the table walk (walk.go) and
	// forgotten the same way.
	uc, err := unicastPath(netip.MustParsePrefix("0.0.0.0/0"), peer, nil)
	if err != nil {
		t.Fatal(err)
	}
	uc.PeerAddress = peer
	sp.drop(peer, uc.Nlri.String(), ErrNotReef)
	sp.drop(peer, uc.Nlri.String(), ErrNotReef)
	uc.Withdrawal = true
	sp.onBestPath([]*apiutil.Path{uc})
	if got := sp.Dropped(); got != n+2 {
		t.Errorf("dropped %d paths after a unicast one, want %d", got, n+2)
	}
	if len(sp.badSeen) != 1 {
		t.Errorf("%d NLRIs remembered as dropped, want 1 (the claim sent again)", len(sp.badSeen))
	}
}
