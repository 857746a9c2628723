package bgp

import (
	"net/netip"
	"testing"
	"time"
)

func TestStuckPeers(t *testing.T) {
	lo, hi := netip.MustParseAddr("192.168.77.11"), netip.MustParseAddr("192.168.77.12")
	lim := stuckLimits{confirm: 3 * time.Second, any: 6 * time.Second}
	tests := []struct {
		name        string
		self, peer  netip.Addr
		state       string
		first, last int // seconds: the peer is seen in state at both
		reset       bool
	}{
		{"lower end resets OpenConfirm after confirm", lo, hi, "openconfirm", 0, 3, true},
		{"lower end waits below confirm", lo, hi, "openconfirm", 0, 2, false},
		{"higher end leaves OpenConfirm to the other", hi, lo, "openconfirm", 0, 5, false},
		{"higher end resets after any", hi, lo, "openconfirm", 0, 6, true},
		{"OpenSent waits for any", lo, hi, "opensent", 0, 5, false},
		{"OpenSent reset after any", lo, hi, "opensent", 0, 6, true},
		{"established is never reset", lo, hi, "established", 0, 60, false},
		{"active is never reset", lo, hi, "active", 0, 60, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[netip.Addr]stuckState{}
			peers := []PeerStatus{{Address: tt.peer, State: tt.state}}
			stuckPeers(tt.self, peers, seen, time.Unix(int64(tt.first), 0), lim)
			got := stuckPeers(tt.self, peers, seen, time.Unix(int64(tt.last), 0), lim)
			if want := tt.reset; (len(got) == 1 && got[0] == tt.peer) != want || len(got) > 1 {
				t.Errorf("reset %v, want reset of %s: %v", got, tt.peer, want)
			}
		})
	}
}

// A state change restarts the clock, and a reset or a recovered peer is
// forgotten.
func TestStuckPeersClock(t *testing.T) {
	lo, hi := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	lim := stuckLimits{confirm: 3 * time.Second, any: 6 * time.Second}
	t0 := time.Unix(0, 0)
	seen := map[netip.Addr]stuckState{}
	stuckPeers(lo, []PeerStatus{{Address: hi, State: "opensent"}}, seen, t0, lim)
	stuckPeers(lo, []PeerStatus{{Address: hi, State: "openconfirm"}}, seen, t0.Add(5*time.Second), lim)
	if got := stuckPeers(lo, []PeerStatus{{Address: hi, State: "openconfirm"}}, seen, t0.Add(7*time.Second), lim); got != nil {
		t.Fatalf("reset %v 2s after entering OpenConfirm; the clock must restart on a state change", got)
	}
	if got := stuckPeers(lo, []PeerStatus{{Address: hi, State: "openconfirm"}}, seen, t0.Add(8*time.Second), lim); len(got) != 1 {
		t.Fatalf("reset %v 3s after entering OpenConfirm, want %v", got, hi)
	}
	if len(seen) != 0 {
		t.Errorf("a reset peer is still remembered: %v", seen)
	}
	stuckPeers(lo, []PeerStatus{{Address: hi, State: "openconfirm"}}, seen, t0.Add(9*time.Second), lim)
	stuckPeers(lo, []PeerStatus{{Address: hi, State: "established"}}, seen, t0.Add(10*time.Second), lim)
	if len(seen) != 0 {
		t.Errorf("an established peer is still remembered: %v", seen)
	}
}
