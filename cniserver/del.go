package cniserver

import (
	"errors"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/cniserver/pendingdel"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/veth"
	"github.com/reefcni/reef/store"
)

// Delete removes one attachment: veth (and with it the /32 route) first,
// then the record and the address, so a crash in between leaves a record
// that reconcile resolves rather than an address held by nothing. An
// unknown attachment, an empty or missing netns and a missing veth are all
// success: runtimes repeat DEL (containerd: at stop, and at remove with no
// netns). It is exported for the daemon's drain of queued DELs.
func (s *Server) Delete(in *reefv1.CNIRequest) *types.Error {
	r, cerr := parseRequest("DEL", in)
	if cerr != nil {
		s.deps.Log.Warn("refused DEL", "container", in.GetContainerId(), "code", cerr.Code, "error", cerr.Msg)
		return cerr
	}
	log := s.log4(r)
	unlock := s.containers.Lock(r.containerID)
	defer unlock()
	op := s.deps.Activity.Begin(r.handle(), "")
	defer op.End()

	ep, found, err := s.deps.Store.Endpoint(r.handle())
	if err == nil && !found {
		ep, found, err = s.recoveredEndpoint(r)
	}
	if err != nil {
		return types.NewError(types.ErrInternal, "read endpoint record", err.Error())
	}
	if !found {
		log.Debug("DEL of an unknown attachment: nothing to do")
		return nil
	}
	if ep.IfName != "" && ep.IfName != r.ifName {
		// Another attachment of the container's (the spec's is the
		// container ID and the ifname): this one's ADD was refused
		// (ErrSecondInterface), and the runtime's DEL after it must not
		// take the first interface away.
		log.Info("DEL of an interface reef did not make: the container's attachment is another one, left alone", "attached", ep.IfName)
		return nil
	}
	op.Pod(ep.Addrs(), ep.HostVeth)
	err = s.release(ep)
	if errors.Is(err, store.ErrNotWritable) || errors.Is(err, store.ErrDamaged) {
		// The pod is gone from the kernel; only the store could not be
		// written. Its address stays taken (so it is never handed out
		// twice) and is freed by the reconcile pass once the store takes
		// writes again: the runtime need not hold the pod.
		s.deferRelease(ep.Handle)
		if s.cfg.DeferredDir != "" {
			qerr := pendingdel.Put(s.cfg.DeferredDir, pendingdel.Entry{ContainerID: in.GetContainerId(), Netns: in.GetNetns(),
				IfName: in.GetIfname(), Args: in.GetArgs(), Path: in.GetPath(), Netconf: in.GetNetconf(), Queued: time.Now().UTC()})
			if qerr != nil {
				log.Error("queue the DEL's store part for the next start", "error", qerr)
			}
		}
		log.Warn("DEL done in the kernel; the store could not be written, so the address is freed once it can be", "ip", ep.AddrsString(), "error", err)
		return nil
	}
	if err != nil {
		log.Error("DEL failed", "ip", ep.AddrsString(), "error", err)
		return types.NewError(types.ErrInternal, "delete pod "+ep.AddrsString(), err.Error())
	}
	log.Info("pod deleted", "ip", ep.AddrsString(), "veth", ep.HostVeth)
	return nil
}

// recoveredEndpoint finds the record `reef store recover` rebuilt for the
// pod of r from the kernel alone: it has no container ID, but the veth's
// name follows from the pod's name (or container ID), as at ADD.
func (s *Server) recoveredEndpoint(r *request) (store.Endpoint, bool, error) {
	eps, err := s.deps.Store.EndpointsWithVeth(routes.HostVethName(r.podNamespace, r.podName, r.containerID))
	if err != nil {
		return store.Endpoint{}, false, err
	}
	for _, ep := range eps {
		if !ep.Recovered() {
			continue
		}
		// The name follows from the pod's name, so a DEL of an older
		// sandbox of the same pod names it too: only the DEL of the
		// sandbox whose netns holds the veth's peer frees it. Without
		// that netns (gone, or not given), the veth is gone with it or
		// soon will be, and the reconcile pass frees the record then.
		if r.netns == "" {
			return store.Endpoint{}, false, nil
		}
		ours, err := veth.PeerIn(r.netns, ep.HostVeth)
		if err != nil || !ours {
			s.deps.Log.Info("DEL names a rebuilt record by its veth, but the veth is not this sandbox's: left alone",
				"veth", ep.HostVeth, "netns", r.netns, "error", err)
			return store.Endpoint{}, false, nil
		}
		return ep, true, nil
	}
	return store.Endpoint{}, false, nil
}

// Alive is SandboxAlive, for the reconcile pass.
func (s *Server) Alive(ep store.Endpoint) bool { return SandboxAlive(ep) }

// SandboxAlive reports whether an endpoint's pod is still there: its
// network namespace exists. A record rebuilt by `reef store recover`
// knows no namespace; its veth, which the kernel removes with the
// namespace, stands in for it.
func SandboxAlive(ep store.Endpoint) bool {
	if ep.Netns == "" && ep.Recovered() {
		return veth.LinkExists(ep.HostVeth)
	}
	return veth.NetnsExists(ep.Netns)
}

