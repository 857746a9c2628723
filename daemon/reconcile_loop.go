package daemon

// The reconcile loop: what runs when (schedule.go decides), and the retry
// of a failed pass.

import (
	"context"
	"time"
)

// Run loops until ctx ends: it runs the pending work that next says is
// due, and asks for a whole pass every interval.
func (r *reconciler) Run(ctx context.Context) {
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	due := time.NewTimer(time.Hour)
	due.Stop()
	for {
		w, age := r.pending.peek()
		now, wait := next(w, r.timing(age, time.Now()))
		if now != 0 {
			r.run(r.pending.take(now))
			if r.passLoop {
				r.pending.add(workStep | workKernel)
			}
			continue
		}
		var fire <-chan time.Time
		if w != 0 {
			due.Reset(wait)
			fire = due.C
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.pending.add(workStep | workKernel)
		case <-r.pending.wake:
		case <-fire:
		}
		due.Stop()
	}
}

// timing is what the loop knows at now of its recent work, for next; age
// is how long the work pending has waited.
func (r *reconciler) timing(age time.Duration, now time.Time) timing {
	return timing{age: age,
		lastPolicy: r.lastPolicy, sincePolicy: now.Sub(r.lastPolicyEnd),
		lastStep: r.lastStep, sinceStep: now.Sub(r.lastStepEnd),
		failures: r.failures, sinceFailure: now.Sub(r.failedAt), interval: r.interval}
}

// run does the work w, as plan says.
func (r *reconciler) run(w work) {
	policy, step, kernel := plan(w)
	if policy && r.policy != nil {
		r.lastPolicy = r.policy.changed()
		r.lastPolicyEnd = time.Now()
	}
	if !step {
		return
	}
	err := r.once(kernel)
	if err == nil {
		return
	}
	if d, ok := r.retryAfter(); ok {
		r.log.Error("reconcile pass failed; retrying", "in", d, "failures", r.failures, "error", err)
		return
	}
	r.log.Error("reconcile pass failed; retrying next interval", "failures", r.failures, "error", err)
}

// ended notes how a pass of the kernel pass k ended (err, at now): a
// whole pass without error ends a run of failures; a pass that failed
// counts one more.
func (r *reconciler) ended(k kernelPass, err error, now time.Time) {
	switch {
	case err != nil:
		r.failures++
		r.failedAt = now
	case k == kernelAll:
		r.failures = 0
	}
}

// retryAfter asks for a whole pass again after the failures so far, while
// retryDelay is shorter than the interval (workRetry: next holds it back
// until the delay has passed); after that the interval's own pass is the
// retry.
func (r *reconciler) retryAfter() (time.Duration, bool) {
	d, ok := retryDelay(r.failures, r.interval)
	if ok {
		r.pending.add(workRetry)
	}
	return d, ok
}
