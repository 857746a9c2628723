package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/store"
)

// needTimeout bounds how long an ADD waits for a block before it gives up
// with "try again later".
const needTimeout = 30 * time.Second

// tombstoneTTL is how long the node that ran `reef node forget` announces
// the forgotten node's blocks as tombstones; every node that sees one
// records the forget for good.
const tombstoneTTL = 10 * time.Minute

// blockEngine runs the block protocol for the reconcile loop: it feeds
// decideBlocks with the store and the BGP table, applies the plan, claims
// blocks when ADDs need them or free addresses run low, and keeps the
// node's announcements in line. Step runs only in the reconcile goroutine.
type blockEngine struct {
	store     *store.Store
	speaker   *bgp.Speaker
	log       *slog.Logger
	self      netip.Addr
	peers     []netip.Addr
	pools     []store.Pool
	claimWait time.Duration
	settle    time.Duration
	trigger   func()

	mu         sync.Mutex
	demand     map[netip.Prefix]int       // pool -> ADDs waiting for a block
	failure    map[netip.Prefix]error     // pool -> why the last claim could not be made
	changed    chan struct{}              // closed and replaced when blocks change
	tombstones map[netip.Prefix]tombstone // announced by this node
	timer      *time.Timer
}

type tombstone struct {
	claim   bgp.Claim
	expires time.Time
}

func newBlockEngine(st *store.Store, sp *bgp.Speaker, log *slog.Logger, self netip.Addr, peers []netip.Addr, pools []store.Pool, claimWait, settle time.Duration, trigger func()) *blockEngine {
	return &blockEngine{store: st, speaker: sp, log: log.With("component", "blocks"), self: self, peers: peers, pools: pools,
		claimWait: claimWait, settle: settle, trigger: trigger,
		demand: map[netip.Prefix]int{}, failure: map[netip.Prefix]error{}, changed: make(chan struct{}),
		tombstones: map[netip.Prefix]tombstone{}}
}

// Need is cniserver's NeedBlock: it registers an ADD's need for a block of
// pool, asks for a pass, and waits until the blocks change or a claim
// fails.
func (e *blockEngine) Need(ctx context.Context, pool store.Pool) *types.Error {
	e.mu.Lock()
	e.demand[pool.CIDR]++
	delete(e.failure, pool.CIDR)
	ch := e.changed
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.demand[pool.CIDR]--; e.demand[pool.CIDR] <= 0 {
			delete(e.demand, pool.CIDR)
		}
		e.mu.Unlock()
	}()
	e.trigger()
	ctx, cancel := context.WithTimeout(ctx, needTimeout)
	defer cancel()
	for {
		select {
		case <-ch:
		case <-ctx.Done():
			msg := fmt.Sprintf("no block of pool %s could be claimed within %s", pool.CIDR, needTimeout)
			if f := e.failureOf(pool.CIDR); f != "" {
				msg = f
			}
			return types.NewError(types.ErrTryAgainLater, msg, "see `reef status` for the BGP sessions")
		}
		e.mu.Lock()
		err := e.failure[pool.CIDR]
		ch = e.changed
		e.mu.Unlock()
		switch {
		case err == nil:
			return nil // blocks changed: try to allocate again
		case errors.Is(err, store.ErrPoolExhausted):
			return types.NewError(cniserver.ErrPoolExhausted, err.Error()+"; add a pool or free addresses", "")
		}
		// No majority yet (sessions still coming up, or a partition):
		// keep waiting until the timeout.
	}
}

func (e *blockEngine) failureOf(pool netip.Prefix) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.failure[pool]; err != nil {
		return err.Error()
	}
	return ""
}

// wake tells every waiting ADD to look again.
func (e *blockEngine) wake() {
	e.mu.Lock()
	close(e.changed)
	e.changed = make(chan struct{})
	e.mu.Unlock()
}

