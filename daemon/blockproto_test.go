package daemon

import (
	"fmt"
	"math/rand"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/store"
)

// The nodes of these tests. bpSelf sits between bpLow and bpHigh so that a
// tie of claim times can go either way.
var (
	bpLow   = netip.MustParseAddr("192.168.10.1")
	bpSelf  = netip.MustParseAddr("192.168.10.2")
	bpHigh  = netip.MustParseAddr("192.168.10.3")
	bpOther = netip.MustParseAddr("192.168.10.4")

	bpPool = netip.MustParsePrefix("10.244.0.0/24")
	bpBlk1 = netip.MustParsePrefix("10.244.0.0/26")
	bpBlk2 = netip.MustParsePrefix("10.244.0.64/26")
	bpBlk3 = netip.MustParsePrefix("10.244.0.128/26")

	bpNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

const (
	bpClaimWait = 5 * time.Second
	bpSettle    = 30 * time.Second
)

var bpCmpOpts = cmp.Options{
	cmp.AllowUnexported(blockPlan{}),
	cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}),
	cmpopts.EquateEmpty(),
}

func bpAgo(d time.Duration) time.Time { return bpNow.Add(-d) }

func bpOwn(cidr netip.Prefix, st store.BlockState, claimed time.Time, used int) store.Block {
	return store.Block{CIDR: cidr, Pool: bpPool, Owner: "self", OwnerAddr: bpSelf, State: st, Claimed: claimed, Used: used, Size: 64}
}

func bpRemote(cidr netip.Prefix, owner netip.Addr, st store.BlockState, claimed, lastSeen time.Time) store.Block {
	return store.Block{CIDR: cidr, Pool: bpPool, OwnerAddr: owner, State: st, Claimed: claimed, LastSeen: lastSeen, Size: 64}
}

// bpClaim is a claim of owner as learned from peer from.
func bpClaim(cidr netip.Prefix, owner netip.Addr, claimed time.Time, st bgp.ClaimState, from netip.Addr) bgp.Claim {
	return bgp.Claim{Block: cidr, Owner: owner, Claimed: claimed, State: st, From: from}
}

// bpDirect is a claim its owner announced itself.
func bpDirect(cidr netip.Prefix, owner netip.Addr, claimed time.Time, st bgp.ClaimState) bgp.Claim {
	return bpClaim(cidr, owner, claimed, st, owner)
}

// bpTomb is a tombstone: owner was forgotten at at, learned from from.
func bpTomb(cidr netip.Prefix, owner netip.Addr, at time.Time, from netip.Addr) bgp.Claim {
	return bpClaim(cidr, owner, at, bgp.Forgotten, from)
}

// bpRemembered is what a plan remembers of claim c, seen now.
func bpRemembered(pool netip.Prefix, c bgp.Claim) store.Block {
	st := store.BlockRemotePending
	if c.State == bgp.Confirmed {
		st = store.BlockRemote
	}
	return store.Block{CIDR: c.Block, Pool: pool, OwnerAddr: c.Owner, State: st, Claimed: c.Claimed, LastSeen: bpNow}
}

// bpSessions builds the established sessions, each up since the time given.
func bpSessions(kv ...any) map[netip.Addr]time.Time {
	out := map[netip.Addr]time.Time{}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(netip.Addr)] = kv[i+1].(time.Time)
	}
	return out
}

