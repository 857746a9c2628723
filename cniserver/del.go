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
