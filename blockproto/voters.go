package blockproto

import (
	"fmt"
	"net/netip"
	"slices"
)

// VoterList is the voter list a node's store last ran under, as the store
// keeps it: the list, and whether the node ran alone (no peers, its only
// voter itself) rather than with a configured bgp.voters.
type VoterList struct {
	Voters []netip.Addr
	Alone  bool
}

// Holds reports whether s holds anything that was decided under a voter
// list: a claim of its own (pending, confirmed or lost) or a vote.
func (s State) Holds() bool { return len(s.Own) > 0 || len(s.Grants) > 0 }

// PendingBlocks are this node's pending claims, in block order: what a
// change of voter list gives up (a claim is made, voted for, counted and
// confirmed under one list).
func (s State) PendingBlocks() []netip.Prefix {
	var out []netip.Prefix
	for _, b := range sortedKeys(s.Own) {
		if s.Own[b].State == OwnPending {
			out = append(out, b)
		}
	}
	return out
}

// ListChangeError is why a node may not run under a new voter list with
// the state its store holds.
type ListChangeError struct {
	From, To VoterList
	Why      string
}

func (e *ListChangeError) Error() string { return e.Why }

// CheckListChange says whether a node whose store last ran under from may
// run under to. Safety of a change rests on the majorities of the old and
// the new list sharing a voter (docs/ipam.md, "Changing the voter list"):
//
//   - the same list, or nothing held under the old one (no claim, no vote),
//     is always fine: a node that decided nothing carries nothing over;
//   - one voter added or removed is the documented step;
//   - a node that ran alone confirmed its blocks with its own vote only:
//     no list of a cluster shares a majority with that, so its blocks
//     cannot be carried into one (two lone nodes that each grew to a list
//     of both would each count their own blocks);
//   - two or more voters changed at once have majorities that need not
//     meet.
//
// from.Voters empty (a store made before stores kept their list) passes.
func CheckListChange(from, to VoterList, holds bool) error {
	f, t := Voters(from.Voters), Voters(to.Voters)
	if len(f) == 0 || slices.Equal(f, t) || !holds {
		return nil
	}
	if from.Alone {
		return &ListChangeError{From: from, To: to, Why: fmt.Sprintf(
			"this node ran alone (no bgp.peers, its only voter itself) and holds blocks it confirmed by its own vote; "+
				"they cannot join the cluster of voters %s, whose blocks may be the same ones. Drain the node, stop reef, "+
				"move its state dir away and start it again: it then joins as a new node (docs/ipam.md, \"Starting a cluster\")",
			addrList(t))}
	}
	if n := changed(f, t); n != 1 {
		return &ListChangeError{From: from, To: to, Why: fmt.Sprintf(
			"bgp.voters changes from %s to %s, %d voters at once; this node holds claims or votes made under the old list, "+
				"and two lists that differ in more than one voter may have majorities with no voter in common. "+
				"Change one voter at a time on every node, waiting between steps (docs/ipam.md, \"Changing the voter list\"): "+
				"set bgp.voters back to %s, or to the first step %s",
			addrList(f), addrList(t), n, addrList(f), addrList(firstStep(f, t)))}
	}
	return nil
}

// changed is the number of voters in exactly one of a and b (both
// normalised).
func changed(a, b []netip.Addr) int {
	n := 0
	for _, x := range a {
		if !slices.Contains(b, x) {
			n++
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			n++
		}
	}
	return n
}

// firstStep is the list one voter away from f on the way to t: the first
// voter of t that f lacks added, or else the first voter of f that t lacks
// removed.
func firstStep(f, t []netip.Addr) []netip.Addr {
	for _, x := range t {
		if !slices.Contains(f, x) {
			return Voters(append(slices.Clone(f), x))
		}
	}
	for i, x := range f {
		if !slices.Contains(t, x) {
			return slices.Delete(slices.Clone(f), i, i+1)
		}
	}
	return f
}
