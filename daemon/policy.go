package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/policy"
	"github.com/reefcni/reef/policy/kube"
	"github.com/reefcni/reef/store"
)

// policyDataplane is the daemon's side of NetworkPolicy: the API's
// objects (package policy/kube) and the store's endpoints compiled
// (package policy) into table inet reef. It is the one writer of that
// table. Nothing is written before the informers have synced: a daemon
// that starts without the API keeps the table the last one left, and ADD
// answers "try again later" until then. Once synced, the table follows
// the caches, which keep their last state while the API is away.
type policyDataplane struct {
	watch   policyAPI
	kernel  policyKernel
	metrics *metrics.Metrics // nil: off
	store   *store.Store
	log     *slog.Logger
	// families are those of the node's pools (Input.Families).
	families policy.Families
	// trigger asks the reconcile loop for a policy sync (TriggerPolicy):
	// the informers and DELs call it. The loop is the one writer of the
	// table, as of the other kernel state.
	trigger func()
	// release returns freed heap to the kernel after heavy syncs (see
	// releaseAfter); reset by each heavy sync. Nil: no release (a
	// dataplane built by a test).
	release *time.Timer

	// renderMu serializes the renderer's use: a full compile renders
	// outside mu (the reconcile loop's), or under it (an ADD's fallback);
	// taken after mu, never before it.
	renderMu sync.Mutex
	renderer policy.Renderer
	// compiles counts the full compiles (compileAll), for tests: an ADD
	// or a DEL makes none when the policies are those applied.
	compiles atomic.Uint64
	// syncMu makes the syncs one at a time (the loop's; the start's
	// first pass, Once): of two compiles made outside mu, the later is
	// applied last.
	syncMu sync.Mutex

	mu sync.Mutex
	// covers counts the ADDs' and DELs' syncs (Cover, Uncover): a full
	// compile made outside the lock is applied only if none came between
	// the endpoints it read and its apply (see sync); so do the changes
	// of pending.
	covers uint64
	// pending are the endpoints of ADDs covered before their record was
	// committed (Cover, from the store's AllocateThen), by handle, until
	// the ADD settles them (Settle) or undoes them (Uncover): every
	// compile takes them as this node's, with the store's.
	pending map[string]store.Endpoint
	// applied is the table as last applied or read, nil when unknown: an
	// ADD or DEL diffs against it instead of dumping the kernel; the
	// reconcile pass reads the kernel.
	applied *nft.Table
	// appliedShape fingerprints the policies applied: while it holds, the
	// table's chains and sets are the same and only elements can differ.
	appliedShape string
	// appliedSets indexes applied's sets by name; an ADD or DEL changes
	// their elements in place.
	appliedSets map[string]int
	// verified is the ruleset generation taken before the kernel's table
	// was last read and applied over: while no writer but reef's Kernels
	// committed since (nft.Generations), the kernel's table is applied,
	// and the reconcile pass need not read it (mustRead).
	verified nft.Mark
	// appliedObjs are the API's objects (*NetworkPolicy,
	// *ClusterNetworkPolicy) appliedShape was made of: the informers
	// replace an object on every change, so the same objects are the same
	// shape (samePolicies).
	appliedObjs map[any]bool
	state       policy.State
	in          policy.Input
	skipped     map[string]string // policy key -> reason, as last logged
	notEnforced map[string]bool   // NotEnforced.String(), as last logged
	// nodeName is kubernetes.nodeName; warnedNode the last other name an
	// ADD's pod was scheduled to (logged once).
	nodeName   string
	warnedNode atomic.Value
	lastErr    error
	synced     bool // the table has been computed from synced caches once
}

