package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/reefcni/reef/cniserver/activity"
	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/store"
)

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
	// blocksIn is the block routes the last Sync of the blocks' owner
	// left in the kernel, as far as it knows (blocksLeft; nil: none yet,
	// as after a start): one of them missing at a later pass was deleted
	// by someone else, a repair.
	blocksIn map[netip.Prefix]routes.Route
	// blocksSynced: a Sync of the blocks' owner has ended without error
	// since the start. Before, another node's block routed otherwise
	// than this start wants is the start's config (a pool's vxlanMode
	// changed), not a repair.
	blocksSynced bool

	mu      sync.Mutex
	lastRun time.Time
	lastErr error // of the last step and pass
	// wholeErr is the last whole pass's error: a routes-only pass or a
	// step that ends well since did not do what failed (a node address
	// gone, an nftables table refused), so Last still reports it.
	wholeErr error
}

// reconcilerDeps are what the reconcile loop works with, all given to
// newReconciler.
type reconcilerDeps struct {
	store       *store.Store
	cni         podRecords     // the CNI server: a pod's record changes through it
	activity    *activity.Log  // the CNI operations' log, which a pass reads (package activity)
	kernel      routesKernel   // the node's own routing, read for the hops to routed owners and foreign routes in reef's way
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

// Last returns when the last pass ran and how it ended: its error, or
// else the last whole pass's.
func (r *reconciler) Last() (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastErr != nil {
		return r.lastRun, r.lastErr
	}
	return r.lastRun, r.wholeErr
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
		r.record(nil, routesOnly)
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
	r.record(err, kernel.scope())
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
func (r *reconciler) record(err error, sc scope) {
	r.mu.Lock()
	r.lastRun, r.lastErr = time.Now(), err
	if sc == wholePass {
		r.wholeErr = err
	}
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
	gone := r.followUplinks(&errs)
	errs = append(errs, r.tunnels.Sync(tunnelSnapshot{net: r.net, own: own, peers: peers}, sc.has(resyncTunnels)))
	live, veths, err := r.syncRoutes(live, routes.BlockSnapshot{Own: own, Remote: remote}, mark, sc.has(syncPods))
	if err != nil {
		errs = append(errs, err) // the tunnels keep what they would drop: routes may still go through it
	} else {
		errs = append(errs, r.tunnels.Finish())
	}
	if !sc.has(syncPods) || veths == nil {
		return errors.Join(errs...)
	}
	r.syncSysctls(live, mark, &errs)
	r.checkNodeAddrs(gone, &errs)
	errs = append(errs, r.nat.reconcile(live, mark), r.policy.reconcile())
	// Last: an update of a record is a CNI operation of the server's,
	// which the owners above would leave its pod alone for.
	r.recordMTUs(live, veths, mark, &errs)
	return errors.Join(errs...)
}

// followUplinks finds the uplinks again by name, for vxlan.reef's
// underlay device and checkNodeAddrs: one deleted and created again (a
// bond or VLAN that a network manager rebuilt, which takes vxlan.reef with
// it) has a new index, and the one read at start would keep vxlan.reef
// from coming back ("no such device") until a restart. It returns the
// names of those that are gone, each with its error in errs.
func (r *reconciler) followUplinks(errs *[]error) (gone []string) {
	found := map[string]int{} // the IPv6 uplink is most often the IPv4 one
	for _, u := range []struct {
		name  string
		index *int
	}{{r.net.uplink.Interface, &r.net.uplink.Index}, {r.net.uplink6.Interface, &r.net.uplink6.Index}} {
		if u.name == "" || *u.index == 0 || slices.Contains(gone, u.name) {
			continue
		}
		if i, ok := found[u.name]; ok {
			r.setIndex(u.index, i)
			continue
		}
		i, err := r.kernel.LinkIndex(u.name)
		switch {
		case errors.Is(err, routes.ErrLinkGone):
			gone = append(gone, u.name)
			*errs = append(*errs, fmt.Errorf("the node's uplink %s is gone: the other nodes reach this node's pods through it; reef takes up a link of that name again when there is one, or restart reef to choose another", u.name))
		case err != nil:
			*errs = append(*errs, fmt.Errorf("find the node's uplink %s: %w", u.name, err))
		case i != *u.index:
			r.log.Warn("the node's uplink was created again: following it", "interface", u.name, "index", i, "was", *u.index)
			r.setIndex(u.index, i)
		}
		if err == nil {
			found[u.name] = i
		}
	}
	return gone
}

// setIndex sets an uplink's index in r.net, the reconcile goroutine's,
// under mu: Status reads r.net (netInfo) from the RPCs' goroutines.
func (r *reconciler) setIndex(index *int, i int) {
	if *index == i {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	*index = i
}

// netInfo is a copy of r.net, for a goroutine other than the reconcile
// loop's (followUplinks changes the uplinks' indices).
func (r *reconciler) netInfo() netInfo {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.net
}

// checkNodeAddrs fails the whole pass while an address of the node's that
// reef chose at start, of either family, is gone from its interface, or
// failed duplicate address detection there: the other nodes route the
// node's blocks of that family through it, and the node no longer answers
// for it (an IPv6 one is not even in a BGP session, so nothing else would
// say so). The address is read at start only: put it back, or restart
// reef to choose another. An uplink in gone (followUplinks) has said so.
func (r *reconciler) checkNodeAddrs(gone []string, errs *[]error) {
	for _, a := range []struct {
		addr  netip.Addr
		index int
		iface string
	}{{r.net.uplink.Address, r.net.uplink.Index, r.net.uplink.Interface}, {r.net.uplink6.Address, r.net.uplink6.Index, r.net.uplink6.Interface}} {
		if !a.addr.IsValid() || a.index == 0 || slices.Contains(gone, a.iface) {
			continue
		}
		state, err := r.kernel.HasAddr(a.index, a.addr)
		switch {
		case err != nil:
			*errs = append(*errs, fmt.Errorf("check the node's address %s on %s: %w", a.addr, a.iface, err))
		case state == routes.AddrGone:
			*errs = append(*errs, fmt.Errorf("the node's address %s is gone from %s: the other nodes route this node's blocks of its family through it; put it back, or restart reef to choose another (the uplink is read at start)", a.addr, a.iface))
		case state == routes.AddrDuplicate:
			*errs = append(*errs, fmt.Errorf("the node's address %s on %s failed duplicate address detection: another host on the link has it, and the other nodes route this node's blocks of its family to that host; "+
				"remove it from the other host and add it here again (ip addr del, then add), or restart reef to choose another", a.addr, a.iface))
		}
	}
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
