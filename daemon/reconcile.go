package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/store"
)

// goneObservations is how many passes in a row must find a pod's netns gone
// before its address is released: one miss may be a runtime still setting
// up a namespace bind mount.
const goneObservations = 2

// reconciler is the one owner of reef's kernel state. Each pass computes the
// desired state from the store, reads what the kernel has and applies the
// difference. It runs at start, on triggers (coalesced) and every interval.
type reconciler struct {
	reconcilerDeps
	log *slog.Logger

	// lastPolicy is how long the last policy-only sync took, and
	// lastPolicyEnd when it ended: in a storm of API events, syncs are
	// spaced by their own duration (up to maxSettle).
	lastPolicy    time.Duration
	lastPolicyEnd time.Time
	// lastStep is how long the last block protocol step took, and
	// lastStepEnd when it ended (the reconcile goroutine's own).
	lastStep    time.Duration
	lastStepEnd time.Time
	// applied are the blocks the last kernel pass brought the kernel in
	// line with, if it ended without error (appliedOK).
	applied   []store.Block
	appliedOK bool
	// failures are the passes in a row that ended in error, the last at
	// failedAt: a retry waits retryDelay(failures) after it.
	failures int
	failedAt time.Time
	gone     map[string]int // handle -> passes in a row that found its netns gone
	// sysctlsSet: a pass has brought the sysctls in line. The first
	// one's changes are the node's start (a fresh node forwards nothing),
	// not repairs.
	sysctlsSet bool

	mu      sync.Mutex
	lastRun time.Time
	lastErr error
}

// reconcilerDeps are what the reconcile loop works with, all given to
// newReconciler.
type reconcilerDeps struct {
	store       *store.Store
	cni         podRecords     // the CNI server: a pod's record changes through it
	activity    *activity.Log  // the CNI operations' log, which a pass reads (package activity)
	kernel      routesKernel   // the node's own routing, read for the hops to routed owners
	blockRoutes *routes.Blocks // the owner of the block routes: the own blocks' blackholes, the other nodes' blocks
	pods        *routes.Pods   // the owner of the pods' kernel objects, shared with the CNI server
	sysctls     *sysctl.Owner
	nat         *natDataplane
	policy      *policyDataplane // nil: NetworkPolicy off
	blocks      *blockEngine     // nil: no block protocol (tests of the kernel side)
	tunnels     *tunnels         // the owner of vxlan.reef, tunl0 and their addresses
	metrics     *metrics.Metrics // nil: metrics off
	net         netInfo          // the node's uplink, pools and pod MTU
	pending     *pending         // what the loop has to do: the triggers fill it (schedule.go)
	interval    time.Duration
	passLoop    bool // test hook: a whole pass right after each (testHooks.passLoop)
}

func newReconciler(deps reconcilerDeps, log *slog.Logger) *reconciler {
	return &reconciler{reconcilerDeps: deps, log: log.With("component", "reconcile"), gone: map[string]int{}}
}

// Run loops until ctx ends: it runs the pending work that next says is
// due, and asks for a whole pass every interval.
func (r *reconciler) Run(ctx context.Context) {
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	due := time.NewTimer(time.Hour)
	due.Stop()
	for {
		w, age := r.pending.peek()
		now, wait := next(w, r.timing(age, time.Now()))
		if now != 0 {
			r.run(r.pending.take(now))
			if r.passLoop {
				r.pending.add(workStep | workKernel)
			}
			continue
		}
		var fire <-chan time.Time
		if w != 0 {
			due.Reset(wait)
			fire = due.C
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			r.pending.add(workStep | workKernel)
		case <-r.pending.wake:
		case <-fire:
		}
		due.Stop()
	}
}

// timing is what the loop knows at now of its recent work, for next; age
// is how long the work pending has waited.
func (r *reconciler) timing(age time.Duration, now time.Time) timing {
	return timing{age: age,
		lastPolicy: r.lastPolicy, sincePolicy: now.Sub(r.lastPolicyEnd),
		lastStep: r.lastStep, sinceStep: now.Sub(r.lastStepEnd),
		failures: r.failures, sinceFailure: now.Sub(r.failedAt), interval: r.interval}
}

