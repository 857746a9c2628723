package daemon

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

func TestSameRouting(t *testing.T) {
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	base := []store.Block{
		{CIDR: p("10.244.0.0/26"), State: store.BlockConfirmed, Used: 3},
		{CIDR: p("10.244.0.64/26"), State: store.BlockRemote, OwnerAddr: a("192.168.77.12"), OwnerInc: 7, Owner: "node2"},
	}
	clone := func(f func(b []store.Block) []store.Block) []store.Block {
		c := append([]store.Block(nil), base...)
		return f(c)
	}
	for _, tt := range []struct {
		name  string
		other []store.Block
		same  bool
	}{
		{"identical", clone(func(b []store.Block) []store.Block { return b }), true},
		{"only counters and names differ", clone(func(b []store.Block) []store.Block {
			b[0].Used, b[1].Owner, b[1].Claimed = 9, "", time.Unix(5, 0)
			return b
		}), true},
		{"a block confirmed", clone(func(b []store.Block) []store.Block { b[0].State = store.BlockPending; return b }), false},
		{"another owner", clone(func(b []store.Block) []store.Block { b[1].OwnerAddr = a("192.168.77.13"); return b }), false},
		{"a new incarnation of the owner", clone(func(b []store.Block) []store.Block { b[1].OwnerInc = 8; return b }), false},
		{"a block more", append(clone(func(b []store.Block) []store.Block { return b }), store.Block{CIDR: p("10.244.0.128/26"), State: store.BlockRemote}), false},
		{"none", nil, false},
	} {
		if got := sameRouting(base, tt.other); got != tt.same {
			t.Errorf("%s: sameRouting = %v, want %v", tt.name, got, tt.same)
		}
	}
	if !sameRouting(nil, []store.Block{}) {
		t.Error("no blocks and an empty list route the same")
	}
}

func TestStepGap(t *testing.T) {
	for last, want := range map[time.Duration]time.Duration{
		0:                       minStepGap,
		2 * time.Millisecond:    minStepGap,
		40 * time.Millisecond:   80 * time.Millisecond,
		1500 * time.Millisecond: 3 * time.Second,
	} {
		if got := stepGap(last); got != want {
			t.Errorf("stepGap(%s) = %s, want %s", last, got, want)
		}
	}
}

// TestPodRoutesDualStack: a dual-stack endpoint is one veth with both its
// addresses routed; a reserved address is no pod's.
func TestPodRoutesDualStack(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.244.0.5"), netip.MustParseAddr("fd00:10:244::5")
	eps := []store.Endpoint{
		{Handle: "a", HostVeth: "reefa", IP: v4, Second: store.Assignment{IP: v6}, State: store.EndpointReady},
		{Handle: "b", HostVeth: "reefb", IP: netip.MustParseAddr("10.244.0.6"), State: store.EndpointReady},
		{Handle: "t", IP: netip.MustParseAddr("10.244.0.1"), State: store.EndpointReserved},
	}
	got := podRoutes(eps, 1450)
	if len(got) != 2 || !slices.Equal(got[0].IPs, []netip.Addr{v4, v6}) || got[0].HostVeth != "reefa" || len(got[1].IPs) != 1 {
		t.Fatalf("podRoutes: %+v", got)
	}
	st := routes.Desired(got, nil, nil, map[string]bool{"reefa": true, "reefb": true})
	for _, dst := range []netip.Prefix{netip.PrefixFrom(v4, 32), netip.PrefixFrom(v6, 128)} {
		if r, ok := st.Routes[dst]; !ok || r.Dev != "reefa" || r.Kind != routes.PodRoute {
			t.Errorf("desired route %s: %+v (present %v), want a pod route dev reefa", dst, r, ok)
		}
	}
}
