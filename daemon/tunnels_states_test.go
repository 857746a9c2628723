package daemon

import (
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/routes/tunnel"
)

// flakyTunnels is the fake kernel's tunnels, counting the reads, with
// calls that fail: fails[call] times from now, each with err.
type flakyTunnels struct {
	tunnelKernel
	err   error
	fails map[string]int
	reads int
}

func (f *flakyTunnels) failing(call string) error {
	if f.fails[call] == 0 {
		return nil
	}
	f.fails[call]--
	return f.err
}

func (f *flakyTunnels) ReadTunnel() (tunnel.State, error) {
	f.reads++
	return f.tunnelKernel.ReadTunnel()
}

func (f *flakyTunnels) ReadIPIP() (tunnel.IPIPState, error) {
	f.reads++
	return f.tunnelKernel.ReadIPIP()
}

func (f *flakyTunnels) ApplyTunnel(want tunnel.State, plan tunnel.Plan, settings func(string) error) error {
	if err := f.failing("ApplyTunnel"); err != nil {
		return err
	}
	return f.tunnelKernel.ApplyTunnel(want, plan, settings)
}

func (f *flakyTunnels) ApplyIPIP(p tunnel.IPIPPlan) error {
	if err := f.failing("ApplyIPIP"); err != nil {
		return err
	}
	return f.tunnelKernel.ApplyIPIP(p)
}

