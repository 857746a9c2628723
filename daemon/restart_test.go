package daemon

import (
	"errors"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/reefcni/reef/routes"
)

// TestKernelKept: the kernel kept reef's dataplane when it holds a route
// of reef's of either family (after a planned stop or a crash); not when
// it holds none (a first start, a reboot, a node that had nothing).
func TestKernelKept(t *testing.T) {
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
		name string
		have routes.State
		want bool
	}{
		{"first start or a reboot", state(), false},
		{"a node with pods", state(pod, remote, hole), true},
		{"an IPv6-only node", state(hole6), true},
		{"a node without blocks in a cluster", state(remote), true},
	} {
		if got := kernelKept(c.have); got != c.want {
			t.Errorf("%s: kept %v, want %v", c.name, got, c.want)
		}
	}
}

type readRoutes func() (routes.State, error)

func (f readRoutes) Read() (routes.State, error) { return f() }

// TestReadBGPStart: the restart bits follow the kernel, not the
// planned-restart mark, and not with a store made at this start (a wiped
// state dir on a live kernel); a failed read starts the speaker without
// them (logged).
func TestReadBGPStart(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	hole := routes.State{Routes: map[netip.Prefix]routes.Route{netip.MustParsePrefix("10.244.29.0/26"): {Kind: routes.Blackhole}}}
	read := func(s routes.State, err error) readRoutes { return func() (routes.State, error) { return s, err } }
	for _, c := range []struct {
		name             string
		k                readRoutes
		planned, created bool
		want             bool
	}{
		{"a crash, reef's routes kept", read(hole, nil), false, false, true},
		{"a planned stop, reef's routes kept", read(hole, nil), true, false, true},
		{"a planned stop, then a reboot", read(routes.State{}, nil), true, false, false},
		{"reef's routes, a new store", read(hole, nil), false, true, false},
		{"the read fails", read(hole, errors.New("netlink: no buffer space")), true, false, false},
	} {
		s := readBGPStart(c.k, c.planned, c.created, log)
		if s.restarting != c.want || s.planned != c.planned {
			t.Errorf("%s: %+v, want restarting %v, planned %v", c.name, s, c.want, c.planned)
		}
	}
}
