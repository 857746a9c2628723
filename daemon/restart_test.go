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

// TestReadBGPStart: reads that keep failing start the speaker without the
// bits (logged), one failure is tried again; reef's routes in the kernel
// start it with them, unless the store was made at this start (a wiped
// state dir on a live kernel).
func TestReadBGPStart(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	hole := routes.State{Routes: map[netip.Prefix]routes.Route{netip.MustParsePrefix("10.244.29.0/26"): {Kind: routes.Blackhole}}}
	failing := func(failures int) readRoutes {
		return func() (routes.State, error) {
			if failures > 0 {
				failures--
				return hole, errors.New("netlink: no buffer space")
			}
			return hole, nil
		}
	}
	for _, c := range []struct {
		name             string
		k                readRoutes
		planned, created bool
		want             bool
	}{
		{"every read fails", failing(100), true, false, false},
		{"the first read fails", failing(1), false, false, true},
		{"reef's routes", failing(0), false, false, true},
		{"reef's routes, a new store", failing(0), true, true, false},
	} {
		s := readBGPStart(c.k, c.planned, c.created, log)
		if s.restarting() != c.want || s.planned != c.planned {
			t.Errorf("%s: %+v, want restarting %v, planned %v", c.name, s, c.want, c.planned)
		}
	}
}
