package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestWatchdogVerdict(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	const interval = 30 * time.Second
	for _, tc := range []struct {
		name      string
		statusErr error
		ready     bool
		lastPass  time.Time
		want      string // "" for a ping
	}{
		{name: "starting, socket answers", ready: false},
		{name: "starting, socket silent", statusErr: errors.New("connection refused"), want: "own socket does not answer"},
		{name: "ready, fresh pass", ready: true, lastPass: now.Add(-10 * time.Second)},
		{name: "ready, pass at the limit", ready: true, lastPass: now.Add(-2*interval - watchdogGrace)},
		{name: "ready, loop stuck", ready: true, lastPass: now.Add(-2*interval - watchdogGrace - time.Second), want: "stuck"},
		{name: "ready, never a pass", ready: true, want: "never finished a pass"},
		{name: "ready, socket silent", ready: true, lastPass: now, statusErr: errors.New("deadline exceeded"), want: "own socket does not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := watchdogVerdict(now, tc.statusErr, tc.ready, tc.lastPass, interval)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want a ping", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
