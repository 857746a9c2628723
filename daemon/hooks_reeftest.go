//go:build reeftest

package daemon

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// readTestHooks of the reeftest build (bin/reef-test): the hooks from
// the environment, each announced in the log.
func readTestHooks(log *slog.Logger) (testHooks, error) {
	var h testHooks
	if v := os.Getenv("REEF_TEST_PAUSE_AFTER_VETH"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return h, fmt.Errorf("REEF_TEST_PAUSE_AFTER_VETH: value %q is not a duration", v)
		}
		h.pauseAfterVeth = d
		log.Warn("test hook on: every ADD pauses after creating the veth", "pause", v)
	}
	if v := os.Getenv("REEF_TEST_BGP_RESTART_TIME"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			return h, fmt.Errorf("REEF_TEST_BGP_RESTART_TIME: value %q is not a duration of 1s or more", v)
		}
		h.bgpRestartTime = d
		log.Warn("test hook on: peers are told to keep this node's routes for this long after a drop", "restartTime", v)
	}
	if v := os.Getenv("REEF_TEST_PASS_LOOP"); v != "" {
		if v != "1" {
			return h, fmt.Errorf("REEF_TEST_PASS_LOOP: value %q is not 1", v)
		}
		h.passLoop = true
		log.Warn("test hook on: a whole reconcile pass right after each")
	}
	if v := os.Getenv("REEF_TEST_FIRST_PASS_DELAY"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return h, fmt.Errorf("REEF_TEST_FIRST_PASS_DELAY: value %q is not a positive duration", v)
		}
		h.firstPassDelay = d
		log.Warn("test hook on: the first reconcile pass, and so the node's first announcement, waits", "delay", v)
	}
	if v := os.Getenv("REEF_TEST_LB_RESYNC"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return h, fmt.Errorf("REEF_TEST_LB_RESYNC: value %q is not a positive duration", v)
		}
		h.lbResync = d
		log.Warn("test hook on: LoadBalancer address assignment runs a round without an event only this often", "resync", v)
	}
	return h, nil
}
