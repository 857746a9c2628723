package cniserver

import (
	"github.com/containernetworking/cni/pkg/types"

	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes"
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
		s.log.Warn("refused DEL", "container", in.GetContainerId(), "code", cerr.Code, "error", cerr.Msg)
		return cerr
	}
	log := s.log4(r)
	unlock := s.containers.lock(r.containerID)
	defer unlock()
	s.Kernel.RLock()
	defer s.Kernel.RUnlock()

	ep, found, err := s.store.Endpoint(r.handle())
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
	if err := s.release(ep); err != nil {
		log.Error("DEL failed", "ip", ep.IP, "error", err)
		return types.NewError(types.ErrInternal, "delete pod "+ep.IP.String(), err.Error())
	}
	log.Info("pod deleted", "ip", ep.IP, "veth", ep.HostVeth)
	return nil
}

// recoveredEndpoint finds the record `reef store recover` rebuilt for the
// pod of r from the kernel alone: it has no container ID, but the veth's
// name follows from the pod's name (or container ID), as at ADD.
func (s *Server) recoveredEndpoint(r *request) (store.Endpoint, bool, error) {
	eps, err := s.store.EndpointsWithVeth(routes.HostVethName(r.podNamespace, r.podName, r.containerID))
	if err != nil {
		return store.Endpoint{}, false, err
	}
	for _, ep := range eps {
		if ep.Recovered() {
			return ep, true, nil
		}
	}
	return store.Endpoint{}, false, nil
}

// SandboxAlive reports whether an endpoint's pod is still there: its
// network namespace exists. A record rebuilt by `reef store recover`
// knows no namespace; its veth, which the kernel removes with the
// namespace, stands in for it.
func SandboxAlive(ep store.Endpoint) bool {
	if ep.Netns == "" && ep.Recovered() {
		return routes.LinkExists(ep.HostVeth)
	}
	return routes.NetnsExists(ep.Netns)
}

// release tears an endpoint down and frees its address. Callers hold the
// container lock and the kernel lock.
func (s *Server) release(ep store.Endpoint) error {
	if ep.HostVeth != "" {
		if err := s.podFilter().DelPod(ep); err != nil {
			return err
		}
		if err := routes.TeardownPod(ep.HostVeth); err != nil {
			return err
		}
	}
	_, _, err := s.store.Release(ep.Handle)
	if err == nil && s.Policy != nil {
		s.Policy.Changed()
	}
	return err
}

// TearDown removes an endpoint's veth and frees its address without taking
// the container lock: for the reconcile loop, which holds Kernel for
// writing and so excludes every CNI operation.
func (s *Server) TearDown(ep store.Endpoint) error { return s.release(ep) }
