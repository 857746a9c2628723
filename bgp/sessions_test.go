package bgp

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

func TestStuckPeers(t *testing.T) {
	lo, hi := netip.MustParseAddr("192.168.77.11"), netip.MustParseAddr("192.168.77.12")
	lim := stuckLimits{confirm: 3 * time.Second, any: 10 * time.Second}
	tests := []struct {
		name        string
		self, peer  netip.Addr
		state       string
		first, last int // seconds: the peer is seen in state at both
		reset       bool
		dynamic     bool
	}{
		{"lower end resets OpenConfirm after confirm", lo, hi, "openconfirm", 0, 3, true, false},
		{"lower end waits below confirm", lo, hi, "openconfirm", 0, 2, false, false},
		{"higher end leaves OpenConfirm to the other first", hi, lo, "openconfirm", 0, 5, false, false},
		{"higher end resets OpenConfirm after twice confirm", hi, lo, "openconfirm", 0, 6, true, false},
		{"OpenSent waits for any", lo, hi, "opensent", 0, 9, false, false},
		{"OpenSent reset after any", lo, hi, "opensent", 0, 10, true, false},
		{"established is never reset", lo, hi, "established", 0, 60, false, false},
		{"active is never reset", lo, hi, "active", 0, 60, false, false},
		{"a dynamic peer is never reset", lo, hi, "opensent", 0, 60, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := map[netip.Addr]stuckState{}
			peers := []PeerStatus{{Address: tt.peer, State: tt.state, Dynamic: tt.dynamic}}
			local := func(netip.Addr) netip.Addr { return tt.self }
			stuckPeers(local, peers, seen, time.Unix(int64(tt.first), 0), lim)
			got := stuckPeers(local, peers, seen, time.Unix(int64(tt.last), 0), lim)
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
	local := func(netip.Addr) netip.Addr { return lo }
	stuckPeers(local, []PeerStatus{{Address: hi, State: "opensent"}}, seen, t0, lim)
	stuckPeers(local, []PeerStatus{{Address: hi, State: "openconfirm"}}, seen, t0.Add(5*time.Second), lim)
	if got := stuckPeers(local, []PeerStatus{{Address: hi, State: "openconfirm"}}, seen, t0.Add(7*time.Second), lim); got != nil {
		t.Fatalf("reset %v 2s after entering OpenConfirm; the clock must restart on a state change", got)
	}
	if got := stuckPeers(local, []PeerStatus{{Address: hi, State: "openconfirm"}}, seen, t0.Add(8*time.Second), lim); len(got) != 1 {
		t.Fatalf("reset %v 3s after entering OpenConfirm, want %v", got, hi)
	}
	if len(seen) != 0 {
		t.Errorf("a reset peer is still remembered: %v", seen)
	}
	stuckPeers(local, []PeerStatus{{Address: hi, State: "openconfirm"}}, seen, t0.Add(9*time.Second), lim)
	stuckPeers(local, []PeerStatus{{Address: hi, State: "established"}}, seen, t0.Add(10*time.Second), lim)
	if len(seen) != 0 {
		t.Errorf("an established peer is still remembered: %v", seen)
	}
}

// The speaker's view of its sessions follows GoBGP's peer events: state,
// since when established (kept across events while it stays so), whether
// the peer is configured, and the hostname, which outlives the session.
func TestNotePeer(t *testing.T) {
	static, dyn := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.9")
	sp := &Speaker{cfg: Config{Peers: []netip.Addr{static}}, sessions: map[netip.Addr]PeerStatus{}, named: map[netip.Addr]bool{}, adminDown: map[netip.Addr]time.Time{}}
	ev := func(a netip.Addr, s bgppkt.FSMState) *apiutil.WatchEventMessage_PeerEvent {
		e := &apiutil.WatchEventMessage_PeerEvent{Type: apiutil.PEER_EVENT_STATE}
		e.Peer.State.NeighborAddress, e.Peer.State.SessionState = a, s
		return e
	}
	t1, t2, t3 := time.Unix(100, 0), time.Unix(200, 0), time.Unix(300, 0)
	sp.notePeer(ev(static, bgppkt.BGP_FSM_OPENCONFIRM), t1)
	sp.notePeer(ev(dyn, bgppkt.BGP_FSM_ESTABLISHED), t1)
	sp.notePeer(ev(static, bgppkt.BGP_FSM_ESTABLISHED), t2)
	sp.notePeer(ev(dyn, bgppkt.BGP_FSM_ESTABLISHED), t3) // a repeat: since stays t1
	sp.notePeer(&apiutil.WatchEventMessage_PeerEvent{Type: apiutil.PEER_EVENT_END_OF_INIT}, t3)
	want := []PeerStatus{
		{Address: static, State: "established", Established: true, Since: t2, Type: PeerMesh},
		{Address: dyn, State: "established", Established: true, Since: t1, Dynamic: true, Type: PeerMesh},
	}
	if got := sp.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("sessions =\n%+v\nwant\n%+v", got, want)
	}
	// What Sessions looks up once per session.
	st := sp.sessions[static]
	st.Hostname = "node2"
	sp.sessions[static] = st
	sp.named[static] = true

	sp.notePeer(ev(static, bgppkt.BGP_FSM_IDLE), t3)
	if got := sp.snapshot()[0]; got.Established || got.State != "idle" || !got.Since.IsZero() || got.Hostname != "node2" {
		t.Errorf("after Idle: %+v, want idle, not established, no since, hostname kept", got)
	}
	sp.notePeer(ev(dyn, bgppkt.BGP_FSM_IDLE), t3)
	if got := sp.snapshot(); len(got) != 1 || got[0].Address != static {
		t.Errorf("after a dynamic peer's session ended: %+v, want it gone (GoBGP removes it)", got)
	}
	down := ev(static, bgppkt.BGP_FSM_IDLE)
	down.Peer.State.AdminState = api.PeerState_ADMIN_STATE_DOWN
	seen := make(chan struct{})
	sp.downSeen = map[netip.Addr]chan struct{}{static: seen}
	sp.notePeer(down, t3)
	if _, ok := sp.adminDown[static]; !ok {
		t.Error("an event saying admin down is not recorded: resetSession would enable the peer too early")
	}
	select {
	case <-seen:
	default:
		t.Error("the event saying admin down does not wake resetSession's wait")
	}
	sp.notePeer(ev(static, bgppkt.BGP_FSM_ESTABLISHED), t3)
	if _, ok := sp.adminDown[static]; ok {
		t.Error("admin down is still recorded after an event saying up")
	}
	if sp.named[static] {
		t.Error("a new session keeps the old lookup: its hostname is never looked up again")
	}
}

// A peer left administratively down past the limit is enabled again, and
// then given a whole limit more for its event.
func TestLeftDown(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	t0 := time.Unix(1000, 0)
	down := map[netip.Addr]time.Time{a: t0, b: t0.Add(10 * time.Second)}
	if got := leftDown(down, t0.Add(15*time.Second), 16*time.Second); got != nil {
		t.Fatalf("leftDown before the limit = %v", got)
	}
	if got := leftDown(down, t0.Add(16*time.Second), 16*time.Second); !slices.Equal(got, []netip.Addr{a}) {
		t.Fatalf("leftDown at the limit = %v, want %v", got, a)
	}
	if got := leftDown(down, t0.Add(20*time.Second), 16*time.Second); got != nil {
		t.Errorf("leftDown right after enabling = %v, want a whole limit's wait", got)
	}
}
