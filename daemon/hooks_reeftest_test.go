//go:build reeftest

package daemon

import (
	"log/slog"
	"testing"
	"time"
)

// bin/reef-test reads the hooks, and refuses a bad value by name.
func TestReefTestReadsHooks(t *testing.T) {
	t.Setenv("REEF_TEST_PAUSE_AFTER_VETH", "1s")
	t.Setenv("REEF_TEST_BGP_RESTART_TIME", "8s")
	t.Setenv("REEF_TEST_PASS_LOOP", "1")
	t.Setenv("REEF_TEST_FIRST_PASS_DELAY", "5s")
	t.Setenv("REEF_TEST_LB_RESYNC", "1h")
	h, err := readTestHooks(slog.New(slog.DiscardHandler))
	if err != nil || h != (testHooks{pauseAfterVeth: time.Second, bgpRestartTime: 8 * time.Second, passLoop: true, firstPassDelay: 5 * time.Second, lbResync: time.Hour}) {
		t.Errorf("readTestHooks = %+v, %v", h, err)
	}
	t.Setenv("REEF_TEST_BGP_RESTART_TIME", "10ms")
	if _, err := readTestHooks(slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a restart time under 1s was taken")
	}
}
