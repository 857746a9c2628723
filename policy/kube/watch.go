// Package kube is the daemon's view of the Kubernetes API for
// NetworkPolicy: shared informers on Pods, Namespaces and NetworkPolicies
// (and, where their CRD is installed, ClusterNetworkPolicies and Nodes),
// each trimmed by a transform to what policy needs, and whether the API
// is reachable. It reads, and writes one thing: each
// ClusterNetworkPolicy's status condition (status.go).
//
// It talks to the API through REST clients of its own, with a scheme of
// only core/v1 and networking/v1 and protobuf on the wire, rather than
// client-go's clientset, whose scheme registers every API group at init
// in every process that links it, with the API or without.
package kube

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/internal/kubeclient"
	"github.com/reefcni/reef/policy"
)

// Status is what `reef status` says of the API.
type Status struct {
	Synced bool // every informer has listed once
	// Reachable is false from the first failed request or watch after
	// the last successful one; Since is when that state began.
	Reachable bool
	Since     time.Time
	LastError string
	Server    string
	// TokenExpires is when the kubeconfig's bearer token expires, if it
	// is a JWT with an expiry (a TokenRequest token); zero otherwise.
	TokenExpires time.Time
	// Cluster says whether ClusterNetworkPolicy is watched, and if not,
	// why: "on", or "off: ..." (its CRD is not installed).
	Cluster string
	// ConditionError is the last failure writing ClusterNetworkPolicy
	// status conditions; "" once they are written.
	ConditionError string
}

// Watcher runs the informers.
type Watcher struct {
	log      *slog.Logger
	cfg      *rest.Config
	core     rest.Interface
	net      rest.Interface
	pods     cache.SharedIndexInformer
	ns       cache.SharedIndexInformer
	policies cache.SharedIndexInformer
	// cnp is the ClusterNetworkPolicy client and informer: the informer
	// is nil until discovery finds the CRD installed (cluster.go).
	cnpClient rest.Interface
	cnp       cache.SharedIndexInformer
	nodes     cache.SharedIndexInformer // with cnp: node peers
	onChange  func()
	expires   time.Time

	mu          sync.Mutex
	status      Status
	tokenWarned time.Time
	// podEvents is closed (and replaced) when a pod is added or updated:
	// what WaitPod waits on.
	podEvents chan struct{}
	// local are the pods ("namespace/name") this node has endpoints for,
	// as the daemon says (MarkLocal): their events always matter.
	local sync.Map
	// conditions are the ClusterNetworkPolicy conditions to write, by
	// name; statusPoke wakes their writer (status.go).
	conditions map[string]Condition
	statusPoke chan struct{}
}

// New loads the kubeconfig and sets up the informers; Run starts them.
// onChange is called (from informer goroutines) after any change of the
// objects; it must not block.
func New(kubeconfig string, log *slog.Logger, onChange func()) (*Watcher, error) {
	cfg, err := kubeclient.Config(kubeconfig)
	if err != nil {
		return nil, err
	}
	s, err := scheme()
	if err != nil {
		return nil, err
	}
	core, err := kubeclient.REST(cfg, s, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	netc, err := kubeclient.REST(cfg, s, networkingv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	w := &Watcher{log: log, cfg: cfg, core: core, net: netc, onChange: onChange, podEvents: make(chan struct{}), statusPoke: make(chan struct{}, 1),
		expires: tokenExpiry(cfg), status: Status{Reachable: true, Since: time.Now(), Server: cfg.Host}}
	w.status.TokenExpires = w.expires
	// Pods: a sync only for the events that can change the table (see
	// podMatters); every add and update wakes WaitPod.
	w.pods = kubeclient.Informer(core, "pods", &corev1.Pod{}, trimPod, w.failed, nil)
	_, _ = w.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.podEvent(nil, obj, true) },
		UpdateFunc: func(old, obj any) { w.podEvent(old, obj, true) },
		DeleteFunc: func(obj any) { w.podEvent(obj, nil, false) },
	})
	w.ns = w.informer(core, "namespaces", &corev1.Namespace{}, trimNamespace)
	w.policies = w.informer(netc, "networkpolicies", &networkingv1.NetworkPolicy{}, trimPolicy)
	// JSON: custom resources have no protobuf.
	if w.cnpClient, err = kubeclient.RESTJSON(cfg, s, cnp.SchemeGroupVersion); err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	return w, nil
}

// scheme has only the groups policy reads, built on first use: a daemon
// without the API never builds it.
var scheme = sync.OnceValues(func() (*runtime.Scheme, error) {
	return kubeclient.Scheme(corev1.AddToScheme, networkingv1.AddToScheme, cnp.Install)
})

// informer is a trimmed informer whose events tell the API reachable and
// ask for a policy sync.
func (w *Watcher) informer(c rest.Interface, resource string, obj runtime.Object, trim cache.TransformFunc) cache.SharedIndexInformer {
	return kubeclient.Informer(c, resource, obj, trim, w.failed, w.changed)
}

// changed is an event that tells the API reachable and asks for a policy
// sync.
func (w *Watcher) changed() {
	w.ok()
	if w.onChange != nil {
		w.onChange()
	}
}

