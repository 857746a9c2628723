package blockproto_test

import (
	"net/netip"
	"testing"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/blockproto/blocksim"
)

// TestSimChaos runs five nodes (three voters) on a pool of sixteen blocks
// through loss, partitions, stale copies and wiped non-voters, and checks
// after every step that no block has two owners handing out addresses;
// then the network heals and every node must get its blocks. The pool is
// IPv4, then IPv6: the protocol is the same for both (docs/ipam.md, "IPv6
// blocks").
func TestSimChaos(t *testing.T) {
	for _, pool := range []blockproto.Pool{
		{CIDR: netip.MustParsePrefix("10.244.0.0/22"), BlockSize: 26},
		{CIDR: netip.MustParsePrefix("fd00:10:244::/118"), BlockSize: 122},
	} {
		t.Run(pool.CIDR.String(), func(t *testing.T) { simChaos(t, []blockproto.Pool{pool}) })
	}
}

func simChaos(t *testing.T, small []blockproto.Pool) {
	for seed := uint64(1); seed <= 30; seed++ {
		s := blocksim.New(5, 3, small, seed)
		rng := s.Rand() // the events in the cluster's own stream: one seed, one run
		s.SameStart = seed%2 == 0
		for _, n := range s.Nodes {
			n.Want = 1
		}
		s.Loss = 0.4
		for step := 0; step < 200; step++ {
			r := rng.IntN(100)
			i := rng.IntN(len(s.Nodes))
			switch {
			case r < 8:
				s.Nodes[i].Cut = !s.Nodes[i].Cut
			case r < 12:
				s.Nodes[i].Up = !s.Nodes[i].Up
				if !s.Nodes[i].Up && rng.IntN(2) == 0 {
					s.Drop(i) // no graceful restart: its paths go
				}
			case r < 14 && i >= 3:
				s.Wipe(i)
			case r < 20:
				s.Nodes[i].Want = 1 + rng.IntN(2)
			}
			s.Step()
			if b, os, bad := s.Violation(); bad {
				t.Fatalf("seed %d step %d: block %s confirmed by %v", seed, step, b, os)
			}
		}
		s.Loss = 0
		for _, n := range s.Nodes {
			n.Cut, n.Up = false, true
			n.Want = 1
		}
		for step := 0; step < 60 && !s.Satisfied(); step++ {
			s.Step()
		}
		if b, os, bad := s.Violation(); bad {
			t.Fatalf("seed %d after healing: block %s confirmed by %v", seed, b, os)
		}
		if !s.Satisfied() {
			for _, n := range s.Nodes {
				t.Logf("%s: own %v status %+v", n.Name, n.State.Own, n.Last.Status)
			}
			t.Fatalf("seed %d: not every node has a block 60 steps after healing", seed)
		}
	}
}

// TestSimPartitionDuringHold is the first sequence: three nodes,
// four blocks, one each; node 3 is cut off, then nodes 1 and 3 each want
// one more. Node 1 gets the last free block, node 3 none.
func TestSimPartitionDuringHold(t *testing.T) {
	four := []blockproto.Pool{{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}}
	s := blocksim.New(3, 3, four, 7)
	for _, n := range s.Nodes {
		n.Want = 1
	}
	for range 20 {
		s.Step()
	}
	if !s.Satisfied() {
		t.Fatal("the three nodes did not get a block each")
	}
	s.Nodes[2].Cut = true
	s.Nodes[0].Want, s.Nodes[2].Want = 2, 2
	for range 30 {
		s.Step()
		if b, os, bad := s.Violation(); bad {
			t.Fatalf("block %s confirmed by %v", b, os)
		}
	}
	if got := s.Nodes[0].Confirmed(four[0].CIDR); got != 2 {
		t.Fatalf("node 1 has %d blocks, want 2", got)
	}
	if got := s.Nodes[2].Confirmed(four[0].CIDR); got != 1 {
		t.Fatalf("the cut-off node 3 has %d blocks, want its 1", got)
	}
	// It still holds the others' last announcements (as BGP does until the
	// hold time runs out), so it claims, but no vote reaches it but its own.
	if p := s.Nodes[2].Last.Status.Pending; len(p) != 1 || len(p[0].Grants) != 1 || p[0].Grants[0] != s.Nodes[2].State.Self.Addr {
		t.Fatalf("the cut-off node's pending claims: %+v", p)
	}
}

// TestSimWipedVoterCatchesUp: a voter restarted with an empty state dir,
// the others in sync, re-learns the confirmed blocks and votes for their
// owners, so a new claimant cannot take them. It comes back restricted
// (no vote for a pending claim): the two other voters confirm node 4's.
func TestSimWipedVoterCatchesUp(t *testing.T) {
	four := []blockproto.Pool{{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}}
	s := blocksim.New(4, 3, four, 3)
	for _, n := range s.Nodes[:3] {
		n.Want = 1
	}
	for range 20 {
		s.Step()
	}
	s.Wipe(1)
	if !s.Nodes[1].State.Restricted {
		t.Fatal("the wiped voter is not restricted")
	}
	s.Nodes[3].Want = 2 // wants two of the one free block: gets one, never a taken one
	for range 40 {
		s.Step()
		if b, os, bad := s.Violation(); bad {
			t.Fatalf("block %s confirmed by %v", b, os)
		}
	}
	if got := s.Nodes[3].Confirmed(four[0].CIDR); got != 1 {
		t.Fatalf("node 4 has %d blocks, want the 1 free one", got)
	}
}
