package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/reefcni/reef/internal/lab"
)

// TestParallelAddDel runs 200 pods through ADD and DEL with 8 at a time:
// no address twice, and nothing left behind.
func TestParallelAddDel(t *testing.T) {
	l := newLab(t)
	// Small blocks so the run crosses several block claims.
	n := startNode(t, l, "node1", lab.NodeOptions{Extra: "pools:\n  - cidr: 10.244.0.0/16\n    blockSize: 28\n"})
	const total, workers = 200, 8
	pods := make([]*lab.Pod, total)
	for i := range pods {
		p, err := n.NewPodNetns("default", fmt.Sprintf("par-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pods[i] = p
	}
	each := func(f func(*lab.Pod) error) []error { return inParallel(pods, workers, f) }
	if errs := each((*lab.Pod).Add); len(errs) > 0 {
		t.Fatalf("%d ADDs failed, first: %v", len(errs), errs[0])
	}
	seen := map[string]string{}
	for _, p := range pods {
		if other, dup := seen[p.IP.String()]; dup {
			t.Errorf("address %s given to %s and %s", p.IP, other, p.Name)
		}
		seen[p.IP.String()] = p.Name
	}
	if got := len(allocations(t, n)); got != total {
		t.Errorf("%d allocations in the store, want %d", got, total)
	}
	if got := len(reefVeths(t, n)); got != total {
		t.Errorf("%d reef veths, want %d", got, total)
	}
	// A sample of pairs talk.
	for i := 0; i < total; i += 37 {
		if _, err := pods[i].Ping(pods[(i+101)%total].IP); err != nil {
			t.Errorf("ping %s -> %s: %v", pods[i].Name, pods[(i+101)%total].Name, err)
		}
	}
	if errs := each((*lab.Pod).Del); len(errs) > 0 {
		t.Fatalf("%d DELs failed, first: %v", len(errs), errs[0])
	}
	if got := allocations(t, n); len(got) != 0 {
		t.Errorf("%d allocations leaked", len(got))
	}
	if got := reefVeths(t, n); len(got) != 0 {
		t.Errorf("veths leaked: %v", got)
	}
	for _, r := range reefRoutes(t, n) {
		if !strings.HasPrefix(r, "blackhole") {
			t.Errorf("route leaked: %s", r)
		}
	}
}

// TestRepeatedAddAndPodRestart: a repeated ADD of one attachment keeps the
// address; a new sandbox of the same pod takes over the veth name, and the
// late DEL of the old sandbox does not touch the new one.
func TestRepeatedAddAndPodRestart(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	p := newPod(t, n, "web-1")
	first := p.IP
	if err := p.Add(); err != nil {
		t.Fatalf("repeated ADD: %v", err)
	}
	if p.IP != first {
		t.Errorf("repeated ADD gave %s, first gave %s", p.IP, first)
	}
	if err := p.Check(); err != nil {
		t.Errorf("CHECK after repeated ADD: %v", err)
	}

	// The pod's new sandbox (same namespace/name, new container) arrives
	// before the old one is deleted.
	q := newPod(t, n, "web-1")
	if err := q.Check(); err != nil {
		t.Fatalf("CHECK of the new sandbox: %v", err)
	}
	if err := p.Del(); err != nil {
		t.Fatal(err)
	}
	if err := q.Check(); err != nil {
		t.Fatalf("the old sandbox's DEL broke the new one: %v", err)
	}
	if _, err := l.Ping(n.Netns, q.IP); err != nil {
		t.Errorf("node -> new sandbox: %v", err)
	}
	if got := allocations(t, n); len(got) != 1 {
		t.Errorf("allocations = %v, want only the new sandbox's", got)
	}
}

// TestPoolExhausted: a full pool is a clear CNI error, and nothing leaks.
func TestPoolExhausted(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{Extra: "pools:\n  - cidr: 10.250.0.0/29\n    blockSize: 30\n    vxlanMode: Never\n"})
	for i := 0; i < 8; i++ {
		newPod(t, n, fmt.Sprintf("fill-%d", i))
	}
	p, err := n.NewPodNetns("default", "one-too-many")
	if err != nil {
		t.Fatal(err)
	}
	err = p.Add()
	if err == nil || !strings.Contains(err.Error(), "10.250.0.0/29 exhausted") {
		t.Fatalf("ADD into a full pool: got %v, want an error naming the exhausted pool", err)
	}
	if got := len(reefVeths(t, n)); got != 8 {
		t.Errorf("%d veths after the failed ADD, want 8", got)
	}
}
