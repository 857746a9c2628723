package blockproto

import (
	"fmt"
	"net/netip"
	"slices"
)

// How a decision learns forgets and orders incarnations (docs/ipam.md,
// "Restarts and wiped state"): never by a clock.

// learn records forgets, and orders the incarnations of each address by
// what they say of each other, never by a clock. An incarnation names as
// predecessors the earlier incarnations of its address it learned of while
// it ran (this node: every other incarnation of its own address it sees,
// in a record or a Seen), so a named predecessor is older, and it is
// superseded for good. Of the incarnations of an address that none names,
// the known one stays current (the others count for nothing until they
// are ordered: Seen tells them of each other); the first one seen of an
// address becomes known when it is the only one.
func (d *decider) learn(c *Changes) {
	self := d.self()
	for _, f := range d.in.Table.Forgets {
		if f.Node.IsValid() && !d.state.Forgotten[f.Node] && !slices.Contains(c.Forget, f.Node) {
			c.Forget = append(c.Forget, f.Node)
		}
	}
	gone := func(n Node) bool {
		return d.state.Forgotten[n] || d.state.Superseded[n] || slices.Contains(c.Supersede, n)
	}
	// This incarnation runs: any other of its address is an earlier one,
	// unless its record says it is at another IPv6 address: then it is
	// another node with this identity (two nodes given one bgp.routerID),
	// which no order between the two can settle (elsewhere).
	older := func(n Node) {
		if n.IsValid() && n.Addr == self.Addr && n.Inc != self.Inc && !gone(n) {
			c.Supersede = append(c.Supersede, n)
		}
	}
	for _, r := range d.in.Table.Records {
		if !elsewhere(r.Addr6, d.in.Addr6) {
			older(r.Node)
		}
	}
	for _, x := range d.in.Table.Seen {
		older(x.Node)
	}
	for _, r := range d.in.Table.Records {
		if !r.Node.IsValid() || d.state.Forgotten[r.Node] {
			continue
		}
		for _, inc := range r.Predecessors {
			// A predecessor of this node itself: a newer incarnation of
			// this address runs somewhere, and this one is superseded.
			// Not when the two are at different IPv6 addresses: two
			// nodes of one identity, neither of which is the other's
			// successor.
			if n := (Node{r.Node.Addr, inc}); n != r.Node && !gone(n) && !elsewhere(r.Addr6, d.addr6Of(n)) {
				c.Supersede = append(c.Supersede, n)
			}
		}
	}
	for a, recs := range d.unordered(func(n Node) bool { return gone(n) }) {
		k, ok := d.state.Known[a]
		if len(recs) != 1 || (ok && k.Inc == recs[0].Node.Inc) {
			continue
		}
		if !ok || gone(Node{a, k.Inc}) {
			c.Known = append(c.Known, KnownIncarnation{a, Incarnation{recs[0].Node.Inc, recs[0].Born}})
		}
	}
}

// elsewhere reports whether two IPv6 node addresses say two different
// nodes: both known and not equal. An incarnation of the same node keeps
// its address (or has none, on an IPv4 node).
func elsewhere(a, b netip.Addr) bool { return a.IsValid() && b.IsValid() && a != b }

// addr6Of is the IPv6 address incarnation n announces in its record, or
// this node's own for itself; invalid when unknown.
func (d *decider) addr6Of(n Node) netip.Addr {
	if n == d.self() {
		return d.in.Addr6
	}
	for _, r := range d.in.Table.Records {
		if r.Node == n && r.Addr6.IsValid() {
			return r.Addr6
		}
	}
	return netip.Addr{}
}

// identityConflicts says which identities two nodes at different IPv6
// addresses announce (two nodes given one bgp.routerID), this node's own
// included: neither supersedes the other, and the operator must give one
// of them another identity.
func (d *decider) identityConflicts() []string {
	at := map[netip.Addr][]netip.Addr{}
	add := func(id, a6 netip.Addr) {
		if a6.IsValid() && !slices.Contains(at[id], a6) {
			at[id] = append(at[id], a6)
		}
	}
	add(d.self().Addr, d.in.Addr6)
	for _, r := range d.in.Table.Records {
		if r.Node.IsValid() && !d.state.Forgotten[r.Node] {
			add(r.Node.Addr, r.Addr6)
		}
	}
	var out []string
	for _, id := range sortedAddrs(at) {
		if as := at[id]; len(as) > 1 {
			slices.SortFunc(as, netip.Addr.Compare)
			out = append(out, fmt.Sprintf("identity %s is announced by nodes at %s: two nodes with one bgp.routerID; give each node its own (docs/design.md, \"IPv6-only nodes\")", id, addrList(as)))
		}
	}
	return out
}

// unordered maps every other address to the records of its incarnations
// that gone does not rule out, one per incarnation, in incarnation order.
func (d *decider) unordered(gone func(Node) bool) map[netip.Addr][]Record {
	out := map[netip.Addr][]Record{}
	for _, r := range d.in.Table.Records {
		if !r.Node.IsValid() || r.Node.Addr == d.self().Addr || gone(r.Node) {
			continue
		}
		rs := out[r.Node.Addr]
		if !slices.ContainsFunc(rs, func(x Record) bool { return x.Node == r.Node }) {
			rs = append(rs, r)
			slices.SortFunc(rs, func(x, y Record) int { return cmpNode(x.Node, y.Node) })
			out[r.Node.Addr] = rs
		}
	}
	return out
}
