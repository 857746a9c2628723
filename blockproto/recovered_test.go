package blockproto

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recovered is node A's input after `reef store recover`: blk0 confirmed,
// the rest of its state lost.
func recovered(t Table) Input {
	in := input(nodeA, three, t)
	in.State.Recovered = true
	in.State.Own[blk0] = OwnBlock{Block: blk0, Pool: pool.CIDR, State: OwnConfirmed, Used: 1}
	return in
}

func TestRecoveredClaimsNothing(t *testing.T) {
	tbl := Table{Records: []Record{record(nodeB, three...), record(nodeC, three...)}}
	d := Decide(need(recovered(tbl)))
	if len(d.Claim) != 0 {
		t.Fatalf("a recovered store claimed %+v", d.Claim)
	}
	if got := d.Status.Blocked[pool.CIDR]; got != RecoveredReason {
		t.Fatalf("blocked = %q, want the recovered reason", got)
	}
	// It keeps its block on the wire.
	if diff := cmp.Diff([]Claim{{Block: blk0, Owner: nodeA, State: Confirmed, VoterHash: VoterHash(three)}}, d.Announce.Claims, netipCmp); diff != "" {
		t.Fatalf("claims (-want +got):\n%s", diff)
	}
}

func TestRecoveredVotesOnlyForConfirmedOwners(t *testing.T) {
	h := VoterHash(three)
	tbl := Table{
		Records: []Record{record(nodeB, three...), record(nodeC, three...)},
		Claims: []Claim{
			{Block: blk1, Owner: nodeB, State: Pending, VoterHash: h},
			{Block: netip.MustParsePrefix("10.244.0.128/26"), Owner: nodeC, State: Confirmed, VoterHash: h},
		},
	}
	d := Decide(recovered(tbl))
	// Its own confirmed block and C's, not B's pending claim.
	want := []Grant{{Block: blk0, Voter: nodeA, To: nodeA, VoterHash: h},
		{Block: netip.MustParsePrefix("10.244.0.128/26"), Voter: nodeA, To: nodeC, VoterHash: h}}
	if diff := cmp.Diff(want, d.Grant, netipCmp); diff != "" {
		t.Fatalf("grants (-want +got):\n%s", diff)
	}
	// The same table without the recovery: A votes for B's pending claim.
	in := recovered(tbl)
	in.State.Recovered = false
	if d := Decide(in); len(d.Grant) != 3 {
		t.Fatalf("a sound voter cast %+v, want a vote for both claims", d.Grant)
	}
}

func TestRecoveredKeepsLostClaims(t *testing.T) {
	h := VoterHash(three)
	// B still holds a vote for a claim of A's that went with the file: A
	// cannot tell whether it was pending or confirmed (and remembered by
	// the others as A's), so it releases nothing and claims nothing.
	tbl := Table{
		Records: []Record{record(nodeB, three...), record(nodeC, three...)},
		Grants:  []Grant{{Block: blk1, Voter: nodeB, To: nodeA, VoterHash: h}},
	}
	d := Decide(need(recovered(tbl)))
	if len(d.Release) != 0 || len(d.Claim) != 0 || len(d.Confirm) != 0 {
		t.Fatalf("a recovered store changed its claims: %+v", d.Changes)
	}
}
