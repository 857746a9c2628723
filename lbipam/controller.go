package lbipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/reefcni/reef/internal/kubeclient"
)

// Namespace and Name are the Lease and the record's ConfigMap:
// kube-system/reef-lb-ipam, next to reef's service account.
const (
	Namespace = "kube-system"
	Name      = "reef-lb-ipam"
	recordKey = "record.json"
	writesKey = "writes" // the record's write counter (writeRecord)
)

// Lease timings, client-go's usual ones. They decide only how soon a
// standby takes over from a leader that stopped renewing; no address
// depends on them (see the package doc).
const (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	// resync is how often the leader runs a round with no event: a
	// status write that failed, a release not yet confirmed.
	resync = 30 * time.Second
)

// Status is what `reef status` says of assignment.
type Status struct {
	Leader   bool
	Holder   string // the Lease's holder, as last seen
	Assigned int    // addresses in the record after the last round
	LastErr  string
}

// Controller assigns LoadBalancer addresses while it holds the Lease.
type Controller struct {
	log      *slog.Logger
	leases   coordinationv1.LeasesGetter
	core     rest.Interface
	identity string
	pools    []netip.Prefix
	services cache.SharedIndexInformer
	kick     chan struct{}
	// Resync is how often the leader runs a round with no event (resync
	// by default); set it before Run.
	Resync time.Duration

	mu      sync.Mutex
	status  Status
	emitted map[string]bool // events sent: uid, reason, message
}

// New sets up the controller for the kubeconfig's API; identity names this
// daemon in the Lease (the node's name).
func New(base *rest.Config, identity string, pools []netip.Prefix, log *slog.Logger) (*Controller, error) {
	leases, err := coordinationv1.NewForConfig(base)
	if err != nil {
		return nil, err
	}
	scheme, err := kubeclient.Scheme(corev1.AddToScheme)
	if err != nil {
		return nil, err
	}
	core, err := kubeclient.REST(base, scheme, corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	c := &Controller{log: log.With("component", "lb-ipam"), leases: leases, core: core, identity: identity, pools: pools,
		kick: make(chan struct{}, 1), emitted: map[string]bool{}, Resync: resync}
	kick := func() {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	c.services = kubeclient.Informer(core, "services", &corev1.Service{}, trimService, func(err error) {
		c.log.Warn("watch Services; the informer retries with backoff, assignments stay as recorded", "error", err)
	}, kick)
	return c, nil
}

// trimService keeps what assignment reads.
func trimService(obj any) (any, error) {
	s, ok := obj.(*corev1.Service)
	if !ok {
		return obj, nil
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
			Annotations: map[string]string{RequestAnnotation: s.Annotations[RequestAnnotation]}},
		Spec: corev1.ServiceSpec{Type: s.Spec.Type, LoadBalancerClass: s.Spec.LoadBalancerClass,
			LoadBalancerIP: s.Spec.LoadBalancerIP, IPFamilies: s.Spec.IPFamilies,
			ClusterIPs: s.Spec.ClusterIPs, ExternalIPs: s.Spec.ExternalIPs},
		Status: corev1.ServiceStatus{LoadBalancer: s.Status.LoadBalancer},
	}, nil
}

// Status is the controller's state.
func (c *Controller) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Run watches the Services and contends for the Lease until ctx ends;
// while it leads it assigns.
func (c *Controller) Run(ctx context.Context) {
	go c.services.RunWithContext(ctx)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: Namespace, Name: Name},
		Client:     c.leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: c.identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, Name: Name, ReleaseOnCancel: true,
			LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: c.lead,
				OnStoppedLeading: func() { c.setLeader(false) },
				OnNewLeader: func(id string) {
					c.mu.Lock()
					c.status.Holder = id
					c.mu.Unlock()
					if id != c.identity {
						c.log.Info("LoadBalancer address assignment is led by another node", "leader", id)
					}
				},
			},
		})
		if err != nil {
			c.log.Error("LoadBalancer address assignment off", "error", err)
			return
		}
		le.Run(ctx)
	}
}

func (c *Controller) setLeader(on bool) {
	c.mu.Lock()
	c.status.Leader = on
	c.mu.Unlock()
	if on {
		c.log.Info("leading LoadBalancer address assignment", "pools", joinPrefixes(c.pools))
	} else {
		c.log.Info("no longer leading LoadBalancer address assignment")
	}
}

