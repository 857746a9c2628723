package blockproto

import (
	"net/netip"
	"slices"
)

// announce is everything this node announces: its record, its claims
// (released ones only while a voter still shows a vote for them), the votes
// someone still needs to see, and the forgets it knows.
func (d *decider) announce() Table {
	var t Table
	for n := range d.state.Forgotten {
		t.Forgets = append(t.Forgets, Forget{Node: n})
	}
	if d.gone != "" {
		t.Sort()
		return t
	}
	self := d.self()
	var preds []uint32
	for n := range d.state.Superseded {
		if n.Addr == self.Addr && n.Inc != self.Inc {
			preds = append(preds, n.Inc)
		}
	}
	slices.Sort(preds)
	rec := Record{Node: self, Born: d.state.Born, VoterHash: d.hash, Voters: d.voters, Predecessors: preds, Addr6: d.in.Addr6, IPv6Only: d.in.IPv6Only}
	if len(d.in.Unresolved) > 0 {
		// Its list is not known yet: the record says so (UnknownList)
		// rather than show the voters it could name as a list of its own.
		rec.VoterHash, rec.Voters = UnknownList, nil
	}
	t.Records = []Record{rec}
	t.Seen = append(t.Seen, d.seen...)
	for b, o := range d.state.Own {
		st := Pending
		if o.State != OwnPending {
			st = Confirmed
		}
		t.Claims = append(t.Claims, Claim{Block: b, Owner: self, State: st, VoterHash: d.hash})
	}
	for b := range d.state.Released {
		if d.toSelf[b] {
			t.Claims = append(t.Claims, Claim{Block: b, Owner: self, State: Released, VoterHash: d.hash})
		}
	}
	if d.isVoter {
		for b, to := range d.state.Grants {
			if d.voteNeeded(b, to) {
				t.Grants = append(t.Grants, Grant{Block: b, Voter: self, To: to, VoterHash: d.hash})
			}
		}
	}
	t.Sort()
	return t
}

// voteNeeded reports whether a vote must be on the wire: while its claimant
// has not announced the claim confirmed (it is counting), and while anyone
// else claims the block (they must learn it is taken). In a quiet cluster
// no vote is announced: the confirmed claims say it all.
func (d *decider) voteNeeded(b netip.Prefix, to Node) bool {
	if d.claims[b][to].state != Confirmed {
		return true
	}
	for n, ci := range d.claims[b] {
		if n != to && ci.state == Pending {
			return true
		}
	}
	return false
}
