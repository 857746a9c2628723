package blockproto

import (
	"net/netip"
	"slices"
)

// One round of the decider: the voter's part, the claimant's, keeping
// the other nodes' confirmed blocks, and claiming a new block.

func (d *decider) round() Changes {
	var c Changes
	d.learn(&c)
	if !c.Empty() {
		return c // forgets and incarnations first: they change what counts
	}
	if d.isVoter && d.gone == "" {
		d.vote(&c)
	}
	d.claimant(&c)
	d.remote(&c)
	if c.Empty() && d.gone == "" {
		d.claimNew(&c)
	}
	return c
}

// vote is the voter's part: revoke votes whose claimant gave up or is gone,
// and cast the vote of every block that has none.
func (d *decider) vote(c *Changes) {
	blocks := map[netip.Prefix]bool{}
	for b := range d.state.Grants {
		blocks[b] = true
	}
	for b := range d.claims {
		blocks[b] = true
	}
	for _, b := range sortedKeys(blocks) {
		if g, ok := d.state.Grants[b]; ok {
			if d.current(g) && d.claims[b][g].state != Released {
				continue // the vote stands
			}
			c.Revoke = append(c.Revoke, b)
		}
		if len(d.in.Unresolved) > 0 {
			continue // not knowing its list, it cannot say under which one it votes
		}
		if to, ok := d.candidate(b); ok {
			c.Grant = append(c.Grant, Grant{Block: b, Voter: d.self(), To: to, VoterHash: d.hash})
		}
	}
}

// candidate is whom this voter grants block b, if it has no vote for it:
// the block's confirmed owner if one is known (a voter added later
// catches up), and never a pending claim then; otherwise the pending
// claim, under this voter list, of the lowest claimant address. A voter
// whose votes may have been lost (Recovered, Restricted) grants only a
// confirmed owner.
func (d *decider) candidate(b netip.Prefix) (Node, bool) {
	if o, ok := d.state.Own[b]; ok && o.State != OwnPending {
		return d.self(), true
	}
	if r, ok := d.state.Remote[b]; ok && d.current(r.Owner) {
		return r.Owner, true
	}
	if d.state.Recovered || d.restricted {
		// Its vote for a pending claim may have been lost with the file
		// or the state dir: only a confirmed owner, which a majority
		// granted, is safe.
		if n, ok := d.confirmedBy(b); ok && d.claims[b][n].hash == d.hash {
			return n, true
		}
		return Node{}, false
	}
	var best Node
	confirmed := false
	for n, ci := range d.claims[b] {
		switch {
		case ci.state == Confirmed:
			if !confirmed || cmpNode(n, best) < 0 {
				best, confirmed = n, true
			}
		case confirmed || ci.state != Pending || ci.hash != d.hash:
		case !best.IsValid() || cmpNode(n, best) < 0:
			best = n
		}
	}
	if confirmed && d.claims[b][best].hash != d.hash {
		return Node{}, false
	}
	return best, best.IsValid()
}

// claimant is the claimant's part for its own blocks.
func (d *decider) claimant(c *Changes) {
	self := d.self()
	for _, b := range sortedKeys(d.state.Own) {
		o := d.state.Own[b]
		_, confirmedElsewhere := d.confirmedBy(b)
		if d.gone != "" {
			if o.State == OwnPending {
				c.Release = append(c.Release, b)
			} else if o.State == OwnConfirmed {
				c.Lose = append(c.Lose, b)
			}
			continue
		}
		switch o.State {
		case OwnPending:
			if confirmedElsewhere {
				c.Release = append(c.Release, b)
				continue
			}
			if _, ok := d.state.Remote[b]; ok {
				c.Release = append(c.Release, b)
				continue
			}
			if d.beaten(b) {
				c.Release = append(c.Release, b)
				continue
			}
			if len(d.grantsTo(b, self)) >= d.maj && len(d.in.Unresolved) == 0 {
				c.Confirm = append(c.Confirm, b)
				d.claimed[o.Pool] = true // the need this decision was asked for is met
			}
		case OwnConfirmed:
			if confirmedElsewhere {
				c.Lose = append(c.Lose, b)
			}
		}
	}
}

