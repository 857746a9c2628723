package blockproto

import (
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