// newPolicyDataplane starts the API client when kubernetes.kubeconfig is
// set, and is nil when it is not; trigger asks for a policy sync. Its
// Kernel follows gens, which the node's other writers of reef's tables
// share (the NAT dataplane's).
func newPolicyDataplane(ctx context.Context, kc KubeConfig, pools []PoolConfig, st *store.Store, m *metrics.Metrics, log *slog.Logger, trigger func(), gens *nft.Generations) (*policyDataplane, error) {
	if kc.Kubeconfig == "" {
		return nil, nil
	}
	p := &policyDataplane{kernel: nft.NewKernel().Follow(gens), metrics: m, store: st, log: log.With("component", "policy"), nodeName: kc.NodeName,
		families: poolFamilies(pools), trigger: trigger, skipped: map[string]string{}, notEnforced: map[string]bool{}}
	// A burst of syncs of a big cluster (thousands of pods, hundreds of
	// policies) leaves the heap they used to the Go runtime, which returns
	// it to the kernel only slowly; the daemon's RSS would stay at the
	// burst's peak for minutes.
	p.release = time.AfterFunc(time.Hour, debug.FreeOSMemory)
	p.release.Stop()
	w, err := kube.New(kc.Kubeconfig, p.log, p.trigger)
	if err != nil {
		return nil, err
	}
	p.watch = w
	go w.Run(ctx)
	p.log.Info("NetworkPolicy on: watching the Kubernetes API", "server", w.Status().Server, "node", kc.NodeName)
	return p, nil
}

// settle is how long the loop waits after an API event for more: the
// events of one kubectl apply, or of a namespace's pods, come together. In
// a storm of events (a node's pods restarting, a namespace created) with
// slow syncs (thousands of pods, hundreds of policies), syncs are spaced
// by their own duration, up to maxSettle. No decision depends on it; the
// ADD path does not wait for it.
const (
	settle    = 5 * time.Millisecond
	maxSettle = time.Second
)

// releaseAfter is how long after the last heavy sync the heap it freed
// goes back to the kernel.
const (
	releaseAfter = 2 * time.Second
	heavySync    = 20 * time.Millisecond
)

// changed is the reconcile loop's policy-only sync, on TriggerPolicy.
func (p *policyDataplane) changed() time.Duration {
	took, err := p.timedSync(false)
	if err != nil {
		p.log.Error("apply NetworkPolicy", "error", err)
	}
	return took
}

// reconcile is the pass's check: the kernel read, compared and repaired.
// A nil policyDataplane (policy off) does nothing.
func (p *policyDataplane) reconcile() error {
	if p == nil {
		return nil
	}
	_, err := p.timedSync(true)
	return err
}

// timedSync is sync, timed; a heavy one arms the heap release.
func (p *policyDataplane) timedSync(readKernel bool) (time.Duration, error) {
	start := time.Now()
	err := p.sync(readKernel)
	took := time.Since(start)
	if took >= heavySync && p.release != nil {
		p.release.Reset(releaseAfter)
	}
	return took, err
}

// outsideTries is how many full compiles sync makes outside the lock
// before it compiles under it, when ADDs keep covering pods meanwhile.
const outsideTries = 3

