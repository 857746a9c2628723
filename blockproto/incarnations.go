package blockproto

import (
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
	// This incarnation runs: any other of its address is an earlier one.
	older := func(n Node) {
		if n.IsValid() && n.Addr == self.Addr && n.Inc != self.Inc && !gone(n) {
			c.Supersede = append(c.Supersede, n)
		}
	}
	for _, r := range d.in.Table.Records {
		older(r.Node)
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
			if n := (Node{r.Node.Addr, inc}); n != r.Node && !gone(n) {
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