// lead runs rounds while this daemon holds the Lease: on Service events,
// and every resync.
func (c *Controller) lead(ctx context.Context) {
	c.setLeader(true)
	if !cache.WaitForCacheSync(ctx.Done(), c.services.HasSynced) {
		return
	}
	t := time.NewTicker(c.Resync)
	defer t.Stop()
	for {
		released, err := c.round(ctx)
		c.mu.Lock()
		c.status.LastErr = ""
		if err != nil {
			c.status.LastErr = err.Error()
		}
		c.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			c.log.Warn("LoadBalancer address round", "error", err)
		}
		wait := t.C
		switch {
		case errors.Is(err, errAgain):
			wait = time.After(retryPeriod / 4) // a compare-and-swap lost: read again soon
		case released > 0:
			// A released address goes to no one in the round that
			// released it; the next round gives it to a Service that
			// waits for one, without waiting for an event or the resync.
			wait = time.After(retryPeriod / 4)
		}
		select {
		case <-ctx.Done():
			return
		case <-c.kick:
		case <-wait:
		}
	}
}

// errAgain: a conditional write lost to another writer; the round is run
// again from fresh reads.
var errAgain = errors.New("a conditional write lost to another writer; running the round again")

// round reads the record, decides, and writes: the record (compare-and-
// swap), then the statuses (each conditioned on the Service's version the
// decision read), then the events. It returns how many addresses it
// released.
func (c *Controller) round(ctx context.Context) (int, error) {
	rec, rv, writes, err := c.readRecord(ctx)
	if err != nil {
		return 0, err
	}
	svcs, versions := c.snapshot()
	p := Assign(svcs, rec, c.pools)
	next := p.Record
	var errs []error
	released := 0
	for _, r := range p.Release {
		ok, err := c.confirmRelease(ctx, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			delete(next, r.Addr)
			released++
			c.log.Info("released LoadBalancer address", "ip", r.Addr, "service", r.Owner.Service, "why", r.Why)
		}
	}
	// A status that is to show an address the Service's cached status
	// does not is written only after a compare-and-swap of the record in
	// this round, even one that changes nothing but the write counter:
	// the record that gives the address to the Service is then current at
	// a moment after the Service's version the status write is
	// conditioned on was read, so a release of the address (which first
	// reads the Service afresh) either comes after, and sees the version
	// move past the one the write names, or made the swap fail.
	if !sameRecord(rec, next) || adds(p.Status, svcs) {
		if err := c.writeRecord(ctx, next, rv, writes+1); err != nil {
			return 0, errors.Join(append(errs, err)...)
		}
	}
	for a, o := range next {
		if _, had := rec[a]; !had {
			c.event(ctx, Event{o.Service, o.UID, "LoadBalancerIPAssigned", "assigned " + a.String()}, corev1.EventTypeNormal)
			c.log.Info("assigned LoadBalancer address", "ip", a, "service", o.Service)
		}
	}
	c.mu.Lock()
	c.status.Assigned = len(next)
	c.mu.Unlock()
	for _, st := range p.Status {
		var ingress []netip.Addr
		for _, a := range st.Ingress {
			if o, ok := next[a]; ok && o.UID == st.UID {
				ingress = append(ingress, a)
			}
		}
		if err := c.writeStatus(ctx, st.Service, versions[st.Service], ingress); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range p.Events {
		c.event(ctx, e, corev1.EventTypeWarning)
	}
	c.forgetEvents(svcs)
	return released, errors.Join(errs...)
}

// snapshot is the informer's Services as Assign takes them, and each
// one's resourceVersion.
func (c *Controller) snapshot() ([]Service, map[string]string) {
	var out []Service
	versions := map[string]string{}
	for _, o := range c.services.GetStore().List() {
		s, ok := o.(*corev1.Service)
		if !ok {
			continue
		}
		sv := serviceFrom(s)
		out = append(out, sv)
		versions[sv.Key] = s.ResourceVersion
	}
	return out, versions
}

// serviceFrom is a Service as Assign takes it.
func serviceFrom(s *corev1.Service) Service {
	out := Service{Key: s.Namespace + "/" + s.Name, UID: string(s.UID),
		Ours: s.Spec.Type == corev1.ServiceTypeLoadBalancer && (s.Spec.LoadBalancerClass == nil || *s.Spec.LoadBalancerClass == Class)}
	for _, f := range s.Spec.IPFamilies {
		out.IPv4 = out.IPv4 || f == corev1.IPv4Protocol
		out.IPv6 = out.IPv6 || f == corev1.IPv6Protocol
	}
	if len(s.Spec.IPFamilies) == 0 {
		out.IPv4 = true
	}
	var bad []string
	req := func(what, v string) {
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			a, err := netip.ParseAddr(f)
			if err != nil {
				bad = append(bad, fmt.Sprintf("%s: %q is not an IP address", what, f))
				continue
			}
			a = a.Unmap()
			if first, dup := out.request(a.Is6()); dup {
				if first != a { // the same address twice (annotation and spec.loadBalancerIP) is one request
					bad = append(bad, fmt.Sprintf("%s: %s is a second address of its family; only the first is used", what, a))
				}
				continue
			}
			out.Requested = append(out.Requested, a)
		}
	}
	req("annotation "+RequestAnnotation, s.Annotations[RequestAnnotation])
	req("spec.loadBalancerIP", s.Spec.LoadBalancerIP)
	out.BadRequest = strings.Join(bad, "; ")
	for _, in := range s.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err == nil {
			out.Ingress = append(out.Ingress, a.Unmap())
		}
	}
	for _, ip := range slices.Concat(s.Spec.ClusterIPs, s.Spec.ExternalIPs) {
		if a, err := netip.ParseAddr(ip); err == nil { // not "None", a headless Service's
			out.Uses = append(out.Uses, a.Unmap())
		}
	}
	return out
}

