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
	sp := &Speaker{cfg: Config{ASN: testASN, Pools: testPools, RouterID: self}, badSeen: map[string]bool{}}
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
