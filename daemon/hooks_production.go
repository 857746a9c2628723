//go:build !reeftest

package daemon

import (
	"log/slog"
)

// readTestHooks of the production binary: no hooks, and nothing read from
// the environment. The lab's tests that need them run bin/reef-test, built
// with the reeftest tag (hooks_reeftest.go).
func readTestHooks(*slog.Logger) (testHooks, error) { return testHooks{}, nil }
