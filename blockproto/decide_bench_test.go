package blockproto_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/blockproto/blocksim"
)

// BenchmarkDecideSettled is one decision of a node in a settled cluster of
// n nodes with 4 confirmed blocks each (the end of the simulation report's
// scenario): the table holds every other node's record and claims, the
// state remembers their blocks, and the node wants one more block. It is
// what the 1,000-node simulation spends its time on (reef-lab bench-sim):
//
//	go test -run '^$' -bench DecideSettled -benchmem ./blockproto/
func BenchmarkDecideSettled(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			in := settledInput(n)
			b.ResetTimer()
			for range b.N {
				blockproto.Decide(in)
			}
		})
	}
}

func settledInput(n int) blockproto.Input {
	pool := blocksim.Pool
	s := blocksim.New(n, 3, []blockproto.Pool{pool}, 1)
	v := blockproto.Voters(s.Voters)
	h := blockproto.VoterHash(v)
	var t blockproto.Table
	self := s.Nodes[n-1].State
	for i, nd := range s.Nodes[:n-1] {
		t.Records = append(t.Records, blockproto.Record{Node: nd.State.Self, Born: 1, VoterHash: h, Voters: v})
		for k := range 4 {
			blk := pool.Block(i*4 + k)
			t.Claims = append(t.Claims, blockproto.Claim{Block: blk, Owner: nd.State.Self, State: blockproto.Confirmed, VoterHash: h})
			self.Remote[blk] = blockproto.RemoteBlock{Block: blk, Pool: pool.CIDR, Owner: nd.State.Self}
		}
		self.Known[nd.State.Self.Addr] = blockproto.Incarnation{Inc: nd.State.Self.Inc, Born: 1}
	}
	return blockproto.Input{State: self, Table: t, Voters: s.Voters, Pools: []blockproto.Pool{pool},
		Need: map[netip.Prefix]bool{pool.CIDR: true}, Name: s.Nodes[n-1].Name}
}
