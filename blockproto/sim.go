package blockproto

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Sim runs the pure protocol for many nodes in one process over a
// simulated network that loses, delays and partitions: BGP carries state,
// not messages, so a receiver holds the last copy of each sender's
// announcements that got through, however old. It is what the tests and
// the simulation report of `make bench` (reef-lab bench-sim, SimRun)
// drive; nothing of it runs in the daemon.
//
// One Step is one round: every node that is up decides once from the
// copies it holds, then every sender's current announcements are
// delivered to every receiver it can reach (each delivery lost with
// probability Loss). A decision reads only copies, never another node's
// decision of the same step, so a claim made in step s reaches the voters
// at the end of s, their votes reach the claimant at the end of s+1 and
// it confirms in step s+2: one round trip is two steps.
type Sim struct {
	Nodes  []*SimNode
	Voters []netip.Addr
	Pools  []Pool
	rng    *rand.Rand
	// copies[dst][src] is what dst holds of src's announcements: one of
	// src's outputs (shared, never modified), nil for nothing.
	copies [][]*simOut
	// Loss is the chance that one sender's update to one receiver does not
	// get through in a step (it may in a later one).
	Loss float64
	// Messages counts the protocol's messages, as BGP updates that reach a
	// party of a claim: one delivery of one announcement (one NLRI: a
	// claim or a grant of one block by one node) that is new, changed or
	// withdrawn in the receiver's copy, when it is
	//   - a claim delivered to a voter, or
	//   - a grant delivered by its voter to the node it grants (or granted,
	//     for a withdrawal or a change), or to a node that itself claims
	//     that block (pending or confirmed, in its own state).
	// It is what a claim costs in agreement, O(voters) per claim; records,
	// forgets, and the copies every other node also gets are in Updates.
	Messages int
	// Updates counts every delivery of an announcement that is new,
	// changed or withdrawn in the receiver's copy, whoever sends or
	// receives it: the UPDATEs a full mesh carries (records and forgets
	// included).
	Updates int
	// Claims, Confirms and Releases count the decisions' own changes
	// (Decision.Claim, Confirm, Release) over all nodes.
	Claims, Confirms, Releases int
	// Latency holds, for every confirmation, the steps from the node's
	// first claim since its previous confirmation (or the start) to the
	// step that confirmed it: 2 is one round trip to the voters.
	Latency []int
	Steps   int
	// Decisions counts the Decide calls; a node whose copies, state and
	// need did not change since a decision that changed nothing is not
	// asked again (Decide is pure: the answer would be the same).
	Decisions int
	// SameStart makes every node start its claim search at the same block,
	// so that claims collide as often as they can.
	SameStart bool
	// Workers is how many decisions run at once (0: GOMAXPROCS). The
	// result does not depend on it.
	Workers int
	// ListOf, if set, is the voter list node i decides with, from the
	// table it holds: a stand-in for how a node picks its list (the tests
	// replay the old default, which learned it from the records). Unset:
	// the node's own Voters, or else the Sim's.
	ListOf func(i int, t Table) []netip.Addr
	// WipeUnrestricted brings a wiped voter back with its votes for
	// pending claims, as before issue 26 (a weakened variant for the
	// tests: it must be able to split).
	WipeUnrestricted bool
}

// simOut is one output of a node: its complete announcements after one
// decision that changed them.
type simOut struct{ t Table }

// SimNode is one simulated node.
type SimNode struct {
	Name  string
	State State
	Out   Table
	Up    bool
	// Cut: no update goes to or comes from this node while set.
	Cut bool
	// Side partitions the network: updates go only between nodes of the
	// same side (0 for all, normally).
	Side int
	// Want is how many blocks of the first pool the node wants confirmed.
	Want int
	// Voters is the node's own bgp.voters; nil: the Sim's Voters.
	Voters []netip.Addr
	// Last is its last decision, less its Changes (applied to State).
	Last     Decision
	voter    bool
	incCount uint32
	// ranUnder is the voter list its state last decided under, as the
	// daemon's store keeps it (nil before its first decision).
	ranUnder []netip.Addr

	out        *simOut // Out as delivered
	dirty      bool    // a copy it holds, or its state, changed since its last decision
	quiet      bool    // its last decision changed nothing
	lastNeed   bool
	firstClaim int // step of its first claim since its last confirmation; -1 none
}

