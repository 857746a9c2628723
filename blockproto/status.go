package blockproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"strings"
)

// Status is the protocol as `reef status` explains it.
type Status struct {
	Voters    []netip.Addr
	VoterHash uint32
	Majority  int
	Reached   []netip.Addr // voters whose record, under this voter list, this node sees (itself included)
	Missing   []netip.Addr // voters it does not
	// Agree are the nodes whose record announces this node's voter list,
	// itself included.
	Agree []netip.Addr
	// OtherLists are the other voter lists the cluster shows: a record
	// that announces one, or a claim or a vote made under one. While there
	// is any, this node claims no block (CanClaim).
	OtherLists []OtherList
	// Unresolved are the voters whose identity this node does not know
	// yet (Input.Unresolved); while there is any, it claims nothing.
	Unresolved []string
	// Gone says why this incarnation may not take part any more (forgotten
	// or superseded); "" while it may.
	Gone string
	// Recovered says the store was rebuilt (State.Recovered): no claims,
	// votes only for confirmed owners; "" otherwise.
	Recovered string
	// Restricted says this voter grants only confirmed owners because its
	// store is new (State.Restricted, in effect); "" otherwise. It does
	// not stop claims.
	Restricted string
	// Blocked says, per pool in Need, why no claim could be made; a pool
	// absent from it had its claim made or has one pending.
	Blocked map[netip.Prefix]string
	// Pending are this node's pending claims with the voters that granted
	// them so far.
	Pending   []PendingClaim
	Conflicts []string
	// Unsettled says why, as far as this node sees, the next one-voter
	// change of the voter list may not start yet; "" when it may: every
	// node it sees runs this list, every voter is reached, no claim is
	// pending, and, on a voter, it holds a vote for the owner of every
	// confirmed block (docs/ipam.md, "Changing the voters", step 2). The
	// next change may start when every node says so, all with the same
	// View.
	Unsettled string
	// Confirmed is how many blocks this node sees confirmed, its own
	// included.
	Confirmed int
	// View is a hash of the confirmed blocks this node sees, with their
	// owners' incarnations, and of the incarnations of the nodes under
	// its list (Agree): two nodes that show the same View see the same.
	View uint32
}

// RecoveredReason is why a recovered store claims no block.
const RecoveredReason = "this node's store was rebuilt by `reef store recover`: it keeps its blocks, but this incarnation claims no new block " +
	"and votes only for confirmed owners (the blocks it gave up and the votes it cast were lost with the file); " +
	"to claim again, drain the node, stop reef, move its state dir away and start it again (docs/ipam.md, \"A damaged store\")"

// RestrictedReason is why a voter whose store is new grants no pending
// claim, and what ends it.
const RestrictedReason = "this node is in bgp.voters but its store is new (its state dir was wiped, or `reef store recover` drew a new incarnation): " +
	"the votes its earlier incarnation cast are lost, so it votes only for confirmed owners, never for a pending claim (its own included); " +
	"claims need the votes of a majority of the other voters meanwhile. To lift it, take this node out of bgp.voters on every node, " +
	"wait until `reef status` on every node shows that list, then add it back (docs/ipam.md, \"Changing the voter list\"). " +
	"A voter of a new cluster runs `reef store init` once before its first start instead; one that was started without it, while the cluster has no block yet, " +
	"is put right by stopping reef, moving its state dir away, running `reef store init` and starting reef again"

// OtherList is a voter list other than this node's, and the nodes whose
// announcements show it.
type OtherList struct {
	Hash uint32
	// Voters is the list as a record announces it; nil when only claims
	// or votes, which carry the hash alone, show it.
	Voters []netip.Addr
	Nodes  []netip.Addr
}

func (o OtherList) String() string {
	list := fmt.Sprintf("an unknown list (hash %08x)", o.Hash)
	if o.Voters != nil {
		list = addrList(o.Voters)
	}
	return fmt.Sprintf("%s from %s", list, addrList(o.Nodes))
}

