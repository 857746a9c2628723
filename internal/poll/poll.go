// Package poll is the one polling loop of reef's tests and lab: it asks a
// condition again and again until the condition holds, and says what was
// still missing when it gives up. Tests wait with it for the event they
// need (a route, a session, a pass of the reconcile loop), never for a
// fixed time.
package poll

import (
	"errors"
	"fmt"
	"time"
)

// The pause between two calls of a condition starts at firstPause and
// doubles up to maxPause: a condition that holds soon is seen soon, and a
// long wait (a hold time, a pass every second) does not keep the machine
// busy with `ip` and status calls.
const (
	firstPause = 10 * time.Millisecond
	maxPause   = 100 * time.Millisecond
)

// Until calls cond until it returns nil, and then returns nil. When
// timeout has passed, it returns cond's last error, saying how long it
// waited. cond returns Stop(err) to end the wait at once with err (a
// daemon that exited will not become ready). cond is called at least once.
func Until(timeout time.Duration, cond func() error) error {
	return loop(timeout, firstPause, maxPause, cond)
}

// Every is Until with the same pause between any two calls: for a wait
// that measures as it asks (when a route first showed, how many sessions
// were up at each call), where the pause is the resolution of the figure,
// or for a condition too dear to ask more often (a walk of every process's
// file descriptors).
func Every(pause, timeout time.Duration, cond func() error) error {
	return loop(timeout, pause, pause, cond)
}

func loop(timeout, first, most time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	pause := first
	for {
		err := cond()
		if err == nil {
			return nil
		}
		var s stopError
		if errors.As(err, &s) {
			return s.err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %w", timeout, err)
		}
		time.Sleep(min(pause, max(time.Until(deadline), time.Millisecond)))
		pause = min(2*pause, most)
	}
}

// Stop wraps err so that Until returns it at once instead of asking again.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return stopError{err}
}

type stopError struct{ err error }

func (s stopError) Error() string { return s.err.Error() }
func (s stopError) Unwrap() error { return s.err }

// T is what For needs of a *testing.T (or B); the lab, which is not a
// test, does not import package testing.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// For is Until for a test: it fails t with cond's last error.
func For(t T, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Until(timeout, cond); err != nil {
		t.Fatalf("%v", err)
	}
}
