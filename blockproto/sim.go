package blockproto

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
)

// Sim runs the pure protocol for many nodes in one process over a
// simulated network that loses, delays and partitions: BGP carries state,
// not messages, so a receiver holds the last copy of each sender's
// announcements that got through, however old. It is what the tests and
// the 1,000-node report of `make bench` drive; nothing of it runs in the
// daemon.
type Sim struct {
	Nodes  []*SimNode
	Voters []netip.Addr
	Pools  []Pool
	rng    *rand.Rand
	// copies[dst][src] is what dst holds of src's announcements.
	copies [][]Table
	// Loss is the chance that one sender's update to one receiver does not
	// get through in a step (it may in a later one).
	Loss float64
	// Messages counts announcements that changed on their way to a voter
	// or from one: the protocol's messages.
	Messages int
	Steps    int
	// SameStart makes every node start its claim search at the same block,
	// so that claims collide as often as they can.
	SameStart bool
}

// SimNode is one simulated node.
type SimNode struct {
	Name  string
	State State
	Out   Table
	Up    bool
	// Cut: no update goes to or comes from this node while set.
	Cut bool
	// Want is how many blocks of the first pool the node wants confirmed.
	Want     int
	Last     Decision
	voter    bool
	incCount uint32
}

// NewSim makes n nodes at 10.0.0.1.. of which the first voters vote.
func NewSim(n, voters int, pools []Pool, seed uint64) *Sim {
	s := &Sim{Pools: pools, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i) + 1})
		if i < voters {
			s.Voters = append(s.Voters, a)
		}
		nd := &SimNode{Name: fmt.Sprintf("node%d", i+1), Up: true, voter: i < voters}
		nd.State = emptyState(Node{Addr: a, Inc: s.rng.Uint32()}, 1)
		s.Nodes = append(s.Nodes, nd)
	}
	s.copies = make([][]Table, n)
	for i := range s.copies {
		s.copies[i] = make([]Table, n)
	}
	return s
}

func emptyState(self Node, born uint32) State {
	return State{Self: self, Born: born, Own: map[netip.Prefix]OwnBlock{}, Released: map[netip.Prefix]bool{},
		Grants: map[netip.Prefix]Node{}, Remote: map[netip.Prefix]RemoteBlock{}, Forgotten: map[Node]bool{},
		Superseded: map[Node]bool{}, Known: map[netip.Addr]Incarnation{}}
}

// Wipe restarts node i with an empty state: a new incarnation, born later.
func (s *Sim) Wipe(i int) {
	n := s.Nodes[i]
	n.incCount++
	n.State = emptyState(Node{Addr: n.State.Self.Addr, Inc: s.rng.Uint32()}, n.State.Born+1)
	n.Out = Table{}
}

// Drop makes every receiver lose its copy of node i's announcements, as
// when its sessions close without graceful restart.
func (s *Sim) Drop(i int) {
	for dst := range s.copies {
		s.copies[dst][i] = Table{}
	}
}

// Step lets every node that is up decide once, then delivers updates.
func (s *Sim) Step() {
	s.Steps++
	order := s.rng.Perm(len(s.Nodes))
	for _, i := range order {
		n := s.Nodes[i]
		if !n.Up {
			continue
		}
		var t Table
		for src, c := range s.copies[i] {
			if src == i {
				continue
			}
			t.Records = append(t.Records, c.Records...)
			t.Claims = append(t.Claims, c.Claims...)
			t.Grants = append(t.Grants, c.Grants...)
			t.Forgets = append(t.Forgets, c.Forgets...)
		}
		need := map[netip.Prefix]bool{}
		if len(s.Pools) > 0 && n.confirmed(s.Pools[0].CIDR) < n.Want {
			need[s.Pools[0].CIDR] = true
		}
		name := n.Name
		if s.SameStart {
			name = ""
		}
		d := Decide(Input{State: n.State, Table: t, Voters: s.Voters, Pools: s.Pools, Need: need, Name: name})
		n.State, n.Out, n.Last = d.State, d.Announce, d
	}
	for dst, dn := range s.Nodes {
		for src, sn := range s.Nodes {
			if src == dst || !sn.Up || sn.Cut || dn.Cut || s.rng.Float64() < s.Loss {
				continue
			}
			old := s.copies[dst][src]
			if dn.voter || sn.voter {
				s.Messages += changed(old, sn.Out)
			}
			s.copies[dst][src] = sn.Out
		}
	}
}

func (n *SimNode) confirmed(pool netip.Prefix) int {
	c := 0
	for _, o := range n.State.Own {
		if o.Pool == pool && o.State == OwnConfirmed {
			c++
		}
	}
	return c
}

// changed counts the claims and grants in b that a does not have.
func changed(a, b Table) int {
	k := 0
	for _, c := range b.Claims {
		if !slices.Contains(a.Claims, c) {
			k++
		}
	}
	for _, g := range b.Grants {
		if !slices.Contains(a.Grants, g) {
			k++
		}
	}
	return k
}

// Owners maps every block some node holds confirmed (or lost) to those
// nodes, across all nodes whatever their incarnation: the invariant is
// that no list is ever longer than one among current incarnations.
func (s *Sim) Owners() map[netip.Prefix][]Node {
	out := map[netip.Prefix][]Node{}
	for _, n := range s.Nodes {
		if n.State.Forgotten[n.State.Self] || n.State.Superseded[n.State.Self] {
			continue
		}
		for b, o := range n.State.Own {
			if o.State == OwnConfirmed {
				out[b] = append(out[b], n.State.Self)
			}
		}
	}
	return out
}

// Violation returns a block with two owners handing out addresses, if any.
func (s *Sim) Violation() (netip.Prefix, []Node, bool) {
	for b, os := range s.Owners() {
		if len(os) > 1 {
			return b, os, true
		}
	}
	return netip.Prefix{}, nil, false
}

// Satisfied reports whether every node that is up has the blocks it wants.
func (s *Sim) Satisfied() bool {
	for _, n := range s.Nodes {
		if n.Up && len(s.Pools) > 0 && n.confirmed(s.Pools[0].CIDR) < n.Want {
			return false
		}
	}
	return true
}
