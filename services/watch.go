package services

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/reefcni/reef/internal/kubeclient"
)

// Watcher runs shared informers on Services (core/v1) and EndpointSlices
// (discovery.k8s.io/v1), each trimmed by a transform to what Desired
// reads. It reads, with list and watch only (reef's RBAC grants no more);
// it never writes to the API. As policy/kube, it talks to the API through
// REST clients of its own with a scheme of only the groups it reads.
//
// While the API is away the informers keep their caches, so the plan
// computed from them stays the last known one: a node keeps announcing
// what it announced rather than withdrawing every Service address
// because its watch broke. When the watch comes back, the informers list
// again and report what changed meanwhile.
type Watcher struct {
	log      *slog.Logger
	host     string
	core     rest.Interface
	svcs     cache.SharedIndexInformer
	slices   cache.SharedIndexInformer
	onChange func()

	mu     sync.Mutex
	status Status
}

// Status is what `reef status` says of the Services' watch.
type Status struct {
	Server string
	Synced bool // both informers have listed once
	// LastError is the last failed watch or list, "" after an event that
	// came since; ErrorSince is when the failures began.
	LastError  string
	ErrorSince time.Time
}

// New loads the kubeconfig and sets up the informers; Run starts them.
// onChange is called (from informer goroutines) after any change of the
// objects and once the informers have synced; it must not block.
func New(kubeconfig string, log *slog.Logger, onChange func()) (*Watcher, error) {
	cfg, err := kubeclient.Config(kubeconfig)
	if err != nil {
		return nil, err
	}
	scheme, err := kubeclient.Scheme(corev1.AddToScheme, discoveryv1.AddToScheme)
	if err != nil {
		return nil, err
	}
	core, err := kubeclient.REST(cfg, scheme, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	disc, err := kubeclient.REST(cfg, scheme, discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.kubeconfig %s: %w", kubeconfig, err)
	}
	w := &Watcher{log: log, host: cfg.Host, core: core, onChange: onChange, status: Status{Server: cfg.Host}}
	changed := func() {
		w.ok()
		if w.onChange != nil {
			w.onChange()
		}
	}
	w.svcs = kubeclient.Informer(core, "services", &corev1.Service{}, trimService, w.failed, changed)
	w.slices = kubeclient.Informer(disc, "endpointslices", &discoveryv1.EndpointSlice{}, trimSlice, w.failed, changed)
	return w, nil
}

// Run starts the informers and the reachability probe and returns at
// once; they stop when ctx ends.
func (w *Watcher) Run(ctx context.Context) {
	go w.svcs.RunWithContext(ctx)
	go w.slices.RunWithContext(ctx)
	go kubeclient.Probe(ctx, w.core, w.host, probeEvery, w.ok, w.failed, nil)
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), w.svcs.HasSynced, w.slices.HasSynced) {
			w.mu.Lock()
			w.status.Synced = true
			w.mu.Unlock()
			w.log.Info("kubernetes informers on Services and EndpointSlices synced", "server", w.host)
			if w.onChange != nil {
				w.onChange()
			}
		}
	}()
}

// probeEvery is how often the API's /readyz is asked (kubeclient.Probe:
// only a probe tells that the API is gone).
const probeEvery = 5 * time.Second

func (w *Watcher) ok() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status.LastError != "" {
		w.log.Info("kubernetes API: the watch of Services and EndpointSlices is back", "server", w.host, "failing since", w.status.ErrorSince.Format(time.RFC3339))
		w.status.LastError, w.status.ErrorSince = "", time.Time{}
	}
}

func (w *Watcher) failed(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.status.LastError == "" {
		w.status.ErrorSince = time.Now()
		w.log.Error("kubernetes API: the watch of Services and EndpointSlices failed; the Service addresses stay announced as last known", "server", w.host, "error", err)
	}
	w.status.LastError = err.Error()
}

// Status is the watch's state as last seen.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

// Objects are the informers' Services and EndpointSlices, and whether
// both have listed once: before that the caches are incomplete, and no
// plan may be computed from them.
func (w *Watcher) Objects() (svcs []*corev1.Service, eps []*discoveryv1.EndpointSlice, synced bool) {
	if !w.Status().Synced {
		return nil, nil, false
	}
	for _, o := range w.svcs.GetStore().List() {
		if s, ok := o.(*corev1.Service); ok {
			svcs = append(svcs, s)
		}
	}
	for _, o := range w.slices.GetStore().List() {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			eps = append(eps, s)
		}
	}
	return svcs, eps, true
}

// The transforms keep what Desired reads and drop the rest (managedFields,
// annotations, ports, selectors, the endpoints' addresses and hints)
// before the informers store the objects: the caches hold every Service
// and EndpointSlice of the cluster.

func trimService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil // cache.DeletedFinalStateUnknown and the like
	}
	out := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Spec: corev1.ServiceSpec{Type: s.Spec.Type, ClusterIP: s.Spec.ClusterIP, ExternalIPs: s.Spec.ExternalIPs,
			ExternalTrafficPolicy: s.Spec.ExternalTrafficPolicy},
	}
	for _, ing := range s.Status.LoadBalancer.Ingress {
		out.Status.LoadBalancer.Ingress = append(out.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ing.IP, IPMode: ing.IPMode})
	}
	return out, nil
}

func trimSlice(obj any) (any, error) {
	es, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return obj, nil
	}
	out := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: es.Name, Namespace: es.Namespace, UID: es.UID, ResourceVersion: es.ResourceVersion},
		AddressType: es.AddressType,
	}
	if name, ok := es.Labels[discoveryv1.LabelServiceName]; ok {
		out.Labels = map[string]string{discoveryv1.LabelServiceName: name}
	}
	for _, e := range es.Endpoints {
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{NodeName: e.NodeName, Conditions: discoveryv1.EndpointConditions{Ready: e.Conditions.Ready}})
	}
	return out, nil
}
