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
