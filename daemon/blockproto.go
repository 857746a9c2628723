package daemon

import (
	"fmt"
	"net/netip"
	"sort"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/store"
)

// This file is the block protocol's decision, a pure function of one
// snapshot: the store's blocks, the claims peers announce, which sessions
// are up. docs/ipam.md explains the protocol; the rules in short:
//
//   - A node believes what an owner says about its own blocks while it has
//     a session with that owner (settled for a while, so the owner's table
//     has arrived). About an owner it cannot reach, it believes the blocks
//     it remembers and what other nodes relay.
//   - Of two claims of one block, the earlier wins, then the lower node
//     address (bgp.Claim.Beats). A pending own claim that loses is dropped;
//     one that nobody contests for claimWait is confirmed.
//   - A node announces its own blocks, relays every claim an owner told it
//     directly, and re-announces the remembered blocks of owners it cannot
//     reach. Relays give two claimants that each reach a majority a common
//     neighbour that tells each of the other's claim; re-announcements let a
//     node that joins while an owner is down learn that owner's blocks.

// blockView is one snapshot of everything the protocol decides from.
type blockView struct {
	self      netip.Addr
	now       time.Time
	claimWait time.Duration
	settle    time.Duration
	blocks    []store.Block
	learned   []bgp.Claim
	sessions  map[netip.Addr]time.Time // established peers -> since
	forgotten map[netip.Addr]time.Time
}

// blockPlan is what the snapshot asks for.
type blockPlan struct {
	confirm    []netip.Prefix
	drop       []netip.Prefix // own claims lost to another node's
	conflicts  []string       // own confirmed blocks lost while holding addresses
	remember   []store.Block  // other nodes' blocks to record or update
	unremember []netip.Prefix // other nodes' blocks no longer claimed
	forget     map[netip.Addr]time.Time
	wait       time.Duration // until the next pending claim matures; 0 if none
}

func (v blockView) settled(owner netip.Addr) bool {
	since, ok := v.sessions[owner]
	return ok && v.now.Sub(since) >= v.settle
}

// void reports whether a claim was made by an owner before it was forgotten.
func void(forgotten map[netip.Addr]time.Time, c bgp.Claim) bool {
	t, ok := forgotten[c.Owner]
	return ok && c.Claimed.Before(t)
}

// believed returns, per block, the claims of other nodes the view believes.
func (v blockView) believed(forgotten map[netip.Addr]time.Time) map[netip.Prefix][]bgp.Claim {
	out := map[netip.Prefix][]bgp.Claim{}
	for _, c := range v.learned {
		if c.State == bgp.Forgotten || c.Owner == v.self || void(forgotten, c) {
			continue
		}
		// A settled owner speaks for itself; relays about it are ignored,
		// so a stale relay can never keep a withdrawn claim alive.
		if v.settled(c.Owner) && c.From != c.Owner {
			continue
		}
		out[c.Block] = append(out[c.Block], c)
	}
	return out
}

func best(cs []bgp.Claim) (bgp.Claim, bool) {
	if len(cs) == 0 {
		return bgp.Claim{}, false
	}
	b := cs[0]
	for _, c := range cs[1:] {
		if c.Beats(b) {
			b = c
		}
	}
	return b, true
}

func remoteState(s bgp.ClaimState) store.BlockState {
	if s == bgp.Confirmed {
		return store.BlockRemote
	}
	return store.BlockRemotePending
}

func ownClaim(self netip.Addr, b store.Block) bgp.Claim {
	st := bgp.Pending
	if b.State == store.BlockConfirmed {
		st = bgp.Confirmed
	}
	return bgp.Claim{Block: b.CIDR, Owner: self, Claimed: b.Claimed, State: st}
}

