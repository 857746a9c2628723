package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// quiet is how long a part waited for the machine to go quiet, and
// whether it did.
type quiet struct {
	waited time.Duration
	ok     bool
}

func (q quiet) String() string {
	if !q.ok {
		return fmt.Sprintf("not quiet after %s", q.waited.Round(time.Second))
	}
	return fmt.Sprintf("quiet after %s", q.waited.Round(100*time.Millisecond))
}

// Quiet is at most this busy (both CPUs, one second of /proc/stat).
const (
	quietBusy = 0.10
	quietMax  = 30 * time.Second
)

// meshQuiet waits, at most quietMax, until a second passes in which the
// CPUs are at most quietBusy busy: the namespaces and daemons of the part
// before are gone (the kernel tears namespaces down in the background), so
// that one part's cleanup does not land in the next one's figures.
func meshQuiet(ctx context.Context) quiet {
	began := time.Now()
	err := poll.Until(quietMax, func() error {
		if ctx.Err() != nil {
			return poll.Stop(ctx.Err())
		}
		a, errA := cpuTimes()
		time.Sleep(time.Second) // the second measured: the measurement, not a wait
		b, errB := cpuTimes()
		if err := cmp.Or(errA, errB); err != nil {
			return poll.Stop(err)
		}
		if total := b[0] - a[0]; total > 0 && float64(total-(b[1]-a[1]))/float64(total) <= quietBusy {
			return nil
		}
		return errors.New("busy")
	})
	return quiet{waited: time.Since(began), ok: err == nil}
}

// cpuTimes returns the total and the idle (idle + iowait) jiffies of all
// CPUs, from /proc/stat.
func cpuTimes() ([2]uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]uint64{}, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return [2]uint64{}, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var out [2]uint64
	for i, v := range f[1:] {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return [2]uint64{}, fmt.Errorf("/proc/stat: %q: %w", line, err)
		}
		out[0] += n
		if i == 3 || i == 4 { // idle, iowait
			out[1] += n
		}
	}
	return out, nil
}