// run does the work w, as plan says.
func (r *reconciler) run(w work) {
	policy, step, kernel := plan(w)
	if policy && r.policy != nil {
		r.lastPolicy = r.policy.changed()
		r.lastPolicyEnd = time.Now()
	}
	if !step {
		return
	}
	err := r.once(kernel)
	if err == nil {
		return
	}
	if d, ok := r.retryAfter(); ok {
		r.log.Error("reconcile pass failed; retrying", "in", d, "failures", r.failures, "error", err)
		return
	}
	r.log.Error("reconcile pass failed; retrying next interval", "failures", r.failures, "error", err)
}

// ended notes how a pass of the kernel pass k ended (err, at now): a
// whole pass without error ends a run of failures; a pass that failed
// counts one more.
func (r *reconciler) ended(k kernelPass, err error, now time.Time) {
	switch {
	case err != nil:
		r.failures++
		r.failedAt = now
	case k == kernelAll:
		r.failures = 0
	}
}

// retryAfter asks for a whole pass again after the failures so far, while
// retryDelay is shorter than the interval (workRetry: next holds it back
// until the delay has passed); after that the interval's own pass is the
// retry.
func (r *reconciler) retryAfter() (time.Duration, bool) {
	d, ok := retryDelay(r.failures, r.interval)
	if ok {
		r.pending.add(workRetry)
	}
	return d, ok
}

// Last returns when the last pass ran and how it ended.
func (r *reconciler) Last() (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastRun, r.lastErr
}

// Once runs one pass: the block protocol's step first, which reads and
// writes only the store and BGP (bbolt orders its transactions with the
// CNI path's), then the kernel. CNI operations go on meanwhile: the pass
// leaves alone what they touch (see pass). A pass that fails is retried by
// the loop, after retryDelay.
func (r *reconciler) Once() error {
	err := r.once(kernelAll)
	if err != nil {
		r.retryAfter()
	}
	return err
}

// once runs a step and then the kernel side: the whole of it for
// kernelAll (the interval, Trigger, the start, a retry), and otherwise only
// its routes (kernelPass.scope), when the step changed the blocks the kernel routes
// or kernelRoutes says an earlier step left that to this pass. When the
// step (not a whole pass) woke ADDs that waited for a block, their wiring
// goes first: the kernel side is put off to the next pass (workRoutes),
// which comes after the BGP step gap. (With 100 route-reflector clients on
// 2 cores, a pass at once kept the woken ADDs waiting for the CPU.) An ADD
// needs nothing of that pass: the pod's own route is its own, and a block
// is announced by the step.
//
// The step and the kernel side share one loop on purpose: with kernel
// passes in a loop of their own, beside the steps, the 100-client
// reflector bench took 38 s cold to every route (one run), against 24-34 s
// in nine runs with one loop: on a machine that is the bottleneck, more
// work at once, and passes no longer paced by the steps.
func (r *reconciler) once(kernel kernelPass) error {
	blocks, woke, stepErr := r.step()
	unchanged := stepErr == nil && r.appliedOK && sameRouting(blocks, r.applied)
	if kernel == kernelIfRouting && (unchanged || woke && stepErr == nil) {
		if !unchanged {
			r.pending.add(workRoutes)
		}
		r.record(nil)
		return nil
	}
	began := time.Now()
	passErr := r.pass(blocks, kernel.scope())
	var failed []string
	if stepErr != nil {
		failed = append(failed, "blocks")
	}
	if passErr != nil {
		failed = append(failed, "kernel")
	}
	took := time.Since(began)
	r.metrics.Pass(took, failed)
	if took >= slowStep {
		r.log.Info("slow kernel pass", "took", took.Round(time.Millisecond))
	}
	r.applied, r.appliedOK = blocks, stepErr == nil && passErr == nil && r.blocks != nil
	err := errors.Join(stepErr, passErr)
	r.record(err)
	r.ended(kernel, err, time.Now())
	return err
}

