package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/routes"
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
	store    *store.Store
	cni      *cniserver.Server
	kernel   *routes.Kernel
	log      *slog.Logger
	interval time.Duration
	nat      *natDataplane
	net      netInfo      // the node's uplink, pools and pod MTU
	blocks   *blockEngine // nil: no block protocol (tests of the kernel side)

	trigger chan struct{}
	gone    map[string]int // handle -> passes in a row that found its netns gone

	mu      sync.Mutex
	lastRun time.Time
	lastErr error
}

func newReconciler(st *store.Store, cni *cniserver.Server, k *routes.Kernel, log *slog.Logger, interval time.Duration) *reconciler {
	return &reconciler{store: st, cni: cni, kernel: k, log: log.With("component", "reconcile"), interval: interval,
		trigger: make(chan struct{}, 1), gone: map[string]int{}}
}

// Trigger asks for a pass soon; triggers that come while one is pending
// fold into it.
func (r *reconciler) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Run loops until ctx ends.
func (r *reconciler) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.trigger:
		}
		if err := r.Once(); err != nil {
			r.log.Error("reconcile pass failed; retrying next interval", "error", err)
		}
	}
}

// Last returns when the last pass ran and how it ended.
func (r *reconciler) Last() (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastRun, r.lastErr
}

// Once runs one pass: the block protocol's step first, which reads and
// writes only the store and BGP (bbolt orders its transactions with the
// CNI path's), then the kernel, while holding the kernel lock for writing,
// so no CNI operation is half-way through the store or the kernel. ADDs
// go on while the step waits for BGP.
func (r *reconciler) Once() error {
	var blocks []store.Block
	var stepErr error
	if r.blocks != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		blocks, stepErr = r.blocks.Step(ctx)
		cancel()
		if stepErr != nil {
			stepErr = fmt.Errorf("block protocol: %w", stepErr)
		}
	}
	r.cni.Kernel.Lock()
	err := errors.Join(stepErr, r.pass(blocks))
	r.cni.Kernel.Unlock()
	r.mu.Lock()
	r.lastRun, r.lastErr = time.Now(), err
	r.mu.Unlock()
	return err
}

// pass brings the kernel in line with the store; blocks are the step's
// (nil: read from the store).
func (r *reconciler) pass(blocks []store.Block) error {
	var errs []error
	if changed, err := routes.EnsureForwarding(); err != nil {
		errs = append(errs, err)
	} else if changed {
		r.log.Warn("repaired: net.ipv4.ip_forward was 0, set to 1")
	}

	// Under the lock no CNI operation is half-way, so store and kernel are
	// both stable while this pass reads them.
	eps, err := r.store.Endpoints()
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("read endpoints: %w", err))...)
	}
	if blocks == nil {
		if blocks, err = r.store.Blocks(); err != nil {
			return errors.Join(append(errs, fmt.Errorf("read blocks: %w", err))...)
		}
	}

	live := r.resolveEndpoints(eps, &errs)

	// The tunnel device first: routes through it need it.
	remote, vxPeers := r.net.remoteRoutes(blocks)
	r.syncTunnel(vxPeers, &errs)
	r.syncIPIP(&errs)

	have, err := r.kernel.Read()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	var want []routes.Endpoint
	for _, ep := range live {
		if ep.State == store.EndpointReserved {
			continue // an address held by no pod, such as the tunnel address
		}
		want = append(want, routes.Endpoint{IP: ep.IP, HostVeth: ep.HostVeth})
	}
	// Only confirmed blocks are routed or blackholed: a pending claim may
	// still be lost to another node.
	var own []netip.Prefix
	for _, b := range blocks {
		if b.State == store.BlockConfirmed {
			own = append(own, b.CIDR)
		}
	}
	plan := routes.Diff(routes.Desired(want, own, remote, have.Links), have)
	for _, rt := range plan.Replace {
		if cur, ok := have.Routes[rt.Dst]; ok {
			r.log.Warn("repairing route", "want", rt.String(), "have", cur.String())
		} else {
			r.log.Info("adding route", "route", rt.String())
		}
	}
	for _, rt := range plan.DeleteRoute {
		r.log.Warn("removing route no pod or block needs", "route", rt.String())
	}
	for _, l := range plan.DeleteLink {
		r.log.Warn("removing veth no pod owns", "veth", l)
	}
	if err := r.kernel.Apply(plan); err != nil {
		errs = append(errs, err)
	}
	r.syncPodMTU(live, have.Links, &errs)
	for _, ep := range live {
		if ep.HostVeth == "" || !have.Links[ep.HostVeth] {
			continue
		}
		if changed, err := routes.EnsureProxyARP(ep.HostVeth); err != nil {
			errs = append(errs, err)
		} else if changed {
			r.log.Warn("repaired: proxy_arp was off", "veth", ep.HostVeth, "ip", ep.IP)
		}
	}
	if err := r.nat.reconcile(live); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// resolveEndpoints releases what no pod can use any more and returns the
// endpoints that stay. A pending record is an ADD that never finished (the
// daemon died, or its rollback failed): the runtime got no result and will
// retry or delete, so the address is freed. A ready record whose netns is
// gone (a reboot, a runtime that never sent DEL) is freed on the second pass
// in a row that finds it gone.
func (r *reconciler) resolveEndpoints(eps []store.Endpoint, errs *[]error) []store.Endpoint {
	var live []store.Endpoint
	seen := map[string]bool{}
	for _, ep := range eps {
		seen[ep.Handle] = true
		switch {
		case ep.State == store.EndpointReserved:
		case ep.State != store.EndpointReady:
			r.release(ep, "its ADD never finished", errs)
			continue
		case !routes.NetnsExists(ep.Netns):
			r.gone[ep.Handle]++
			if r.gone[ep.Handle] >= goneObservations {
				r.release(ep, "its network namespace is gone", errs)
				delete(r.gone, ep.Handle)
				continue
			}
			r.log.Info("pod's network namespace is gone; releasing its address on the next pass if still gone", "ip", ep.IP, "netns", ep.Netns, "container", ep.ContainerID)
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
	if err := r.cni.TearDown(ep); err != nil {
		*errs = append(*errs, fmt.Errorf("release %s of %s: %w", ep.IP, ep.ContainerID, err))
		return
	}
	r.log.Warn("released address: "+why, "ip", ep.IP, "container", ep.ContainerID, "pod", ep.PodNamespace+"/"+ep.PodName)
}
