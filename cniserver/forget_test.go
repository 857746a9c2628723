package cniserver

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/reefcni/reef/store"
)

// Forget records the addresses whose conntrack entries a release had
// deleted (PodForgetter).
func (f *fakeNode) Forget(ep store.Endpoint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgotten = append(f.forgotten, ep.Addrs()...)
}

// TestReleaseForgetsConntrack: every release of an attachment has the
// conntrack entries of its addresses deleted before they are freed, also
// that of an old sandbox whose veth a newer sandbox of the same pod took
// over (its record has no veth any more): its address goes to the next
// pod like any other.
func TestReleaseForgetsConntrack(t *testing.T) {
	s, st, f := newAddFailServer(t)
	if _, cerr := s.add(context.Background(), podRequest("c1", "web-1", "/run/netns/p1", 8080)); cerr != nil {
		t.Fatal(cerr)
	}
	old := endpoints(t, st)["k8s-pod-network.c1"]
	// A new sandbox of the same pod, the old one not deleted yet.
	if _, cerr := s.add(context.Background(), podRequest("c2", "web-1", "/run/netns/p2", 8081)); cerr != nil {
		t.Fatal(cerr)
	}
	if ep := endpoints(t, st)["k8s-pod-network.c1"]; ep.HostVeth != "" {
		t.Fatalf("the old sandbox's record keeps veth %q after the new one's ADD", ep.HostVeth)
	}
	newer := endpoints(t, st)["k8s-pod-network.c2"]
	for _, c := range []struct {
		id   string
		addr netip.Addr
	}{{"c1", old.IP}, {"c2", newer.IP}} {
		f.forgotten = nil
		if cerr := s.Delete(podRequest(c.id, "web-1", "/run/netns/p"+c.id[1:], 0)); cerr != nil {
			t.Fatalf("DEL %s: %v", c.id, cerr)
		}
		if !slices.Equal(f.forgotten, []netip.Addr{c.addr}) {
			t.Errorf("DEL %s deleted the conntrack entries of %v, want %s", c.id, f.forgotten, c.addr)
		}
	}
}
