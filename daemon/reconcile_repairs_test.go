package daemon

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/routes"
)

// refusingBlocks is the fake kernel whose Apply of block routes fails
// while refuse is set, as a foreign route in the way or a netlink error
// makes the blocks' owner's Sync fail.
type refusingBlocks struct {
	*fakeKernel
	refuse bool
}

func (k *refusingBlocks) Apply(p routes.Plan) error {
	if k.refuse {
		return errors.New("replace route: the fake kernel refuses")
	}
	return k.fakeKernel.Apply(p)
}

var routeRepairs = regexp.MustCompile(`(?m)^reef_reconcile_repairs_total\{kind="route"\} ([0-9]+)$`)

// repairedRoutes is reef_reconcile_repairs_total{kind="route"} as a
// scrape of m shows it (0 before the first).
func repairedRoutes(t *testing.T, m *metrics.Metrics) int {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(nil, func() (bool, string) { return true, "" }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	match := routeRepairs.FindStringSubmatch(rec.Body.String())
	if match == nil {
		return 0
	}
	n, err := strconv.Atoi(match[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRepairCountedAfterFailedPass: a block route deleted after a pass
// whose Sync of the block routes failed is still counted as a repair
// when a later pass puts it back. The failed pass used to forget every
// block route it had left, so no deletion was counted until a pass
// succeeded and one more found something missing.
func TestRepairCountedAfterFailedPass(t *testing.T) {
	n := newNode(t)
	k := &refusingBlocks{fakeKernel: n.k}
	n.rec.blockRoutes = routes.NewBlocks(k)
	m := metrics.New()
	n.rec.metrics = m
	n.pass()
	if _, ok := n.k.routes[otherBlock]; !ok {
		t.Fatalf("the first pass did not route the other node's block %s:\n%s", otherBlock, n.k)
	}

	// The own block's blackhole deleted, and the pass that would put it
	// back fails: the other node's block route stays as it was.
	n.k.mu.Lock()
	delete(n.k.routes, ownBlock)
	n.k.mu.Unlock()
	k.refuse = true
	if err := n.rec.pass(nil, wholePass); err == nil {
		t.Fatal("the pass succeeded with the block routes' Apply refused")
	}
	k.refuse = false
	before := repairedRoutes(t, m)

	n.k.mu.Lock()
	delete(n.k.routes, otherBlock)
	n.k.mu.Unlock()
	n.pass()
	if _, ok := n.k.routes[otherBlock]; !ok {
		t.Fatalf("the pass did not put the other node's block %s back:\n%s", otherBlock, n.k)
	}
	if got := repairedRoutes(t, m) - before; got != 1 {
		t.Errorf("the route to %s, deleted after a failed pass and put back, counted %d route repairs, want 1", otherBlock, got)
	}
}

// addrGoneKernel is the fake kernel whose uplink has lost the node's
// address while gone is set.
type addrGoneKernel struct {
	*fakeKernel
	gone bool
}

func (k *addrGoneKernel) HasAddr(int, netip.Addr) (routes.NodeAddrState, error) {
	if k.gone {
		return routes.AddrGone, nil
	}
	return routes.AddrPresent, nil
}

// TestLastKeepsWholePassError: an error only a whole pass finds (the
// node's address gone from its uplink) stands in Last, as reef status
// shows it, through a routes-only pass that succeeds after it, until a
// whole pass succeeds. It used to be cleared by the next routes-only
// pass, which a BGP update brings at any time.
func TestLastKeepsWholePassError(t *testing.T) {
	n := newNode(t)
	k := &addrGoneKernel{fakeKernel: n.k, gone: true}
	n.rec.kernel = k
	if err := n.rec.once(kernelAll); err == nil {
		t.Fatal("a whole pass with the node's address gone succeeded")
	}
	if err := n.rec.once(kernelRoutes); err != nil {
		t.Fatalf("routes-only pass: %v", err)
	}
	if _, err := n.rec.Last(); err == nil || !strings.Contains(err.Error(), "is gone from") {
		t.Errorf("Last after a routes-only pass that succeeded: %v, want the whole pass's error", err)
	}
	k.gone = false
	if err := n.rec.once(kernelAll); err != nil {
		t.Fatalf("whole pass with the address back: %v", err)
	}
	if _, err := n.rec.Last(); err != nil {
		t.Errorf("Last after a whole pass that succeeded: %v, want nil", err)
	}
}
