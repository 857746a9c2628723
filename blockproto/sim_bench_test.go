package blockproto

import (
	"fmt"
	"net/netip"
	"testing"
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
				Decide(in)
			}
		})
	}
}

func settledInput(n int) Input {
	s := NewSim(n, 3, []Pool{SimPool}, 1)
	v := Voters(s.Voters)
	h := VoterHash(v)
	var t Table
	self := s.Nodes[n-1].State
	for i, nd := range s.Nodes[:n-1] {
		t.Records = append(t.Records, Record{Node: nd.State.Self, Born: 1, VoterHash: h, Voters: v})
		for k := range 4 {
			blk := SimPool.Block(i*4 + k)
			t.Claims = append(t.Claims, Claim{Block: blk, Owner: nd.State.Self, State: Confirmed, VoterHash: h})
			self.Remote[blk] = RemoteBlock{Block: blk, Pool: SimPool.CIDR, Owner: nd.State.Self}
		}
		self.Known[nd.State.Self.Addr] = Incarnation{Inc: nd.State.Self.Inc, Born: 1}
	}
	return Input{State: self, Table: t, Voters: s.Voters, Pools: []Pool{SimPool}, Need: map[netip.Prefix]bool{SimPool.CIDR: true}, Name: s.Nodes[n-1].Name}
}