// flaky gives n's tunnels' owner a flakyTunnels on its fake kernel, as
// the state tests build the owner.
func (n *node) flaky() *flakyTunnels {
	f := &flakyTunnels{tunnelKernel: n.k, err: errors.New("create vxlan.reef: no buffer space available"), fails: map[string]int{}}
	n.rec.tunnels = newTunnels(tunnelDeps{kernel: f, store: n.st, sysctls: n.sys}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return f
}

// wantVXLANNode is the kernel's text of a vxNode with both pools through
// VXLAN after a pass that ended without error, on a kernel that never
// failed.
func wantVXLANNode(t *testing.T) string {
	m := vxNode(t)
	m.vxModes(EncapAlways, EncapAlways)
	m.pass()
	return m.text()
}

// TestRetryAfterFailedApply: a whole pass whose vxlan.reef apply fails
// leaves a retry pending; next holds it back 1 s after the failure, the
// retry fails again and waits 2 s, the third try succeeds, the kernel is
// as a pass that never failed leaves it, and the run of failures is over;
// the daemon's first pass (Once) is retried the same way. The loop's
// clock is passed in: nothing sleeps.
func TestRetryAfterFailedApply(t *testing.T) {
	want := wantVXLANNode(t)
	n := vxNode(t)
	n.vxModes(EncapAlways, EncapAlways)
	f := n.flaky()
	f.fails["ApplyTunnel"] = 2
	n.rec.interval = 30 * time.Second
	runDue := func(at time.Time) (ran work, wait time.Duration) {
		t.Helper()
		w, age := n.rec.pending.peek()
		now, wait := next(w, n.rec.timing(age, at))
		if now != 0 {
			n.rec.run(n.rec.pending.take(now))
		}
		return now, wait
	}

	n.rec.pending.Trigger()
	if ran, _ := runDue(time.Now()); ran != workStep|workKernel {
		t.Fatalf("the whole pass asked for did not run: ran %06b", ran)
	}
	for try, backoff := range []time.Duration{time.Second, 2 * time.Second} {
		if w, _ := n.rec.pending.peek(); w != workRetry || n.rec.failures != try+1 {
			t.Fatalf("after failed pass %d: pending %06b, failures %d; want a retry, %d", try+1, w, n.rec.failures, try+1)
		}
		if strings.Contains(n.text(), "link vxlan.reef") {
			t.Fatalf("vxlan.reef is there though its apply failed:\n%s", n.text())
		}
		failed := n.rec.failedAt
		if ran, wait := runDue(failed); ran != 0 || wait != backoff {
			t.Fatalf("right after failure %d: ran %06b, wait %s; want nothing, %s", try+1, ran, wait, backoff)
		}
		if ran, wait := runDue(failed.Add(backoff - time.Millisecond)); ran != 0 || wait != time.Millisecond {
			t.Fatalf("1 ms before the retry: ran %06b, wait %s", ran, wait)
		}
		if ran, _ := runDue(failed.Add(backoff)); ran != workRetry {
			t.Fatalf("%s after failure %d: ran %06b, want the retry", backoff, try+1, ran)
		}
	}
	if w, _ := n.rec.pending.peek(); w != 0 || n.rec.failures != 0 {
		t.Errorf("after the retry that succeeded: pending %06b, failures %d; want none", w, n.rec.failures)
	}
	if got := n.text(); got != want {
		t.Errorf("after the retry that succeeded, kernel\n%s\nwant\n%s", got, want)
	}
	if _, err := n.rec.Last(); err != nil {
		t.Errorf("Last after the retry that succeeded: %v", err)
	}

	// The daemon's first pass (Once, before the loop runs) is retried
	// the same way.
	delete(n.k.vxlan.neigh4, otherNode)
	f.fails["ApplyTunnel"] = 1
	if err := n.rec.Once(); !errors.Is(err, f.err) {
		t.Fatalf("Once whose apply fails: %v", err)
	}
	if w, _ := n.rec.pending.peek(); w != workRetry || n.rec.failures != 1 {
		t.Fatalf("after Once failed: pending %06b, failures %d; want a retry, 1", w, n.rec.failures)
	}
	if ran, _ := runDue(n.rec.failedAt.Add(time.Second)); ran != workRetry {
		t.Fatalf("1 s after Once failed: ran %06b, want the retry", ran)
	}
	if got := n.text(); got != want || n.rec.failures != 0 {
		t.Errorf("after the retry of Once (failures %d), kernel\n%s\nwant\n%s", n.rec.failures, got, want)
	}
}

// TestTunnelsFollowSnapshot: in a routes-only pass the tunnels' owner
// syncs only what its snapshot changes: with the same own blocks and peers
// it reads no device (drift waits for a whole pass); the other node's
// blocks gone or back, it brings vxlan.reef's neighbours and fdb in line;
// a sync that failed is tried again by the next pass, same snapshot or
// not; a whole pass reads both devices and repairs drift.
func TestTunnelsFollowSnapshot(t *testing.T) {
	want := wantVXLANNode(t)
	n := vxNode(t)
	n.vxModes(EncapAlways, EncapAlways)
	f := n.flaky()
	n.pass()
	routesPass := func(what string) {
		t.Helper()
		if err := n.rec.pass(nil, routesOnly); err != nil {
			t.Fatalf("%s: routes-only pass: %v", what, err)
		}
	}
	neigh := "neigh " + otherNode.String() + " "

	delete(n.k.vxlan.neigh4, otherNode)
	f.reads = 0
	routesPass("drift, same snapshot")
	if f.reads != 0 || strings.Contains(n.text(), neigh) {
		t.Errorf("a routes-only pass with the same snapshot read %d devices; neighbour there: %v", f.reads, strings.Contains(n.text(), neigh))
	}

	forget := blockproto.Changes{Unremember: []netip.Prefix{otherBlock, vxOtherBlock6}}
	if err := n.st.ApplyProtocol(forget); err != nil {
		t.Fatal(err)
	}
	routesPass("the other node's blocks gone")
	if got := n.vxlanText(); strings.Contains(got, "fdb ") || strings.Contains(got, "neigh ") || !strings.Contains(got, "link vxlan.reef") {
		t.Errorf("the other node's blocks gone: vxlan.reef\n%s\nwant the device without neighbours or fdb", got)
	}

	back := blockproto.Changes{Remember: []blockproto.RemoteBlock{{Block: otherBlock, Pool: statePool, Owner: blockproto.Node{Addr: otherNode, Inc: 1}},
		{Block: vxOtherBlock6, Pool: vxPool6, Owner: blockproto.Node{Addr: otherNode, Inc: 1}}}}
	if err := n.st.ApplyProtocol(back); err != nil {
		t.Fatal(err)
	}
	f.fails["ApplyTunnel"] = 1
	if err := n.rec.pass(nil, routesOnly); err == nil || !errors.Is(err, f.err) {
		t.Fatalf("routes-only pass whose apply fails: %v", err)
	}
	routesPass("after a failed sync, same snapshot")
	if got := n.text(); got != want {
		t.Errorf("the other node's blocks back, after a failed sync and a routes-only pass: kernel\n%s\nwant\n%s", got, want)
	}

	delete(n.k.vxlan.neigh4, otherNode)
	n.k.vxlan.fdb[otherNode] = netip.MustParseAddr("192.168.10.99")
	n.pass()
	if got := n.text(); got != want {
		t.Errorf("after drift and a whole pass: kernel\n%s\nwant\n%s", got, want)
	}
}
