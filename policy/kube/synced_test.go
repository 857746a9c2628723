package kube

import (
	"testing"

	"k8s.io/client-go/tools/cache"
)

// listed is an informer that has, or has not, listed once; Synced asks
// it nothing else.
type listed struct {
	cache.SharedIndexInformer
	done bool
}

func (l *listed) HasSynced() bool { return l.done }

// TestSyncedWaitsForClusterInformers: with the other informers synced, a
// ClusterNetworkPolicy CRD found after the start makes Synced false (ADDs
// try again) until its informer and the Nodes' have both listed.
func TestSyncedWaitsForClusterInformers(t *testing.T) {
	w := &Watcher{status: Status{Synced: true}}
	if !w.Synced() {
		t.Fatal("not synced without cluster informers, the others synced")
	}
	policies, nodes := &listed{}, &listed{}
	w.cnp, w.nodes = policies, nodes
	if w.Synced() {
		t.Error("synced while the cluster informers have not listed: an ADD would return before cluster policies cover its pod")
	}
	policies.done = true
	if w.Synced() {
		t.Error("synced while the Nodes (node peers) have not listed")
	}
	nodes.done = true
	if !w.Synced() {
		t.Error("not synced once the cluster informers listed")
	}
	w.status.Synced = false
	if w.Synced() {
		t.Error("synced before the other informers")
	}
}
