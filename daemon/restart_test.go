package daemon

import (
	"errors"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/reefcni/reef/routes"
)

// TestBGPStart: the speaker starts with the restart bits when the kernel
// holds a route of reef's, of either family, after a planned stop or a
// crash; not when it holds none (a first start, a reboot, a node that
// had nothing), planned stop or not.
func TestBGPStart(t *testing.T) {
	state := func(rs ...routes.Route) routes.State {
		s := routes.State{Routes: map[netip.Prefix]routes.Route{}}
		for _, r := range rs {
			s.Routes[r.Dst] = r
		}
		return s
	}
	hole := routes.Route{Dst: netip.MustParsePrefix("10.244.29.0/26"), Kind: routes.Blackhole}
	hole6 := routes.Route{Dst: netip.MustParsePrefix("fd00:10:244:1d::/64"), Kind: routes.Blackhole}
	pod := routes.Route{Dst: netip.MustParsePrefix("10.244.29.1/32"), Kind: routes.PodRoute, Dev: "reef1234"}
	remote := routes.Route{Dst: netip.MustParsePrefix("10.244.30.0/26"), Kind: routes.RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.168.77.12"), OnLink: true}
	for _, c := range []struct {
		name    string
		planned bool
		have    routes.State
		want    bool
	}{
		{"first start", false, state(), false},
		{"planned stop", true, state(hole, pod), true},
		{"planned stop, then a reboot", true, state(), false},
		{"crash", false, state(pod, remote, hole), true},
		{"crash, IPv6-only node", false, state(hole6), true},
		{"crash, a node without blocks in a cluster", false, state(remote), true},
		{"planned stop, a node without blocks in a cluster", true, state(remote), true},
		{"crash, then a reboot", false, state(), false},
	} {
		s := bgpStart{planned: c.planned, kept: kernelKept(c.have)}
		if got := s.restarting(); got != c.want {
			t.Errorf("%s: restarting %v, want %v (%+v)", c.name, got, c.want, s)
		}
	}
}

type readRoutes func() (routes.State, error)

func (f readRoutes) Read() (routes.State, error) { return f() }

// TestReadBGPStart: a failed read of reef's routes starts the speaker
// without the bits (logged), a read with reef's routes with them.
func TestReadBGPStart(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	failed := readRoutes(func() (routes.State, error) {
		return routes.State{Routes: map[netip.Prefix]routes.Route{netip.MustParsePrefix("10.244.29.0/26"): {Kind: routes.Blackhole}}}, errors.New("netlink: no buffer space")
	})
	if s := readBGPStart(failed, true, log); s.restarting() || !s.planned {
		t.Errorf("after a failed read: %+v, want planned and not restarting", s)
	}
	kept := readRoutes(func() (routes.State, error) {
		return routes.State{Routes: map[netip.Prefix]routes.Route{netip.MustParsePrefix("10.244.29.0/26"): {Kind: routes.Blackhole}}}, nil
	})
	if s := readBGPStart(kept, false, log); !s.restarting() {
		t.Errorf("with a blackhole of reef's read: %+v, want restarting", s)
	}
}
