package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/internal/kubeclient"
)

// ClusterNetworkPolicy is a CRD (sigs.k8s.io/network-policy-api): reef
// watches it only where it is installed, and never installs it. Its
// storage version, v1beta1, is the one read. Discovery asks the API
// whether the group/version serves the resource, at start and then with
// every probe until it does; the informer then runs for the daemon's
// life (a CRD removed later leaves it watching nothing and saying so in
// its watch errors).

const cnpResource = "clusternetworkpolicies"

// cnpOffAbsent is what `reef status` and the log say without the CRD.
var cnpOffAbsent = fmt.Sprintf("off: the ClusterNetworkPolicy CRD (%s %s) is not installed; install the upstream one to use cluster policies (docs/policy.md)",
	cnp.SchemeGroupVersion.String(), cnpResource)

// discoverCluster looks the resource up and starts its informer when it
// is served; answered is false when the API could not tell (a failure
// other than "not found": the API is away, say), which leaves the
// question open. Once the informer runs it answers at once.
func (w *Watcher) discoverCluster(ctx context.Context) (answered bool) {
	if w.clusterInformer() != nil {
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, probeEvery)
	defer cancel()
	var code int
	raw, err := w.cnpClient.Get().AbsPath("/apis", cnp.SchemeGroupVersion.Group, cnp.SchemeGroupVersion.Version).Do(rctx).StatusCode(&code).Raw()
	served := false
	switch {
	case code == http.StatusNotFound || apierrors.IsNotFound(err):
		// A kube-apiserver that has just started serves the core before
		// the CRDs' groups: its "not found" counts once it is ready
		// (its /readyz waits for its CRD informer).
		var ready int
		if err := w.core.Get().AbsPath("/readyz").Do(rctx).StatusCode(&ready).Error(); err != nil || ready != http.StatusOK {
			w.log.Debug("the ClusterNetworkPolicy group is not served, and the API is not ready yet; asking again", "readyz", ready, "error", err)
			return false
		}
	case err != nil:
		w.log.Debug("cannot tell whether the ClusterNetworkPolicy CRD is installed; asking again", "error", err)
		return false
	default:
		var list metav1.APIResourceList
		if err := json.Unmarshal(raw, &list); err != nil {
			w.log.Warn("cannot read the API's discovery of "+cnp.SchemeGroupVersion.String(), "error", err)
			return false
		}
		for _, r := range list.APIResources {
			served = served || r.Name == cnpResource
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !served {
		if w.status.Cluster != cnpOffAbsent {
			w.status.Cluster = cnpOffAbsent
			w.log.Info("ClusterNetworkPolicy "+cnpOffAbsent, "server", w.cfg.Host)
		}
		return true
	}
	if w.cnp != nil {
		return true // found by another caller meanwhile (Run's, the probe's)
	}
	w.cnp = kubeclient.Informer(w.cnpClient, cnpResource, &cnp.ClusterNetworkPolicy{}, trimClusterPolicy, w.failed, nil)
	_, _ = w.cnp.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.changed() },
		UpdateFunc: func(old, obj any) { w.clusterUpdated(old, obj) },
		DeleteFunc: func(any) { w.changed() },
	})
	// Nodes: what node peers stand for, watched only with cluster
	// policies.
	w.nodes = w.informer(w.core, "nodes", &corev1.Node{}, trimNode)
	w.status.Cluster = "on"
	w.log.Info("ClusterNetworkPolicy on: its CRD is installed; watching "+cnp.SchemeGroupVersion.String()+" "+cnpResource+" and nodes", "server", w.cfg.Host)
	inf, nodes := w.cnp, w.nodes
	go inf.RunWithContext(ctx)
	go nodes.RunWithContext(ctx)
	go func() {
		// Found after the start: its policies join the others' next
		// sync once listed.
		if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced, nodes.HasSynced) && w.onChange != nil {
			w.onChange()
		}
	}()
	return true
}

func (w *Watcher) clusterInformers() (policies, nodes cache.SharedIndexInformer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cnp, w.nodes
}

func (w *Watcher) clusterInformer() cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cnp
}

// ClusterPolicies are the informer's ClusterNetworkPolicies: none when the
// CRD is not installed or they (and the Nodes their node peers stand for)
// have not been listed yet.
func (w *Watcher) ClusterPolicies() []*cnp.ClusterNetworkPolicy {
	inf, nodes := w.clusterInformers()
	if inf == nil || !inf.HasSynced() || !nodes.HasSynced() {
		return nil
	}
	var out []*cnp.ClusterNetworkPolicy
	for _, o := range inf.GetStore().List() {
		if p, ok := o.(*cnp.ClusterNetworkPolicy); ok {
			out = append(out, p)
		}
	}
	return out
}

func trimClusterPolicy(obj any) (any, error) {
	p, ok := obj.(*cnp.ClusterNetworkPolicy)
	if !ok {
		return obj, nil
	}
	// The status's conditions: whether reef's condition is written.
	out := &cnp.ClusterNetworkPolicy{ObjectMeta: meta(p.ObjectMeta, false), Spec: p.Spec, Status: p.Status}
	out.Generation = p.Generation
	return out, nil
}

// clusterUpdated handles an update of a cluster policy: one of its spec
// asks for a sync; one of its status alone (the conditions reef and the
// other nodes write, each one an update of every policy in a big burst)
// compiles to the same table, and only wakes the conditions' writer, in
// case another writer changed reef's condition.
func (w *Watcher) clusterUpdated(old, obj any) {
	o, ok1 := old.(*cnp.ClusterNetworkPolicy)
	n, ok2 := obj.(*cnp.ClusterNetworkPolicy)
	if !ok1 || !ok2 || !sameSpec(o, n) {
		w.changed()
		return
	}
	w.ok()
	select {
	case w.statusPoke <- struct{}{}:
	default:
	}
}

// sameSpec reports whether two versions of a cluster policy compile the
// same: the same object (UID) and generation, which the API raises with
// every change of the spec (the CRD has a status subresource).
func sameSpec(o, n *cnp.ClusterNetworkPolicy) bool {
	return o.UID == n.UID && o.Name == n.Name && o.Generation == n.Generation && o.Generation != 0
}

// Nodes are the informer's Nodes: none without cluster policies.
func (w *Watcher) Nodes() []*corev1.Node {
	_, inf := w.clusterInformers()
	if inf == nil || !inf.HasSynced() {
		return nil
	}
	var out []*corev1.Node
	for _, o := range inf.GetStore().List() {
		if n, ok := o.(*corev1.Node); ok {
			out = append(out, n)
		}
	}
	return out
}

// trimNode keeps a Node's name, labels and addresses: what node peers
// select and stand for.
func trimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	return &corev1.Node{ObjectMeta: meta(n.ObjectMeta, true), Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}, nil
}
