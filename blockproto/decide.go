package blockproto

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Input is everything one decision is made from.
type Input struct {
	State  State
	Table  Table
	Voters []netip.Addr // bgp.voters, as configured
	Pools  []Pool
	// Need are the pools for which this node wants a new block now (an ADD
	// waits, or free addresses run low).
	Need map[netip.Prefix]bool
	// Name seeds where the claim search starts (Offset).
	Name string
	// Unreachable are voters the caller knows no live session leads to
	// now (their announcements, if still in the table, are stale copies a
	// peer keeps over a graceful restart). They do not count as reached,
	// so a cut-off node says so at once instead of waiting for votes.
	Unreachable map[netip.Addr]bool
	// Addr6 is this node's IPv6 address, announced in its record for the
	// other nodes to route its IPv6 blocks through (Record.Addr6).
	Addr6 netip.Addr
	// IPv6Only: this node has no IPv4 address (Record.IPv6Only), so its
	// identity is a configured router ID, not an address of its own
	// (bgp.routerID): another incarnation of that identity is an earlier
	// one of this node only if it announced this node's IPv6 address
	// (Addr6). Any other is another node given the same router ID: it is
	// not superseded, and the status names it as a conflict
	// (incarnations.go).
	IPv6Only bool
	// Unresolved are the voters of bgp.voters the caller could not name
	// yet, each with why: a voter written as an IPv6 address is known in
	// the protocol by its identity, which the caller learns from that
	// voter's own record (docs/design.md, "IPv6-only nodes"). Voters then
	// holds the others only, and while any is unresolved this node claims
	// nothing, casts no new vote and confirms nothing: fail closed.
	Unresolved []string
	// VoterAddr6 maps the identity of each voter configured by its IPv6
	// address to that address. Such a voter's votes count only while the
	// record of its current incarnation announces that address: a node
	// given the same router ID elsewhere never votes in its place.
	VoterAddr6 map[netip.Addr]netip.Addr
}

// Decision is what Decide asks for: the changes to persist, then the
// complete set of announcements to make, and what `reef status` shows.
type Decision struct {
	Changes
	Announce Table
	Status   Status
	// State is Input.State with Changes applied.
	State State
}

// maxRounds bounds the rounds of one decision. Each round only adds facts
// (what was learned, then a claim, then this node's own vote for it, then
// its confirmation); the loop ends at the first round that adds none.
const maxRounds = 8

// Decide makes one decision. It is a pure function: the same input gives
// the same decision, whatever the order of the table.
func Decide(in Input) Decision {
	voters := Voters(in.Voters)
	d := decider{in: in, state: in.State.Clone(), voters: voters, hash: VoterHash(voters), maj: Majority(len(voters)),
		claimed: map[netip.Prefix]bool{}}
	for _, v := range voters {
		if v == in.State.Self.Addr {
			d.isVoter = true
		}
	}
	// The only voter of a list has no other vote to be counted against:
	// restricted, it could never confirm a block.
	d.restricted = in.State.Restricted && d.isVoter && len(voters) > 1
	var all Changes
	for range maxRounds {
		d.view()
		c := d.round()
		if c.Empty() {
			break
		}
		all.add(c)
		d.state = Apply(d.state, c)
	}
	d.view()
	st := d.status()
	// Only for reef status: not in status(), which every claim asks.
	st.Unsettled = d.unsettled(st)
	st.Confirmed, st.View = d.viewOf(st)
	return Decision{Changes: all, Announce: d.announce(), Status: st, State: d.state}
}

type claimInfo struct {
	state ClaimState
	hash  uint32
}

type decider struct {
	in      Input
	state   State
	voters  []netip.Addr
	hash    uint32
	maj     int
	isVoter bool
	// restricted: State.Restricted in effect (a voter among others).
	restricted bool

	// The view of one round, from the table and the state.
	gone    string
	claims  map[netip.Prefix]map[Node]claimInfo    // current nodes' claims, own included
	grants  map[netip.Prefix]map[netip.Addr][]Node // votes that count here: voter -> claimants (copies may differ)
	granted map[netip.Prefix]bool                  // any grant announced at all, whatever list
	records map[netip.Addr]Record                  // current records of other nodes
	toSelf  map[netip.Prefix]bool                  // some copy of a grant to this incarnation is announced
	others  map[uint32]*OtherList                  // other voter lists the table shows, by hash
	// ambiguous are addresses with no known incarnation and several in the
	// table that none names: none of them counts until they are ordered.
	ambiguous map[netip.Addr]bool
	// seen are the incarnations of other addresses this node cannot order
	// (Seen): the known one and every other in the table that is not
	// superseded, when there are two or more.
	seen    []Seen
	claimed map[netip.Prefix]bool // pools claimed in during this decision
}

func (d *decider) self() Node { return d.state.Self }

// current reports whether announcements of n count: not forgotten, not
// superseded, and the newest incarnation known of its address.
func (d *decider) current(n Node) bool {
	if !n.IsValid() || d.state.Forgotten[n] || d.state.Superseded[n] {
		return false
	}
	if n.Addr == d.self().Addr {
		return n == d.self()
	}
	k, ok := d.state.Known[n.Addr]
	if !ok {
		return !d.ambiguous[n.Addr]
	}
	return k.Inc == n.Inc
}

// boundVoter reports whether the votes of identity v may count as those
// of the voter configured for it. A voter written as its IPv6 address
// counts only while the record of its current incarnation announces that
// address (Input.VoterAddr6); one written as an IPv4 address is the node
// that has it, never an IPv6-only node given that value as its router ID
// (Record.IPv6Only). Either way the votes counted for a voter are those
// of one node (blocks.pml, ADDR_BOUND).
func (d *decider) boundVoter(v netip.Addr) bool {
	r := d.records[v]
	a6, ok := d.in.VoterAddr6[v]
	if !ok {
		return !r.IPv6Only
	}
	return r.Node.IsValid() && r.Addr6 == a6
}

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

func addNode(list *[]Node, n Node) {
	if !slices.Contains(*list, n) {
		*list = append(*list, n)
	}
}

func sortedKeys[V any](m map[netip.Prefix]V) []netip.Prefix {
	keys := make([]netip.Prefix, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmpPrefix)
	return keys
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
