package daemon

import (
	"net/netip"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/store"
)

// The other nodes' IPv6 addresses: each node's record gives its own
// (blockproto.Record.Addr6), and the store keeps it with the node's remote
// blocks (store.Block.OwnerAddr6), where the reconciler finds the next hop
// of an IPv6 block, also after a restart, before the records are learned
// again.

// blocksWithAddrs6 reads the blocks, after recording the IPv6 addresses
// the records in table give for their owners where the store has another.
func (e *blockEngine) blocksWithAddrs6(table blockproto.Table) ([]store.Block, error) {
	blocks, err := e.store.Blocks()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.awaiting6 = awaitingRecords(table, blocks)
	e.mu.Unlock()
	addrs := ownerAddrs6(table, blocks)
	if len(addrs) == 0 {
		return blocks, nil
	}
	if err := e.store.SetBlockOwnerAddrs6(addrs); err != nil {
		return nil, err
	}
	for n, a := range addrs {
		e.log.Info("learned a node's IPv6 address: its IPv6 blocks are routed through it", "node", n, "address", a.Addr, "ipv6Only", a.IPv6Only)
	}
	return e.store.Blocks()
}

// ownerAddrs6 are the IPv6 addresses that the records in t give for the
// owners of remote blocks, and whether the owners are IPv6-only, where the
// block says otherwise, by owner incarnation. An owner whose record gives none (its IPv6 pool gone from
// its config while this node still has it, during a rolling change) keeps
// the address the store has: its blocks stay routed as they were. An owner
// whose copies of its record disagree (a reflector's stale copy of the
// record before a change) is left as the store has it until they agree.
func ownerAddrs6(t blockproto.Table, blocks []store.Block) map[blockproto.Node]store.Owner6 {
	given, ambiguous := recordsOf(t)
	out := map[blockproto.Node]store.Owner6{}
	for _, b := range blocks {
		n := blockproto.Node{Addr: b.OwnerAddr, Inc: b.OwnerInc}
		if a, ok := given[n]; ok && a.Addr.IsValid() && b.State == store.BlockRemote && !ambiguous[n] &&
			(a.Addr != b.OwnerAddr6 || a.IPv6Only != b.OwnerIPv6Only) {
			out[n] = a
		}
	}
	return out
}

// awaitingRecords are the owners of remote IPv6 blocks that the store has
// no IPv6 address for and whose records t does not hold (or holds in
// copies that disagree): a node learns another's blocks and its record
// in separate updates, so the blocks may come a step before the record
// that says where they are routed. Such an owner's blocks are not yet
// unroutable; one whose record is learned and gives no IPv6 address is.
func awaitingRecords(t blockproto.Table, blocks []store.Block) map[netip.Addr]bool {
	given, ambiguous := recordsOf(t)
	out := map[netip.Addr]bool{}
	for _, b := range blocks {
		n := blockproto.Node{Addr: b.OwnerAddr, Inc: b.OwnerInc}
		if _, ok := given[n]; b.State == store.BlockRemote && b.CIDR.Addr().Is6() && !b.OwnerAddr6.IsValid() && (!ok || ambiguous[n]) {
			out[b.OwnerAddr] = true
		}
	}
	return out
}

// awaitingRecord says whether the last step was still waiting for the
// record of owner, which has IPv6 blocks (awaitingRecords).
func (e *blockEngine) awaitingRecord(owner netip.Addr) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.awaiting6[owner]
}

// recordsOf is what the records in t say of each node's IPv6 side, and
// the nodes whose copies of their record disagree.
func recordsOf(t blockproto.Table) (given map[blockproto.Node]store.Owner6, ambiguous map[blockproto.Node]bool) {
	given, ambiguous = map[blockproto.Node]store.Owner6{}, map[blockproto.Node]bool{}
	for _, r := range t.Records {
		o := store.Owner6{Addr: r.Addr6, IPv6Only: r.IPv6Only}
		if a, ok := given[r.Node]; ok && a != o {
			ambiguous[r.Node] = true
		}
		given[r.Node] = o
	}
	return given, ambiguous
}
