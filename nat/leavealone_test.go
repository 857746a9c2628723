package nat

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/nft"
)

// TestLeaveAlone has a pass whose snapshot knows pod A, while a CNI
// operation adds pod B (its elements are in the kernel, not the snapshot)
// and another deletes pod D (in the snapshot, its elements already gone
// from the kernel), and a stale element of pod C is left from earlier. The
// plan repairs A and removes C, and touches neither B nor D.
func TestLeaveAlone(t *testing.T) {
	a := Pod{Veth: "reefaaaaaaaaaaa", IPs: []netip.Addr{addr("10.244.0.5")}, Ports: []hostport.Mapping{{Proto: unix.IPPROTO_TCP, Port: 8080, PodPort: 80}}}
	b := Pod{Veth: "reefbbbbbbbbbbb", IPs: []netip.Addr{addr("10.244.0.6")}, Ports: []hostport.Mapping{{Proto: unix.IPPROTO_TCP, Port: 9090, PodPort: 90}}}
	c := Pod{Veth: "reefccccccccccc", IPs: []netip.Addr{addr("10.244.0.7")}}
	d := Pod{Veth: "reefddddddddddd", IPs: []netip.Addr{addr("10.244.0.8")}, Ports: []hostport.Mapping{{Proto: unix.IPPROTO_UDP, Port: 53, PodPort: 53}}}
	touched := func(e nft.Elem) bool {
		return e.Iface == b.Veth || e.Iface == d.Veth || e.From == e.To && (e.From == b.IPs[0] || e.From == d.IPs[0]) ||
			e.Value.IsValid() && (e.Value.Addr() == b.IPs[0] || e.Value.Addr() == d.IPs[0])
	}
	want := Desired(testPools(), []Pod{a, d})
	have := Desired(testPools(), []Pod{b, c})

	plan := nft.Diff(nft.LeaveAlone(want, have, touched), have)
	added, deleted := map[nft.Elem]bool{}, map[nft.Elem]bool{}
	for _, ch := range plan.Changes {
		switch ch.Kind {
		case nft.AddElems:
			for _, e := range ch.Elems {
				added[e.KeyOnly()] = true
			}
		case nft.DelElems:
			for _, e := range ch.Elems {
				deleted[e.KeyOnly()] = true
			}
		default:
			t.Errorf("unexpected change %s of %s: %s", ch.Kind, ch.Table.ID, ch.Why)
		}
	}
	for _, e := range []nft.Elem{{Iface: a.Veth, From: a.IPs[0], To: a.IPs[0]}, {Proto: unix.IPPROTO_TCP, Port: 8080}, {From: a.IPs[0], To: a.IPs[0]}} {
		if !added[e] {
			t.Errorf("pod A's element %s is not repaired", e)
		}
	}
	if !deleted[nft.Elem{Iface: c.Veth, From: c.IPs[0], To: c.IPs[0]}] {
		t.Errorf("pod C's stale element is not removed")
	}
	for e := range added {
		if touched(e) {
			t.Errorf("element %s of a busy pod is added", e)
		}
	}
	for e := range deleted {
		if touched(e) {
			t.Errorf("element %s of a busy pod is removed", e)
		}
	}
	if len(added) != 3 || len(deleted) != 1 {
		t.Errorf("added %v, deleted %v; want A's three and C's one", added, deleted)
	}
	// Without leaving them alone, B's elements would go and D's come back:
	// the test can tell.
	plain := nft.Diff(want, have)
	if n := len(plain.Changes); n == len(plan.Changes) {
		t.Errorf("the plain diff has as many changes (%d) as the one that leaves busy pods alone", n)
	}
}
