package lab

import (
	"fmt"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// The reconcile loop counts its passes, by result.
const (
	passesOK    = `reef_reconcile_passes_total{result="ok"}`
	passesError = `reef_reconcile_passes_total{result="error"}`
)

// Passes is how many reconcile passes the node's daemon has ended since it
// started, with or without an error (reef_reconcile_passes_total, read from
// its metrics listener). The daemon ends its first pass before it serves
// ADD, so a ready daemon has at least one.
func (n *Node) Passes() (int, error) {
	v, err := n.MetricValues(passesOK, passesError)
	if err != nil {
		return 0, err
	}
	return int(v[passesOK] + v[passesError]), nil
}

// WaitPass waits until a whole reconcile pass has run after the call: the
// event a test needs after it changed what the daemon reconciles, or
// before it checks that a pass changed nothing. It is WaitPasses(1).
func (n *Node) WaitPass(timeout time.Duration) error { return n.WaitPasses(1, timeout) }

// WaitPasses waits until k passes have begun after the call and ended: k+1
// more than when it was called, as the pass that may be running then began
// before. The daemon's counter counts the routes-only passes that follow a
// block change as well as its whole ones (every ReconcileInterval, after
// ADD and DEL, on drift in nftables); in a settled lab, where no block
// changes, every pass is a whole one. A test that waits across a block
// change waits for what it needs (a route, a session) instead.
func (n *Node) WaitPasses(k int, timeout time.Duration) error {
	from, err := n.Passes()
	if err != nil {
		return err
	}
	if err := poll.Until(timeout, func() error {
		now, err := n.Passes()
		if err != nil {
			return err
		}
		if now < from+k+1 {
			return fmt.Errorf("%d passes ended, want %d", now-from, k+1)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("node %s: waiting for %d reconcile passes: %w", n.Name, k, err)
	}
	return nil
}
