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
)

// steps is the work that runs a block protocol step.
const steps = workStep | workStepNow | workKernel | workRoutes

func (w work) has(x work) bool { return w&x != 0 }

// pending is the loop's work set, safe for the triggers' goroutines. The
// channel wakes the loop; a wake-up that finds the set empty is harmless.
type pending struct {
	mu    sync.Mutex
	set   work
	since time.Time // when set became non-empty
	wake  chan struct{}
}

func newPending() *pending { return &pending{wake: make(chan struct{}, 1)} }

func (p *pending) add(w work) {
	p.mu.Lock()
	if p.set == 0 {
		p.since = time.Now()
	}
	p.set |= w
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// peek returns the set and how long it has been non-empty.
func (p *pending) peek() (work, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.set == 0 {
		return 0, 0
	}
	return p.set, time.Since(p.since)
}

// take empties the set and returns what it held.
func (p *pending) take() work {
	p.mu.Lock()
	defer p.mu.Unlock()
	w := p.set
	p.set = 0
	return w
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
// and how long ago each ended.
type timing struct {
	age                     time.Duration
	lastPolicy, sincePolicy time.Duration
	lastStep, sinceStep     time.Duration
}

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

// kernelPass is how much of the kernel a pass brings in line.
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

// plan says what running the work w does: a policy sync, a block protocol
// step, and after the step which kernel pass.
func plan(w work) (policy, step bool, kernel kernelPass) {
	policy, step = w.has(workPolicy), w.has(steps)
	switch {
	case w.has(workKernel):
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