// sync compiles the desired table and brings the kernel in line with it.
// readKernel: compare with the kernel itself (the reconcile pass), not
// with what was last applied, unless no writer but reef committed since
// the table was last read (mustRead).
//
// The compile (tens of milliseconds with a thousand pods and hundreds of
// policies) runs outside the lock, so that an ADD's Cover does not wait
// for it; only the apply holds it. The endpoints it compiled from must
// still be the store's: an ADD records its endpoint before its Cover, so
// a compile whose apply finds no Cover since it read the endpoints has
// every covered pod; otherwise it is made again (its result would leave
// that pod out of its sets until the next sync).
func (p *policyDataplane) sync(readKernel bool) error {
	if !p.watch.Synced() {
		return nil
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	for range outsideTries {
		p.mu.Lock()
		covers := p.covers
		read := readKernel && p.mustRead()
		pending := maps.Clone(p.pending)
		p.mu.Unlock()
		if readKernel && !read {
			p.log.Debug("table inet reef as applied: no nftables batch but reef's since it was read; not read again")
		}
		eps, err := p.store.Endpoints()
		if err != nil {
			return err
		}
		in := p.input()
		in.Local = localEndpoints(withPending(eps, pending))
		c, err := p.compileAll(in)
		if err != nil {
			return err
		}
		if read {
			// The kernel's table, read outside the lock too (with tens
			// of thousands of elements, a second on a loaded node): no
			// Cover since means no write since but this loop's. The
			// generation is taken before it.
			c.mark = p.kernel.Mark()
			if c.have, err = p.kernel.Read([]nft.TableID{policy.TableID}); err != nil {
				return err
			}
		}
		p.mu.Lock()
		if p.covers == covers {
			err := p.install(c, read)
			p.mu.Unlock()
			return err
		}
		p.mu.Unlock()
	}
	return p.locked(func(local []policy.Endpoint) error { return p.syncLocal(local, readKernel && p.mustRead()) })
}

// mustRead says whether the kernel's table can differ from the one
// applied: none is, or it was never read, or a writer that is not one of
// reef's Kernels committed since it was (nft.Generations.Unchanged; any
// other nft command, even one that changed another table, counts). Under
// the lock.
func (p *policyDataplane) mustRead() bool {
	return p.applied == nil || !p.kernel.Unchanged(p.verified)
}

// locked runs f under the lock with this node's endpoints of this moment.
// They are read under the lock: an ADD's sync that read them before
// another ADD recorded its own must not apply after it. Whatever the API
// holds must not take the daemon down: a panic in compiling it is a bug
// of reef's, reported, and the table stays as it was.
func (p *policyDataplane) locked(f func(local []policy.Endpoint) error) (err error) {
	if !p.watch.Synced() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("BUG: compiling NetworkPolicy panicked; the table stays as last applied", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("compile NetworkPolicy: panic: %v", r)
		}
	}()
	eps, err := p.store.Endpoints()
	if err != nil {
		return err
	}
	return f(localEndpoints(withPending(eps, p.pending)))
}

// localEndpoints are the store's pod endpoints as policy sees them: one
// per address, so that a dual-stack pod is in its policies' sets in both
// families. A record `reef store recover` rebuilt without its pod's name
// goes without one (policy.Input.Local); other records without a name
// (the tunnels' addresses) are no pod's.
func localEndpoints(eps []store.Endpoint) []policy.Endpoint {
	var local []policy.Endpoint
	for _, ep := range eps {
		if ep.PodName == "" && !ep.Recovered() {
			continue
		}
		for _, ip := range ep.Addrs() {
			local = append(local, policy.Endpoint{Namespace: ep.PodNamespace, Name: ep.PodName, IP: ip})
		}
	}
	return local
}

// syncLocal is syncAll with the API's objects as the informers have them
// and local as this node's endpoints; under the lock.
func (p *policyDataplane) syncLocal(local []policy.Endpoint, readKernel bool) error {
	in := p.input()
	in.Local = local
	return p.syncAll(in, readKernel)
}

// syncAll compiles everything and brings the kernel in line; under the
// lock.
func (p *policyDataplane) syncAll(in policy.Input, readKernel bool) error {
	c, err := p.compileAll(in)
	if err != nil {
		return err
	}
	return p.install(c, readKernel)
}

// compiled is a full compile and its table, not applied yet.
type compiled struct {
	in    policy.Input
	st    policy.State
	want  nft.Table
	shape string
	// have is the kernel's table when read with the compile (sync with
	// readKernel), mark the generation before it; nil: read it when
	// applying.
	have []nft.Table
	mark nft.Mark
}

