package daemon

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/store"
)

func TestUnreachableVoters(t *testing.T) {
	a, b, c := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	rr := netip.MustParseAddr("10.0.0.100")
	voters := []netip.Addr{a, b, c}
	for _, tc := range []struct {
		name  string
		peers []bgp.PeerStatus
		want  []netip.Addr
	}{
		{"mesh, all up", []bgp.PeerStatus{{Address: b, Established: true}, {Address: c, Established: true}}, nil},
		{"mesh, c down", []bgp.PeerStatus{{Address: b, Established: true}, {Address: c}}, []netip.Addr{c}},
		{"through a reflector that is up", []bgp.PeerStatus{{Address: rr, Established: true}}, nil},
		{"through a reflector that is down", []bgp.PeerStatus{{Address: rr}}, []netip.Addr{b, c}},
		{"only a router is up", []bgp.PeerStatus{{Address: rr}, {Address: netip.MustParseAddr("10.0.0.254"), Established: true, Type: bgp.PeerExternal}}, []netip.Addr{b, c}},
	} {
		got := unreachable(voters, nodeAddrs{a}, tc.peers)
		var list []netip.Addr
		for _, v := range voters {
			if got[v] {
				list = append(list, v)
			}
		}
		if diff := cmp.Diff(tc.want, list, cmp.Comparer(func(x, y netip.Addr) bool { return x == y })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestBlockedError(t *testing.T) {
	pool := netip.MustParsePrefix("10.244.0.0/24")
	v1, v2, v3 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")
	base := blockproto.Status{Voters: []netip.Addr{v1, v2, v3}, Majority: 2, Reached: []netip.Addr{v1, v2, v3}, Blocked: map[netip.Prefix]string{}}

	exh := base
	exh.Blocked = map[netip.Prefix]string{pool: "pool 10.244.0.0/24 exhausted: all 4 blocks of /26 are owned or claimed"}
	if err := blockedError(exh, pool); !errors.Is(err, store.ErrPoolExhausted) || strings.Contains(err.Error(), ": exhausted") {
		t.Errorf("exhausted: %v", err)
	}

	cut := base
	cut.Reached, cut.Missing = []netip.Addr{v1}, []netip.Addr{v2, v3}
	cut.Blocked = map[netip.Prefix]string{pool: cut.CanClaim().Error()}
	if err := blockedError(cut, pool); err == nil || errors.Is(err, store.ErrPoolExhausted) || !strings.Contains(err.Error(), "10.0.0.2") {
		t.Errorf("cut off: %v", err)
	}

	waiting := base
	waiting.Pending = []blockproto.PendingClaim{{Block: netip.MustParsePrefix("10.244.0.64/26"), Grants: []netip.Addr{v1}}}
	err := blockedError(waiting, pool)
	if err == nil || !strings.Contains(err.Error(), "has 1 of the 2 votes") || !strings.Contains(err.Error(), "[10.0.0.2 10.0.0.3]") {
		t.Errorf("waiting for votes: %v", err)
	}
	waiting.Restricted = blockproto.RestrictedReason
	if err := blockedError(waiting, pool); err == nil || !strings.Contains(err.Error(), "votes for no pending claim, its own included") {
		t.Errorf("waiting for votes, restricted: %v", err)
	}

	gone := base
	gone.Gone = "this node was forgotten"
	if err := blockedError(gone, pool); !errors.Is(err, errGone) {
		t.Errorf("gone: %v", err)
	}
	rec := base
	rec.Recovered = blockproto.RecoveredReason
	if err := blockedError(rec, pool); !errors.Is(err, errRecovered) || !strings.Contains(err.Error(), "reef store recover") {
		t.Errorf("recovered: %v", err)
	}
	if err := blockedError(base, pool); err != nil {
		t.Errorf("nothing in the way: %v", err)
	}
}

// An ADD that found no address just before a block was confirmed begins
// its wait after that step's wake-up. The next step finds free addresses
// and so claims nothing and wakes nobody: Need must send the ADD back to
// allocate rather than wait out its deadline.
func TestNeedAfterMissedWakeUp(t *testing.T) {
	pool := store.Pool{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26}
	e := &blockEngine{demand: map[netip.Prefix]int{}, failure: map[netip.Prefix]error{}, free: map[netip.Prefix]int{},
		changed: make(chan struct{}), stepped: make(chan struct{})}
	e.trigger = func() {
		// The step this ADD's trigger runs: free addresses, nothing changed.
		go func() {
			e.mu.Lock()
			e.free[pool.CIDR] = 63
			close(e.stepped)
			e.stepped = make(chan struct{})
			e.mu.Unlock()
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan *types.Error, 1)
	go func() { done <- e.Need(ctx, []store.Pool{pool}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Need: %v, want nil (try again: there are free addresses)", err)
		}
	case <-ctx.Done():
		t.Fatal("Need waited out its deadline with free addresses in the node's blocks")
	}
}

// TestNeedDemandsEveryPoolAtOnce: a fresh dual-stack node's first ADD
// finds both pools without a block; one Need registers demand for both, so
// the pass it triggers wants a block of each (and claims them together)
// rather than the IPv6 one only after the IPv4 one is confirmed.
func TestNeedDemandsEveryPoolAtOnce(t *testing.T) {
	v4 := store.Pool{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26}
	v6 := store.Pool{CIDR: netip.MustParsePrefix("fd00:10:244::/56"), BlockSize: 122}
	e := &blockEngine{blockEngineDeps: blockEngineDeps{pools: []store.Pool{v4, v6}}, demand: map[netip.Prefix]int{}, failure: map[netip.Prefix]error{}, free: map[netip.Prefix]int{},
		changed: make(chan struct{}), stepped: make(chan struct{})}
	needs := make(chan map[netip.Prefix]bool, 1)
	e.trigger = func() {
		// The pass this ADD's trigger runs, on a node with no block: it
		// decides what to claim, and its claims are confirmed.
		go func() {
			needs <- e.need(blockproto.State{})
			e.wake()
		}()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Need(ctx, []store.Pool{v4, v6}); err != nil {
		t.Fatalf("Need: %v", err)
	}
	want := map[netip.Prefix]bool{v4.CIDR: true, v6.CIDR: true}
	if diff := cmp.Diff(want, <-needs); diff != "" {
		t.Errorf("the pass's need (-want +got):\n%s", diff)
	}
	if len(e.demand) != 0 {
		t.Errorf("demand left after the wait: %v", e.demand)
	}
}
