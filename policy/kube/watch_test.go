package kube

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/policy"
)

// TestPodEventsThatMatter: a pod's event asks for a policy sync when the
// pod, as it was or is, has an address or is this node's (marked); a pod
// of another node with no address yet does not (a thousand pods created
// at once were a thousand full compiles); a delete of unknown state does;
// a delete takes the mark with it.
func TestPodEventsThatMatter(t *testing.T) {
	syncs := 0
	w := &Watcher{podEvents: make(chan struct{}), onChange: func() { syncs++ }, status: Status{Reachable: true}}
	pod := func(name string, ips ...string) *policy.Pod {
		p := &policy.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		for _, ip := range ips {
			p.IPs = append(p.IPs, netip.MustParseAddr(ip))
		}
		return p
	}
	w.MarkLocal("ns", "mine")
	for _, tc := range []struct {
		name     string
		old, obj any
		want     bool
	}{
		{"created, no address", nil, pod("a"), false},
		{"updated, still no address", pod("a"), pod("a"), false},
		{"got its address", pod("a"), pod("a", "10.0.0.1"), true},
		{"lost its address", pod("a", "10.0.0.1"), pod("a"), true},
		{"deleted, no address", pod("a"), nil, false},
		{"deleted with an address", pod("a", "10.0.0.1"), nil, true},
		{"this node's, no address", nil, pod("mine"), true},
		{"this node's, updated", pod("mine"), pod("mine"), true},
		{"deleted, state unknown", cache.DeletedFinalStateUnknown{Key: "ns/b"}, nil, true},
		{"this node's, deleted", pod("mine"), nil, true},
		{"this node's name again, after the delete", nil, pod("mine"), false},
	} {
		syncs = 0
		w.podEvent(tc.old, tc.obj, tc.obj != nil)
		if got := syncs == 1; got != tc.want {
			t.Errorf("%s: sync asked for: %t, want %t", tc.name, got, tc.want)
		}
	}
}

// TestClusterStatusOnlyUpdate: an update of a cluster policy's status
// alone (the same UID and generation: the conditions the nodes write)
// asks for no sync but wakes the conditions' writer; a new generation, or
// an object recreated under the same name, asks for one.
func TestClusterStatusOnlyUpdate(t *testing.T) {
	syncs := 0
	w := &Watcher{onChange: func() { syncs++ }, statusPoke: make(chan struct{}, 1), status: Status{Reachable: true}}
	pol := func(uid string, gen int64, rv string) *cnp.ClusterNetworkPolicy {
		return &cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: types.UID(uid), Generation: gen, ResourceVersion: rv}}
	}
	for _, tc := range []struct {
		name     string
		old, obj *cnp.ClusterNetworkPolicy
		sync     bool
	}{
		{"status only", pol("u", 2, "10"), pol("u", 2, "11"), false},
		{"spec changed", pol("u", 2, "10"), pol("u", 3, "11"), true},
		{"recreated", pol("u", 1, "10"), pol("v", 1, "11"), true},
		{"no generation (not from the API)", pol("u", 0, "10"), pol("u", 0, "11"), true},
	} {
		syncs = 0
		select {
		case <-w.statusPoke:
		default:
		}
		w.clusterUpdated(tc.old, tc.obj)
		poked := len(w.statusPoke) == 1
		if got := syncs == 1; got != tc.sync || poked == tc.sync {
			t.Errorf("%s: sync %t, writer woken %t; want sync %t", tc.name, got, poked, tc.sync)
		}
	}
}