// NewSim makes n nodes at 10.0.0.1.. of which the first voters vote.
func NewSim(n, voters int, pools []Pool, seed uint64) *Sim {
	s := &Sim{Pools: pools, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i) + 1})
		if i < voters {
			s.Voters = append(s.Voters, a)
		}
		nd := &SimNode{Name: fmt.Sprintf("node%d", i+1), Up: true, voter: i < voters, dirty: true, firstClaim: -1}
		nd.State = emptyState(Node{Addr: a, Inc: s.rng.Uint32()}, 1)
		s.Nodes = append(s.Nodes, nd)
	}
	s.copies = make([][]*simOut, n)
	for i := range s.copies {
		s.copies[i] = make([]*simOut, n)
	}
	return s
}

func emptyState(self Node, born uint32) State {
	return State{Self: self, Born: born, Own: map[netip.Prefix]OwnBlock{}, Released: map[netip.Prefix]bool{},
		Grants: map[netip.Prefix]Node{}, Remote: map[netip.Prefix]RemoteBlock{}, Forgotten: map[Node]bool{},
		Superseded: map[Node]bool{}, Known: map[netip.Addr]Incarnation{}}
}

// Wipe restarts node i with an empty state: a new incarnation, born later.
// A voter (of a list of more than one) comes back restricted, as the
// daemon brings it up (State.Restricted), unless WipeUnrestricted.
func (s *Sim) Wipe(i int) {
	n := s.Nodes[i]
	n.incCount++
	n.State = emptyState(Node{Addr: n.State.Self.Addr, Inc: s.rng.Uint32()}, n.State.Born+1)
	l := s.listOf(n)
	n.State.Restricted = !s.WipeUnrestricted && len(l) > 1 && slices.Contains(l, n.State.Self.Addr)
	n.ranUnder = l
	n.Out, n.out = Table{}, nil
	n.dirty, n.firstClaim = true, -1
}

// listOf is the voter list node n is configured with (not with ListOf,
// which picks it from the table).
func (s *Sim) listOf(n *SimNode) []netip.Addr {
	if n.Voters != nil {
		return n.Voters
	}
	return s.Voters
}

// startUnder is the daemon's check at start of the list a node runs
// under, for a node whose list changed since its last decision (a restart
// with another bgp.voters): a restricted node added back to the list
// after it was out of it is restricted no more, and pending claims are
// given up.
func (s *Sim) startUnder(n *SimNode) {
	l := s.listOf(n)
	if n.ranUnder != nil && slices.Equal(l, n.ranUnder) {
		return
	}
	self := n.State.Self.Addr
	if n.ranUnder != nil && n.State.Restricted && slices.Contains(l, self) && !slices.Contains(n.ranUnder, self) {
		n.State.Restricted = false
	}
	if n.ranUnder != nil && s.ListOf == nil {
		// A claim is made, voted for, counted and confirmed under one
		// list: the daemon gives up its pending claims when its list
		// changes (voterList). ListOf replays the old default, which
		// did not.
		n.State = Apply(n.State, Changes{Release: n.State.PendingBlocks()})
	}
	n.ranUnder, n.dirty = l, true
}

// Drop makes every receiver lose its copy of node i's announcements, as
// when its sessions close without graceful restart.
func (s *Sim) Drop(i int) {
	for dst := range s.copies {
		if s.copies[dst][i] != nil {
			s.count(dst, i, s.copies[dst][i], nil)
			s.copies[dst][i] = nil
			s.Nodes[dst].dirty = true
		}
	}
}

func (s *Sim) need(n *SimNode) bool {
	return len(s.Pools) > 0 && n.confirmed(s.Pools[0].CIDR) < n.Want
}

