package blockproto

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// restricted is voter A's input with a new store while it is in the list
// (a wiped state dir): State.Restricted.
func restricted(t Table) Input {
	in := input(nodeA, three, t)
	in.State.Restricted = true
	return in
}

func TestRestrictedVotesOnlyForConfirmedOwners(t *testing.T) {
	h := VoterHash(three)
	blk2 := netip.MustParsePrefix("10.244.0.128/26")
	tbl := Table{
		Records: []Record{record(nodeB, three...), record(nodeC, three...)},
		Claims: []Claim{
			{Block: blk1, Owner: nodeB, State: Pending, VoterHash: h},
			{Block: blk2, Owner: nodeC, State: Confirmed, VoterHash: h},
		},
	}
	d := Decide(restricted(tbl))
	want := []Grant{{Block: blk2, Voter: nodeA, To: nodeC, VoterHash: h}}
	if diff := cmp.Diff(want, d.Grant, netipCmp); diff != "" {
		t.Fatalf("grants of a restricted voter (-want +got):\n%s", diff)
	}
	if d.Status.Restricted != RestrictedReason {
		t.Fatalf("status restricted = %q", d.Status.Restricted)
	}
	// A block it remembers as B's, which D claims: granted to B.
	in := restricted(Table{Records: append(tbl.Records, record(nodeD, three...)),
		Claims: []Claim{{Block: blk1, Owner: nodeD, State: Pending, VoterHash: h}}})
	in.State.Remote[blk1] = RemoteBlock{Block: blk1, Pool: pool.CIDR, Owner: nodeB}
	if d := Decide(in); !slices.Equal(d.Grant, []Grant{{Block: blk1, Voter: nodeA, To: nodeB, VoterHash: h}}) {
		t.Fatalf("grants for a remembered owner: %+v", d.Grant)
	}
	// Not restricted: it votes for B's pending claim too.
	in = restricted(tbl)
	in.State.Restricted = false
	if d := Decide(in); len(d.Grant) != 2 || d.Status.Restricted != "" {
		t.Fatalf("a voter with its store cast %+v (restricted %q), want a vote for both claims", d.Grant, d.Status.Restricted)
	}
}

// TestRestrictedClaimsWithoutItsOwnVote: a restricted node claims blocks
// as any node does (unlike a recovered one), but its own pending claim
// gets no vote from itself: the other voters confirm it.
func TestRestrictedClaimsWithoutItsOwnVote(t *testing.T) {
	h := VoterHash(three)
	tbl := Table{Records: []Record{record(nodeB, three...), record(nodeC, three...)}}
	d := Decide(need(restricted(tbl)))
	if len(d.Claim) != 1 || len(d.Grant) != 0 || len(d.Confirm) != 0 {
		t.Fatalf("want one pending claim and no vote of its own, got %+v", d.Changes)
	}
	if err := d.Status.CanClaim(); err != nil || len(d.Status.Blocked) != 0 {
		t.Fatalf("a restricted node may claim: %v, blocked %v", err, d.Status.Blocked)
	}
	b := d.Claim[0].Block
	if diff := cmp.Diff([]PendingClaim{{Block: b}}, d.Status.Pending, netipCmp); diff != "" {
		t.Fatalf("pending (-want +got):\n%s", diff)
	}
	// B's vote alone is one of the two it needs.
	in := restricted(tbl)
	in.State = d.State
	in.Table.Grants = []Grant{{Block: b, Voter: nodeB, To: nodeA, VoterHash: h}}
	if d := Decide(in); len(d.Confirm) != 0 || len(d.Grant) != 0 {
		t.Fatalf("confirmed with one vote of another voter: %+v", d.Changes)
	}
	// B's and C's confirm it; then it grants its own confirmed block.
	in.Table.Grants = append(in.Table.Grants, Grant{Block: b, Voter: nodeC, To: nodeA, VoterHash: h})
	d = Decide(in)
	if !slices.Equal(d.Confirm, []netip.Prefix{b}) {
		t.Fatalf("confirm %v, want %s", d.Confirm, b)
	}
	if !slices.Equal(d.Grant, []Grant{{Block: b, Voter: nodeA, To: nodeA, VoterHash: h}}) {
		t.Fatalf("grants once confirmed: %+v", d.Grant)
	}
}

// TestRestrictedOnlyAsOneOfSeveralVoters: the restriction has no effect on
// a node that is not a voter, nor on the only voter of a list (it could
// never confirm a block).
func TestRestrictedOnlyAsOneOfSeveralVoters(t *testing.T) {
	in := need(input(nodeA, []netip.Addr{addrA}, Table{}))
	in.State.Restricted = true
	if d := Decide(in); len(d.Confirm) != 1 || d.Status.Restricted != "" {
		t.Fatalf("the only voter, restricted: %+v, status %q", d.Changes, d.Status.Restricted)
	}
	bcd := []netip.Addr{addrB, addrC, addrD}
	in = input(nodeA, bcd, Table{Records: []Record{record(nodeB, bcd...), record(nodeC, bcd...), record(nodeD, bcd...)}})
	in.State.Restricted = true
	if d := Decide(in); d.Status.Restricted != "" {
		t.Fatalf("a node out of the list shows the restriction: %q", d.Status.Restricted)
	}
}
