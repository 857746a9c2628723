package blockproto

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
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
	// unless its identity is a router ID and the other did not announce
	// this node's IPv6 address (sameNode).
	older := func(n Node, addr6 netip.Addr) {
		if n.IsValid() && n.Addr == self.Addr && n.Inc != self.Inc && !gone(n) && d.sameNode(addr6) {
			c.Supersede = append(c.Supersede, n)
		}
	}
	for _, r := range d.in.Table.Records {
		older(r.Node, r.Addr6)
	}
	for _, x := range d.in.Table.Seen {
		older(x.Node, x.Addr6)
	}
	for _, r := range d.in.Table.Records {
		if !r.Node.IsValid() || d.state.Forgotten[r.Node] || (r.Node.Addr == self.Addr && !d.sameNode(r.Addr6)) {
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
		if len(recs) != 1 {
			continue
		}
		r := recs[0]
		// The known one's IPv6 address is kept once learned (a store of an
		// older reef has none: it is filled in from the record).
		if !ok || gone(Node{a, k.Inc}) || (k.Inc == r.Node.Inc && !k.Addr6.IsValid() && r.Addr6.IsValid()) {
			c.Known = append(c.Known, KnownIncarnation{a, Incarnation{r.Node.Inc, r.Born, r.Addr6}})
		}
	}
}

// sameNode reports whether an incarnation of this node's identity that
// announced addr6 (invalid: unknown) may be an earlier one of this node.
// An identity that is an address of the node (IPv4) is that node, as
// addresses are unique. A router ID is only what an operator wrote, and
// two nodes may have been given one: then the other incarnation is this
// node only if it announced this node's IPv6 address. Naming another
// node's incarnation as a predecessor would free its blocks and votes
// while its pods hold their addresses (docs/design.md, "IPv6-only
// nodes").
func (d *decider) sameNode(addr6 netip.Addr) bool {
	return !d.in.IPv6Only || (d.in.Addr6.IsValid() && addr6 == d.in.Addr6)
}

// identityConflicts names the incarnations of this node's identity that
// are another node's (sameNode), and the addresses of which two current
// incarnations announce different IPv6 addresses: two nodes given one
// router ID. It changes nothing the protocol does; it tells the operator.
func (d *decider) identityConflicts() []string {
	self := d.self()
	var out []string
	other := map[Node]netip.Addr{}
	note := func(n Node, addr6 netip.Addr) {
		if n.Addr == self.Addr && n.Inc != self.Inc && !d.state.Forgotten[n] && !d.state.Superseded[n] && !d.sameNode(addr6) {
			if _, ok := other[n]; !ok || !other[n].IsValid() {
				other[n] = addr6
			}
		}
	}
	for _, r := range d.in.Table.Records {
		note(r.Node, r.Addr6)
	}
	for _, x := range d.in.Table.Seen {
		note(x.Node, x.Addr6)
	}
	for _, n := range sortedNodes(other) {
		at := "an unknown IPv6 address"
		if a := other[n]; a.IsValid() {
			at = a.String()
		}
		out = append(out, fmt.Sprintf("identity %s: incarnation %08x at %s announces it too, and this node is at %s: two nodes were given one bgp.routerID; "+
			"this node does not take it for an earlier incarnation of its own (that would free the other's blocks): give one of them another bgp.routerID and a new state dir",
			self.Addr, n.Inc, at, d.in.Addr6))
	}
	gone := func(n Node) bool { return d.state.Forgotten[n] || d.state.Superseded[n] }
	for a, recs := range d.unordered(gone) {
		// Two copies of one NLRI (two nodes' records of one identity) reach
		// a node as one best path: the known incarnation stands for the
		// other when its record is not in the table.
		at := map[Node]netip.Addr{}
		for _, r := range recs {
			at[r.Node] = r.Addr6
		}
		if k, ok := d.state.Known[a]; ok && !gone(Node{a, k.Inc}) {
			if _, in := at[Node{a, k.Inc}]; !in {
				at[Node{a, k.Inc}] = k.Addr6
			}
		}
		var addrs []string
		for _, a6 := range at {
			if a6.IsValid() && !slices.Contains(addrs, a6.String()) {
				addrs = append(addrs, a6.String())
			}
		}
		if len(addrs) > 1 {
			slices.Sort(addrs)
			out = append(out, fmt.Sprintf("identity %s: %d incarnations announce it from different IPv6 addresses (%s): two nodes given one bgp.routerID, or a node reinstalled with a new address (then it names the old incarnation within a round trip)",
				a, len(at), strings.Join(addrs, ", ")))
		}
	}
	slices.Sort(out[min(len(out), len(other)):])
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