// step runs the block protocol's step, if there is one: the blocks it
// leaves, and whether it woke ADDs waiting for a block.
func (r *reconciler) step() (blocks []store.Block, woke bool, err error) {
	if r.blocks == nil {
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	blocks, woke, err = r.blocks.Step(ctx)
	r.lastStepEnd = time.Now()
	r.lastStep = r.lastStepEnd.Sub(began)
	if err != nil {
		err = fmt.Errorf("block protocol: %w", err)
	}
	return blocks, woke, err
}

// record notes when a pass ended and how, for Last.
func (r *reconciler) record(err error) {
	r.mu.Lock()
	r.lastRun, r.lastErr = time.Now(), err
	r.mu.Unlock()
}

// pass brings the kernel in line with the store; blocks are the step's
// (nil: read from the store). Each kernel domain is brought in line by its
// owner, in an order where each finds what it needs: the tunnel devices
// before the routes through them, the routes and the veths' MTUs before
// what hangs off the pods' veths (sysctls, tc), nftables last, and the
// records' MTUs after all of it (see recordMTUs).
//
// A routes-only pass (scope routesOnly) is the pass of a step that changed
// what is routed (a block learnt, lost or confirmed): the routes, and the
// tunnels when the nodes reached through them or the own blocks (which
// hold their addresses) changed (the tunnels' owner decides), and nothing
// else. Through route reflectors every node hears
// every block of the cluster come, and a whole pass for each (sysctls,
// every pod's proxy ARP, the nftables tables, the tunnel's neighbours) was
// a seventh of a 100-client bench's CPU; the next whole pass (the interval,
// an ADD, a DEL) repairs the rest, as it repairs any drift.
//
// CNI operations run beside the pass. It takes a mark in their activity
// log before it reads the store, and whatever an operation in flight, or
// ended since the mark, touched (its record, veth, /32, elements, ifb) is
// left alone: neither released, pruned nor put back; the next pass, whose
// mark comes after the operation ended, finds it in the store. Each owner
// asks again after reading the kernel, and the pods' owner under each pod
// object's lock before changing it (routes.Busy), so an operation that
// begins while the pass runs is seen too.
func (r *reconciler) pass(blocks []store.Block, sc scope) error {
	mark := r.activity.Mark()
	defer mark.Close()
	eps, err := r.store.Endpoints()
	if err != nil {
		return fmt.Errorf("read endpoints: %w", err)
	}
	know(mark, eps)
	if blocks == nil {
		if blocks, err = r.store.Blocks(); err != nil {
			return fmt.Errorf("read blocks: %w", err)
		}
	}
	var errs []error
	live := readyEndpoints(eps)
	if sc.has(syncPods) {
		live = r.resolveEndpoints(eps, mark.Touched(), &errs)
	}
	own, remote, peers := r.routedBlocks(blocks, &errs)
	errs = append(errs, r.tunnels.Sync(tunnelSnapshot{net: r.net, own: own, peers: peers}, sc.has(resyncTunnels)))
	live, veths, err := r.syncRoutes(live, routes.BlockSnapshot{Own: own, Remote: remote}, mark, sc.has(syncPods))
	if err != nil {
		errs = append(errs, err)
	}
	if !sc.has(syncPods) || veths == nil {
		return errors.Join(errs...)
	}
	r.syncSysctls(live, mark, &errs)
	errs = append(errs, r.nat.reconcile(live, mark), r.policy.reconcile())
	// Last: an update of a record is a CNI operation of the server's,
	// which the owners above would leave its pod alone for.
	r.recordMTUs(live, veths, mark, &errs)
	return errors.Join(errs...)
}

// know tells mark what the store holds for each pod, so that an operation
// that names a pod by one key (a DEL, by its handle) touches all of the
// pod's objects (activity.Mark.Know).
func know(mark *activity.Mark, eps []store.Endpoint) {
	for _, ep := range eps {
		if ep.State != store.EndpointReserved {
			mark.Know(ep.Handle, ep.HostVeth, ep.Addrs())
		}
	}
}

// untouched are the endpoints of eps that no CNI operation touched.
func untouched(eps []store.Endpoint, t activity.Touched) []store.Endpoint {
	var out []store.Endpoint
	for _, ep := range eps {
		if ep.State == store.EndpointReserved || !t.Pod(ep.Handle, ep.HostVeth, ep.Addrs()...) {
			out = append(out, ep)
		}
	}
	return out
}

// readyEndpoints are the endpoints a routes-only pass counts: what a
// whole pass would release stays for it, so only ready attachments and
// reserved addresses.
func readyEndpoints(eps []store.Endpoint) []store.Endpoint {
	var live []store.Endpoint
	for _, ep := range eps {
		if ep.State == store.EndpointReady || ep.State == store.EndpointReserved {
			live = append(live, ep)
		}
	}
	return live
}

// syncRoutes brings the routes and the pods' objects in line, from one
// read of the kernel (the blocks' owner's Read): through the blocks'
// owner, the own blocks' blackholes and the other nodes' blocks of
// snapshot; then, through the pods' owner, the pods' /32s and /128s, no
// veth without a pod, the pods' MTU on both ends of every veth pair and,
// with limits (a whole pass), each limited pod's tc and no ifb without a
// pod. After reading the kernel, before either owner changes it, it
// drops from live the endpoints a CNI operation touched since the mark,
// and returns the rest with the veths the kernel had and the MTU of each
// one's node-side end after the pass (nil when the kernel could not be
// read).
func (r *reconciler) syncRoutes(live []store.Endpoint, snapshot routes.BlockSnapshot, mark *activity.Mark, limits bool) ([]store.Endpoint, map[string]int, error) {
	have, err := r.blockRoutes.Read()
	if err != nil {
		return live, nil, err
	}
	live = untouched(live, mark.Touched())
	blocks, err := r.blockRoutes.Sync(snapshot, have)
	errs := []error{err}
	want := podsOf(live, r.net.podMTU)
	sync := r.pods.SyncRoutes
	if limits {
		sync = r.pods.Sync
	}
	synced, err := sync(want, have, mark)
	errs = append(errs, err)
	r.logRoutes(blocks, synced.Plan, have, want)
	for _, c := range synced.TC {
		r.log.Warn("repaired: "+c.Change, "veth", c.HostVeth, "ip", ipOfVeth(live, c.HostVeth))
	}
	r.metrics.Repaired(metrics.RepairTC, len(synced.TC))
	for _, ifb := range synced.IFBs {
		r.log.Warn("removed an ifb no pod's egress limit uses", "ifb", ifb)
	}
	r.metrics.Repaired(metrics.RepairLink, len(synced.IFBs))
	return live, synced.MTUs, errors.Join(errs...)
}

// ipOfVeth is the addresses of the endpoint of live whose veth is veth,
// for the log.
func ipOfVeth(live []store.Endpoint, veth string) string {
	for _, ep := range live {
		if ep.HostVeth == veth {
			return ep.AddrsString()
		}
	}
	return ""
}

// logRoutes logs and counts what the pass changed: blocks, its own plan,
// and pods, what the pods' owner applied.
func (r *reconciler) logRoutes(blocks, pods routes.Plan, have routes.State, want []routes.Pod) {
	plan := routes.Plan{Replace: slices.Concat(blocks.Replace, pods.Replace), DeleteRoute: slices.Concat(blocks.DeleteRoute, pods.DeleteRoute),
		SetMTU: pods.SetMTU, DeleteLink: pods.DeleteLink}
	podAddrs := map[netip.Prefix]bool{} // the pods' /32s and /128s: ADD writes them, so a pass that adds one repairs it
	for _, ep := range want {
		for _, ip := range ep.IPs {
			podAddrs[netip.PrefixFrom(ip, ip.BitLen())] = true
		}
	}
	for _, rt := range plan.Replace {
		if cur, ok := have.Routes[rt.Dst]; ok {
			r.log.Warn("repairing route", "want", rt.String(), "have", cur.String())
			r.metrics.Repaired(metrics.RepairRoute, 1)
		} else {
			r.log.Info("adding route", "route", rt.String())
			if podAddrs[rt.Dst] {
				r.metrics.Repaired(metrics.RepairRoute, 1)
			}
		}
	}
	for _, rt := range plan.DeleteRoute {
		if rt.Kind != routes.PodRoute && !r.net.inPools(rt.Dst) {
			r.log.Info("removing route of a pool gone from the config", "route", rt.String())
			continue
		}
		r.log.Warn("removing route no pod or block needs", "route", rt.String())
		r.metrics.Repaired(metrics.RepairRoute, 1)
	}
	ips := map[string]string{}
	for _, ep := range want {
		ips[ep.HostVeth] = joinAddrs(ep.IPs)
	}
	for _, m := range plan.SetMTU {
		r.log.Info("pod MTU changed", "ip", ips[m.HostVeth], "veth", m.HostVeth, "from", have.MTUs[m.HostVeth].MTU, "to", m.MTU)
	}
	for _, l := range plan.DeleteLink {
		r.log.Warn("removing veth no pod owns", "veth", l)
	}
	r.metrics.Repaired(metrics.RepairLink, len(plan.DeleteLink))
}

// joinAddrs is a pod's addresses as one log value: "10.244.0.5", or
// "10.244.0.5,fd00:10:244::5".
func joinAddrs(ips []netip.Addr) string {
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.String()
	}
	return strings.Join(s, ",")
}

