package cniserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/cniserver/activity"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/veth"
	"github.com/reefcni/reef/store"
)

// BlockWait bounds how long an ADD waits for the block protocol to confirm a
// new block for it before it fails with "try again later".
const BlockWait = 30 * time.Second

// Plugin-specific CNI error codes (the spec leaves 100 and up to plugins).
// docs/cni.md lists them for operators.
const (
	// ErrPoolExhausted: no free address and no free block in the pool.
	ErrPoolExhausted uint = 100
	// ErrDataplaneDiffers: CHECK found the kernel out of line with the record.
	ErrDataplaneDiffers uint = 101
	// ErrNodeForgotten: the cluster forgot this node (`reef node forget`)
	// or a newer incarnation of it took over; it hands out no address until
	// the operator restarts it with an empty state dir (docs/ipam.md).
	ErrNodeForgotten uint = 102
	// ErrHostPortTaken: another live pod on the node holds a hostPort the
	// pod asks for.
	ErrHostPortTaken uint = 103
	// ErrStoreRecovered: the node's blocks are full and its store was
	// rebuilt by `reef store recover`, so this incarnation claims no new
	// block until the operator restarts it with an empty state dir on a
	// drained node (docs/ipam.md, "A damaged store").
	ErrStoreRecovered uint = 105
	// ErrSecondInterface: the container has reef's interface already,
	// under another CNI_IFNAME or another network: the node-side veth is
	// named after the pod, so reef gives a sandbox one interface.
	ErrSecondInterface uint = 106
)

func (s *Server) log4(r *request) *slog.Logger {
	return s.deps.Log.With("cmd", r.command, "container", r.containerID, "pod", r.podNamespace+"/"+r.podName, "ifname", r.ifName)
}

