package blockproto

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Reading the input: what a round of the decider starts from (who is gone,
// which incarnations count, the current records, claims and votes).

// view reads the input into the decider's maps, in order, for a round:
// whether this node is gone, the incarnations of one address whose order
// is unknown, the current records, the claims and the votes.
func (d *decider) view() {
	d.viewGone()
	d.viewSeen()
	d.viewRecords()
	d.viewClaims()
	d.viewGrants()
}

// viewGone says why this node no longer counts, if it was forgotten or
// superseded.
func (d *decider) viewGone() {
	self := d.self()
	d.gone = ""
	switch {
	case d.state.Forgotten[self]:
		d.gone = fmt.Sprintf("this node (%s) was forgotten by the cluster (`reef node forget`): stop reef, move its state dir away and start it again to join as a new node", self)
	case d.state.Superseded[self]:
		d.gone = fmt.Sprintf("this node (%s) was superseded by a newer incarnation of %s: another reef with this node's address started from an empty state dir", self, self.Addr)
	}
}

// viewSeen collects, per address, the incarnations that nothing orders
// (d.seen), and the addresses of which none is known (d.ambiguous).
func (d *decider) viewSeen() {
	d.ambiguous, d.seen = nil, nil
	for a, recs := range d.unordered(func(n Node) bool { return d.state.Forgotten[n] || d.state.Superseded[n] }) {
		group := make([]Seen, 0, len(recs)+1)
		for _, r := range recs {
			group = append(group, Seen{r.Node, r.Addr6})
		}
		k, ok := d.state.Known[a]
		if kn := (Node{a, k.Inc}); ok && !d.state.Forgotten[kn] && !d.state.Superseded[kn] && !slices.ContainsFunc(group, func(x Seen) bool { return x.Node == kn }) {
			group = append(group, Seen{kn, k.Addr6})
		}
		if len(group) < 2 {
			continue
		}
		if !ok {
			if d.ambiguous == nil {
				d.ambiguous = map[netip.Addr]bool{}
			}
			d.ambiguous[a] = true
		}
		d.seen = append(d.seen, group...)
	}
}

// viewRecords keeps the current records of the other nodes, and notes the
// voter lists they name that are not this node's.
func (d *decider) viewRecords() {
	self := d.self()
	// Sized up front: the maps are made anew at every step, and growing
	// them was most of the view's cost with a few hundred paths.
	d.records = make(map[netip.Addr]Record, len(d.in.Table.Records))
	d.others = nil
	for _, r := range d.in.Table.Records {
		if r.Node.Addr != self.Addr && d.current(r.Node) {
			d.records[r.Node.Addr] = r
			if r.VoterHash != d.hash && r.VoterHash != UnknownList {
				d.otherList(r.VoterHash, r.Node.Addr).Voters = Voters(r.Voters)
			}
		}
	}
}

// viewClaims collects the claims of every block: the current ones of the
// other nodes from the table, this node's own from its state (none once
// it is gone).
func (d *decider) viewClaims() {
	self := d.self()
	d.claims = make(map[netip.Prefix]map[Node]claimInfo, len(d.in.Table.Claims)+len(d.state.Own)+len(d.state.Released))
	for _, c := range d.in.Table.Claims {
		if c.Owner.Addr != self.Addr && c.State.Valid() && d.current(c.Owner) {
			d.putClaim(c.Block, c.Owner, claimInfo{c.State, c.VoterHash})
			if c.VoterHash != d.hash {
				d.otherList(c.VoterHash, c.Owner.Addr)
			}
		}
	}
	if d.gone != "" {
		return
	}
	for b, o := range d.state.Own {
		st := Pending
		if o.State != OwnPending {
			st = Confirmed
		}
		d.putClaim(b, self, claimInfo{st, d.hash})
	}
	for b := range d.state.Released {
		d.putClaim(b, self, claimInfo{Released, d.hash})
	}
}

// putClaim notes n's claim of b. Of two copies, the later state wins:
// pending is followed by confirmed or released, never the other way.
func (d *decider) putClaim(b netip.Prefix, n Node, ci claimInfo) {
	m := d.claims[b]
	if m == nil {
		m = map[Node]claimInfo{}
		d.claims[b] = m
	}
	if old, ok := m[n]; !ok || ci.state > old.state {
		m[n] = ci
	}
}

// viewGrants collects the votes: which blocks have any (d.granted), which
// are for this node (d.toSelf), and those that count, of current voters
// of this node's list bound to their configured address (d.grants), with
// this node's own from its state while it is a voter and not gone.
func (d *decider) viewGrants() {
	self := d.self()
	d.grants = make(map[netip.Prefix]map[netip.Addr][]Node, len(d.in.Table.Grants)+len(d.state.Grants))
	d.granted = make(map[netip.Prefix]bool, len(d.in.Table.Grants)+len(d.state.Grants))
	d.toSelf = map[netip.Prefix]bool{}
	for _, g := range d.in.Table.Grants {
		if g.Voter.Addr == self.Addr {
			continue // our own votes come from the state
		}
		d.granted[g.Block] = true
		if g.To == self {
			d.toSelf[g.Block] = true
		}
		if !d.current(g.Voter) || !d.boundVoter(g.Voter.Addr) {
			continue
		}
		if g.VoterHash != d.hash {
			d.otherList(g.VoterHash, g.Voter.Addr)
		} else if slices.Contains(d.voters, g.Voter.Addr) {
			d.countVote(g.Block, g.Voter.Addr, g.To)
		}
	}
	if d.isVoter && d.gone == "" {
		for b, to := range d.state.Grants {
			d.granted[b] = true
			d.countVote(b, self.Addr, to)
		}
	}
}

// countVote notes voter v's vote for to's claim of b, once.
func (d *decider) countVote(b netip.Prefix, v netip.Addr, to Node) {
	m := d.grants[b]
	if m == nil {
		m = map[netip.Addr][]Node{}
		d.grants[b] = m
	}
	if !slices.Contains(m[v], to) {
		m[v] = append(m[v], to)
	}
}

// otherList notes that node announces something under the voter list
// of hash h, which is not this node's.
func (d *decider) otherList(h uint32, node netip.Addr) *OtherList {
	if d.others == nil {
		d.others = map[uint32]*OtherList{}
	}
	o := d.others[h]
	if o == nil {
		o = &OtherList{Hash: h}
		d.others[h] = o
	}
	if !slices.Contains(o.Nodes, node) {
		o.Nodes = append(o.Nodes, node)
	}
	return o
}

// otherLists are the other voter lists of the view, in a stable order.
func (d *decider) otherLists() []OtherList {
	var out []OtherList
	for _, o := range d.others {
		c := *o
		c.Nodes = slices.Clone(o.Nodes)
		slices.SortFunc(c.Nodes, netip.Addr.Compare)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b OtherList) int { return cmp.Or(a.Nodes[0].Compare(b.Nodes[0]), cmp.Compare(a.Hash, b.Hash)) })
	return out
}
