package daemon

import (
	"testing"
	"time"
)

func TestDelay(t *testing.T) {
	ms := time.Millisecond
	quiet := timing{sincePolicy: time.Hour, sinceStep: time.Hour}
	for _, tt := range []struct {
		name string
		w    work
		t    timing
		want time.Duration
	}{
		{"nothing pending", 0, quiet, 0},
		{"a whole pass runs at once", workKernel, timing{lastStep: 40 * ms}, 0},
		{"a step asked for at once", workStepNow | workStep, timing{lastStep: 40 * ms}, 0},
		{"a whole pass takes a pending policy sync along at once", workKernel | workPolicy, timing{lastPolicy: time.Second}, 0},
		{"a BGP step long after the last one", workStep, quiet, 0},
		{"a BGP step right after a 40 ms step waits twice that", workStep, timing{lastStep: 40 * ms}, 80 * ms},
		{"a BGP step 30 ms after a 40 ms step", workStep, timing{lastStep: 40 * ms, sinceStep: 30 * ms}, 50 * ms},
		{"a BGP step after a fast step waits the minimum gap", workStep, timing{lastStep: ms}, minStepGap},
		{"a routes pass put off by a step waits the step gap", workRoutes, timing{lastStep: 40 * ms}, 80 * ms},
		{"a policy sync with a step waits as the step does", workPolicy | workStep, timing{lastStep: 40 * ms, lastPolicy: time.Second}, 80 * ms},
		{"a policy sync alone waits settle for the rest of a change", workPolicy, quiet, settle},
		{"a policy sync that waited settle runs", workPolicy, timing{age: settle, sincePolicy: time.Hour}, 0},
		{"in a storm, syncs are spaced by their duration", workPolicy, timing{lastPolicy: 300 * ms, sincePolicy: 100 * ms}, 200 * ms},
		{"the spacing counts the time already waited", workPolicy, timing{age: 150 * ms, lastPolicy: 300 * ms, sincePolicy: 100 * ms}, 50 * ms},
		{"no sync waits more than maxSettle", workPolicy, timing{lastPolicy: time.Minute}, maxSettle},
	} {
		if got := delay(tt.w, tt.t); got != tt.want {
			t.Errorf("%s: delay(%05b) = %s, want %s", tt.name, tt.w, got, tt.want)
		}
	}
}

func TestPlan(t *testing.T) {
	for _, tt := range []struct {
		w            work
		policy, step bool
		kernel       kernelPass
		scope        scope
	}{
		{workPolicy, true, false, kernelIfRouting, routesOnly},
		{workStep, false, true, kernelIfRouting, routesOnly},
		{workStepNow, false, true, kernelIfRouting, routesOnly},
		{workRoutes, false, true, kernelRoutes, routesOnly},
		{workRoutes | workStep, false, true, kernelRoutes, routesOnly},
		{workKernel, false, true, kernelAll, wholePass},
		{workKernel | workRoutes | workPolicy, true, true, kernelAll, wholePass},
		{workStep | workPolicy, true, true, kernelIfRouting, routesOnly},
		{workRetry, false, true, kernelAll, wholePass},
		{workRetry | workStep | workPolicy, true, true, kernelAll, wholePass},
	} {
		policy, step, kernel := plan(tt.w)
		if policy != tt.policy || step != tt.step || kernel != tt.kernel || kernel.scope() != tt.scope {
			t.Errorf("plan(%06b) = %v, %v, %d (scope %02b); want %v, %v, %d (scope %02b)", tt.w, policy, step, kernel, kernel.scope(),
				tt.policy, tt.step, tt.kernel, tt.scope)
		}
	}
}

// TestRetryDelay: a failed pass is retried after 1 s, 2 s, 4 s ..., until
// that reaches the interval, whose own pass is then the retry.
func TestRetryDelay(t *testing.T) {
	s := time.Second
	for _, tt := range []struct {
		failures int
		interval time.Duration
		want     time.Duration
		ok       bool
	}{
		{0, 30 * s, 0, false},
		{1, 30 * s, s, true},
		{2, 30 * s, 2 * s, true},
		{3, 30 * s, 4 * s, true},
		{5, 30 * s, 16 * s, true},
		{6, 30 * s, 30 * s, false},
		{7, 30 * s, 30 * s, false},
		{1000, 30 * s, 30 * s, false},
		{1, s, s, false},
		{1, 2 * s, s, true},
		{2, 2 * s, 2 * s, false},
	} {
		if got, ok := retryDelay(tt.failures, tt.interval); got != tt.want || ok != tt.ok {
			t.Errorf("retryDelay(%d, %s) = %s, %v; want %s, %v", tt.failures, tt.interval, got, ok, tt.want, tt.ok)
		}
	}
}

