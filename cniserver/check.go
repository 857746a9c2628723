package cniserver

import (
	"encoding/json"
	"fmt"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"

	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

func (s *Server) check(in *reefv1.CNIRequest) *types.Error {
	r, cerr := parseRequest("CHECK", in)
	if cerr != nil {
		return cerr
	}
	unlock := s.containers.Lock(r.containerID)
	defer unlock()

	ep, found, err := s.deps.Store.Endpoint(r.handle())
	if err != nil {
		return types.NewError(types.ErrInternal, "read endpoint record", err.Error())
	}
	if !found {
		return types.NewError(types.ErrUnknownContainer, fmt.Sprintf("reef has no attachment %s (container %s)", r.handle(), r.containerID), "")
	}
	if ep.State != store.EndpointReady {
		return types.NewError(ErrDataplaneDiffers, fmt.Sprintf("attachment of %s is %s: its ADD did not finish", ep.IP, ep.State), "")
	}
	if ep.Netns != r.netns || ep.IfName != r.ifName {
		return types.NewError(ErrDataplaneDiffers,
			fmt.Sprintf("attachment of %s was made in %s as %s, CHECK names %s as %s", ep.IP, ep.Netns, ep.IfName, r.netns, r.ifName), "")
	}
	if err := checkPrevResult(in.GetNetconf(), ep.IP); err != nil {
		return types.NewError(ErrDataplaneDiffers, err.Error(), "")
	}
	if ep.HostVeth == "" {
		return types.NewError(ErrDataplaneDiffers, fmt.Sprintf("pod %s lost its veth to a newer sandbox of the same pod", ep.IP), "")
	}
	if err := routes.CheckPod(routes.PodSpec{Netns: ep.Netns, IfName: ep.IfName, HostVeth: ep.HostVeth, IPs: ep.Addrs(), MTU: ep.MTU}); err != nil {
		return types.NewError(ErrDataplaneDiffers, fmt.Sprintf("pod %s: %v", ep.IP, err),
			"reef's reconcile loop repairs node-side routes within reconcileInterval; a missing veth or pod interface needs the pod recreated")
	}
	return nil
}

// checkPrevResult compares the address the runtime remembers with the
// record, when the runtime sends one.
func checkPrevResult(netconf []byte, ip netip.Addr) error {
	var c struct {
		PrevResult *struct {
			IPs []struct {
				Address string `json:"address"`
			} `json:"ips"`
		} `json:"prevResult"`
	}
	if err := json.Unmarshal(netconf, &c); err != nil || c.PrevResult == nil {
		return nil
	}
	for _, x := range c.PrevResult.IPs {
		if p, err := netip.ParsePrefix(x.Address); err == nil && p.Addr() == ip {
			return nil
		}
	}
	return fmt.Errorf("prevResult does not contain the attachment's address %s", ip)
}