// PendingClaim is a pending claim with its grants so far.
type PendingClaim struct {
	Block  netip.Prefix
	Grants []netip.Addr
}

// CanClaim reports whether nothing but the pool's free blocks stands in
// the way of a claim: this node takes part, the cluster shows no voter
// list but its own, and a majority of its voters is reached.
func (s Status) CanClaim() error {
	if s.Gone != "" {
		return fmt.Errorf("%s", s.Gone)
	}
	if s.Recovered != "" {
		return fmt.Errorf("%s", s.Recovered)
	}
	if len(s.OtherLists) > 0 {
		return errors.New(s.ListsDisagree())
	}
	if len(s.Unresolved) > 0 {
		return fmt.Errorf("this node does not know which node %s of bgp.voters is (%d of %d voters named); it claims nothing, votes for nothing new "+
			"and confirms nothing until it does (docs/design.md, \"IPv6-only nodes\")", strings.Join(s.Unresolved, "; "), len(s.Voters), len(s.Unresolved)+len(s.Voters))
	}
	if len(s.Reached) >= s.Majority {
		return nil
	}
	return fmt.Errorf("this node reaches %d of the %d voters and needs %d: no answer from %s; check `reef status` on them",
		len(s.Reached), len(s.Voters), s.Majority, addrList(s.Missing))
}

// ListsDisagree says which voter lists the cluster shows and the nodes
// behind each; "" when it shows only this node's.
func (s Status) ListsDisagree() string {
	if len(s.OtherLists) == 0 {
		return ""
	}
	var others []string
	for _, o := range s.OtherLists {
		others = append(others, o.String())
	}
	return fmt.Sprintf("the cluster shows %d voter lists: this node's %s from %s, and %s; bgp.voters must be the same on every node, "+
		"and this node claims no block until no other list is announced (docs/ipam.md, \"Voters\")",
		len(s.OtherLists)+1, addrList(s.Voters), addrList(s.Agree), strings.Join(others, ", and "))
}

func addrList(as []netip.Addr) string {
	var s []string
	for _, a := range as {
		s = append(s, a.String())
	}
	return "[" + strings.Join(s, " ") + "]"
}

// claimBlocked says why this node may not claim now, or nil.
func (d *decider) claimBlocked() error { return d.status().CanClaim() }

func (d *decider) status() Status {
	s := Status{Voters: d.voters, VoterHash: d.hash, Majority: d.maj, Gone: d.gone, Blocked: map[netip.Prefix]string{}, Unresolved: d.in.Unresolved}
	if d.state.Recovered {
		s.Recovered = RecoveredReason
	}
	if d.restricted {
		s.Restricted = RestrictedReason
	}
	for _, v := range d.voters {
		if r := d.records[v]; v == d.self().Addr || (r.Node.IsValid() && !d.in.Unreachable[v] && r.VoterHash == d.hash && d.boundVoter(v)) {
			s.Reached = append(s.Reached, v)
		} else {
			s.Missing = append(s.Missing, v)
		}
	}
	s.Agree = []netip.Addr{d.self().Addr}
	for _, a := range sortedAddrs(d.records) {
		if d.records[a].VoterHash == d.hash {
			s.Agree = append(s.Agree, a)
		}
	}
	slices.SortFunc(s.Agree, netip.Addr.Compare)
	if len(d.in.Unresolved) == 0 {
		// A node that cannot name its voters has no list to compare.
		s.OtherLists = d.otherLists()
	}
	for _, b := range sortedKeys(d.state.Own) {
		if d.state.Own[b].State == OwnPending {
			s.Pending = append(s.Pending, PendingClaim{Block: b, Grants: d.grantsTo(b, d.self())})
		}
	}
	s.Conflicts = d.identityConflicts()
	for _, b := range sortedKeys(d.state.Own) {
		o := d.state.Own[b]
		if other, ok := d.confirmedBy(b); ok && o.State != OwnPending {
			s.Conflicts = append(s.Conflicts, fmt.Sprintf("block %s: this node and %s both announce it confirmed; this node hands out no more addresses from it, and the %d pods that hold one must be recreated",
				b, other.Addr, o.Used))
		}
	}
	for _, b := range sortedKeys(d.state.Remote) {
		r := d.state.Remote[b]
		if other, ok := d.confirmedBy(b); ok && other != r.Owner && d.current(r.Owner) {
			s.Conflicts = append(s.Conflicts, fmt.Sprintf("block %s: remembered as %s's, but %s announces it confirmed", b, r.Owner.Addr, other.Addr))
		}
	}
	why := s.CanClaim()
	for _, p := range d.in.Pools {
		if !d.in.Need[p.CIDR] || d.pendingIn(p.CIDR) || d.claimed[p.CIDR] {
			continue
		}
		switch _, ok := d.free(p); {
		case why != nil:
			s.Blocked[p.CIDR] = why.Error()
		case !ok:
			s.Blocked[p.CIDR] = fmt.Sprintf("pool %s exhausted: all %d blocks of /%d are owned or claimed", p.CIDR, p.NumBlocks(), p.BlockSize)
		}
	}
	return s
}