// confirmRelease reads r's Service from the API itself (the informer's
// copy may lag: a Service created a moment ago, or changed back) and
// says whether r may leave the record: the Service is gone (or is another
// object of the same name), or it no longer wants the address and its
// status does not show it (reef removes it first, conditioned on the
// version read).
func (c *Controller) confirmRelease(ctx context.Context, r Release) (bool, error) {
	ns, name, _ := strings.Cut(r.Owner.Service, "/")
	var s corev1.Service
	err := c.core.Get().Namespace(ns).Resource("services").Name(name).Do(ctx).Into(&s)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read Service %s: %w", r.Owner.Service, err)
	}
	if string(s.UID) != r.Owner.UID {
		return true, nil
	}
	fresh := serviceFrom(&s)
	if fresh.wants(r.Addr) && slices.ContainsFunc(c.pools, func(p netip.Prefix) bool { return p.Contains(r.Addr) }) {
		return false, nil // the cache lagged: it still wants it
	}
	if !slices.Contains(fresh.Ingress, r.Addr) {
		return true, nil
	}
	keep := slices.DeleteFunc(slices.Clone(fresh.Ingress), func(a netip.Addr) bool { return a == r.Addr })
	if err := c.writeStatus(ctx, r.Owner.Service, s.ResourceVersion, keep); err != nil {
		return false, err
	}
	return false, nil // released on a later round, once the status no longer shows it
}

// readRecord reads the record, its resourceVersion ("" when there is
// none yet) and its write counter.
func (c *Controller) readRecord(ctx context.Context) (Record, string, uint64, error) {
	var cm corev1.ConfigMap
	err := c.core.Get().Namespace(Namespace).Resource("configmaps").Name(Name).Do(ctx).Into(&cm)
	if apierrors.IsNotFound(err) {
		return Record{}, "", 0, nil
	}
	if err != nil {
		return nil, "", 0, fmt.Errorf("read ConfigMap %s/%s: %w", Namespace, Name, err)
	}
	rec := Record{}
	if data := cm.Data[recordKey]; data != "" {
		if err := json.Unmarshal([]byte(data), &rec); err != nil {
			return nil, "", 0, fmt.Errorf("ConfigMap %s/%s key %s: %w (fix or delete it: reef rebuilds it from the Services' status)", Namespace, Name, recordKey, err)
		}
	}
	writes, _ := strconv.ParseUint(cm.Data[writesKey], 10, 64)
	return rec, cm.ResourceVersion, writes, nil
}