// syncSysctls has the sysctl owner bring forwarding and the pods' veths'
// settings in line, each veth's through the pods' owner (under its lock,
// not while busy); what it changes was a repair (ADD sets a pod's).
func (r *reconciler) syncSysctls(live []store.Endpoint, busy routes.Busy, errs *[]error) {
	var pods []sysctl.Pod
	for _, ep := range live {
		if ep.State != store.EndpointReserved && ep.HostVeth != "" {
			pods = append(pods, sysctl.Pod{HostVeth: ep.HostVeth, HostPorts: len(ep.PortMappings) > 0, IPv6: ep.HasIPv6()})
		}
	}
	changes, err := r.sysctls.Sync(sysctl.Node{Pods: pods, IPv6Pool: r.net.ipv6Pool(), VXLAN6: r.net.vxlanPool6().IsValid()}, r.pods.Links(busy))
	for _, c := range changes {
		if !r.sysctlsSet {
			r.log.Info("set a sysctl", "sysctl", c.Key, "was", c.Was, "now", c.Value)
			continue
		}
		r.log.Warn("repaired a sysctl", "sysctl", c.Key, "was", c.Was, "now", c.Value)
		r.metrics.Repaired(metrics.RepairSysctl, 1)
	}
	if err != nil {
		*errs = append(*errs, err)
		return
	}
	r.sysctlsSet = true
}