// compileAll compiles and renders in; it needs no lock of the caller's.
// Whatever the API holds must not take the daemon down: a panic in
// compiling it is a bug of reef's, reported, and the table stays as it
// was.
func (p *policyDataplane) compileAll(in policy.Input) (c compiled, err error) {
	defer func() {
		if r := recover(); r != nil {
			p.log.Error("BUG: compiling NetworkPolicy panicked; the table stays as last applied", "panic", r, "stack", string(debug.Stack()))
			err = fmt.Errorf("compile NetworkPolicy: panic: %v", r)
		}
	}()
	p.compiles.Add(1)
	c = compiled{in: in, st: policy.Compile(in), shape: shapeOf(in)}
	p.renderMu.Lock()
	defer p.renderMu.Unlock()
	c.want = p.renderer.Table(c.st)
	return c, nil
}

// install brings the kernel in line with a compile; under the lock.
func (p *policyDataplane) install(c compiled, readKernel bool) error {
	for _, ep := range c.in.Local {
		if ep.Name != "" {
			p.watch.MarkLocal(ep.Namespace, ep.Name) // after a restart, say
		}
	}
	p.logSkipped(c.st.Skipped)
	p.logNotEnforced(c.st.NotEnforced)
	p.watch.SetClusterConditions(clusterConditions(c.in.ClusterPolicies, c.st))
	err := p.apply(c.want, c.shape, readKernel || p.applied == nil, c.have, c.mark)
	if err != nil && !readKernel {
		// What was applied may not be what the kernel has (a table
		// deleted by hand): compare with the kernel and try once more.
		err = p.apply(c.want, c.shape, true, nil, nft.Mark{})
	}
	p.lastErr = err
	if err != nil {
		p.setApplied(nil, "")
		return err
	}
	p.state, p.in, p.synced = c.st, c.in, true
	p.appliedObjs = policyObjs(c.in.Policies, c.in.ClusterPolicies)
	return nil
}

// policyObjs are the objects of pols and cpols, nil left out.
func policyObjs(pols []*networkingv1.NetworkPolicy, cpols []*cnp.ClusterNetworkPolicy) map[any]bool {
	out := make(map[any]bool, len(pols)+len(cpols))
	for _, o := range pols {
		if o != nil {
			out[o] = true
		}
	}
	for _, o := range cpols {
		if o != nil {
			out[o] = true
		}
	}
	return out
}

// samePolicies reports whether the informers' policies are of the shape
// applied: the same objects, or else (an update that changed no spec,
// a relist) the same Shape, whose objects are then recorded as applied's.
// Under the lock.
func (p *policyDataplane) samePolicies() bool {
	pols, cpols := p.watch.Policies(), p.watch.ClusterPolicies()
	same := true
	n := 0
	for _, o := range pols {
		if o != nil {
			n++
			same = same && p.appliedObjs[o]
		}
	}
	for _, o := range cpols {
		if o != nil {
			n++
			same = same && p.appliedObjs[o]
		}
	}
	if same && n == len(p.appliedObjs) {
		return true
	}
	if shapeOf(policy.Input{Policies: pols, ClusterPolicies: cpols, Families: p.families, Local: p.in.Local}) != p.appliedShape {
		return false
	}
	p.appliedObjs = policyObjs(pols, cpols)
	return true
}

// syncPod is the sync of an ADD (pod, its endpoint in local) and of a
// DEL (pod nil; its endpoint gone from local): with the same policies as
// last applied, only those the pod can affect are compiled again
// (policy.Recompile, which works from the last compile's view of the API:
// no list of every pod) and only the sets that can have changed are
// compared with those applied and changed; else it is syncAll.
func (p *policyDataplane) syncPod(local []policy.Endpoint, pod *policy.Pod) error {
	full := func(readKernel bool) error { return p.syncLocal(local, readKernel) }
	if p.applied == nil || !p.synced || !p.samePolicies() {
		return full(false)
	}
	st, ch, ok := policy.Recompile(p.state, local, pod)
	if !ok {
		return full(false)
	}
	sets := policy.SetsOf(st, ch)
	plan, ok := p.diffSets(sets)
	if !ok {
		return full(false)
	}
	if err := p.kernel.Apply(plan); err != nil {
		return full(true)
	}
	for _, s := range sets {
		// Elements only: a shared set's comment names the first policy
		// rendered with it, which SetsOf's few need not be.
		p.applied.Sets[p.appliedSets[s.Name]].Elems = s.Elems
	}
	p.state, p.lastErr = st, nil
	p.in.Local = local
	return nil
}

