package blocksim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/reefcni/reef/blockproto"
)

// Cluster is n simulated nodes and the network between them. BGP carries
// state, not messages, so a receiver holds the last copy of each sender's
// announcements that got through, however old.
//
// One Step is one round: every node that is up decides once from the
// copies it holds, then every sender's current announcements are
// delivered to every receiver it can reach (each delivery lost with
// probability Loss). A decision reads only copies, never another node's
// decision of the same step, so a claim made in step s reaches the voters
// at the end of s, their votes reach the claimant at the end of s+1 and
// it confirms in step s+2: one round trip is two steps.
type Cluster struct {
	Nodes  []*Node
	Voters []netip.Addr
	Pools  []blockproto.Pool
	rng    *rand.Rand
	// copies[dst][src] is what dst holds of src's announcements: one of
	// src's outputs (shared, never modified), nil for nothing.
	copies [][]*output
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
	// the node's own Voters, or else the cluster's.
	ListOf func(i int, t blockproto.Table) []netip.Addr
	// WipeUnrestricted brings a wiped voter back with its votes for
	// pending claims, as before issue 26 (a weakened variant for the
	// tests: it must be able to split).
	WipeUnrestricted bool
}

// output is one output of a node: its complete announcements after one
// decision that changed them.
type output struct{ t blockproto.Table }

// Node is one simulated node.
type Node struct {
	Name  string
	State blockproto.State
	Out   blockproto.Table
	Up    bool
	// Cut: no update goes to or comes from this node while set.
	Cut bool
	// Side partitions the network: updates go only between nodes of the
	// same side (0 for all, normally).
	Side int
	// Want is how many blocks of the first pool the node wants confirmed.
	Want int
	// Voters is the node's own bgp.voters; nil: the cluster's Voters.
	// SetVoters changes it as a restart with another list does.
	Voters []netip.Addr
	// Last is its last decision, less its Changes (applied to State).
	Last  blockproto.Decision
	voter bool
	// ranUnder is the voter list its state last decided under, as the
	// daemon's store keeps it (nil before its first decision).
	ranUnder []netip.Addr

	out        *output // Out as delivered
	dirty      bool    // a copy it holds, or its state, changed since its last decision
	quiet      bool    // its last decision changed nothing
	lastNeed   bool
	firstClaim int // step of its first claim since its last confirmation; -1 none
}

// New makes n nodes at 10.0.0.1.. of which the first voters vote. The
// seed makes a run repeatable: it draws the incarnations and the losses.
func New(n, voters int, pools []blockproto.Pool, seed uint64) *Cluster {
	c := &Cluster{Pools: pools, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := range n {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i) + 1})
		if i < voters {
			c.Voters = append(c.Voters, a)
		}
		nd := &Node{Name: fmt.Sprintf("node%d", i+1), Up: true, voter: i < voters, dirty: true, firstClaim: -1}
		nd.State = blockproto.NewState(blockproto.Node{Addr: a, Inc: c.rng.Uint32()}, 1)
		c.Nodes = append(c.Nodes, nd)
	}
	c.copies = make([][]*output, n)
	for i := range c.copies {
		c.copies[i] = make([]*output, n)
	}
	return c
}

// Rand is the cluster's random source, the one that draws incarnations
// and losses: a test that draws its own events from it too replays the
// same run from the same seed.
func (c *Cluster) Rand() *rand.Rand { return c.rng }

// Wipe restarts node i with an empty state: a new incarnation, born later.
// A voter (of a list of more than one) comes back restricted, as the
// daemon brings it up (State.Restricted), unless WipeUnrestricted.
func (c *Cluster) Wipe(i int) {
	n := c.Nodes[i]
	n.State = blockproto.NewState(blockproto.Node{Addr: n.State.Self.Addr, Inc: c.rng.Uint32()}, n.State.Born+1)
	l := c.listOf(n)
	n.State.Restricted = !c.WipeUnrestricted && len(l) > 1 && slices.Contains(l, n.State.Self.Addr)
	n.ranUnder = l
	n.Out, n.out = blockproto.Table{}, nil
	n.dirty, n.firstClaim = true, -1
}

// listOf is the voter list node n is configured with (not with ListOf,
// which picks it from the table).
func (c *Cluster) listOf(n *Node) []netip.Addr {
	if n.Voters != nil {
		return n.Voters
	}
	return c.Voters
}

// startUnder is the daemon's check at start of the list a node runs
// under, for a node whose list changed since its last decision (a restart
// with another bgp.voters): a restricted node added back to the list
// after it was out of it is restricted no more, and pending claims are
// given up.
func (c *Cluster) startUnder(n *Node) {
	l := c.listOf(n)
	if n.ranUnder != nil && slices.Equal(l, n.ranUnder) {
		return
	}
	self := n.State.Self.Addr
	if n.ranUnder != nil && n.State.Restricted && slices.Contains(l, self) && !slices.Contains(n.ranUnder, self) {
		n.State.Restricted = false
	}
	if n.ranUnder != nil && c.ListOf == nil {
		// A claim is made, voted for, counted and confirmed under one
		// list: the daemon gives up its pending claims when its list
		// changes (voterList). ListOf replays the old default, which
		// did not.
		n.State = blockproto.Apply(n.State, blockproto.Changes{Release: n.State.PendingBlocks()})
	}
	n.ranUnder, n.dirty = l, true
}