// writeRecord writes the record and the write counter, conditioned on rv
// (create when ""). The counter makes every write a change: the API
// server skips an update that changes nothing, and would not move the
// resourceVersion on.
func (c *Controller) writeRecord(ctx context.Context, rec Record, rv string, writes uint64) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: Name, ResourceVersion: rv},
		Data:       map[string]string{recordKey: string(data), writesKey: strconv.FormatUint(writes, 10)},
	}
	req := c.core.Put().Namespace(Namespace).Resource("configmaps").Name(Name)
	if rv == "" {
		req = c.core.Post().Namespace(Namespace).Resource("configmaps")
	}
	err = req.Body(cm).Do(ctx).Error()
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return errAgain
	}
	if err != nil {
		return fmt.Errorf("write ConfigMap %s/%s: %w", Namespace, Name, err)
	}
	return nil
}

// writeStatus sets a Service's status.loadBalancer.ingress, conditioned
// on rv: a patch that names a resourceVersion is refused (409) when the
// Service has changed since.
func (c *Controller) writeStatus(ctx context.Context, key, rv string, ingress []netip.Addr) error {
	if rv == "" {
		return fmt.Errorf("write the status of Service %s: no resourceVersion to condition it on", key)
	}
	ns, name, _ := strings.Cut(key, "/")
	type ing struct {
		IP     string `json:"ip"`
		IPMode string `json:"ipMode"`
	}
	list := []ing{}
	for _, a := range ingress {
		list = append(list, ing{a.String(), string(corev1.LoadBalancerIPModeVIP)})
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": rv},
		"status":   map[string]any{"loadBalancer": map[string]any{"ingress": list}},
	})
	if err != nil {
		return err
	}
	err = c.core.Patch(types.MergePatchType).Namespace(ns).Resource("services").Name(name).SubResource("status").Body(body).Do(ctx).Error()
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the Service changed or went: the event it made brings a new round
	}
	if err != nil {
		return fmt.Errorf("write the status of Service %s: %w", key, err)
	}
	return nil
}

// event records an Event on a Service, once per reason and message.
func (c *Controller) event(ctx context.Context, e Event, kind string) {
	id := e.UID + "\x00" + e.Reason + "\x00" + e.Message
	c.mu.Lock()
	seen := c.emitted[id]
	c.emitted[id] = true
	c.mu.Unlock()
	if seen {
		return
	}
	if kind == corev1.EventTypeWarning {
		c.log.Warn("LoadBalancer address not assigned", "service", e.Service, "reason", e.Reason, "message", e.Message)
	}
	ns, name, _ := strings.Cut(e.Service, "/")
	now := metav1.Now()
	ev := &corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: name + "."},
		InvolvedObject: corev1.ObjectReference{APIVersion: "v1", Kind: "Service", Namespace: ns, Name: name,
			UID: types.UID(e.UID)},
		Reason: e.Reason, Message: e.Message, Type: kind, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source:              corev1.EventSource{Component: "reef-lb-ipam", Host: c.identity},
		ReportingController: "reefcni.io/lb-ipam", ReportingInstance: c.identity,
	}
	if err := c.core.Post().Namespace(ns).Resource("events").Body(ev).Do(ctx).Error(); err != nil {
		c.log.Warn("record an event", "service", e.Service, "reason", e.Reason, "error", err)
	}
}

// adds says whether a status of st is to show an address its Service's
// status (in svcs, the snapshot) does not.
func adds(st []Ingress, svcs []Service) bool {
	for _, in := range st {
		i := slices.IndexFunc(svcs, func(s Service) bool { return s.Key == in.Service })
		if i < 0 {
			return true
		}
		for _, a := range in.Ingress {
			if !slices.Contains(svcs[i].Ingress, a) {
				return true
			}
		}
	}
	return false
}

// forgetEvents forgets the events sent for Services that are gone.
func (c *Controller) forgetEvents(svcs []Service) {
	live := map[string]bool{}
	for _, s := range svcs {
		live[s.UID] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.emitted {
		if uid, _, _ := strings.Cut(id, "\x00"); !live[uid] {
			delete(c.emitted, id)
		}
	}
}

func sameRecord(a, b Record) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
