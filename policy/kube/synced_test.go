package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// emptyInformer lists nothing and then watches forever: it has synced
// once it ran its first list.
func emptyInformer(obj runtime.Object, list runtime.Object) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListFunc:  func(metav1.ListOptions) (runtime.Object, error) { return list, nil },
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
	return cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{})
}

// TestSyncedWaitsForClusterInformers: with the other informers synced, a
// ClusterNetworkPolicy CRD found after the start makes Synced false (ADDs
// try again) until its informers and the Nodes' have listed.
func TestSyncedWaitsForClusterInformers(t *testing.T) {
	w := &Watcher{status: Status{Synced: true}}
	if !w.Synced() {
		t.Fatal("not synced without cluster informers, the others synced")
	}
	w.cnp = emptyInformer(&cnp.ClusterNetworkPolicy{}, &cnp.ClusterNetworkPolicyList{})
	w.nodes = emptyInformer(&corev1.Node{}, &corev1.NodeList{})
	if w.Synced() {
		t.Error("synced while the cluster informers have not listed: an ADD would return before cluster policies cover its pod")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.cnp.RunWithContext(ctx)
	go w.nodes.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), w.cnp.HasSynced, w.nodes.HasSynced) {
		t.Fatal("the informers never listed")
	}
	if !w.Synced() {
		t.Error("not synced once the cluster informers listed")
	}
}