// Drop makes every receiver lose its copy of node i's announcements, as
// when its sessions close without graceful restart.
func (c *Cluster) Drop(i int) {
	for dst := range c.copies {
		if c.copies[dst][i] != nil {
			c.count(dst, i, c.copies[dst][i], nil)
			c.copies[dst][i] = nil
			c.Nodes[dst].dirty = true
		}
	}
}

func (c *Cluster) need(n *Node) bool {
	return len(c.Pools) > 0 && n.Confirmed(c.Pools[0].CIDR) < n.Want
}

// input is what node i decides from now.
func (c *Cluster) input(i int, t *blockproto.Table) blockproto.Input {
	n := c.Nodes[i]
	*t = blockproto.Table{Records: t.Records[:0], Claims: t.Claims[:0], Grants: t.Grants[:0], Forgets: t.Forgets[:0], Seen: t.Seen[:0]}
	for src, o := range c.copies[i] {
		if src == i || o == nil {
			continue
		}
		t.Records = append(t.Records, o.t.Records...)
		t.Claims = append(t.Claims, o.t.Claims...)
		t.Grants = append(t.Grants, o.t.Grants...)
		t.Forgets = append(t.Forgets, o.t.Forgets...)
		t.Seen = append(t.Seen, o.t.Seen...)
	}
	need := map[netip.Prefix]bool{}
	if c.need(n) {
		need[c.Pools[0].CIDR] = true
	}
	name := n.Name
	if c.SameStart {
		name = ""
	}
	voters := c.Voters
	switch {
	case c.ListOf != nil:
		voters = c.ListOf(i, *t)
	case n.Voters != nil:
		voters = n.Voters
	}
	return blockproto.Input{State: n.State, Table: *t, Voters: voters, Pools: c.Pools, Need: need, Name: name}
}

// Step lets every node that is up decide once, then delivers updates.
func (c *Cluster) Step() {
	c.Steps++
	var jobs []int
	for i, n := range c.Nodes {
		if !n.Up {
			continue
		}
		if c.ListOf == nil {
			c.startUnder(n)
		}
		need := c.need(n)
		if n.quiet && !n.dirty && need == n.lastNeed {
			continue // the same input as its last decision, which changed nothing
		}
		n.lastNeed = need
		jobs = append(jobs, i)
	}
	results := make([]decided, len(jobs))
	workers := c.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var t blockproto.Table // reused from decision to decision
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
				results[k] = c.apply(jobs[k], blockproto.Decide(c.input(jobs[k], &t)))
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		c.Decisions++
		c.Claims += r.claims
		c.Confirms += r.confirms
		c.Releases += r.releases
		for range r.confirms {
			c.Latency = append(c.Latency, r.latency)
		}
	}
	for dst, dn := range c.Nodes {
		for src, sn := range c.Nodes {
			if src == dst || !sn.Up || sn.Cut || dn.Cut || sn.Side != dn.Side || c.copies[dst][src] == sn.out {
				continue
			}
			if c.rng.Float64() < c.Loss {
				continue
			}
			c.count(dst, src, c.copies[dst][src], sn.out)
			c.copies[dst][src] = sn.out
			dn.dirty = true
		}
	}
}

// decided is what one decision adds to the cluster's counters.
type decided struct{ claims, confirms, releases, latency int }

// apply makes d node i's state and announcements.
func (c *Cluster) apply(i int, d blockproto.Decision) decided {
	n := c.Nodes[i]
	r := decided{claims: len(d.Claim), confirms: len(d.Confirm), releases: len(d.Release)}
	if r.claims > 0 && n.firstClaim < 0 {
		n.firstClaim = c.Steps
	}
	if r.confirms > 0 {
		r.latency = c.Steps - max(n.firstClaim, 0)
		n.firstClaim = -1
	}
	if !tableEqual(n.Out, d.Announce) {
		n.out = &output{t: d.Announce}
	}
	n.dirty, n.quiet = false, d.Changes.Empty()
	n.State, n.Out = d.State, d.Announce
	n.Last = d
	n.Last.Changes = blockproto.Changes{} // applied to State, counted above: not kept (they can be large)
	return r
}

// Current reports whether every node holds the current announcements of
// every node it can reach: nothing is left to deliver.
func (c *Cluster) Current() bool {
	for dst, dn := range c.Nodes {
		for src, sn := range c.Nodes {
			if src != dst && sn.Up && !sn.Cut && !dn.Cut && sn.Side == dn.Side && c.copies[dst][src] != sn.out {
				return false
			}
		}
	}
	return true
}

// Held is how many announcements node i holds of the others.
func (c *Cluster) Held(i int) int {
	k := 0
	for src, o := range c.copies[i] {
		if src != i && o != nil {
			k += o.t.Len()
		}
	}
	return k
}