// confirmedBy returns another current node that announces b confirmed.
func (d *decider) confirmedBy(b netip.Prefix) (Node, bool) {
	var best Node
	for n, ci := range d.claims[b] {
		if n != d.self() && ci.state == Confirmed && (!best.IsValid() || cmpNode(n, best) < 0) {
			best = n
		}
	}
	return best, best.IsValid()
}

// beaten reports whether a voter voted for b for another claimant that
// this claim cannot outlast: a lower claimant address with a claim that is
// not released (the claim split votes converge on), or any claimant whose
// claim is not pending as far as this node can see: confirmed, or not seen
// at all, as when the block belongs to a node that is down and that this
// node has never heard of (the voters remember it for it).
func (d *decider) beaten(b netip.Prefix) bool {
	self := d.self()
	for _, tos := range d.grants[b] {
		for _, to := range tos {
			if to == self || !d.current(to) {
				continue
			}
			switch st := d.claims[b][to].state; {
			case st == Released:
			case st != Pending:
				return true
			case to.Addr.Less(self.Addr):
				return true
			}
		}
	}
	return false
}

// grantsTo lists the voters whose vote for b counts for n. Any copy
// counts: a voter revokes a vote for n only after n released the claim,
// and n never claims a block again once it released it.
func (d *decider) grantsTo(b netip.Prefix, n Node) []netip.Addr {
	var out []netip.Addr
	for v, tos := range d.grants[b] {
		if slices.Contains(tos, n) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// remote keeps the other nodes' confirmed blocks remembered.
func (d *decider) remote(c *Changes) {
	for _, b := range sortedKeys(d.claims) {
		if _, own := d.state.Own[b]; own {
			continue
		}
		owner, ok := d.confirmedBy(b)
		if !ok {
			continue
		}
		r, known := d.state.Remote[b]
		if known && (r.Owner == owner || d.current(r.Owner)) {
			continue // remembered already, or a conflict (status says so)
		}
		c.Remember = append(c.Remember, RemoteBlock{Block: b, Pool: d.poolOf(b), Owner: owner})
	}
	for _, b := range sortedKeys(d.state.Remote) {
		r := d.state.Remote[b]
		if d.current(r.Owner) || slices.ContainsFunc(c.Remember, func(x RemoteBlock) bool { return x.Block == b }) {
			continue
		}
		c.Unremember = append(c.Unremember, b)
	}
}

func (d *decider) poolOf(b netip.Prefix) netip.Prefix {
	for _, p := range d.in.Pools {
		if p.CIDR.Contains(b.Addr()) {
			return p.CIDR
		}
	}
	return netip.Prefix{}
}

// claimNew makes a claim for every pool that needs one and has none
// pending, when the node may claim at all.
func (d *decider) claimNew(c *Changes) {
	if d.claimBlocked() != nil {
		return
	}
	for _, p := range d.in.Pools {
		if !d.in.Need[p.CIDR] || d.pendingIn(p.CIDR) || d.claimed[p.CIDR] {
			continue
		}
		if b, ok := d.free(p); ok {
			c.Claim = append(c.Claim, OwnBlock{Block: b, Pool: p.CIDR, State: OwnPending})
			d.claimed[p.CIDR] = true // Need asks for one block per decision
		}
	}
}

func (d *decider) pendingIn(pool netip.Prefix) bool {
	for _, o := range d.state.Own {
		if o.Pool == pool && o.State == OwnPending {
			return true
		}
	}
	return false
}

// free returns the first block of p, from this node's offset on, that
// nobody claims, owns or votes for, as far as this node can tell.
func (d *decider) free(p Pool) (netip.Prefix, bool) {
	n := p.NumBlocks()
	off := Offset(d.in.Name, n)
	for i := range n {
		b := p.Block((off + i) % n)
		if _, ok := d.state.Own[b]; ok {
			continue
		}
		if d.state.Released[b] || d.granted[b] {
			continue
		}
		if _, ok := d.state.Remote[b]; ok {
			continue
		}
		if len(d.claims[b]) > 0 {
			continue
		}
		return b, true
	}
	return netip.Prefix{}, false
}