// Forget frees the blocks of a node gone for good and announces tombstones
// so that the other nodes free them too.
func (e *blockEngine) Forget(owner netip.Addr) ([]netip.Prefix, error) {
	if owner == e.self {
		return nil, fmt.Errorf("%s is this node", owner)
	}
	now := time.Now().UTC()
	freed, err := e.store.Forget(owner, now)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	for _, p := range freed {
		e.tombstones[p] = tombstone{claim: bgp.Claim{Block: p, Owner: owner, Claimed: now, State: bgp.Forgotten}, expires: now.Add(tombstoneTTL)}
	}
	e.mu.Unlock()
	e.log.Warn("node forgotten: its blocks are free for others", "node", owner, "blocks", len(freed))
	e.trigger()
	return freed, nil
}

// sessions returns the established peers with the time they came up, and
// every peer.
func (e *blockEngine) sessions(ctx context.Context) (map[netip.Addr]time.Time, []bgp.PeerStatus) {
	peers := e.speaker.Sessions(ctx)
	up := map[netip.Addr]time.Time{}
	for _, p := range peers {
		if p.Established {
			up[p.Address] = p.Since
		}
	}
	return up, peers
}

func (e *blockEngine) poolOf(p netip.Prefix) netip.Prefix {
	for _, pool := range e.pools {
		if pool.CIDR.Contains(p.Addr()) {
			return pool.CIDR
		}
	}
	return netip.Prefix{}
}

// Step runs the protocol once. It returns the blocks as they stand after,
// for the kernel's desired state.
func (e *blockEngine) Step(ctx context.Context) ([]store.Block, error) {
	var errs []error
	now := time.Now()
	learned, err := e.speaker.Learned()
	if err != nil {
		return nil, err
	}
	sessions, peerNames := e.sessions(ctx)
	blocks, err := e.store.Blocks()
	if err != nil {
		return nil, err
	}
	forgotten, err := e.store.Forgotten()
	if err != nil {
		return nil, err
	}
	up, known := quorum(e.self, e.peers, blocks, sessions, forgotten)
	wait := e.claimWait
	if known == 1 {
		wait = 0 // nobody else to contest a claim
	}
	plan := decideBlocks(blockView{self: e.self, now: now, claimWait: wait, settle: e.settle,
		blocks: blocks, learned: learned, sessions: sessions, forgotten: forgotten})

	changed := false
	for owner, at := range plan.forget {
		if err := e.store.RecordForgotten(owner, at); err != nil {
			errs = append(errs, err)
			continue
		}
		freed, err := e.store.Forget(owner, at)
		if err != nil {
			errs = append(errs, err)
		}
		e.log.Warn("learned that a node was forgotten; its blocks are free", "node", owner, "at", at, "blocks", len(freed))
		changed = true
	}
	for _, c := range plan.conflicts {
		e.log.Error("block conflict", "detail", c)
	}
	for _, p := range plan.drop {
		if err := e.store.DropOwnBlock(p); err != nil {
			errs = append(errs, err)
			continue
		}
		e.log.Warn("lost a block claim to an earlier one; claiming another", "block", p)
		changed = true
	}
	names := map[netip.Addr]string{}
	for _, p := range peerNames {
		names[p.Address] = p.Hostname
	}
	if len(plan.remember) > 0 {
		for i := range plan.remember {
			b := &plan.remember[i]
			if !b.Pool.IsValid() {
				b.Pool = e.poolOf(b.CIDR)
			}
			b.Owner = names[b.OwnerAddr]
		}
		// One transaction for all: a node that learns a whole cluster's
		// blocks at once syncs the file once.
		perBlock, err := e.store.PutRemoteBlocks(plan.remember)
		if err != nil {
			errs = append(errs, err)
		}
		for _, err := range perBlock {
			if err != nil && !errors.Is(err, store.ErrOwnBlock) {
				errs = append(errs, err)
			}
		}
		changed = true
	}
	for _, p := range plan.unremember {
		if err := e.store.DeleteRemoteBlock(p); err != nil {
			errs = append(errs, err)
			continue
		}
		e.log.Info("block no longer claimed by its owner", "block", p)
		changed = true
	}
	for _, p := range plan.confirm {
		if up*2 <= known {
			continue // lost the majority while waiting: confirm later
		}
		if err := e.store.ConfirmBlock(p); err != nil {
			errs = append(errs, err)
			continue
		}
		e.log.Info("block claim confirmed", "block", p)
		changed = true
	}

	if blocks, err = e.store.Blocks(); err != nil {
		return nil, err
	}
	if e.claimAhead(blocks, up, known, now, &errs) {
		changed = true
		if blocks, err = e.store.Blocks(); err != nil {
			return nil, err
		}
	}

	e.mu.Lock()
	var tombs []bgp.Claim
	for p, t := range e.tombstones {
		if now.After(t.expires) {
			delete(e.tombstones, p)
			continue
		}
		tombs = append(tombs, t.claim)
	}
	e.mu.Unlock()
	if err := e.speaker.Announce(announcements(e.self, blocks, learned, sessions, forgotten, tombs)); err != nil {
		errs = append(errs, err)
	}
	if changed {
		e.wake()
	}
	e.schedule(blocks, now, wait)
	return blocks, errors.Join(errs...)
}