// Confirmed is how many blocks of pool the node owns, confirmed.
func (n *Node) Confirmed(pool netip.Prefix) int {
	k := 0
	for _, o := range n.State.Own {
		if o.Pool == pool && o.State == blockproto.OwnConfirmed {
			k++
		}
	}
	return k
}

// Voter reports whether the node is one of the cluster's voters.
func (n *Node) Voter() bool { return n.voter }

// SetVoters gives the node another bgp.voters, as a restart with a new
// configuration does: it decides again at its next step up, even if the
// list is by then back to the one it last decided under.
func (n *Node) SetVoters(voters []netip.Addr) {
	n.Voters, n.dirty = voters, true
}

// Stale reports whether something the node decides from (a copy it
// holds, its state, its voter list) changed since its last decision: its
// Last.Status may be out of date until it decides again.
func (n *Node) Stale() bool { return n.dirty }

// count adds one delivery from src to dst, which replaces the copy a with
// b (nil: nothing), to Updates and Messages. Both are a node's complete,
// sorted announcements (Decide sorts them), in which a claim or a grant is
// named by its block (one NLRI per node and block, as on the wire).
func (c *Cluster) count(dst, src int, a, b *output) {
	var ta, tb blockproto.Table
	if a != nil {
		ta = a.t
	}
	if b != nil {
		tb = b.t
	}
	dn, sn := c.Nodes[dst], c.Nodes[src]
	c.Updates += diffBy(ta.Records, tb.Records, recordKey, cmpAddr, blockproto.Record.Equal, nil)
	c.Updates += diffBy(ta.Forgets, tb.Forgets, forgetKey, cmpNode, func(x, y blockproto.Forget) bool { return x == y }, nil)
	c.Updates += diffBy(ta.Seen, tb.Seen, seenKey, cmpNode, func(x, y blockproto.Seen) bool { return x == y }, nil)
	nc := diffBy(ta.Claims, tb.Claims, claimKey, cmpPrefix, func(x, y blockproto.Claim) bool { return x == y }, nil)
	c.Updates += nc
	if dn.voter {
		c.Messages += nc
	}
	party := func(old, cur *blockproto.Grant) {
		if !sn.voter {
			return
		}
		for _, g := range []*blockproto.Grant{old, cur} {
			if g != nil && g.To == dn.State.Self {
				c.Messages++
				return
			}
		}
		g := cur
		if g == nil {
			g = old
		}
		if o, ok := dn.State.Own[g.Block]; ok && o.State != blockproto.OwnLost {
			c.Messages++
		}
	}
	c.Updates += diffBy(ta.Grants, tb.Grants, grantKey, cmpPrefix, func(x, y blockproto.Grant) bool { return x == y }, party)
}

// The keys that name an announcement on the wire (one NLRI each), in the
// order blockproto.Table.Sort puts them (TestKeysFollowTableSort).
func recordKey(r blockproto.Record) netip.Addr      { return r.Node.Addr }
func forgetKey(f blockproto.Forget) blockproto.Node { return f.Node }
func seenKey(s blockproto.Seen) blockproto.Node     { return s.Node }
func claimKey(c blockproto.Claim) netip.Prefix      { return c.Block }
func grantKey(g blockproto.Grant) netip.Prefix      { return g.Block }

func cmpAddr(a, b netip.Addr) int { return a.Compare(b) }

func cmpNode(a, b blockproto.Node) int {
	return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Inc, b.Inc))
}

func cmpPrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
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

func tableEqual(a, b blockproto.Table) bool {
	return slices.EqualFunc(a.Records, b.Records, blockproto.Record.Equal) && slices.Equal(a.Claims, b.Claims) &&
		slices.Equal(a.Grants, b.Grants) && slices.Equal(a.Forgets, b.Forgets) && slices.Equal(a.Seen, b.Seen)
}

// Owners maps every block some node holds confirmed (or lost) to those
// nodes, across all nodes whatever their incarnation: the invariant is
// that no list is ever longer than one among current incarnations.
func (c *Cluster) Owners() map[netip.Prefix][]blockproto.Node {
	out := map[netip.Prefix][]blockproto.Node{}
	for _, n := range c.Nodes {
		if n.State.Forgotten[n.State.Self] || n.State.Superseded[n.State.Self] {
			continue
		}
		for b, o := range n.State.Own {
			if o.State == blockproto.OwnConfirmed {
				out[b] = append(out[b], n.State.Self)
			}
		}
	}
	return out
}

// Violation returns a block with two owners handing out addresses, if any.
func (c *Cluster) Violation() (netip.Prefix, []blockproto.Node, bool) {
	var bad []netip.Prefix
	owners := c.Owners()
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
	slices.SortFunc(os, func(x, y blockproto.Node) int { return cmp.Compare(x.Addr.String(), y.Addr.String()) })
	return b, os, true
}

// Satisfied reports whether every node that is up has the blocks it wants.
func (c *Cluster) Satisfied() bool {
	for _, n := range c.Nodes {
		if n.Up && c.need(n) {
			return false
		}
	}
	return true
}