// Run starts the informers and the reachability probe and returns when
// ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	go w.pods.RunWithContext(ctx)
	go w.ns.RunWithContext(ctx)
	go w.policies.RunWithContext(ctx)
	go w.runStatus(ctx)
	go func() {
		// Whether the ClusterNetworkPolicy CRD is there is asked while the
		// others list, and answered before the caches count as synced:
		// when it is, nothing is enforced before its policies are read
		// too. An API away at start (a node restarted while it is)
		// answers nothing: the question is asked again until it is
		// answered, and the caches wait for it, so that the API's return
		// is not taken for "no cluster policies" and their enforcement
		// stays as the kernel has it.
		for !w.discoverCluster(ctx) {
			select {
			case <-ctx.Done():
				return
			case <-time.After(discoverEvery):
			}
		}
		synced := []cache.InformerSynced{w.pods.HasSynced, w.ns.HasSynced, w.policies.HasSynced}
		if inf, nodes := w.clusterInformers(); inf != nil {
			synced = append(synced, inf.HasSynced, nodes.HasSynced)
		}
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			w.mu.Lock()
			w.status.Synced = true
			w.mu.Unlock()
			w.log.Info("kubernetes informers synced", "server", w.cfg.Host)
			if w.onChange != nil {
				w.onChange()
			}
		}
	}()
	w.probe(ctx)
}

// discoverEvery paces the start's discovery of the ClusterNetworkPolicy
// CRD while the API cannot answer it (Run).
const discoverEvery = time.Second

// probeEvery is how often the API's /readyz is asked: how soon `reef
// status` says the API is back (or gone) when no watch event says so.
const probeEvery = 5 * time.Second

func (w *Watcher) probe(ctx context.Context) {
	kubeclient.Probe(ctx, w.core, w.cfg.Host, probeEvery, w.ok, w.failed, func() {
		w.checkToken()
		if w.clusterInformer() == nil {
			w.discoverCluster(ctx) // installed since?
		}
	})
}

func (w *Watcher) ok() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.status.Reachable {
		w.log.Info("kubernetes API reachable again", "server", w.cfg.Host, "unreachable since", w.status.Since.Format(time.RFC3339))
		w.status.Reachable, w.status.Since, w.status.LastError = true, time.Now(), ""
	}
}

func (w *Watcher) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status.LastError = err.Error()
	if w.status.Reachable {
		w.status.Reachable, w.status.Since = false, time.Now()
		w.log.Error("kubernetes API unreachable; NetworkPolicy stays enforced as last known", "server", w.cfg.Host, "error", err)
	}
}

// Status is the API's state as last seen.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Synced reports whether every informer has listed once: before that the
// caches are incomplete, and nothing may be computed from them.
func (w *Watcher) Synced() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status.Synced
}

// Pod is the informer's copy of a pod, if it has one.
func (w *Watcher) Pod(namespace, name string) (*policy.Pod, bool) {
	obj, ok, err := w.pods.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false
	}
	p, ok := obj.(*policy.Pod)
	return p, ok
}

// podEvent handles a pod's add, update or delete: WaitPod is woken by an
// add or update (wake), and a policy sync asked for when it matters.
func (w *Watcher) podEvent(old, obj any, wake bool) {
	w.ok()
	if wake {
		w.mu.Lock()
		close(w.podEvents)
		w.podEvents = make(chan struct{})
		w.mu.Unlock()
	}
	if w.onChange != nil && (w.podMatters(old) || w.podMatters(obj)) {
		w.onChange()
	}
	if obj == nil { // deleted: its mark goes with it
		switch p := old.(type) {
		case *policy.Pod:
			w.local.Delete(p.Namespace + "/" + p.Name)
		case cache.DeletedFinalStateUnknown:
			w.local.Delete(p.Key)
		}
	}
}

// podMatters reports whether a pod, as it was or is now (nil: none), can
// change the table: one with an address in its status (a member of some
// selector's sets, with its named ports), or one of this node's (its
// addresses are its endpoints'). A pod of another node without an
// address is in no set, and no compile differs by it: in a cluster, the
// pods just created, not started yet. Anything else (an object of no
// known type, a delete whose last state is unknown) matters.
func (w *Watcher) podMatters(obj any) bool {
	if obj == nil {
		return false
	}
	p, ok := obj.(*policy.Pod)
	if !ok {
		return true
	}
	if len(p.IPs) > 0 {
		return true
	}
	_, local := w.local.Load(p.Namespace + "/" + p.Name)
	return local
}

// MarkLocal says that this node has (or is about to have) an endpoint of
// the pod: its events matter from now on, addresses or not. The ADD
// marks its pod before it reads the informer's copy (Pod), so that an
// event the informer handles after that read asks for a sync. A mark
// goes when the pod is deleted from the API.
func (w *Watcher) MarkLocal(namespace, name string) {
	w.local.Store(namespace+"/"+name, struct{}{})
}

// WaitPod waits until the informer has the pod, or ctx ends.
func (w *Watcher) WaitPod(ctx context.Context, namespace, name string) bool {
	for {
		w.mu.Lock()
		ev := w.podEvents
		w.mu.Unlock()
		if _, ok := w.Pod(namespace, name); ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ev:
		}
	}
}

// Input is the objects policy compiles from (Local left to the caller).
func (w *Watcher) Input() policy.Input {
	in := policy.Input{Policies: w.Policies(), ClusterPolicies: w.ClusterPolicies(), Nodes: w.Nodes()}
	for _, o := range w.ns.GetStore().List() {
		if n, ok := o.(*corev1.Namespace); ok {
			in.Namespaces = append(in.Namespaces, n)
		}
	}
	for _, o := range w.pods.GetStore().List() {
		if p, ok := o.(*policy.Pod); ok {
			in.Pods = append(in.Pods, p)
		}
	}
	return in
}

// Policies are the informer's NetworkPolicies: Input's, without listing
// pods and namespaces.
func (w *Watcher) Policies() []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, o := range w.policies.GetStore().List() {
		if p, ok := o.(*networkingv1.NetworkPolicy); ok {
			out = append(out, p)
		}
	}
	return out
}