// claimAhead claims a block for every pool an ADD waits on, and for every
// pool whose confirmed blocks run low (under a quarter of a block free),
// one pending claim per pool at a time, and only with a majority.
func (e *blockEngine) claimAhead(blocks []store.Block, up, known int, now time.Time, errs *[]error) bool {
	claimed := false
	for _, pool := range e.pools {
		pending, owned, free := false, false, 0
		for _, b := range blocks {
			if !b.Own() || b.Pool != pool.CIDR {
				continue
			}
			owned = true
			if b.State == store.BlockPending {
				pending = true
			} else {
				free += b.Size - b.Used
			}
		}
		e.mu.Lock()
		waiting := e.demand[pool.CIDR] > 0
		e.mu.Unlock()
		// An ADD waits only when no confirmed block has room; a block
		// confirmed in this very pass will serve it.
		needed := waiting && free == 0
		low := owned && free < max(1, (1<<(32-pool.BlockSize))/4)
		if pending || (!needed && !low) {
			continue
		}
		if up*2 <= known {
			e.fail(pool.CIDR, fmt.Errorf("cannot claim a block of pool %s: this node reaches %d of the %d nodes it knows (itself included) and needs a majority; check `reef status`", pool.CIDR, up, known))
			continue
		}
		p, err := e.store.Claim(pool, now)
		if err != nil {
			if needed || !errors.Is(err, store.ErrPoolExhausted) {
				e.fail(pool.CIDR, err)
			}
			continue
		}
		e.log.Info("claimed a block; announcing it before use", "block", p, "pool", pool.CIDR, "forADD", needed)
		e.mu.Lock()
		delete(e.failure, pool.CIDR)
		e.mu.Unlock()
		claimed = true
	}
	return claimed
}

func (e *blockEngine) fail(pool netip.Prefix, err error) {
	e.mu.Lock()
	first := e.failure[pool] == nil
	e.failure[pool] = err
	e.mu.Unlock()
	if first {
		e.log.Warn("cannot claim a block", "pool", pool, "error", err)
	}
	e.wake()
}

// schedule asks for a pass when the next pending claim matures.
func (e *blockEngine) schedule(blocks []store.Block, now time.Time, wait time.Duration) {
	var next time.Duration
	for _, b := range blocks {
		if b.State != store.BlockPending {
			continue
		}
		d := max(wait-now.Sub(b.Claimed), time.Millisecond)
		if next == 0 || d < next {
			next = d
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if next > 0 {
		e.timer = time.AfterFunc(next, e.trigger)
	} else if len(e.tombstones) > 0 || len(e.demand) > 0 {
		e.timer = time.AfterFunc(time.Second, e.trigger)
	}
}