// podRoutes are the live endpoints that have a pod (not a reserved
// address such as the tunnel's), as package routes wants them, each veth
// pair with the pods' MTU (0: leave it).
func podRoutes(live []store.Endpoint, mtu int) []routes.Endpoint {
	var want []routes.Endpoint
	for _, pod := range podsOf(live, mtu) {
		want = append(want, pod.Endpoint)
	}
	return want
}

// podsOf are the live endpoints that have a pod, as the pods' owner wants
// them, with their bandwidth limits.
func podsOf(live []store.Endpoint, mtu int) []routes.Pod {
	var want []routes.Pod
	for _, ep := range live {
		if ep.State == store.EndpointReserved {
			continue
		}
		pod := routes.Pod{Endpoint: routes.Endpoint{IPs: ep.Addrs(), HostVeth: ep.HostVeth, Netns: ep.Netns, IfName: ep.IfName, MTU: mtu}}
		if ep.Bandwidth != nil {
			bw := cniserver.RoutesBandwidth(*ep.Bandwidth)
			pod.Bandwidth = &bw
		}
		want = append(want, pod)
	}
	return want
}

// compareRoutes is `reef routes`: the routes and veths reef wants next to
// the kernel's, without changing anything (the pass would release
// endpoints and sync the tunnels; this reads). Endpoints count as a
// routes-only pass counts them: ready and reserved ones. What CNI
// operations touched while it read is left out of both sides, as a pass
// leaves it alone.
func (r *reconciler) compareRoutes() (want, have routes.State, err error) {
	mark := r.activity.Mark()
	defer mark.Close()
	eps, err := r.store.Endpoints()
	if err != nil {
		return want, have, err
	}
	know(mark, eps)
	blocks, err := r.store.Blocks()
	if err != nil {
		return want, have, err
	}
	var errs []error
	own, remote, _ := r.routedBlocks(blocks, &errs)
	if have, err = r.blockRoutes.Read(); err != nil {
		return want, have, err
	}
	t := mark.Touched()
	maps.DeleteFunc(have.Links, func(name string, _ bool) bool { return t.Link(name) })
	maps.DeleteFunc(have.Routes, func(dst netip.Prefix, rt routes.Route) bool {
		return rt.Kind == routes.PodRoute && dst.IsSingleIP() && (t.Addr(dst.Addr()) || t.Link(rt.Dev))
	})
	live := untouched(readyEndpoints(eps), t)
	return routes.Desired(podRoutes(live, r.net.podMTU), own, remote, have.Links), have, errors.Join(errs...)
}

