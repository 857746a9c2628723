package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestRestartFlagGobgpd: a router sees the graceful-restart Restart
// State bit (R, RFC 4724) in the OPEN of a node's daemon only after a
// restart that the kernel's routes of reef's lived through (README, "the
// restarting flag is set only after a restart that kept the node's
// forwarding state"): the first start sends R=0; a start after SIGTERM or
// kill -9 R=1 when the kernel holds the node's block (its blackhole and
// its pod's route), and R=0 when it holds nothing of reef's: before the
// node's first pod, and after reef's routes were flushed while the
// daemon was down, as a reboot leaves the kernel, or with the state dir
// wiped (a new node on the old one's kernel). No stop sends a
// NOTIFICATION (no Cease). The router is Debian's gobgpd, an external
// peer of the node; `gobgp neighbor` shows the flags of the OPEN it last
// received and counts the messages.
func TestRestartFlagGobgpd(t *testing.T) {
	timerBound(t)
	l := newLab(t)
	n, g := nodeWithGobgpd(t, l, nil)
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	neighbor := func() (lab.GobgpNeighbor, string) {
		nb, err := g.Neighbor(n.Address)
		if err != nil {
			return nb, err.Error()
		}
		return nb, ""
	}
	opens := 0
	// opened waits for the session of the daemon's latest start (the
	// old one seen down first, so that this one is the new daemon's) and
	// checks the R bit of its OPEN.
	opened := func(after string, wantR bool) lab.GobgpNeighbor {
		t.Helper()
		var nb lab.GobgpNeighbor
		eventually(t, 20*time.Second, func() string {
			var msg string
			if nb, msg = neighbor(); msg != "" {
				return msg
			}
			if nb.State != "ESTABLISHED" || nb.OpensReceived <= opens {
				return fmt.Sprintf("after %s, gobgpd's session with the node: %+v, want established on a new OPEN (it had %d)", after, nb, opens)
			}
			return ""
		})
		opens = nb.OpensReceived
		if !nb.GracefulRestart {
			t.Errorf("after %s, the node's OPEN (gobgpd's %d.) has no graceful-restart capability", after, opens)
		}
		if nb.RestartFlag != wantR {
			t.Errorf("after %s, the node's OPEN (gobgpd's %d.) has the Restart State bit %v, want %v", after, opens, nb.RestartFlag, wantR)
		}
		return nb
	}
	closed := func(after string) {
		t.Helper()
		eventually(t, 20*time.Second, func() string {
			if nb, msg := neighbor(); msg != "" || nb.State == "ESTABLISHED" {
				return fmt.Sprintf("after %s, gobgpd still has the session: %+v %s", after, nb, msg)
			}
			return ""
		})
	}

	opened("the first start", false)

	// restart stops the daemon (SIGTERM, or SIGKILL with kill), runs
	// between before it starts again (the flush of a reboot), and checks
	// the R bit of the new daemon's OPEN.
	restart := func(what string, kill bool, between func(), wantR bool) {
		t.Helper()
		stop := n.Stop
		if kill {
			stop = n.Kill
		}
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		closed(what)
		if between != nil {
			between()
		}
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		if nb := opened(what+" and a start", wantR); nb.NotificationsReceived != 0 {
			t.Errorf("gobgpd received %d NOTIFICATION messages from the node, want none (no Cease at a stop)", nb.NotificationsReceived)
		}
	}
	// Before the first pod the kernel holds nothing of reef's.
	restart("SIGTERM, no pod yet", false, nil, false)
	restart("kill -9, no pod yet", true, nil, false)

	newPod(t, n, "p1")
	var blocks []netip.Prefix
	for _, b := range blocksOf(t, n) {
		blocks = append(blocks, netip.MustParsePrefix(b))
	}
	if len(blocks) == 0 {
		t.Fatal("the node has no confirmed block after its first ADD")
	}
	waitBlackholes(t, n, blocks...)
	// A reboot is played by flushing reef's routes while the daemon is
	// down: the kernel of a rebooted node holds none.
	flush := func() { run(t, l, n.Netns, "ip", "-4", "route", "flush", "proto", "238") }
	restart("SIGTERM with a pod", false, nil, true)
	restart("kill -9 with a pod", true, nil, true)
	restart("kill -9 with a pod, reef's routes flushed", true, flush, false)
	waitBlackholes(t, n, blocks...)
	restart("SIGTERM with a pod, reef's routes flushed", false, flush, false)
	// A state dir wiped on a live kernel: a new node, whose first pass
	// removes the old one's pods; the old routes are no state of its.
	waitBlackholes(t, n, blocks...)
	restart("kill -9 with a pod, the state dir wiped", true, func() {
		if err := os.RemoveAll(n.StateDir); err != nil {
			t.Fatal(err)
		}
	}, false)
}
