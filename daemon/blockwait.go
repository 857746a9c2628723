package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/store"
)

// Need is cniserver's NeedBlock: it registers an ADD's need for a block of
// each of pools (both of a dual-stack pod's at once, so that one pass
// claims both), asks for a pass, and waits until the blocks change (the
// caller then allocates again), or a pass after it finds a pool exhausted
// or the node forgotten, or the wait times out.
func (e *blockEngine) Need(ctx context.Context, pools []store.Pool) *types.Error {
	e.mu.Lock()
	for _, p := range pools {
		e.demand[p.CIDR]++
	}
	changed, stepped := e.changed, e.stepped
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		for _, p := range pools {
			if e.demand[p.CIDR]--; e.demand[p.CIDR] <= 0 {
				delete(e.demand, p.CIDR)
			}
		}
		e.mu.Unlock()
	}()
	e.trigger()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, needTimeout)
		defer cancel()
	}
	for {
		select {
		case <-changed:
			return nil // blocks changed: try to allocate again
		case <-stepped:
		case <-ctx.Done():
			return e.timedOut(pools)
		}
		// A pass ran since this ADD asked: it knows this ADD's need.
		e.mu.Lock()
		stepped = e.stepped
		allFree := true
		var errs []error
		for _, p := range pools {
			allFree = allFree && e.free[p.CIDR] > 0
			errs = append(errs, e.failure[p.CIDR])
		}
		e.mu.Unlock()
		if allFree {
			// The pass found free addresses in this node's blocks: a
			// block was confirmed after this ADD found none and before it
			// began to wait (its wake-up came before this wait). Try again.
			return nil
		}
		for _, err := range errs {
			switch {
			case errors.Is(err, store.ErrPoolExhausted):
				return types.NewError(cniserver.ErrPoolExhausted, err.Error()+"; add a pool or free addresses", "")
			case errors.Is(err, errGone):
				return types.NewError(cniserver.ErrNodeForgotten, err.Error(), "docs/ipam.md, \"Removing a node for good\"")
			case errors.Is(err, errRecovered):
				return types.NewError(cniserver.ErrStoreRecovered, err.Error(), "")
			}
		}
		// Waiting for votes, sessions still coming up, a partition: wait on.
	}
}

// timedOut is Need's error when no block came in time: why, for the first
// pool a pass could say it of.
func (e *blockEngine) timedOut(pools []store.Pool) *types.Error {
	cidrs := make([]string, len(pools))
	for i, p := range pools {
		cidrs[i] = p.CIDR.String()
	}
	msg := fmt.Sprintf("no block of pool %s could be confirmed within %s", strings.Join(cidrs, " and "), needTimeout)
	for _, p := range pools {
		if f := e.failureOf(p.CIDR); f != nil {
			msg = f.Error()
			break
		}
	}
	return types.NewError(types.ErrTryAgainLater, msg, "see `reef status` for the voters and BGP sessions")
}

func (e *blockEngine) failureOf(pool netip.Prefix) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failure[pool]
}

// wake tells every waiting ADD to look again, and reports whether one
// waited.
func (e *blockEngine) wake() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	close(e.changed)
	e.changed = make(chan struct{})
	return len(e.demand) > 0
}
