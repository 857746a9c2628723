package daemon

import (
	"net/netip"
	"testing"

	"github.com/reefcni/reef/routes"
)

// TestBGPStart: the speaker starts with the restart bits after a planned
// stop, and after an unplanned one only when the kernel holds a blackhole
// of reef's (an own block's); a pod route or another node's block alone,
// or nothing (a first start, a reboot), is no forwarding state of the
// node's blocks.
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
		{"planned stop, kernel emptied", true, state(), true},
		{"crash, kernel kept", false, state(pod, remote, hole), true},
		{"crash, IPv6-only node", false, state(hole6), true},
		{"crash, only a pod route", false, state(pod), false},
		{"crash, only another node's block", false, state(remote), false},
	} {
		s := bgpStart{planned: c.planned, kept: forwardingKept(c.have)}
		if got := s.restarting(); got != c.want {
			t.Errorf("%s: restarting %v, want %v (%+v)", c.name, got, c.want, s)
		}
	}
}
