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
	}{
		{workPolicy, true, false, kernelIfRouting},
		{workStep, false, true, kernelIfRouting},
		{workStepNow, false, true, kernelIfRouting},
		{workRoutes, false, true, kernelRoutes},
		{workRoutes | workStep, false, true, kernelRoutes},
		{workKernel, false, true, kernelAll},
		{workKernel | workRoutes | workPolicy, true, true, kernelAll},
		{workStep | workPolicy, true, true, kernelIfRouting},
	} {
		policy, step, kernel := plan(tt.w)
		if policy != tt.policy || step != tt.step || kernel != tt.kernel {
			t.Errorf("plan(%05b) = %v, %v, %d; want %v, %v, %d", tt.w, policy, step, kernel, tt.policy, tt.step, tt.kernel)
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
	if w := p.take(); w != workStep|workPolicy {
		t.Errorf("take = %05b, want step and policy", w)
	}
	if w, age := p.peek(); w != 0 || age != 0 {
		t.Errorf("after take: %05b, age %s", w, age)
	}
}