// input is what node i decides from now.
func (s *Sim) input(i int, t *Table) Input {
	n := s.Nodes[i]
	*t = Table{Records: t.Records[:0], Claims: t.Claims[:0], Grants: t.Grants[:0], Forgets: t.Forgets[:0], Seen: t.Seen[:0]}
	for src, c := range s.copies[i] {
		if src == i || c == nil {
			continue
		}
		t.Records = append(t.Records, c.t.Records...)
		t.Claims = append(t.Claims, c.t.Claims...)
		t.Grants = append(t.Grants, c.t.Grants...)
		t.Forgets = append(t.Forgets, c.t.Forgets...)
		t.Seen = append(t.Seen, c.t.Seen...)
	}
	need := map[netip.Prefix]bool{}
	if s.need(n) {
		need[s.Pools[0].CIDR] = true
	}
	name := n.Name
	if s.SameStart {
		name = ""
	}
	voters := s.Voters
	switch {
	case s.ListOf != nil:
		voters = s.ListOf(i, *t)
	case n.Voters != nil:
		voters = n.Voters
	}
	return Input{State: n.State, Table: *t, Voters: voters, Pools: s.Pools, Need: need, Name: name}
}

// Step lets every node that is up decide once, then delivers updates.
func (s *Sim) Step() {
	s.Steps++
	var jobs []int
	for i, n := range s.Nodes {
		if !n.Up {
			continue
		}
		if s.ListOf == nil {
			s.startUnder(n)
		}
		need := s.need(n)
		if n.quiet && !n.dirty && need == n.lastNeed {
			continue // the same input as its last decision, which changed nothing
		}
		n.lastNeed = need
		jobs = append(jobs, i)
	}
	results := make([]simDecided, len(jobs))
	workers := s.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var t Table // reused from decision to decision
			for {
				k := int(next.Add(1)) - 1
				if k >= len(jobs) {
					return
				}
				// Decide keeps no reference to the table's slices once it
				// returns: its State and Announce are its own. A decision
				// touches only its own node (the others read their own
				// state and the copies, which change only in delivery), so
				// it is applied at once and the old state can go.
				results[k] = s.apply(jobs[k], Decide(s.input(jobs[k], &t)))
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		s.Decisions++
		s.Claims += r.claims
		s.Confirms += r.confirms
		s.Releases += r.releases
		for range r.confirms {
			s.Latency = append(s.Latency, r.latency)
		}
	}
	for dst, dn := range s.Nodes {
		for src, sn := range s.Nodes {
			if src == dst || !sn.Up || sn.Cut || dn.Cut || sn.Side != dn.Side || s.copies[dst][src] == sn.out {
				continue
			}
			if s.rng.Float64() < s.Loss {
				continue
			}
			s.count(dst, src, s.copies[dst][src], sn.out)
			s.copies[dst][src] = sn.out
			dn.dirty = true
		}
	}
}

// simDecided is what one decision adds to the Sim's counters.
type simDecided struct{ claims, confirms, releases, latency int }

// apply makes d node i's state and announcements.
func (s *Sim) apply(i int, d Decision) simDecided {
	n := s.Nodes[i]
	r := simDecided{claims: len(d.Claim), confirms: len(d.Confirm), releases: len(d.Release)}
	if r.claims > 0 && n.firstClaim < 0 {
		n.firstClaim = s.Steps
	}
	if r.confirms > 0 {
		r.latency = s.Steps - max(n.firstClaim, 0)
		n.firstClaim = -1
	}
	if !tableEqual(n.Out, d.Announce) {
		n.out = &simOut{t: d.Announce}
	}
	n.dirty, n.quiet = false, d.Changes.Empty()
	n.State, n.Out = d.State, d.Announce
	n.Last = d
	n.Last.Changes = Changes{} // applied to State, counted above: not kept (they can be large)
	return r
}

// Current reports whether every node holds the current announcements of
// every node it can reach: nothing is left to deliver.
func (s *Sim) Current() bool {
	for dst, dn := range s.Nodes {
		for src, sn := range s.Nodes {
			if src != dst && sn.Up && !sn.Cut && !dn.Cut && sn.Side == dn.Side && s.copies[dst][src] != sn.out {
				return false
			}
		}
	}
	return true
}