// TestNext: what of the pending set runs now, or how long until something
// does. A retry waits its backoff whatever else runs, unless a whole pass
// takes it along; a due retry takes everything pending along.
func TestNext(t *testing.T) {
	ms, s := time.Millisecond, time.Second
	quiet := timing{sincePolicy: time.Hour, sinceStep: time.Hour, interval: 30 * s}
	failed := func(failures int, since time.Duration) timing {
		t := quiet
		t.failures, t.sinceFailure = failures, since
		return t
	}
	for _, tt := range []struct {
		name string
		w    work
		t    timing
		now  work
		wait time.Duration
	}{
		{"nothing pending", 0, quiet, 0, 0},
		{"a whole pass runs at once", workKernel, quiet, workKernel, 0},
		{"a BGP step after the gap", workStep, timing{lastStep: 40 * ms, sinceStep: time.Hour}, workStep, 0},
		{"a BGP step waits the gap", workStep, timing{lastStep: 40 * ms}, 0, 80 * ms},
		{"a retry right after the first failure waits 1 s", workRetry, failed(1, 0), 0, s},
		{"a retry 400 ms after the first failure", workRetry, failed(1, 400*ms), 0, 600 * ms},
		{"a retry after the third failure waits 4 s", workRetry, failed(3, s), 0, 3 * s},
		{"a retry whose backoff has passed runs", workRetry, failed(2, 2*s), workRetry, 0},
		{"a whole pass takes a pending retry along", workRetry | workKernel, failed(1, 0), workRetry | workKernel, 0},
		{"a step now runs and leaves the retry waiting", workRetry | workStepNow, failed(1, 0), workStepNow, 0},
		{"a BGP step that waits the gap, before the retry", workRetry | workStep, timing{lastStep: 40 * ms, failures: 1, interval: 30 * s}, 0, 80 * ms},
		{"a retry due before the BGP step's gap", workRetry | workStep, timing{lastStep: 2 * s, failures: 1, interval: 30 * s}, 0, s},
		{"a due retry takes a waiting policy sync along", workRetry | workPolicy, failed(1, s), workRetry | workPolicy, 0},
		{"a policy sync alone settles, the retry waits", workRetry | workPolicy, failed(4, 0), 0, settle},
	} {
		now, wait := next(tt.w, tt.t)
		if now != tt.now || wait != tt.wait {
			t.Errorf("%s: next(%06b) = %06b, %s; want %06b, %s", tt.name, tt.w, now, wait, tt.now, tt.wait)
		}
	}
}

// Triggers fold into one set; take empties it, and its age starts again
// with the next trigger.
func TestPendingFolds(t *testing.T) {
	p := newPending()
	if w, _ := p.peek(); w != 0 {
		t.Fatalf("new set holds %05b", w)
	}
	p.add(workStep)
	p.add(workPolicy)
	p.add(workStep)
	if w, _ := p.peek(); w != workStep|workPolicy {
		t.Errorf("peek = %05b, want step and policy", w)
	}
	select {
	case <-p.wake:
	default:
		t.Error("add did not wake the loop")
	}
	select {
	case <-p.wake:
		t.Error("three adds woke the loop twice: the wake-up should fold")
	default:
	}
	if w := p.take(workStep | workPolicy | workKernel); w != workStep|workPolicy {
		t.Errorf("take = %05b, want step and policy", w)
	}
	if w, age := p.peek(); w != 0 || age != 0 {
		t.Errorf("after take: %05b, age %s", w, age)
	}
}

// A retry left pending is not work that has waited: the age of what comes
// after it starts with that.
func TestPendingRetryKeepsNoAge(t *testing.T) {
	p := newPending()
	p.add(workRetry | workStep)
	if w := p.take(workStep); w != workStep {
		t.Fatalf("take(step) = %06b", w)
	}
	if w, age := p.peek(); w != workRetry || age != 0 {
		t.Errorf("after taking the step: %06b, age %s; want the retry, age 0", w, age)
	}
	p.since = time.Now().Add(-time.Hour) // as if the retry had waited an hour
	p.add(workPolicy)
	if _, age := p.peek(); age > time.Minute {
		t.Errorf("a policy sync added beside an old retry has waited %s", age)
	}
	if w := p.take(^work(0)); w != workRetry|workPolicy {
		t.Errorf("take(all) = %06b", w)
	}
}
