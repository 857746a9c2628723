package daemon

import (
	"sync"
	"time"
)

// work is what the reconcile loop has pending: one set, filled by the
// triggers and emptied by the loop when it runs the work.
type work uint8

const (
	// workPolicy: a NetworkPolicy sync (an API event, a DEL).
	workPolicy work = 1 << iota
	// workStep: a block protocol step (a BGP update).
	workStep
	// workStepNow: a step without waiting for the step gap (an ADD waiting
	// for a block, a forget).
	workStepNow
	// workKernel: a whole kernel pass, after a step (the interval, an ADD
	// or DEL, the start, drift in nftables).
	workKernel
	// workRoutes: the routes-only pass an earlier step put off because it
	// woke ADDs waiting for a block (see reconciler.once).
	workRoutes
	// workRetry: a whole pass again after passes that ended in error,
	// once retryDelay has passed (reconciler.retry).
	workRetry
)

// steps is the work that runs a block protocol step.
const steps = workStep | workStepNow | workKernel | workRoutes | workRetry

func (w work) has(x work) bool { return w&x != 0 }

// pending is the loop's work set, safe for the triggers' goroutines. The
// channel wakes the loop; a wake-up that finds the set empty is harmless.
type pending struct {
	mu    sync.Mutex
	set   work
	since time.Time // when set, a retry aside, became non-empty
	wake  chan struct{}
}

func newPending() *pending { return &pending{wake: make(chan struct{}, 1)} }