// resolveEndpoints releases what no pod can use any more and returns the
// endpoints that stay. A pending record is an ADD that never finished (the
// daemon died, or its rollback failed): the runtime got no result and will
// retry or delete, so the address is freed. A ready record whose netns is
// gone (a reboot, a runtime that never sent DEL) is freed on the second pass
// in a row that finds it gone.
func (r *reconciler) resolveEndpoints(eps []store.Endpoint, touched activity.Touched, errs *[]error) []store.Endpoint {
	var live []store.Endpoint
	seen := map[string]bool{}
	for _, ep := range eps {
		seen[ep.Handle] = true
		switch {
		case ep.State == store.EndpointReserved:
		case touched.Pod(ep.Handle, ep.HostVeth, ep.Addrs()...):
			// A CNI operation's: it decides; the next pass sees what it did.
			delete(r.gone, ep.Handle)
			continue
		case ep.State != store.EndpointReady:
			r.release(ep, "its ADD never finished", errs)
			continue
		case r.cni.ReleaseDeferred(ep.Handle):
			r.release(ep, "its DEL came while the store could not be written", errs)
			continue
		case !r.cni.Alive(ep):
			r.gone[ep.Handle]++
			if r.gone[ep.Handle] >= goneObservations {
				r.release(ep, "its network namespace is gone", errs)
				delete(r.gone, ep.Handle)
				continue
			}
			r.log.Info("pod's network namespace is gone; releasing its address on the next pass if still gone", "ip", ep.AddrsString(), "netns", ep.Netns, "container", ep.ContainerID)
		default:
			delete(r.gone, ep.Handle)
		}
		live = append(live, ep)
	}
	for h := range r.gone {
		if !seen[h] {
			delete(r.gone, h)
		}
	}
	return live
}

func (r *reconciler) release(ep store.Endpoint, why string, errs *[]error) {
	released, err := r.cni.Release(ep, false)
	if err != nil {
		*errs = append(*errs, fmt.Errorf("release %s of %s: %w", ep.AddrsString(), ep.ContainerID, err))
		return
	}
	if !released {
		r.log.Info("not releasing an address now: its record changed since the pass read it, or an operation on its container is in flight", "ip", ep.AddrsString(), "container", ep.ContainerID)
		return
	}
	r.log.Warn("released address: "+why, "ip", ep.AddrsString(), "container", ep.ContainerID, "pod", ep.PodNamespace+"/"+ep.PodName)
}

// sameRouting says whether two block lists route the same: the same blocks,
// in the same states, of the same owners. (Used and the other counters do
// not matter to the kernel.)
func sameRouting(a, b []store.Block) bool {
	return slices.EqualFunc(a, b, func(x, y store.Block) bool {
		return x.CIDR == y.CIDR && x.State == y.State && x.OwnerAddr == y.OwnerAddr && x.OwnerInc == y.OwnerInc && x.Own() == y.Own()
	})
}