// decideBlocks is the protocol's decision for one snapshot.
func decideBlocks(v blockView) blockPlan {
	p := blockPlan{forget: map[netip.Addr]time.Time{}}
	forgotten := map[netip.Addr]time.Time{}
	for a, t := range v.forgotten {
		forgotten[a] = t
	}
	for _, c := range v.learned {
		if c.State != bgp.Forgotten {
			continue
		}
		if t, ok := forgotten[c.Owner]; !ok || c.Claimed.After(t) {
			forgotten[c.Owner] = c.Claimed
			p.forget[c.Owner] = c.Claimed
		}
	}
	claims := v.believed(forgotten)
	known := map[netip.Prefix]bool{}

	for _, b := range v.blocks {
		known[b.CIDR] = true
		other, contested := best(claims[b.CIDR])
		if b.Own() {
			mine := ownClaim(v.self, b)
			lost := contested && other.Beats(mine)
			if t, ok := forgotten[v.self]; ok && b.Claimed.Before(t) {
				lost = true // an operator forgot this node; its old claims are void
			}
			switch {
			case lost && b.Used == 0:
				p.drop = append(p.drop, b.CIDR)
				if contested {
					p.remember = append(p.remember, remoteBlock(b.Pool, other, v.now))
				}
			case lost:
				p.conflicts = append(p.conflicts, fmt.Sprintf("block %s: this node's claim (%s) lost to %s's (%s), but %d pods hold addresses from it; recreate them",
					b.CIDR, b.Claimed.Format(time.RFC3339Nano), other.Owner, other.Claimed.Format(time.RFC3339Nano), b.Used))
			case b.State == store.BlockPending:
				if age := v.now.Sub(b.Claimed); age >= v.claimWait {
					p.confirm = append(p.confirm, b.CIDR)
				} else if w := v.claimWait - age; p.wait == 0 || w < p.wait {
					p.wait = w
				}
			}
			continue
		}
		// Another node's block. While its owner is out of reach, what we
		// remember is a claim in the contest too: a later claim by a third
		// node must not displace it.
		if !v.settled(b.OwnerAddr) && b.State == store.BlockRemote && !void(forgotten, bgp.Claim{Owner: b.OwnerAddr, Claimed: b.Claimed}) {
			mem := bgp.Claim{Block: b.CIDR, Owner: b.OwnerAddr, Claimed: b.Claimed, State: bgp.Confirmed}
			if contested && mem.Beats(other) {
				continue // the remembered claim stands; nothing new to record
			}
		}
		switch {
		case contested:
			if other.Owner != b.OwnerAddr || !other.Claimed.Equal(b.Claimed) || remoteState(other.State) != b.State ||
				v.now.Sub(b.LastSeen) > time.Minute {
				p.remember = append(p.remember, remoteBlock(b.Pool, other, v.now))
			}
		case forgotten[b.OwnerAddr] != time.Time{} && b.Claimed.Before(forgotten[b.OwnerAddr]):
			p.unremember = append(p.unremember, b.CIDR)
		case v.settled(b.OwnerAddr):
			// The owner is reachable and no longer announces the block.
			p.unremember = append(p.unremember, b.CIDR)
		}
	}
	// Blocks the store does not know yet.
	var fresh []netip.Prefix
	for blk := range claims {
		if !known[blk] {
			fresh = append(fresh, blk)
		}
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].Addr().Less(fresh[j].Addr()) })
	for _, blk := range fresh {
		c, _ := best(claims[blk])
		p.remember = append(p.remember, remoteBlock(netip.Prefix{}, c, v.now))
	}
	return p
}

func remoteBlock(pool netip.Prefix, c bgp.Claim, now time.Time) store.Block {
	return store.Block{CIDR: c.Block, Pool: pool, OwnerAddr: c.Owner, State: remoteState(c.State), Claimed: c.Claimed, LastSeen: now}
}

// announcements is what the node announces: its own blocks, every claim an
// owner told it directly (relayed), the remembered blocks of owners it has
// no session with, and its tombstones, one path per block.
func announcements(self netip.Addr, blocks []store.Block, learned []bgp.Claim, sessions, forgotten map[netip.Addr]time.Time, tombs []bgp.Claim) []bgp.Claim {
	out := map[netip.Prefix]bgp.Claim{}
	tomb := map[netip.Prefix]bool{}
	for _, t := range tombs {
		out[t.Block] = t
		tomb[t.Block] = true
	}
	for _, b := range blocks {
		if b.Own() {
			out[b.CIDR] = ownClaim(self, b)
			continue
		}
		if _, up := sessions[b.OwnerAddr]; up || b.State != store.BlockRemote {
			continue
		}
		if _, taken := out[b.CIDR]; !taken {
			out[b.CIDR] = bgp.Claim{Block: b.CIDR, Owner: b.OwnerAddr, Claimed: b.Claimed, State: bgp.Confirmed}
		}
	}
	for _, c := range learned {
		if c.From != c.Owner || c.State == bgp.Forgotten || c.Owner == self || void(forgotten, c) {
			continue
		}
		if cur, taken := out[c.Block]; !taken || (cur.Owner != self && !tomb[c.Block] && c.Beats(cur)) {
			c.From = netip.Addr{}
			out[c.Block] = c
		}
	}
	list := make([]bgp.Claim, 0, len(out))
	for _, c := range out {
		list = append(list, c)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Block.Addr().Less(list[j].Block.Addr()) })
	return list
}

// quorum reports whether this node reaches a majority of the nodes it
// knows (itself, its configured peers, the owners of blocks it remembers,
// the peers it has sessions with). Only then may it claim: two nodes that
// both reach a majority share a neighbour that relays each one's claim to
// the other.
func quorum(self netip.Addr, peers []netip.Addr, blocks []store.Block, sessions map[netip.Addr]time.Time, forgotten map[netip.Addr]time.Time) (up, known int) {
	all := map[netip.Addr]bool{self: true}
	for _, p := range peers {
		all[p] = true
	}
	for _, b := range blocks {
		if !b.Own() && b.OwnerAddr.IsValid() {
			all[b.OwnerAddr] = true
		}
	}
	for a := range sessions {
		all[a] = true
	}
	for a := range forgotten {
		if a != self {
			delete(all, a)
		}
	}
	up = 1
	for a := range all {
		if _, ok := sessions[a]; ok && a != self {
			up++
		}
	}
	return up, len(all)
}
