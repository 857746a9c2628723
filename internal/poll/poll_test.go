package poll

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilHolds(t *testing.T) {
	calls := 0
	err := Until(time.Second, func() error {
		if calls++; calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Until = %v after %d calls, want nil after 3", err, calls)
	}
}

func TestUntilTimesOutWithTheLastError(t *testing.T) {
	calls := 0
	start := time.Now()
	err := Until(50*time.Millisecond, func() error { calls++; return fmt.Errorf("still missing (call %d)", calls) })
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("still missing (call %d)", calls)) || !strings.HasPrefix(err.Error(), "after 50ms: ") {
		t.Errorf("Until = %v, want the last error after 50ms", err)
	}
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("Until gave up after %s, before its timeout", took)
	}
}

func TestUntilStops(t *testing.T) {
	gone := errors.New("daemon exited")
	calls := 0
	err := Until(time.Minute, func() error { calls++; return Stop(gone) })
	if !errors.Is(err, gone) || err.Error() != "daemon exited" || calls != 1 {
		t.Errorf("Until = %v after %d calls, want %v at once", err, calls, gone)
	}
}

type fakeT struct{ failed string }

func (f *fakeT) Helper()                           {}
func (f *fakeT) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestFor(t *testing.T) {
	var f fakeT
	For(&f, 20*time.Millisecond, func() error { return errors.New("no route to 10.244.1.0/26") })
	if f.failed != "after 20ms: no route to 10.244.1.0/26" {
		t.Errorf("For failed the test with %q", f.failed)
	}
	f = fakeT{}
	For(&f, time.Second, func() error { return nil })
	if f.failed != "" {
		t.Errorf("For failed a test whose condition held: %q", f.failed)
	}
}

func TestEveryKeepsItsPause(t *testing.T) {
	var at []time.Time
	err := Every(20*time.Millisecond, time.Second, func() error {
		if at = append(at, time.Now()); len(at) < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || len(at) != 4 {
		t.Fatalf("Every = %v after %d calls, want nil after 4", err, len(at))
	}
	// Until would pause 10ms, then 20ms: Every pauses 20ms each time.
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < 20*time.Millisecond {
			t.Errorf("pause %d of Every(20ms) was %s", i, d)
		}
	}
}

func TestEveryTimesOutAndStops(t *testing.T) {
	err := Every(5*time.Millisecond, 30*time.Millisecond, func() error { return errors.New("no session") })
	if err == nil || err.Error() != "after 30ms: no session" {
		t.Errorf("Every = %v, want the last error after 30ms", err)
	}
	gone := errors.New("interrupted")
	calls := 0
	err = Every(time.Hour, time.Hour, func() error { calls++; return Stop(gone) })
	if !errors.Is(err, gone) || calls != 1 {
		t.Errorf("Every = %v after %d calls, want %v at once", err, calls, gone)
	}
}
