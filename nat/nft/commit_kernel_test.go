package nft

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/nftables"

	"github.com/reefcni/reef/internal/netnstest"
)

// BenchmarkSetCommit is what one pod's addresses cost a batch in the
// kernel, by the kind and size of the sets they go into: a batch adds one
// address to each of 12 sets of n addresses that are not adjacent (every
// other one, as a selector's pods spread over blocks and namespaces
// are). An interval set's commit grows with its size on this kernel; a
// hash set's does not (docs/policy.md, "What step 2 costs"). Root only,
// in a throw-away network namespace:
//
//	go test -run '^$' -bench BenchmarkSetCommit ./nat/nft/
func BenchmarkSetCommit(b *testing.B) {
	for _, interval := range []bool{false, true} {
		for _, n := range []int{100, 1000, 4000} {
			b.Run(fmt.Sprintf("interval=%t/addrs=%d", interval, n), func(b *testing.B) { benchSetCommit(b, interval, n) })
		}
	}
}

func benchSetCommit(b *testing.B, interval bool, n int) {
	netnstest.RequireRoot(b)
	ns := netnstest.New(b)
	k := NewKernel(nftables.WithNetNSFd(int(ns.Fd())))
	id := TableID{Family: nftables.TableFamilyINet, Name: TableName}
	addr := func(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}) }
	// sets are the 12 sets, each with the elements of [from, to).
	sets := func(from, to int) Table {
		t := Table{ID: id}
		for s := range 12 {
			set := Set{Name: fmt.Sprint("s", s), KeyType: "ipv4_addr", KeyLen: 4, Interval: interval}
			for i := from; i < to; i++ {
				set.Elems = append(set.Elems, Elem{From: addr(2 * i), To: addr(2 * i)})
			}
			t.Sets = append(t.Sets, set)
		}
		return t
	}
	apply := func(want, have Table) {
		p, ok := DiffElements(want, have)
		if !ok {
			b.Fatal("DiffElements refused")
		}
		if err := k.Apply(p); err != nil {
			b.Fatal(err)
		}
	}
	if err := k.Apply(Diff([]Table{sets(0, 0)}, nil)); err != nil {
		b.Fatal(err)
	}
	for from := 0; from < n; from += 250 { // a batch of its size at once is too large for one message
		apply(sets(from, min(from+250, n)), sets(0, 0))
	}
	// One address more in each set, then one less, in turn: every batch
	// changes 12 elements of sets of n.
	one, none := sets(n, n+1), sets(0, 0)
	add := true
	for b.Loop() {
		if add {
			apply(one, none)
		} else {
			apply(none, one)
		}
		add = !add
	}
}
