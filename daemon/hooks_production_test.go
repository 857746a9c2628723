//go:build !reeftest

package daemon

import (
	"log/slog"
	"testing"
)

// The production binary reads no test hook from its environment.
func TestProductionIgnoresTestHooks(t *testing.T) {
	t.Setenv("REEF_TEST_PAUSE_AFTER_VETH", "1s")
	t.Setenv("REEF_TEST_BGP_RESTART_TIME", "8s")
	t.Setenv("REEF_TEST_PASS_LOOP", "1")
	t.Setenv("REEF_TEST_FIRST_PASS_DELAY", "5s")
	t.Setenv("REEF_TEST_LB_RESYNC", "1h")
	h, err := readTestHooks(slog.New(slog.DiscardHandler))
	if err != nil || h != (testHooks{}) {
		t.Errorf("readTestHooks = %+v, %v; want no hooks", h, err)
	}
}