// Held is how many announcements node i holds of the others.
func (s *Sim) Held(i int) int {
	k := 0
	for src, c := range s.copies[i] {
		if src != i && c != nil {
			k += c.t.Len()
		}
	}
	return k
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

// Confirmed is how many blocks of pool the node owns, confirmed.
func (n *SimNode) Confirmed(pool netip.Prefix) int { return n.confirmed(pool) }

// Voter reports whether the node is one of the voters.
func (n *SimNode) Voter() bool { return n.voter }

// count adds one delivery from src to dst, which replaces the copy a with
// b (nil: nothing), to Updates and Messages. Both are a node's complete,
// sorted announcements (Decide sorts them), in which a claim or a grant is
// named by its block (one NLRI per node and block, as on the wire).
func (s *Sim) count(dst, src int, a, b *simOut) {
	var ta, tb Table
	if a != nil {
		ta = a.t
	}
	if b != nil {
		tb = b.t
	}
	dn, sn := s.Nodes[dst], s.Nodes[src]
	s.Updates += diffBy(ta.Records, tb.Records, func(r Record) netip.Addr { return r.Node.Addr }, cmpAddr, Record.Equal, nil)
	s.Updates += diffBy(ta.Forgets, tb.Forgets, func(f Forget) Node { return f.Node }, cmpNode, func(x, y Forget) bool { return x == y }, nil)
	s.Updates += diffBy(ta.Seen, tb.Seen, func(x Seen) Node { return x.Node }, cmpNode, func(x, y Seen) bool { return x == y }, nil)
	nc := diffBy(ta.Claims, tb.Claims, func(c Claim) netip.Prefix { return c.Block }, cmpPrefix, func(x, y Claim) bool { return x == y }, nil)
	s.Updates += nc
	if dn.voter {
		s.Messages += nc
	}
	party := func(old, cur *Grant) {
		if !sn.voter {
			return
		}
		for _, g := range []*Grant{old, cur} {
			if g != nil && g.To == dn.State.Self {
				s.Messages++
				return
			}
		}
		g := cur
		if g == nil {
			g = old
		}
		if o, ok := dn.State.Own[g.Block]; ok && o.State != OwnLost {
			s.Messages++
		}
	}
	s.Updates += diffBy(ta.Grants, tb.Grants, func(g Grant) netip.Prefix { return g.Block }, cmpPrefix, func(x, y Grant) bool { return x == y }, party)
}

// diffBy counts the keys that are in only one of a and b, or in both with
// different values; a and b are sorted by key, one entry per key. each, if
// set, is told of every such key (nil for the side that lacks it).
func diffBy[T any, K any](a, b []T, key func(T) K, cmpK func(K, K) int, eq func(T, T) bool, each func(old, cur *T)) int {
	n, i, j := 0, 0, 0
	for i < len(a) || j < len(b) {
		var c int
		switch {
		case i == len(a):
			c = 1
		case j == len(b):
			c = -1
		default:
			c = cmpK(key(a[i]), key(b[j]))
		}
		switch {
		case c < 0:
			n++
			if each != nil {
				each(&a[i], nil)
			}
			i++
		case c > 0:
			n++
			if each != nil {
				each(nil, &b[j])
			}
			j++
		default:
			if !eq(a[i], b[j]) {
				n++
				if each != nil {
					each(&a[i], &b[j])
				}
			}
			i, j = i+1, j+1
		}
	}
	return n
}

func cmpAddr(a, b netip.Addr) int { return a.Compare(b) }

func tableEqual(a, b Table) bool {
	return slices.EqualFunc(a.Records, b.Records, Record.Equal) && slices.Equal(a.Claims, b.Claims) &&
		slices.Equal(a.Grants, b.Grants) && slices.Equal(a.Forgets, b.Forgets) && slices.Equal(a.Seen, b.Seen)
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
	var bad []netip.Prefix
	owners := s.Owners()
	for b, os := range owners {
		if len(os) > 1 {
			bad = append(bad, b)
		}
	}
	if len(bad) == 0 {
		return netip.Prefix{}, nil, false
	}
	b := slices.MinFunc(bad, cmpPrefix) // the same one whatever the map order
	os := owners[b]
	slices.SortFunc(os, func(x, y Node) int { return cmp.Compare(x.Addr.String(), y.Addr.String()) })
	return b, os, true
}

// Satisfied reports whether every node that is up has the blocks it wants.
func (s *Sim) Satisfied() bool {
	for _, n := range s.Nodes {
		if n.Up && s.need(n) {
			return false
		}
	}
	return true
}