// release tears an endpoint down and frees its address. Callers hold the
// container lock, and have told the activity log of the pod. The veth goes
// only if, under its locks, the record still gives it to this attachment:
// a newer sandbox of the same pod takes the name over (detachOthers, under
// its own container's lock) and creates the veth again.
func (s *Server) release(ep store.Endpoint) error {
	if ep.HostVeth != "" {
		if err := s.deps.PodFilter.DelPod(ep); err != nil {
			return err
		}
		still := func() bool {
			cur, found, err := s.deps.Store.Endpoint(ep.Handle)
			return err != nil || found && cur.HostVeth == ep.HostVeth
		}
		if err := s.deps.Pods.Down(ep.HostVeth, still); err != nil {
			return err
		}
	}
	// The addresses' conntrack entries go also when a newer sandbox of
	// the pod took the veth (no HostVeth): they are freed all the same.
	if f, ok := s.deps.PodFilter.(PodForgetter); ok {
		f.Forget(ep)
	}
	_, _, err := s.deps.Store.Release(ep.Handle)
	if err == nil {
		s.undefer(ep)
		if s.deps.Policy != nil {
			s.deps.Policy.Uncover(ep)
		}
	}
	return err
}

// deferRelease remembers a handle whose DEL is done in the kernel but not
// in the store.
func (s *Server) deferRelease(handle string) { s.deferred.Store(handle, true) }

// undefer forgets a deferred DEL of ep's attachment, in memory and in the
// queue, when an ADD of the same attachment came after it.
func (s *Server) undefer(ep store.Endpoint) {
	if _, was := s.deferred.LoadAndDelete(ep.Handle); was && s.cfg.DeferredDir != "" {
		if err := pendingdel.Drop(s.cfg.DeferredDir, ep.ContainerID, ep.IfName); err != nil {
			s.deps.Log.Warn("drop a queued DEL an ADD overtook", "error", err)
		}
	}
}

// ReleaseDeferred reports whether handle's DEL waits for the store to take
// writes: the reconcile pass releases it then (Release), whatever its
// netns says. A daemon restart forgets it; the pass then frees the
// address once the pod's netns is gone, as for any pod.
func (s *Server) ReleaseDeferred(handle string) bool {
	_, ok := s.deferred.Load(handle)
	return ok
}

// Release removes an endpoint's veth and frees its address, for the
// reconcile pass and `reef ipam release`, which decided on ep from an
// earlier read: under the container's lock the record is read again, and
// released only if it is still ep (same state, namespace, veth and
// address). A record that changed meanwhile (a repeated ADD finished, a
// DEL came first) is left as it is, and released says so. With wait false
// (the pass) a container whose lock is held, by an operation in flight,
// is left alone too: the pass must not wait for an ADD that waits for
// the pass's block step.
func (s *Server) Release(ep store.Endpoint, wait bool) (released bool, err error) {
	err = s.withRecord(ep, wait, func(store.Endpoint) error { return s.release(ep) })
	if errors.Is(err, errChanged) {
		return false, nil
	}
	return err == nil, err
}

// Update changes a live pod's record for the reconcile pass (the MTU
// its veth pair got from the pass): under the container's lock, if it is
// free and the record is still ep, record changes it, in one store
// transaction that writes only while the record keeps ep's veth and
// state. It says whether it wrote.
func (s *Server) Update(ep store.Endpoint, record func(*store.Endpoint)) (bool, error) {
	wrote := false
	err := s.withRecord(ep, false, func(cur store.Endpoint) error {
		var err error
		wrote, err = s.deps.Store.UpdateEndpoint(ep.Handle, func(e *store.Endpoint) bool {
			if e.HostVeth != cur.HostVeth || e.State != cur.State {
				return false
			}
			record(e)
			return true
		})
		return err
	})
	if errors.Is(err, errChanged) {
		return false, nil
	}
	return wrote, err
}

// errChanged says withRecord found the record changed, or the container
// busy.
var errChanged = errors.New("the attachment's record changed")

// withRecord runs f under ep's container lock, told to the activity log,
// if the record still is ep; else it returns errChanged. Without wait, a
// held lock is errChanged too.
func (s *Server) withRecord(ep store.Endpoint, wait bool, f func(store.Endpoint) error) error {
	var unlock func()
	if wait {
		unlock = s.containers.Lock(ep.ContainerID)
	} else {
		var ok bool
		if unlock, ok = s.containers.TryLock(ep.ContainerID); !ok {
			return errChanged
		}
	}
	defer unlock()
	op := s.deps.Activity.Begin(ep.Handle, ep.HostVeth)
	defer op.End()
	op.Pod(ep.Addrs(), "")
	cur, found, err := s.deps.Store.Endpoint(ep.Handle)
	if err != nil {
		return err
	}
	if !found || cur.State != ep.State || cur.Netns != ep.Netns || cur.HostVeth != ep.HostVeth || cur.IP != ep.IP || cur.Second != ep.Second {
		return errChanged
	}
	return f(cur)
}