func TestDecideBlocks(t *testing.T) {
	settled := bpAgo(time.Hour)         // a session up long enough for the owner's table to arrive
	fresh := bpAgo(bpSettle / 2)        // a session still settling
	t0 := bpAgo(time.Hour)              // an old claim time
	forgetAt := bpAgo(10 * time.Minute) // when some node was forgotten

	for _, tc := range []struct {
		name      string
		blocks    []store.Block
		learned   []bgp.Claim
		sessions  map[netip.Addr]time.Time
		forgotten map[netip.Addr]time.Time
		want      blockPlan
		// wantConflicts are substrings, one list per expected conflict entry.
		wantConflicts [][]string
	}{
		{
			name: "empty view",
		},

		// Rule 1: an uncontested pending claim matures after claimWait.
		{
			name:   "own pending uncontested for exactly claimWait is confirmed",
			blocks: []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(bpClaimWait), 0)},
			want:   blockPlan{confirm: []netip.Prefix{bpBlk1}},
		},
		{
			name:   "own pending uncontested younger than claimWait waits the rest",
			blocks: []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(2*time.Second), 0)},
			want:   blockPlan{wait: 3 * time.Second},
		},
		{
			name: "wait is until the nearest of several pending claims",
			blocks: []store.Block{
				bpOwn(bpBlk1, store.BlockPending, bpAgo(1*time.Second), 0),
				bpOwn(bpBlk2, store.BlockPending, bpAgo(4*time.Second), 0),
				bpOwn(bpBlk3, store.BlockPending, bpAgo(2*time.Second), 0),
			},
			want: blockPlan{wait: 1 * time.Second},
		},
		{
			name: "mature and young pending claims: confirm one, wait for the other",
			blocks: []store.Block{
				bpOwn(bpBlk1, store.BlockPending, bpAgo(time.Minute), 0),
				bpOwn(bpBlk2, store.BlockPending, bpAgo(4*time.Second), 0),
			},
			want: blockPlan{confirm: []netip.Prefix{bpBlk1}, wait: time.Second},
		},
		{
			name:   "own confirmed uncontested: nothing to do",
			blocks: []store.Block{bpOwn(bpBlk1, store.BlockConfirmed, t0, 7)},
		},

		// Rule 2: a pending claim against a competitor.
		{
			name:     "own pending loses to an earlier pending claim",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(2*time.Second), 0)},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, bpAgo(3*time.Second), bgp.Pending)},
			sessions: bpSessions(bpHigh, settled),
			want: blockPlan{
				drop:     []netip.Prefix{bpBlk1},
				remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpHigh, bpAgo(3*time.Second), bgp.Pending))},
			},
		},
		{
			name:     "own pending loses to an earlier confirmed claim, remembered as remote",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(2*time.Second), 0)},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed)},
			sessions: bpSessions(bpHigh, settled),
			want: blockPlan{
				drop:     []netip.Prefix{bpBlk1},
				remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed))},
			},
		},
		{
			name:     "same claim time: the lower owner address wins over self",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(2*time.Second), 0)},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpLow, bpAgo(2*time.Second), bgp.Pending)},
			sessions: bpSessions(bpLow, settled),
			want: blockPlan{
				drop:     []netip.Prefix{bpBlk1},
				remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpLow, bpAgo(2*time.Second), bgp.Pending))},
			},
		},
		{
			name:     "same claim time: self wins over a higher owner address",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(2*time.Second), 0)},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, bpAgo(2*time.Second), bgp.Pending)},
			sessions: bpSessions(bpHigh, settled),
			want:     blockPlan{wait: 3 * time.Second},
		},
		{
			name:     "own pending earlier than the competitor wins and is confirmed when mature",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(10*time.Second), 0)},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpLow, bpAgo(8*time.Second), bgp.Pending)},
			sessions: bpSessions(bpLow, settled),
			want:     blockPlan{confirm: []netip.Prefix{bpBlk1}},
		},
		{
			name:   "of several competitors the best one is remembered",
			blocks: []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(2*time.Second), 0)},
			learned: []bgp.Claim{
				bpDirect(bpBlk1, bpHigh, bpAgo(3*time.Second), bgp.Pending),
				bpDirect(bpBlk1, bpOther, bpAgo(4*time.Second), bgp.Pending),
				bpDirect(bpBlk1, bpLow, bpAgo(3*time.Second), bgp.Pending),
			},
			sessions: bpSessions(bpHigh, settled, bpOther, settled, bpLow, settled),
			want: blockPlan{
				drop:     []netip.Prefix{bpBlk1},
				remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpOther, bpAgo(4*time.Second), bgp.Pending))},
			},
		},

		// Rule 3: a confirmed block that loses.
		{
			name:     "own confirmed empty block that loses is dropped",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockConfirmed, bpAgo(time.Minute), 0)},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed)},
			sessions: bpSessions(bpHigh, settled),
			want: blockPlan{
				drop:     []netip.Prefix{bpBlk1},
				remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed))},
			},
		},
		{
			name:          "own confirmed block in use that loses is a conflict, not a drop",
			blocks:        []store.Block{bpOwn(bpBlk1, store.BlockConfirmed, bpAgo(time.Minute), 3)},
			learned:       []bgp.Claim{bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed)},
			sessions:      bpSessions(bpHigh, settled),
			wantConflicts: [][]string{{bpBlk1.String(), "3 pods", bpHigh.String()}},
		},
		{
			name:     "own confirmed block that wins stays",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockConfirmed, t0, 0)},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, bpAgo(time.Minute), bgp.Pending)},
			sessions: bpSessions(bpHigh, settled),
		},

		// Rule 4: remembered blocks of other nodes are kept up to date.
		{
			name:     "remembered block seen again recently: no write",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(10*time.Second))},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed)},
			sessions: bpSessions(bpHigh, settled),
		},
		{
			name:     "remembered block seen exactly a minute ago: no write yet",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Minute))},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed)},
			sessions: bpSessions(bpHigh, settled),
		},
		{
			name:     "remembered block last seen over a minute ago is refreshed",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(2*time.Minute))},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed)},
			sessions: bpSessions(bpHigh, settled),
			want:     blockPlan{remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed))}},
		},
		{
			name:     "remembered pending block now confirmed is updated",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemotePending, t0, bpAgo(time.Second))},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed)},
			sessions: bpSessions(bpHigh, settled),
			want:     blockPlan{remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed))}},
		},
		{
			name:     "remembered block re-claimed at another time is updated",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Second))},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpHigh, t0.Add(time.Millisecond), bgp.Confirmed)},
			sessions: bpSessions(bpHigh, settled),
			want:     blockPlan{remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpHigh, t0.Add(time.Millisecond), bgp.Confirmed))}},
		},
		{
			name:     "remembered block now claimed earlier by another owner is updated",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Second))},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpLow, t0.Add(-time.Second), bgp.Confirmed)},
			sessions: bpSessions(bpLow, settled),
			want:     blockPlan{remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpLow, t0.Add(-time.Second), bgp.Confirmed))}},
		},

		// Rule 5: a settled owner that no longer announces a block gave it up.
		{
			name:     "settled owner without a path for the block: unremember",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Second))},
			sessions: bpSessions(bpHigh, settled),
			want:     blockPlan{unremember: []netip.Prefix{bpBlk1}},
		},
		{
			name:     "settled owner announcing only another block: unremember this one, remember that one",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Second))},
			learned:  []bgp.Claim{bpDirect(bpBlk2, bpHigh, t0, bgp.Confirmed)},
			sessions: bpSessions(bpHigh, settled),
			want: blockPlan{
				unremember: []netip.Prefix{bpBlk1},
				remember:   []store.Block{bpRemembered(netip.Prefix{}, bpDirect(bpBlk2, bpHigh, t0, bgp.Confirmed))},
			},
		},
		{
			name:   "owner without a session (down): kept",
			blocks: []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Hour))},
		},
		{
			name:     "owner whose session is still settling: kept",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Second))},
			sessions: bpSessions(bpHigh, fresh),
		},
		{
			name:     "owner whose session came up exactly settle ago counts as settled",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Second))},
			sessions: bpSessions(bpHigh, bpAgo(bpSettle)),
			want:     blockPlan{unremember: []netip.Prefix{bpBlk1}},
		},

		// Rule 6: relays (From != Owner).
		{
			name:     "stale relay about a settled owner does not keep its withdrawn block",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Second))},
			learned:  []bgp.Claim{bpClaim(bpBlk1, bpHigh, t0, bgp.Confirmed, bpLow)},
			sessions: bpSessions(bpHigh, settled, bpLow, settled),
			want:     blockPlan{unremember: []netip.Prefix{bpBlk1}},
		},
		{
			name:     "relay about a settled owner of an unknown block is ignored",
			learned:  []bgp.Claim{bpClaim(bpBlk1, bpHigh, t0, bgp.Confirmed, bpLow)},
			sessions: bpSessions(bpHigh, settled, bpLow, settled),
		},
		{
			name:     "relay about a settled owner cannot beat an own pending claim",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(time.Minute), 0)},
			learned:  []bgp.Claim{bpClaim(bpBlk1, bpHigh, t0, bgp.Pending, bpLow)},
			sessions: bpSessions(bpHigh, settled, bpLow, settled),
			want:     blockPlan{confirm: []netip.Prefix{bpBlk1}},
		},
		{
			name:     "joining while the owner is down: its blocks are learned from relays",
			learned:  []bgp.Claim{bpClaim(bpBlk2, bpHigh, t0, bgp.Confirmed, bpLow), bpClaim(bpBlk1, bpHigh, t0, bgp.Confirmed, bpOther)},
			sessions: bpSessions(bpLow, settled, bpOther, settled),
			want: blockPlan{remember: []store.Block{
				bpRemembered(netip.Prefix{}, bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed)),
				bpRemembered(netip.Prefix{}, bpDirect(bpBlk2, bpHigh, t0, bgp.Confirmed)),
			}},
		},
		{
			name:     "relay about an owner still settling is believed",
			learned:  []bgp.Claim{bpClaim(bpBlk1, bpHigh, t0, bgp.Confirmed, bpLow)},
			sessions: bpSessions(bpHigh, fresh, bpLow, settled),
			want:     blockPlan{remember: []store.Block{bpRemembered(netip.Prefix{}, bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed))}},
		},
		{
			name:     "relay about a down owner beats a later own pending claim",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(time.Second), 0)},
			learned:  []bgp.Claim{bpClaim(bpBlk1, bpHigh, t0, bgp.Confirmed, bpLow)},
			sessions: bpSessions(bpLow, settled),
			want: blockPlan{
				drop:     []netip.Prefix{bpBlk1},
				remember: []store.Block{bpRemembered(bpPool, bpDirect(bpBlk1, bpHigh, t0, bgp.Confirmed))},
			},
		},

		// Rule 7: tombstones and forgotten owners.
		{
			name:     "tombstone records the forget and voids the owner's older remembered blocks",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Hour))},
			learned:  []bgp.Claim{bpTomb(bpBlk1, bpHigh, forgetAt, bpLow)},
			sessions: bpSessions(bpLow, settled),
			want: blockPlan{
				forget:     map[netip.Addr]time.Time{bpHigh: forgetAt},
				unremember: []netip.Prefix{bpBlk1},
			},
		},
		{
			name:     "tombstone keeps the owner's later remembered blocks",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, forgetAt.Add(time.Second), bpAgo(time.Hour))},
			learned:  []bgp.Claim{bpTomb(bpBlk2, bpHigh, forgetAt, bpLow)},
			sessions: bpSessions(bpLow, settled),
			want:     blockPlan{forget: map[netip.Addr]time.Time{bpHigh: forgetAt}},
		},
		{
			name:      "tombstone no newer than the known forget: nothing to record",
			learned:   []bgp.Claim{bpTomb(bpBlk1, bpHigh, forgetAt, bpLow)},
			sessions:  bpSessions(bpLow, settled),
			forgotten: map[netip.Addr]time.Time{bpHigh: forgetAt},
		},
		{
			name:      "tombstone newer than the known forget is recorded",
			learned:   []bgp.Claim{bpTomb(bpBlk1, bpHigh, forgetAt, bpLow)},
			sessions:  bpSessions(bpLow, settled),
			forgotten: map[netip.Addr]time.Time{bpHigh: forgetAt.Add(-time.Hour)},
			want:      blockPlan{forget: map[netip.Addr]time.Time{bpHigh: forgetAt}},
		},
		{
			name:     "of two tombstones of one owner the later is recorded",
			learned:  []bgp.Claim{bpTomb(bpBlk2, bpHigh, forgetAt, bpLow), bpTomb(bpBlk1, bpHigh, forgetAt.Add(time.Minute), bpLow), bpTomb(bpBlk3, bpHigh, forgetAt, bpLow)},
			sessions: bpSessions(bpLow, settled),
			want:     blockPlan{forget: map[netip.Addr]time.Time{bpHigh: forgetAt.Add(time.Minute)}},
		},
		{
			name: "claims made before a learned forget are void, later ones believed",
			learned: []bgp.Claim{
				bpTomb(bpBlk3, bpHigh, forgetAt, bpLow),
				bpDirect(bpBlk1, bpHigh, forgetAt.Add(-time.Millisecond), bgp.Confirmed),
				bpDirect(bpBlk2, bpHigh, forgetAt.Add(time.Millisecond), bgp.Confirmed),
			},
			sessions: bpSessions(bpLow, settled, bpHigh, settled),
			want: blockPlan{
				forget:   map[netip.Addr]time.Time{bpHigh: forgetAt},
				remember: []store.Block{bpRemembered(netip.Prefix{}, bpDirect(bpBlk2, bpHigh, forgetAt.Add(time.Millisecond), bgp.Confirmed))},
			},
		},
		{
			name:      "a forget known to the store voids older claims without a tombstone",
			blocks:    []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(time.Second), 0)},
			learned:   []bgp.Claim{bpClaim(bpBlk1, bpHigh, t0, bgp.Confirmed, bpLow), bpClaim(bpBlk2, bpHigh, t0, bgp.Confirmed, bpLow)},
			sessions:  bpSessions(bpLow, settled),
			forgotten: map[netip.Addr]time.Time{bpHigh: forgetAt},
			want:      blockPlan{wait: bpClaimWait - time.Second},
		},
		{
			name:      "a remembered block of a forgotten owner claimed before the forget is unremembered",
			blocks:    []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Hour))},
			forgotten: map[netip.Addr]time.Time{bpHigh: forgetAt},
			want:      blockPlan{unremember: []netip.Prefix{bpBlk1}},
		},
		{
			name: "a tombstone of this node voids its older own blocks",
			blocks: []store.Block{
				bpOwn(bpBlk1, store.BlockConfirmed, t0, 0),
				bpOwn(bpBlk2, store.BlockPending, forgetAt.Add(-time.Second), 0),
				bpOwn(bpBlk3, store.BlockPending, bpAgo(time.Second), 0),
			},
			learned:  []bgp.Claim{bpTomb(bpBlk1, bpSelf, forgetAt, bpLow)},
			sessions: bpSessions(bpLow, settled),
			want: blockPlan{
				forget: map[netip.Addr]time.Time{bpSelf: forgetAt},
				drop:   []netip.Prefix{bpBlk1, bpBlk2},
				wait:   bpClaimWait - time.Second,
			},
		},
		{
			name:          "a tombstone of this node on a block in use is a conflict",
			blocks:        []store.Block{bpOwn(bpBlk1, store.BlockConfirmed, t0, 2)},
			learned:       []bgp.Claim{bpTomb(bpBlk1, bpSelf, forgetAt, bpLow)},
			sessions:      bpSessions(bpLow, settled),
			want:          blockPlan{forget: map[netip.Addr]time.Time{bpSelf: forgetAt}},
			wantConflicts: [][]string{{bpBlk1.String(), "2 pods"}},
		},

		// Rule 8: blocks the store does not know.
		{
			name: "unknown blocks are remembered in address order, the best claim of each",
			learned: []bgp.Claim{
				bpDirect(bpBlk3, bpHigh, t0, bgp.Confirmed),
				bpDirect(bpBlk1, bpHigh, t0, bgp.Pending),
				bpDirect(bpBlk2, bpHigh, t0.Add(time.Second), bgp.Confirmed),
				bpDirect(bpBlk2, bpLow, t0, bgp.Confirmed),
			},
			sessions: bpSessions(bpHigh, settled, bpLow, settled),
			want: blockPlan{remember: []store.Block{
				bpRemembered(netip.Prefix{}, bpDirect(bpBlk1, bpHigh, t0, bgp.Pending)),
				bpRemembered(netip.Prefix{}, bpDirect(bpBlk2, bpLow, t0, bgp.Confirmed)),
				bpRemembered(netip.Prefix{}, bpDirect(bpBlk3, bpHigh, t0, bgp.Confirmed)),
			}},
		},

		// Rule 9: claims of this node learned back from peers.
		{
			name:     "a relay of this node's own claim is not remembered",
			learned:  []bgp.Claim{bpClaim(bpBlk1, bpSelf, t0, bgp.Confirmed, bpLow)},
			sessions: bpSessions(bpLow, settled),
		},
		{
			name:     "an older claim of this node relayed back cannot beat its current claim",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(time.Second), 0)},
			learned:  []bgp.Claim{bpClaim(bpBlk1, bpSelf, t0, bgp.Confirmed, bpLow)},
			sessions: bpSessions(bpLow, settled),
			want:     blockPlan{wait: bpClaimWait - time.Second},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideBlocks(blockView{self: bpSelf, now: bpNow, claimWait: bpClaimWait, settle: bpSettle,
				blocks: tc.blocks, learned: tc.learned, sessions: tc.sessions, forgotten: tc.forgotten})
			if len(got.conflicts) != len(tc.wantConflicts) {
				t.Errorf("conflicts = %q, want %d entries", got.conflicts, len(tc.wantConflicts))
			} else {
				for i, subs := range tc.wantConflicts {
					for _, s := range subs {
						if !strings.Contains(got.conflicts[i], s) {
							t.Errorf("conflict %q does not name %q", got.conflicts[i], s)
						}
					}
				}
			}
			got.conflicts = nil
			if diff := cmp.Diff(tc.want, got, bpCmpOpts); diff != "" {
				t.Errorf("decideBlocks plan (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecideBlocksLeavesViewAlone checks that the decision does not write
// to the maps of the snapshot it is given: the caller reuses them.
func TestDecideBlocksLeavesViewAlone(t *testing.T) {
	forgotten := map[netip.Addr]time.Time{bpHigh: bpAgo(time.Hour)}
	sessions := bpSessions(bpLow, bpAgo(time.Hour))
	decideBlocks(blockView{self: bpSelf, now: bpNow, claimWait: bpClaimWait, settle: bpSettle,
		learned:   []bgp.Claim{bpTomb(bpBlk1, bpHigh, bpAgo(time.Minute), bpLow), bpTomb(bpBlk2, bpOther, bpAgo(time.Minute), bpLow)},
		sessions:  sessions,
		forgotten: forgotten})
	if diff := cmp.Diff(map[netip.Addr]time.Time{bpHigh: bpAgo(time.Hour)}, forgotten, bpCmpOpts); diff != "" {
		t.Errorf("view's forgotten map changed (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(bpSessions(bpLow, bpAgo(time.Hour)), sessions, bpCmpOpts); diff != "" {
		t.Errorf("view's sessions map changed (-before +after):\n%s", diff)
	}
}

// TestDecideBlocksOneWinner runs the decision of two nodes that claimed the
// same block, each seeing its own claim pending and the other's as learned:
// for every pair of claim times, ties included, exactly one of them drops
// its claim, the one Beats says lost, and it remembers the winner's claim.
func TestDecideBlocksOneWinner(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	addrs := []netip.Addr{bpLow, bpSelf, bpHigh, bpOther, netip.MustParseAddr("10.0.0.9"), netip.MustParseAddr("172.16.0.1")}
	relay := netip.MustParseAddr("192.168.99.99") // a third node, neither a nor b
	base := bpAgo(time.Minute)
	ties := 0
	for i := range 2000 {
		perm := rng.Perm(len(addrs))
		a, b := addrs[perm[0]], addrs[perm[1]]
		// A few milliseconds apart at most, so that ties are common.
		ta := base.Add(time.Duration(rng.Intn(4)) * time.Millisecond)
		tb := base.Add(time.Duration(rng.Intn(4)) * time.Millisecond)
		if ta.Equal(tb) {
			ties++
		}
		// Whether they see each other directly or only through a relay
		// (no session) must not change the outcome.
		direct := rng.Intn(2) == 0
		decide := func(self, other netip.Addr, mine, theirs time.Time) blockPlan {
			from, sessions := other, bpSessions(other, bpAgo(time.Hour))
			if !direct {
				from, sessions = relay, bpSessions(relay, bpAgo(time.Hour))
			}
			return decideBlocks(blockView{self: self, now: bpNow, claimWait: bpClaimWait, settle: bpSettle,
				blocks:   []store.Block{{CIDR: bpBlk1, Pool: bpPool, OwnerAddr: self, State: store.BlockPending, Claimed: mine, Size: 64}},
				learned:  []bgp.Claim{bpClaim(bpBlk1, other, theirs, bgp.Pending, from)},
				sessions: sessions})
		}
		pa, pb := decide(a, b, ta, tb), decide(b, a, tb, ta)
		ca := bgp.Claim{Block: bpBlk1, Owner: a, Claimed: ta, State: bgp.Pending}
		cb := bgp.Claim{Block: bpBlk1, Owner: b, Claimed: tb, State: bgp.Pending}
		aDrops, bDrops := len(pa.drop) == 1, len(pb.drop) == 1
		desc := fmt.Sprintf("case %d: %s at %s vs %s at %s (direct %v)", i, a, ta.Format(time.StampMilli), b, tb.Format(time.StampMilli), direct)
		if aDrops == bDrops {
			t.Fatalf("%s: a drops %v, b drops %v; want exactly one to drop", desc, aDrops, bDrops)
		}
		loser, winner, plan := b, ca, pb
		if aDrops {
			loser, winner, plan = a, cb, pa
		}
		if !winner.Beats(bgp.Claim{Owner: loser, Claimed: map[netip.Addr]time.Time{a: ta, b: tb}[loser]}) {
			t.Fatalf("%s: %s dropped but its claim beats the other", desc, loser)
		}
		want := []store.Block{{CIDR: bpBlk1, Pool: bpPool, OwnerAddr: winner.Owner, State: store.BlockRemotePending, Claimed: winner.Claimed, LastSeen: bpNow}}
		if diff := cmp.Diff(want, plan.remember, bpCmpOpts); diff != "" {
			t.Fatalf("%s: loser remembers (-want +got):\n%s", desc, diff)
		}
		if len(pa.conflicts)+len(pb.conflicts) != 0 {
			t.Fatalf("%s: conflicts %q %q for pending claims", desc, pa.conflicts, pb.conflicts)
		}
	}
	if ties == 0 {
		t.Fatal("no tie among the random claim times: the test does not cover the address rule")
	}
}

func TestAnnouncements(t *testing.T) {
	t0 := bpAgo(time.Hour)
	up := bpAgo(time.Hour)
	forgetAt := bpAgo(time.Minute)
	ownClaimOf := func(cidr netip.Prefix, claimed time.Time, st bgp.ClaimState) bgp.Claim {
		return bgp.Claim{Block: cidr, Owner: bpSelf, Claimed: claimed, State: st}
	}
	relayed := func(c bgp.Claim) bgp.Claim { c.From = netip.Addr{}; return c }

	for _, tc := range []struct {
		name     string
		blocks   []store.Block
		learned  []bgp.Claim
		sessions map[netip.Addr]time.Time
		tombs    []bgp.Claim
		want     []bgp.Claim
	}{
		{
			name: "nothing",
		},
		{
			name: "own blocks with their state",
			blocks: []store.Block{
				bpOwn(bpBlk2, store.BlockPending, bpAgo(time.Second), 0),
				bpOwn(bpBlk1, store.BlockConfirmed, t0, 4),
			},
			want: []bgp.Claim{ownClaimOf(bpBlk1, t0, bgp.Confirmed), ownClaimOf(bpBlk2, bpAgo(time.Second), bgp.Pending)},
		},
		{
			name: "claims an owner told directly are relayed with From cleared, in block order",
			learned: []bgp.Claim{
				bpDirect(bpBlk3, bpHigh, t0, bgp.Confirmed),
				bpDirect(bpBlk1, bpLow, t0, bgp.Pending),
			},
			sessions: bpSessions(bpHigh, up, bpLow, up),
			want:     []bgp.Claim{relayed(bpDirect(bpBlk1, bpLow, t0, bgp.Pending)), relayed(bpDirect(bpBlk3, bpHigh, t0, bgp.Confirmed))},
		},
		{
			name: "relays, own claims coming back and learned tombstones are not relayed",
			learned: []bgp.Claim{
				bpClaim(bpBlk1, bpHigh, t0, bgp.Confirmed, bpLow),
				bpClaim(bpBlk2, bpSelf, t0, bgp.Confirmed, bpLow),
				bpTomb(bpBlk3, bpOther, forgetAt, bpLow),
				bpTomb(bpBlk3, bpOther, forgetAt, bpOther),
			},
			sessions: bpSessions(bpLow, up),
		},
		{
			name: "remembered confirmed blocks of an owner without a session are re-announced",
			blocks: []store.Block{
				bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Hour)),
				bpRemote(bpBlk2, bpLow, store.BlockRemote, t0, bpAgo(time.Second)),       // owner has a session
				bpRemote(bpBlk3, bpHigh, store.BlockRemotePending, t0, bpAgo(time.Hour)), // not confirmed
			},
			sessions: bpSessions(bpLow, up),
			want:     []bgp.Claim{{Block: bpBlk1, Owner: bpHigh, Claimed: t0, State: bgp.Confirmed}},
		},
		{
			name: "a remembered block of an owner with a session still settling is not re-announced",
			blocks: []store.Block{
				bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Hour)),
			},
			sessions: bpSessions(bpHigh, bpNow),
		},
		{
			name:  "tombstones are announced",
			tombs: []bgp.Claim{{Block: bpBlk2, Owner: bpHigh, Claimed: forgetAt, State: bgp.Forgotten}},
			want:  []bgp.Claim{{Block: bpBlk2, Owner: bpHigh, Claimed: forgetAt, State: bgp.Forgotten}},
		},
		{
			name:   "an own claim replaces a tombstone of its block",
			blocks: []store.Block{bpOwn(bpBlk2, store.BlockPending, bpAgo(time.Second), 0)},
			tombs:  []bgp.Claim{{Block: bpBlk2, Owner: bpHigh, Claimed: forgetAt, State: bgp.Forgotten}},
			want:   []bgp.Claim{ownClaimOf(bpBlk2, bpAgo(time.Second), bgp.Pending)},
		},
		{
			name:     "a tombstone stays when another node claims the block afresh",
			learned:  []bgp.Claim{bpDirect(bpBlk2, bpLow, bpAgo(time.Second), bgp.Pending)},
			sessions: bpSessions(bpLow, up),
			tombs:    []bgp.Claim{{Block: bpBlk2, Owner: bpHigh, Claimed: forgetAt, State: bgp.Forgotten}},
			want:     []bgp.Claim{{Block: bpBlk2, Owner: bpHigh, Claimed: forgetAt, State: bgp.Forgotten}},
		},
		{
			name:     "one claim per block: an own claim is not replaced by an earlier learned one",
			blocks:   []store.Block{bpOwn(bpBlk1, store.BlockPending, bpAgo(time.Second), 0)},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpLow, t0, bgp.Confirmed)},
			sessions: bpSessions(bpLow, up),
			want:     []bgp.Claim{ownClaimOf(bpBlk1, bpAgo(time.Second), bgp.Pending)},
		},
		{
			name: "one claim per block: of two learned claims the better is relayed",
			learned: []bgp.Claim{
				bpDirect(bpBlk1, bpHigh, t0, bgp.Pending),
				bpDirect(bpBlk1, bpLow, t0, bgp.Pending),
				bpDirect(bpBlk1, bpOther, t0.Add(time.Millisecond), bgp.Pending),
			},
			sessions: bpSessions(bpHigh, up, bpLow, up, bpOther, up),
			want:     []bgp.Claim{relayed(bpDirect(bpBlk1, bpLow, t0, bgp.Pending))},
		},
		{
			name:     "one claim per block: a re-announcement gives way to an earlier direct claim",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Hour))},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpLow, t0.Add(-time.Second), bgp.Confirmed)},
			sessions: bpSessions(bpLow, up),
			want:     []bgp.Claim{relayed(bpDirect(bpBlk1, bpLow, t0.Add(-time.Second), bgp.Confirmed))},
		},
		{
			name:     "one claim per block: a re-announcement stays against a later direct claim",
			blocks:   []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Hour))},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpLow, t0.Add(time.Second), bgp.Pending)},
			sessions: bpSessions(bpLow, up),
			want:     []bgp.Claim{{Block: bpBlk1, Owner: bpHigh, Claimed: t0, State: bgp.Confirmed}},
		},
		{
			name: "everything together, sorted by block address",
			blocks: []store.Block{
				bpRemote(bpBlk3, bpHigh, store.BlockRemote, t0, bpAgo(time.Hour)),
				bpOwn(bpBlk2, store.BlockConfirmed, t0, 1),
			},
			learned:  []bgp.Claim{bpDirect(bpBlk1, bpLow, t0, bgp.Confirmed)},
			sessions: bpSessions(bpLow, up),
			tombs:    []bgp.Claim{{Block: netip.MustParsePrefix("10.244.1.0/26"), Owner: bpOther, Claimed: forgetAt, State: bgp.Forgotten}},
			want: []bgp.Claim{
				relayed(bpDirect(bpBlk1, bpLow, t0, bgp.Confirmed)),
				ownClaimOf(bpBlk2, t0, bgp.Confirmed),
				{Block: bpBlk3, Owner: bpHigh, Claimed: t0, State: bgp.Confirmed},
				{Block: netip.MustParsePrefix("10.244.1.0/26"), Owner: bpOther, Claimed: forgetAt, State: bgp.Forgotten},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := announcements(bpSelf, tc.blocks, tc.learned, tc.sessions, nil, tc.tombs)
			if diff := cmp.Diff(tc.want, got, bpCmpOpts); diff != "" {
				t.Errorf("announcements (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAnnouncementsKeepTombstoneAgainstVoidClaim: a forgotten node that
// comes back announces its old claims; the node that forgot it must go on
// announcing the tombstone, not relay the void claim in its place.
func TestAnnouncementsKeepTombstoneAgainstVoidClaim(t *testing.T) {
	forgetAt := bpAgo(time.Minute)
	tomb := bgp.Claim{Block: bpBlk1, Owner: bpHigh, Claimed: forgetAt, State: bgp.Forgotten}
	got := announcements(bpSelf, nil,
		[]bgp.Claim{bpDirect(bpBlk1, bpHigh, bpAgo(time.Hour), bgp.Confirmed)},
		bpSessions(bpHigh, bpAgo(time.Second)), nil,
		[]bgp.Claim{tomb})
	if diff := cmp.Diff([]bgp.Claim{tomb}, got, bpCmpOpts); diff != "" {
		t.Errorf("announcements (-want +got):\n%s", diff)
	}
}

// TestDecideBlocksRemembersEarlierClaimOfDownOwner: while an owner is
// down, the node believes the blocks it remembers of it (see the comment
// at the top of blockproto.go), so a later claim of such a block by
// another node loses to the remembered one, as any later claim does. The
// remembered claim must stay, and stay re-announced, so that the later
// claimant learns it and gives its claim up.
func TestDecideBlocksRemembersEarlierClaimOfDownOwner(t *testing.T) {
	t0 := bpAgo(time.Hour)
	blocks := []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, t0, bpAgo(time.Second))}
	later := bpDirect(bpBlk1, bpLow, bpAgo(time.Second), bgp.Pending)
	got := decideBlocks(blockView{self: bpSelf, now: bpNow, claimWait: bpClaimWait, settle: bpSettle,
		blocks: blocks, learned: []bgp.Claim{later}, sessions: bpSessions(bpLow, bpAgo(time.Hour))})
	if diff := cmp.Diff(blockPlan{}, got, bpCmpOpts); diff != "" {
		t.Errorf("decideBlocks plan (-want +got):\n%s", diff)
	}
}

func TestQuorum(t *testing.T) {
	up := bpAgo(time.Hour)
	for _, tc := range []struct {
		name      string
		peers     []netip.Addr
		blocks    []store.Block
		sessions  map[netip.Addr]time.Time
		forgotten map[netip.Addr]time.Time
		wantUp    int
		wantKnown int
	}{
		{name: "single node without peers", wantUp: 1, wantKnown: 1},
		{
			name:     "three configured peers, one session",
			peers:    []netip.Addr{bpLow, bpHigh, bpOther},
			sessions: bpSessions(bpHigh, up),
			wantUp:   2, wantKnown: 4,
		},
		{
			name:      "a forgotten peer is not counted, even with a session",
			peers:     []netip.Addr{bpLow, bpHigh, bpOther},
			sessions:  bpSessions(bpHigh, up, bpOther, up),
			forgotten: map[netip.Addr]time.Time{bpOther: up},
			wantUp:    2, wantKnown: 3,
		},
		{
			name:   "owners of remembered blocks count",
			blocks: []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, up, up), bpRemote(bpBlk2, bpLow, store.BlockRemotePending, up, up)},
			wantUp: 1, wantKnown: 3,
		},
		{
			name: "own blocks and remembered blocks without an owner address do not",
			blocks: []store.Block{
				bpOwn(bpBlk1, store.BlockConfirmed, up, 0),
				{CIDR: bpBlk2, Pool: bpPool, Owner: "old-node", State: store.BlockRemote},
			},
			wantUp: 1, wantKnown: 1,
		},
		{
			name:     "a peer with a session that is not configured counts",
			sessions: bpSessions(bpLow, up),
			wantUp:   2, wantKnown: 2,
		},
		{
			name:     "one node known several ways counts once",
			peers:    []netip.Addr{bpLow, bpLow},
			blocks:   []store.Block{bpRemote(bpBlk1, bpLow, store.BlockRemote, up, up)},
			sessions: bpSessions(bpLow, up),
			wantUp:   2, wantKnown: 2,
		},
		{
			name:      "a forget of this node itself does not remove it",
			peers:     []netip.Addr{bpLow},
			forgotten: map[netip.Addr]time.Time{bpSelf: up},
			wantUp:    1, wantKnown: 2,
		},
		{
			name:      "an owner of remembered blocks that was forgotten is not counted",
			blocks:    []store.Block{bpRemote(bpBlk1, bpHigh, store.BlockRemote, up, up)},
			forgotten: map[netip.Addr]time.Time{bpHigh: up},
			wantUp:    1, wantKnown: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotUp, gotKnown := quorum(bpSelf, tc.peers, tc.blocks, tc.sessions, tc.forgotten)
			if gotUp != tc.wantUp || gotKnown != tc.wantKnown {
				t.Errorf("quorum = (%d up, %d known), want (%d, %d)", gotUp, gotKnown, tc.wantUp, tc.wantKnown)
			}
		})
	}
}