func (p *pending) add(w work) {
	p.mu.Lock()
	if p.set&^workRetry == 0 && w&^workRetry != 0 {
		p.since = time.Now()
	}
	p.set |= w
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// peek returns the set and how long it has been non-empty, a retry
// aside (a retry waits for its own delay: next).
func (p *pending) peek() (work, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set&^workRetry == 0 {
		return p.set, 0
	}
	return p.set, time.Since(p.since)
}

// take takes w out of the set and returns what the set held of it.
func (p *pending) take(w work) work {
	p.mu.Lock()
	defer p.mu.Unlock()
	got := p.set & w
	p.set &^= w
	return got
}

// Trigger asks for a whole pass soon; triggers that come while one is
// pending fold into it.
func (p *pending) Trigger() { p.add(workStep | workKernel) }

// TriggerPolicy asks for a NetworkPolicy sync soon (an API event, a
// DEL): it runs in this loop, which owns the kernel state, without a
// block protocol step or a kernel pass of its own.
func (p *pending) TriggerPolicy() { p.add(workPolicy) }

// TriggerBlocks asks for a block protocol step at once (an ADD waiting
// for a block, a forget; BGP updates come through BGPChanged). The kernel
// side of the pass runs only when the step changed the blocks it routes
// (own confirmed blocks, remote blocks and their owners). Through a route
// reflector every node hears every update of the cluster; a whole pass per
// update kept 100 clients' CPUs busy on kernel dumps that found nothing to
// do. Drift in the kernel is repaired by the passes of the interval and of
// Trigger.
func (p *pending) TriggerBlocks() { p.add(workStepNow) }

// BGPChanged is TriggerBlocks for a BGP update: the step may wait a
// little (stepGap) so that the updates of a burst fold into one step.
// Updates come in bursts (a claim brings the claim, then a vote per voter,
// then the confirmed claim and its route; through a reflector, two copies
// of each), and a step per update kept every node of a 100-node cluster
// busy re-reading its BGP table and store.
func (p *pending) BGPChanged() { p.add(workStep) }

// timing is what the loop knows of its recent work: how long the work now
// pending has waited, how long the last policy sync and the last step took,
// and how long ago each ended; how many passes in a row ended in error,
// how long ago the last did, and the interval of the whole passes.
type timing struct {
	age                     time.Duration
	lastPolicy, sincePolicy time.Duration
	lastStep, sinceStep     time.Duration
	failures                int
	sinceFailure, interval  time.Duration
}

// next is what of the pending work w runs now (nothing: 0) and, when
// nothing does, how long until something is due. All but a retry wait as
// delay says. A retry waits its own delay after the last failure
// (retryDelay), whatever else runs meanwhile, unless a whole pass is due
// anyway, which takes it along; once due it runs as a whole pass with
// everything else pending.
func next(w work, t timing) (now work, wait time.Duration) {
	rest := w &^ workRetry
	wait = -1
	if rest != 0 {
		switch d := delay(rest, t); {
		case d == 0 && rest.has(workKernel):
			return w, 0
		case d == 0:
			return rest, 0
		default:
			wait = d
		}
	}
	if w.has(workRetry) {
		backoff, _ := retryDelay(t.failures, t.interval)
		d := max(0, backoff-t.sinceFailure)
		if d == 0 {
			return w, 0
		}
		if wait < 0 || d < wait {
			wait = d
		}
	}
	return 0, max(0, wait)
}

// retryDelay is how long after the last of failures passes in a row that
// ended in error the next is tried: firstRetry, doubled with each failure
// (cilium's reconciler retries a failed target so: exponentially, capped).
// ok is false once that reaches the interval: the interval's own whole
// pass is then the retry.
func retryDelay(failures int, interval time.Duration) (d time.Duration, ok bool) {
	if failures < 1 {
		return 0, false
	}
	d = firstRetry << min(failures-1, 20)
	if d >= interval {
		return interval, false
	}
	return d, true
}

const firstRetry = time.Second

// delay is how long the loop waits before it runs the work w: zero for a
// whole pass or a step asked for at once; for a step, until the step gap
// after the last step (stepGap) has passed, so that the updates of a BGP
// burst fold into one step; for a policy sync alone, settle after the
// first event (the events of one change come together), and in a storm of
// events as long as the last sync took, up to maxSettle, so that syncs are
// spaced by their own duration. No decision depends on these waits; they
// only delay one.
func delay(w work, t timing) time.Duration {
	switch {
	case w == 0:
		return 0
	case w.has(workKernel | workStepNow):
		return 0
	case w.has(steps):
		return max(0, stepGap(t.lastStep)-t.sinceStep)
	default: // a policy sync alone
		return max(0, max(settle, min(maxSettle, t.lastPolicy-t.sincePolicy))-t.age)
	}
}

// kernelPass is how much of the kernel a pass brings in line, and when.
type kernelPass uint8

const (
	// kernelIfRouting: the routes, and only when the step changed what is
	// routed (see reconciler.once).
	kernelIfRouting kernelPass = iota
	// kernelRoutes: the routes, a pass an earlier step put off.
	kernelRoutes
	// kernelAll: everything.
	kernelAll
)

// scope is which owners a kernel pass brings in line besides the routes,
// which every pass does.
type scope uint8

const (
	// resyncTunnels: the tunnels' owner reads both devices and repairs
	// drift; without it, it syncs only a device whose snapshot changed
	// (tunnels.Sync).
	resyncTunnels scope = 1 << iota
	// syncPods: the pods' side: endpoints released, sysctls, tc,
	// nftables, NetworkPolicy, the records' MTUs.
	syncPods

	// routesOnly is the pass of a step that changed what is routed.
	routesOnly scope = 0
	// wholePass is every owner.
	wholePass = resyncTunnels | syncPods
)

func (s scope) has(x scope) bool { return s&x == x }

// scope is what the kernel pass k brings in line.
func (k kernelPass) scope() scope {
	if k == kernelAll {
		return wholePass
	}
	return routesOnly
}

// plan says what running the work w does: a policy sync, a block protocol
// step, and after the step which kernel pass.
func plan(w work) (policy, step bool, kernel kernelPass) {
	policy, step = w.has(workPolicy), w.has(steps)
	switch {
	case w.has(workKernel | workRetry):
		kernel = kernelAll
	case w.has(workRoutes):
		kernel = kernelRoutes
	}
	return policy, step, kernel
}

// stepGap is how long a BGP-triggered step waits after the last step
// ended: twice as long as that step took, at least minStepGap. A node whose
// steps get slow (a loaded machine, a big table, GoBGP busy: the table is
// read through GoBGP's own loop) steps less often instead of adding to the
// load. (A cap of 250 ms made the 100-client reflector bench slower: more
// steps, each waiting longer on GoBGP.)
func stepGap(lastStep time.Duration) time.Duration { return max(minStepGap, 2*lastStep) }

const minStepGap = 10 * time.Millisecond
