package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

func TestPassive(t *testing.T) {
	a := netip.MustParseAddr
	cfg := Config{RouterID: a("192.168.77.12"), Peers: []netip.Addr{a("192.168.77.11"), a("192.168.77.13")}, RouteReflectors: []netip.Addr{a("192.168.77.20")}}
	for peer, want := range map[string]bool{
		"192.168.77.11": false, // lower: this end dials
		"192.168.77.13": true,  // higher: it dials this end
		"192.168.77.20": false, // a reflector is always dialled
		"192.168.77.30": false, // not configured
	} {
		if got := cfg.passive(a(peer)); got != want {
			t.Errorf("passive(%s) = %v, want %v", peer, got, want)
		}
	}
}

func TestOverduePassive(t *testing.T) {
	p := netip.MustParseAddr("192.168.77.13")
	t0 := time.Unix(1000, 0)
	wait := 15 * time.Second
	for _, tt := range []struct {
		name   string
		state  string
		after  time.Duration
		dial   bool
		waited bool // still waited for afterwards
	}{
		{"active, within the wait", "active", 14 * time.Second, false, true},
		{"active, past the wait", "active", 15 * time.Second, true, false},
		{"idle past the wait", "idle", time.Minute, true, false},
		{"it connected: OpenSent", "opensent", time.Second, false, false},
		{"it connected: established", "established", time.Minute, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			waiting := map[netip.Addr]time.Time{p: t0}
			got := overduePassive([]PeerStatus{{Address: p, State: tt.state}}, waiting, t0.Add(tt.after), wait)
			if (len(got) == 1 && got[0] == p) != tt.dial || len(got) > 1 {
				t.Errorf("dial %v, want dial %v", got, tt.dial)
			}
			if _, ok := waiting[p]; ok != tt.waited {
				t.Errorf("still waited for: %v, want %v", ok, tt.waited)
			}
		})
	}
	// A peer that connected once is never dialled, however long it is gone.
	waiting := map[netip.Addr]time.Time{p: t0}
	overduePassive([]PeerStatus{{Address: p, State: "established"}}, waiting, t0.Add(time.Second), wait)
	if got := overduePassive([]PeerStatus{{Address: p, State: "active"}}, waiting, t0.Add(time.Hour), wait); got != nil {
		t.Errorf("dialled a peer that had connected: %v", got)
	}
	// Dynamic sessions and peers not waited for are left alone.
	waiting = map[netip.Addr]time.Time{}
	if got := overduePassive([]PeerStatus{{Address: p, State: "active", Dynamic: true}}, waiting, t0.Add(time.Hour), wait); got != nil {
		t.Errorf("dialled a peer not waited for: %v", got)
	}
}

func TestReaddable(t *testing.T) {
	a, b := netip.MustParseAddr("192.168.77.13"), netip.MustParseAddr("192.168.77.14")
	readd := map[netip.Addr]bool{a: true, b: true}
	// b has a session (the dynamic one that made its add fail): wait.
	got := readdable(readd, []PeerStatus{{Address: b, State: "established", Dynamic: true}})
	if !slices.Equal(got, []netip.Addr{a}) {
		t.Errorf("readdable = %v, want [%s]", got, a)
	}
	// a's record is the removed configured peer's, kept after its session
	// (reef peer reset removed it, and its add failed): it holds nothing.
	got = readdable(readd, []PeerStatus{{Address: a, State: "idle"}, {Address: b, State: "established", Dynamic: true}})
	if !slices.Equal(got, []netip.Addr{a}) {
		t.Errorf("readdable with a's configured record idle = %v, want [%s]", got, a)
	}
}

// Two real speakers on loopback. When both list each other, the higher one
// dials and the lower one never does; when the higher one takes the lower
// one in only through PeerPrefixes (a node that joined later), the lower
// one dials it once the wait is over.
func TestWhoDials(t *testing.T) {
	if testing.Short() {
		t.Skip("starts BGP speakers")
	}
	for _, tt := range []struct {
		name      string
		listsBack bool
		dials     bool // the lower end ends up dialling
	}{
		{"both list each other: the higher end dials", true, false},
		{"the higher end does not list the lower one: the lower end dials after the wait", false, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lo, hi := netip.MustParseAddr("127.0.0.5"), netip.MustParseAddr("127.0.0.6")
			ctx, logs, listenOn := testSpeakers(t, lo, hi)
			start := func(self netip.Addr, cfg Config) *Speaker {
				sp := listenOn(self, cfg)
				sp.waitFor = 3 * time.Second
				return sp
			}
			hiCfg := Config{PeerPrefixes: []netip.Prefix{netip.PrefixFrom(lo, 32)}}
			if tt.listsBack {
				hiCfg.Peers = []netip.Addr{lo}
			}
			sLo := start(lo, Config{Peers: []netip.Addr{hi}, PeerPrefixes: []netip.Prefix{netip.PrefixFrom(hi, 32)}})
			sHi := start(hi, hiCfg)
			for _, sp := range []*Speaker{sLo, sHi} {
				if err := sp.connect(ctx); err != nil {
					t.Fatal(err)
				}
			}
			began := time.Now()
			poll.For(t, 30*time.Second, func() error {
				if st := sLo.Status(ctx); len(st) != 1 || st[0].State != "established" {
					return fmt.Errorf("no session: %+v", st)
				}
				return nil
			})
			took := time.Since(began)
			dialled := strings.Contains(logs.String(), "dialling it instead")
			if dialled != tt.dials {
				t.Errorf("the lower end switched to dialling: %v, want %v (session after %s)", dialled, tt.dials, took.Round(time.Millisecond))
			}
			if closed := strings.Count(logs.String(), "Closed an accepted connection"); closed > 0 {
				t.Errorf("%d connections closed as collisions; one end should dial", closed)
			}
		})
	}
}