func sortedAddrs[V any](m map[netip.Addr]V) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// unsettled is Status.Unsettled, from what this node can see: votes for
// confirmed owners are not announced (announce), so a voter answers only
// for its own. The operator's check is every node's, with the same counts
// of confirmed blocks and nodes (docs/ipam.md, step 2).
func (d *decider) unsettled(s Status) string {
	switch {
	case len(s.OtherLists) > 0:
		return "the cluster shows another voter list: " + s.ListsDisagree()
	case len(s.Unresolved) > 0:
		return "voters not named yet: " + strings.Join(s.Unresolved, "; ")
	case len(s.Missing) > 0:
		return fmt.Sprintf("no record under this list from voter %s", addrList(s.Missing))
	}
	var first string
	lacking := 0
	for _, b := range sortedKeys(d.claims) {
		for _, n := range sortedNodes(d.claims[b]) {
			switch d.claims[b][n].state {
			case Pending:
				return fmt.Sprintf("%s's claim of %s is pending", n.Addr, b)
			case Confirmed:
				if d.isVoter && d.state.Grants[b] != n {
					if lacking == 0 {
						first = fmt.Sprintf("this voter holds no vote for %s, confirmed by %s", b, n.Addr)
					}
					lacking++
				}
			}
		}
	}
	if lacking > 1 {
		return fmt.Sprintf("%s (%d confirmed blocks lack its vote)", first, lacking)
	}
	return first
}

// viewOf is Status.Confirmed and Status.View: the confirmed blocks with
// their owners and the incarnations of the nodes under this list, hashed
// (FNV-1a) in order.
func (d *decider) viewOf(s Status) (confirmed int, view uint32) {
	h := fnv.New32a()
	var buf []byte
	for _, b := range sortedKeys(d.claims) {
		for _, n := range sortedNodes(d.claims[b]) {
			if d.claims[b][n].state == Confirmed {
				confirmed++
				buf = b.Addr().AppendTo(buf[:0])
				buf = append(buf, byte(b.Bits()))
				buf = binary.BigEndian.AppendUint32(n.Addr.AppendTo(buf), n.Inc)
				h.Write(buf)
			}
		}
	}
	h.Write([]byte{0})
	for _, a := range s.Agree {
		inc := d.self().Inc
		if a != d.self().Addr {
			inc = d.records[a].Node.Inc
		}
		buf = binary.BigEndian.AppendUint32(a.AppendTo(buf[:0]), inc)
		h.Write(buf)
	}
	return confirmed, h.Sum32()
}

func sortedNodes[V any](m map[Node]V) []Node {
	out := make([]Node, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	slices.SortFunc(out, cmpNode)
	return out
}