// poolsFor are the pools a pod of r gets an address from: one of each
// family the node has pools of, the first of its family (pools[0] for
// its family) unless the netconf key "pool" names another.
func (s *Server) poolsFor(r *request) ([]store.Pool, *types.Error) {
	var out []store.Pool
	if r.pool.IsValid() {
		i := slices.IndexFunc(s.cfg.Pools, func(p store.Pool) bool { return p.CIDR == r.pool })
		if i < 0 {
			var names []string
			for _, p := range s.cfg.Pools {
				names = append(names, p.CIDR.String())
			}
			return nil, types.NewError(types.ErrInvalidNetworkConfig,
				fmt.Sprintf("netconf key \"pool\": %s is not a pool of this node (pools: %v); add it to pools in /etc/reef/config.yaml", r.pool, names), "")
		}
		out = append(out, s.cfg.Pools[i])
	}
	for _, p := range s.cfg.Pools {
		if !slices.ContainsFunc(out, func(q store.Pool) bool { return q.CIDR.Addr().Is4() == p.CIDR.Addr().Is4() }) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (s *Server) add(ctx context.Context, in *reefv1.CNIRequest) ([]byte, *types.Error) {
	r, cerr := parseRequest("ADD", in)
	if cerr != nil {
		s.deps.Log.Warn("refused ADD", "container", in.GetContainerId(), "code", cerr.Code, "error", cerr.Msg)
		return nil, cerr
	}
	log := s.log4(r)
	if !s.Ready() {
		return nil, types.NewError(types.ErrTryAgainLater, "reef daemon is starting; try again later", "")
	}
	pools, cerr := s.poolsFor(r)
	if cerr != nil {
		return nil, cerr
	}
	if cerr := checkBurst(r.bandwidth, s.cfg.MTU); cerr != nil {
		return nil, cerr
	}
	if s.deps.Policy != nil {
		if cerr := s.deps.Policy.Admit(ctx, r.podNamespace, r.podName); cerr != nil {
			log.Warn("ADD refused for now", "code", cerr.Code, "error", cerr.Msg)
			return nil, cerr
		}
	}
	unlock := s.containers.Lock(r.containerID)
	defer unlock()
	op := s.deps.Activity.Begin(r.handle(), routes.HostVethName(r.podNamespace, r.podName, r.containerID))
	defer op.End()
	var ep store.Endpoint
	var podMAC string
	// One deadline for all the waits of this ADD: blocks may change many
	// times (other nodes' blocks learned) before one of this node's is
	// confirmed.
	needCtx, cancel := context.WithTimeout(ctx, BlockWait)
	defer cancel()
	if s.deps.Policy != nil {
		// Every cover of this ADD has ended when addLocked returns.
		defer s.deps.Policy.Settle(store.Endpoint{Handle: r.handle()})
	}
	for {
		var needBlocks []store.Pool
		ep, podMAC, needBlocks, cerr = s.addLocked(r, pools, op, log)
		if needBlocks == nil {
			break
		}
		// Every confirmed block of a pool is full, of one or both (nothing
		// was taken from the other family's). Wait, holding only the
		// container's lock, for the block protocol to confirm new claims,
		// of both pools at once, then retry. (The pass skips a container
		// whose lock is held: Server.Release and Update only try it.)
		if err := s.deps.NeedBlock(needCtx, needBlocks); err != nil {
			cerr = err
			break
		}
	}
	if cerr != nil {
		log.Warn("ADD failed", "code", cerr.Code, "error", cerr.Msg, "details", cerr.Details)
		return nil, cerr
	}
	out, err := s.result(r, ep, podMAC)
	if err != nil {
		return nil, types.NewError(types.ErrInternal, "encode CNI result", err.Error())
	}
	log.Info("pod added", "ip", ep.AddrsString(), "veth", ep.HostVeth)
	return out, nil
}

// addLocked allocates and wires, under the container's lock; op is the
// ADD in the activity log, told the pod's addresses before anything of the
// pod is written with them. needBlocks are the pools that have no free
// address in this node's confirmed blocks (nothing was done).
func (s *Server) addLocked(r *request, pools []store.Pool, op *activity.Op, log *slog.Logger) (ep store.Endpoint, podMAC string, needBlocks []store.Pool, cerr *types.Error) {
	ep, existed, needBlocks, cover, cerr := s.allocate(r, pools, op, log)
	if cerr != nil || needBlocks != nil {
		return ep, "", needBlocks, cerr
	}
	if cover != nil {
		// On every way out, a panic's too: the ADD's Settle (add) must
		// come after the Cover, or the pending endpoint it takes out
		// would be put back after it.
		defer cover.wait()
	}
	if existed && s.deps.Policy != nil {
		// A repeated ADD covers before it redoes the wiring: its failure
		// must leave the earlier ADD's wiring in place for its DEL.
		if err := s.deps.Policy.Cover(ep); err != nil {
			return ep, "", nil, s.rollback(r, ep, existed, coverError(ep, err), log)
		}
	}
	if err := s.detachOthers(ep); err != nil {
		if cover != nil {
			cover.wait() // the rollback's Uncover comes after the Cover
		}
		return ep, "", nil, s.rollback(r, ep, existed, types.NewError(types.ErrInternal, "take over veth "+ep.HostVeth, err.Error()), log)
	}
	spec := veth.Spec{Netns: r.netns, IfName: r.ifName, HostVeth: ep.HostVeth, IPs: ep.Addrs(), MTU: s.cfg.MTU,
		HostPorts: len(ep.PortMappings) > 0, TestPauseAfterVeth: s.cfg.TestPauseAfterVeth}
	if cover != nil {
		// A new pod is covered from the moment its record is written
		// (allocate), while the store syncs it and its veth is made, and
		// before the node's routes to it exist: nothing reaches it
		// uncovered, and the ADD takes the longer of the two, not their
		// sum.
		spec.BeforeRoutes = cover.wait
	}
	links, err := s.deps.Pods.Up(spec)
	if cover != nil {
		// Waited for on every path: a rollback's Uncover must come after
		// the Cover, and the cover must not outlive the ADD's lock. A
		// wiring that failed of itself (not of the cover, through the
		// hook) answers with its own error, the cover's in its details.
		if coverErr := cover.wait(); coverErr != nil {
			cerr := coverError(ep, coverErr)
			switch {
			case err == nil:
				s.unwire(ep, log)
			case !errors.Is(err, coverErr):
				cerr = wireError(r, ep, err)
				cerr.Details += "; the NetworkPolicy cover also failed: " + coverErr.Error()
			}
			return ep, "", nil, s.rollback(r, ep, existed, cerr, log)
		}
	}
	if err != nil {
		return ep, "", nil, s.rollback(r, ep, existed, wireError(r, ep, err), log)
	}
	if ep, cerr = s.finishWired(r, ep, existed, op, log); cerr != nil {
		return ep, "", nil, cerr
	}
	return ep, links.PodMAC.String(), nil, nil
}

// wireError is the CNI error of a failed wiring.
func wireError(r *request, ep store.Endpoint, err error) *types.Error {
	if errors.Is(err, veth.ErrNetnsGone) {
		return types.NewError(types.ErrUnknownContainer, "CNI_NETNS "+r.netns+" is gone: the sandbox was deleted, or never created", err.Error())
	}
	if errors.Is(err, veth.ErrIfNameTaken) {
		return types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_IFNAME %q already exists in CNI_NETNS %s, and it is not reef's: %s", r.ifName, r.netns, ifNameNew), err.Error())
	}
	return types.NewError(types.ErrInternal, "wire pod "+ep.AddrsString()+" in "+r.netns, err.Error())
}

// pendingCover is a new pod's policy cover, made while its record is
// synced to disk (allocate) and its veth is wired (addLocked).
type pendingCover struct {
	done chan struct{}
	err  error
}

// startCover covers ep by its policies in a goroutine of its own.
func (s *Server) startCover(ep store.Endpoint) *pendingCover {
	c := &pendingCover{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		// Off the request's goroutine, out of the server's recover: a
		// panic here must fail the ADD, not end the daemon.
		defer func() {
			if r := recover(); r != nil {
				s.deps.Log.Error("BUG: NetworkPolicy cover panicked", "pod", ep.PodNamespace+"/"+ep.PodName, "panic", r, "stack", string(debug.Stack()))
				c.err = fmt.Errorf("cover panicked: %v", r)
			}
		}()
		c.err = s.deps.Policy.Cover(ep)
	}()
	return c
}

// wait returns the cover's result once it is made; it can be called any
// number of times.
func (c *pendingCover) wait() error {
	<-c.done
	return c.err
}

// coverError is the CNI error of a failed cover.
func coverError(ep store.Endpoint, err error) *types.Error {
	return types.NewError(types.ErrInternal, "apply NetworkPolicy for pod "+ep.AddrsString()+" (nftables table inet reef)", err.Error())
}

// allocate records the ADD's endpoint, pending, with its addresses (a
// repeated ADD's are kept, with this call's netns and hostPorts); op is
// told them. needBlocks are the pools with no free address (nothing was
// stored).
func (s *Server) allocate(r *request, pools []store.Pool, op *activity.Op, log *slog.Logger) (ep store.Endpoint, existed bool, needBlocks []store.Pool, cover *pendingCover, cerr *types.Error) {
	tmpl := store.Endpoint{
		Handle:       r.handle(),
		Network:      r.conf.Name,
		ContainerID:  r.containerID,
		IfName:       r.ifName,
		Netns:        r.netns,
		PodNamespace: r.podNamespace,
		PodName:      r.podName,
		HostVeth:     routes.HostVethName(r.podNamespace, r.podName, r.containerID),
		MTU:          s.cfg.MTU,
		Bandwidth:    r.bandwidth,
		PortMappings: r.ports,
		State:        store.EndpointPending,
	}
	if cerr := s.secondInterface(r, tmpl.HostVeth); cerr != nil {
		return ep, false, nil, nil, cerr // nothing was stored
	}
	// The record is written before the kernel is touched: a crash at any
	// later point leaves a pending record that the next start resolves.
	// A new pod's cover starts once its record is written, while the
	// write is synced to disk.
	var chosen func(store.Endpoint)
	var covered store.Endpoint
	if s.deps.Policy != nil {
		chosen = func(ep store.Endpoint) {
			op.Pod(ep.Addrs(), tmpl.HostVeth) // before the cover writes its addresses
			covered, cover = ep, s.startCover(ep)
		}
	}
	ep, existed, err := s.deps.Store.AllocateThen(tmpl, chosen, pools...)
	if err != nil && cover != nil {
		// The commit failed: nothing is stored.
		cover.wait()
		s.deps.Policy.Uncover(covered)
		cover = nil
	}
	var full *store.NoFreeAddressError
	if errors.As(err, &full) {
		for _, cidr := range full.Pools {
			if i := slices.IndexFunc(pools, func(p store.Pool) bool { return p.CIDR == cidr }); i >= 0 {
				needBlocks = append(needBlocks, pools[i])
			}
		}
		if needBlocks == nil {
			return ep, existed, nil, nil, storeError("allocate an address", err)
		}
		return ep, existed, needBlocks, nil, nil
	}
	var taken *store.PortTakenError
	if errors.As(err, &taken) {
		return ep, existed, nil, nil, portTaken(r, taken) // nothing was stored
	}
	if err != nil {
		return ep, existed, nil, nil, storeError("allocate an address", err)
	}
	op.Pod(ep.Addrs(), tmpl.HostVeth)
	prev := ep // a repeated ADD's record as it was, its elements in the kernel
	if existed {
		// A repeated ADD: same address, wiring redone with this call's netns.
		log.Info("ADD repeated for a known attachment; keeping its address", "ip", ep.AddrsString())
		s.undefer(ep) // a DEL deferred for a full disk is overtaken: the pod is back
		ep.Netns, ep.IfName, ep.HostVeth, ep.MTU, ep.Bandwidth = tmpl.Netns, tmpl.IfName, tmpl.HostVeth, tmpl.MTU, tmpl.Bandwidth
		ep.State = store.EndpointPending
		if err := s.deps.Store.SetEndpoint(ep); err != nil {
			return ep, existed, nil, nil, types.NewError(types.ErrInternal, "update endpoint record", err.Error())
		}
	}
	if existed && !slices.Equal(r.ports, ep.PortMappings) {
		// A repeated ADD with other hostPorts: this call's are the pod's.
		// The kernel's elements of those it had and this call does not
		// name go first, while the store still holds their ports for the
		// pod: deleted after, they could be another pod's that claimed a
		// port in between (an element is keyed by protocol and port). The
		// ADD adds this call's (finishWired). A record without a veth (a
		// newer sandbox of the pod took it) has none of its own, as at
		// its release.
		dropped := prev
		dropped.PortMappings = slices.DeleteFunc(slices.Clone(prev.PortMappings), func(m store.PortMapping) bool { return slices.Contains(r.ports, m) })
		unmap := prev.HostVeth != "" && len(dropped.PortMappings) > 0
		if unmap {
			if err := s.deps.PodFilter.DelPod(dropped); err != nil {
				log.Warn("remove the nftables elements of the hostPorts a repeated ADD dropped; the next whole reconcile pass removes them", "error", err)
			}
		}
		claimed, err := s.deps.Store.ClaimPorts(ep.Handle, r.ports)
		if err != nil && unmap {
			// The pod keeps the ports it had: their elements come back.
			if err := s.deps.PodFilter.AddPod(prev); err != nil {
				log.Warn("put back the nftables elements of the pod's hostPorts; the next whole reconcile pass does", "error", err)
			}
		}
		if errors.As(err, &taken) {
			return ep, existed, nil, nil, portTaken(r, taken)
		}
		if err != nil {
			return ep, existed, nil, nil, types.NewError(types.ErrInternal, "record the pod's hostPorts", err.Error())
		}
		ep = claimed
	}
	return ep, existed, nil, cover, nil
}

// secondInterface refuses an ADD of a second interface into a sandbox
// that has reef's already: the same container under another CNI_IFNAME
// (the spec's attachment is the container ID and the ifname; reef's
// record is one per container and network), or under another network
// (whose veth would be named after the same pod). Served, either would
// take the first interface's veth and leave its record without one,
// while the runtime still counts on it. Callers hold the container's
// lock; nothing is written.
func (s *Server) secondInterface(r *request, hostVeth string) *types.Error {
	refuse := func(o store.Endpoint) *types.Error {
		return types.NewError(ErrSecondInterface,
			fmt.Sprintf("container %s has reef's interface %s (%s, network %q) already; reef gives a container one interface, so CNI_IFNAME %s on network %q is refused",
				r.containerID, o.IfName, o.AddrsString(), o.Network, r.ifName, r.conf.Name),
			"DEL the other attachment first, or attach the second interface with another plugin")
	}
	ep, found, err := s.deps.Store.Endpoint(r.handle())
	if err != nil {
		return storeError("read endpoint record", err)
	}
	if found && ep.IfName != "" && ep.IfName != r.ifName {
		return refuse(ep)
	}
	others, err := s.deps.Store.EndpointsWithVeth(hostVeth)
	if err != nil {
		return storeError("read endpoint records", err)
	}
	for _, o := range others {
		if o.Handle != r.handle() && o.ContainerID == r.containerID {
			return refuse(o)
		}
	}
	return nil
}

// finishWired completes an ADD whose pod is wired: its bandwidth limits,
// its ARP-filter and hostPort elements, its record ready (the endpoint
// returned). A failure undoes the ADD (the wiring, the allocation) and is
// returned.
func (s *Server) finishWired(r *request, ep store.Endpoint, existed bool, op *activity.Op, log *slog.Logger) (store.Endpoint, *types.Error) {
	// The bandwidth limits (tc on the veth and the ifb: a dozen netlink
	// calls) are set while nftables and the store do their part; the ADD
	// waits for both before it answers, and undoes both on a failure.
	bw := make(chan error, 1)
	if ep.Bandwidth != nil {
		go func(veth string, b store.Bandwidth) {
			_, err := s.deps.Pods.Limit(veth, RoutesBandwidth(b))
			bw <- err
		}(ep.HostVeth, *ep.Bandwidth)
	} else {
		bw <- nil
	}
	fail := func(cerr *types.Error) *types.Error {
		<-bw // before the veth and the ifb go
		s.unwire(ep, log)
		return s.rollback(r, ep, existed, cerr, log)
	}
	err := s.deps.PodFilter.AddPod(ep)
	if errors.Is(err, ErrRepairLater) && s.deps.Trigger != nil {
		log.Warn("an nftables table of reef's is missing at ADD; a whole reconcile pass after this ADD recreates it with the pod's elements", "error", err)
		op.AfterEnd(s.deps.Trigger)
		err = nil
	}
	if err != nil {
		return ep, fail(types.NewError(types.ErrInternal,
			"add pod "+ep.AddrsString()+" to the ARP filter and its hostPorts (nftables tables arp reef, inet reef-hostport)", err.Error()))
	}
	ep.State = store.EndpointReady
	if err := s.deps.Store.SetEndpoint(ep); err != nil {
		return ep, fail(storeError("record endpoint", err))
	}
	if err := <-bw; err != nil {
		bw <- nil // for fail's wait
		return ep, fail(types.NewError(types.ErrInternal,
			"limit the bandwidth of pod "+ep.AddrsString()+" (tc on "+ep.HostVeth+")", err.Error()))
	}
	return ep, nil
}

// storeError is the CNI error of a store call that failed: I/O failure
// (5) when the state file cannot be written or is damaged, naming the file
// and what to do; an internal error otherwise.
func storeError(what string, err error) *types.Error {
	if errors.Is(err, store.ErrNotWritable) || errors.Is(err, store.ErrDamaged) {
		return types.NewError(types.ErrIOFailure, what+": "+err.Error(), "")
	}
	return types.NewError(types.ErrInternal, what, err.Error())
}

// portTaken is the CNI error of a hostPort another pod holds.
func portTaken(r *request, taken *store.PortTakenError) *types.Error {
	return types.NewError(ErrHostPortTaken, fmt.Sprintf("pod %s: %s; delete that pod or pick another hostPort", podName(r), taken), "")
}

// podName is the pod as an operator names it: namespace/name, or the
// container ID for a runtime that sends no pod name.
func podName(r *request) string {
	if r.podName == "" {
		return "container " + r.containerID
	}
	return r.podNamespace + "/" + r.podName
}

// rollback undoes the allocation of a failed ADD (the kernel side is undone
// by the pods' owner's Up itself). An address that a repeated ADD found is kept but left
// pending: the runtime's DEL after the failure releases it. A record the
// ADD had made ready already (the bandwidth limits fail last) is made
// pending again: its veth is gone.
func (s *Server) rollback(r *request, ep store.Endpoint, existed bool, cerr *types.Error, log *slog.Logger) *types.Error {
	if existed {
		if ep.State != store.EndpointPending {
			ep.State = store.EndpointPending
			if err := s.deps.Store.SetEndpoint(ep); err != nil {
				log.Error("mark the failed repeated ADD's record pending", "ip", ep.AddrsString(), "error", err)
				cerr.Details += "; marking the record pending also failed: " + err.Error()
			}
		}
		return cerr
	}
	if _, _, err := s.deps.Store.Release(r.handle()); err != nil {
		log.Error("roll back allocation", "ip", ep.AddrsString(), "error", err)
		cerr.Details += "; rolling back the allocation also failed: " + err.Error()
	}
	if s.deps.Policy != nil {
		s.deps.Policy.Uncover(ep)
	}
	return cerr
}

// detachOthers handles a veth name that an older attachment still holds: a
// new sandbox of the same pod whose predecessor has not been deleted yet.
// The old record loses the name, so its later DEL cannot remove the new
// pod's veth. Each record changes in a transaction of its own that finds
// it still holding the name: the reconcile pass may release an old one
// meanwhile (its netns gone), under that container's lock, not this one's.
func (s *Server) detachOthers(ep store.Endpoint) error {
	eps, err := s.deps.Store.EndpointsWithVeth(ep.HostVeth)
	if err != nil {
		return err
	}
	for _, o := range eps {
		if o.Handle == ep.Handle {
			continue
		}
		wrote, err := s.deps.Store.UpdateEndpoint(o.Handle, func(rec *store.Endpoint) bool {
			if rec.HostVeth != ep.HostVeth {
				return false
			}
			rec.HostVeth = ""
			return true
		})
		if err != nil {
			return err
		}
		if wrote {
			s.deps.Log.Info("veth taken over by a newer sandbox of the same pod", "veth", ep.HostVeth, "old", o.ContainerID, "new", ep.ContainerID)
		}
	}
	return nil
}