// diffSets is the element changes that make the applied sets of those
// names sets; ok is false when one is not applied.
func (p *policyDataplane) diffSets(sets []nft.Set) (nft.Plan, bool) {
	have := nft.Table{ID: policy.TableID, Sets: make([]nft.Set, 0, len(sets))}
	for _, s := range sets {
		i, ok := p.appliedSets[s.Name]
		if !ok {
			return nft.Plan{}, false
		}
		have.Sets = append(have.Sets, p.applied.Sets[i])
	}
	return nft.DiffElements(nft.Table{ID: policy.TableID, Sets: sets}, have)
}

// setApplied records t (nil: unknown) as the table applied, of shape, and
// indexes its sets by name for the ADDs' and DELs' diffs.
func (p *policyDataplane) setApplied(t *nft.Table, shape string) {
	p.applied, p.appliedShape, p.appliedSets = t, shape, nil
	if t == nil {
		p.verified = nft.Mark{}
		return
	}
	p.appliedSets = make(map[string]int, len(t.Sets))
	for i, s := range t.Sets {
		p.appliedSets[s.Name] = i
	}
}

// apply brings the kernel in line with want: by its elements when the
// shape is the one applied, else by a diff with what was applied or, with
// readKernel, with the kernel's table (have, if read already, after mark).
func (p *policyDataplane) apply(want nft.Table, shape string, readKernel bool, have []nft.Table, mark nft.Mark) error {
	var plan nft.Plan
	ok := false
	if !readKernel && shape == p.appliedShape {
		// The same policies: only elements can differ (pods and
		// namespaces changed).
		plan, ok = nft.DiffElements(want, *p.applied)
	}
	if !ok {
		switch {
		case readKernel && have != nil:
		case readKernel:
			var err error
			mark = p.kernel.Mark()
			if have, err = p.kernel.Read([]nft.TableID{policy.TableID}); err != nil {
				return err
			}
		default:
			have = []nft.Table{*p.applied}
		}
		plan = nft.DiffInPlace([]nft.Table{want}, have)
	}
	for _, c := range plan.Changes {
		switch {
		case !readKernel:
		case c.Kind == nft.CreateTable && !p.synced:
			p.log.Info("creating nftables table", "table", policy.TableID.String())
		default:
			p.log.Warn("repairing nftables: "+c.Why, "change", c.Kind.String(), "table", policy.TableID.String())
			p.metrics.Repaired(metrics.RepairNFTables, 1)
		}
	}
	if err := p.kernel.Apply(plan); err != nil {
		return fmt.Errorf("table %s: %w", policy.TableID, err)
	}
	p.setApplied(&want, shape)
	if readKernel {
		p.verified = mark
	}
	return nil
}

// shapeOf fingerprints the NetworkPolicies and ClusterNetworkPolicies:
// while it holds, only set elements can differ.
func shapeOf(in policy.Input) string {
	return policy.FamiliesOf(in).String() + "|" + policy.Shape(in.Policies) + "|" + policy.ClusterShape(in.ClusterPolicies)
}

// input is the API's objects as the informers have them, for this node's
// families.
func (p *policyDataplane) input() policy.Input {
	in := p.watch.Input()
	in.Families = p.families
	in.NodeName = p.nodeName
	return in
}

// poolFamilies are the families of the node's pools: its pods' addresses
// are of those, and the policy table has sets and rules for those only.
func poolFamilies(pools []PoolConfig) policy.Families {
	var fs policy.Families
	for _, pl := range pools {
		if pl.CIDR.Addr().Is4() {
			fs |= policy.IPv4
		} else {
			fs |= policy.IPv6
		}
	}
	return fs
}
