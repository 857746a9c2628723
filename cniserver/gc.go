package cniserver

import (
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	reefv1 "github.com/reefcni/reef/proto"
)

// gc releases every attachment of this network that the runtime does not
// list as valid (CNI 1.1 "cni.dev/valid-attachments"), tearing down its veth
// and route: what a runtime that lost track of a sandbox would otherwise leak.
func (s *Server) gc(in *reefv1.CNIRequest) *types.Error {
	r, cerr := parseRequest("GC", in)
	if cerr != nil {
		return cerr
	}
	type att struct{ id, ifname string }
	valid := map[att]bool{}
	for _, a := range r.conf.ValidAttachments {
		valid[att{a.ContainerID, a.IfName}] = true
	}
	eps, err := s.deps.Store.Endpoints()
	if err != nil {
		return types.NewError(types.ErrInternal, "read endpoint records", err.Error())
	}
	released := 0
	var failed []string
	for _, ep := range eps {
		if ep.Recovered() && !SandboxAlive(ep) {
			// Rebuilt by `reef store recover` without its container ID:
			// the runtime's list cannot name it, but its veth is gone.
		} else if ep.Network != r.conf.Name || valid[att{ep.ContainerID, ep.IfName}] {
			continue
		}
		if err := s.releaseHandle(ep.ContainerID, ep.Handle); err != nil {
			failed = append(failed, ep.ContainerID+": "+err.Error())
			continue
		}
		released++
		s.deps.Log.Info("GC released an attachment the runtime no longer knows", "container", ep.ContainerID, "pod", ep.PodNamespace+"/"+ep.PodName, "ip", ep.AddrsString())
	}
	s.deps.Log.Info("GC done", "network", r.conf.Name, "valid", len(valid), "released", released)
	if len(failed) > 0 {
		return types.NewError(types.ErrInternal, "GC could not release every stale attachment", strings.Join(failed, "; "))
	}
	return nil
}

// releaseHandle releases one attachment under its container's lock,
// re-reading the record there: a DEL may have come first.
func (s *Server) releaseHandle(containerID, handle string) error {
	unlock := s.containers.Lock(containerID)
	defer unlock()
	op := s.deps.Activity.Begin(handle, "")
	defer op.End()
	ep, found, err := s.deps.Store.Endpoint(handle)
	if err != nil || !found {
		return err
	}
	op.Pod(ep.Addrs(), ep.HostVeth)
	return s.release(ep)
}
