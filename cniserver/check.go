package cniserver

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/routes/veth"
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
		return types.NewError(ErrDataplaneDiffers, fmt.Sprintf("attachment of %s is %s: its ADD did not finish", ep.AddrsString(), ep.State), "")
	}
	if ep.Netns != r.netns || ep.IfName != r.ifName {
		return types.NewError(ErrDataplaneDiffers,
			fmt.Sprintf("attachment of %s was made in %s as %s, CHECK names %s as %s", ep.AddrsString(), ep.Netns, ep.IfName, r.netns, r.ifName), "")
	}
	if cerr := checkPrevResult(in.GetNetconf(), ep.Addrs()); cerr != nil {
		return cerr
	}
	if ep.HostVeth == "" {
		return types.NewError(ErrDataplaneDiffers, fmt.Sprintf("pod %s lost its veth to a newer sandbox of the same pod", ep.AddrsString()), "")
	}
	if err := veth.Check(veth.Spec{Netns: ep.Netns, IfName: ep.IfName, HostVeth: ep.HostVeth, IPs: ep.Addrs(), MTU: ep.MTU}); err != nil {
		return types.NewError(ErrDataplaneDiffers, fmt.Sprintf("pod %s: %v", ep.AddrsString(), err),
			"reef's reconcile loop repairs node-side routes within reconcileInterval; a missing veth or pod interface needs the pod recreated")
	}
	// The spec's CHECK also fails on traffic shaping and firewall rules
	// that are missing: the pod's limits, its ARP-filter and hostPort
	// elements.
	var diffs []string
	if ep.Bandwidth != nil {
		d, err := tc.CheckBandwidth(ep.HostVeth, RoutesBandwidth(*ep.Bandwidth))
		if err != nil {
			return types.NewError(types.ErrInternal, "read the bandwidth limits of veth "+ep.HostVeth, err.Error())
		}
		diffs = append(diffs, d...)
	}
	if c, ok := s.deps.PodFilter.(PodChecker); ok {
		d, err := c.CheckPod(ep)
		if err != nil {
			return types.NewError(types.ErrInternal, "read the nftables elements of pod "+ep.AddrsString(), err.Error())
		}
		diffs = append(diffs, d...)
	}
	if len(diffs) > 0 {
		return types.NewError(ErrDataplaneDiffers, fmt.Sprintf("pod %s: %s", ep.AddrsString(), strings.Join(diffs, "\n")),
			"reef's reconcile loop repairs the pod's limits and nftables elements within reconcileInterval")
	}
	return nil
}

// checkPrevResult compares the addresses of the runtime's prevResult,
// the result of the attachment's ADD, with the record's: each of the
// attachment's addresses must be there (code 101). The spec has the
// runtime pass prevResult to CHECK, and CHECK consult it for the
// addresses it expects; like the reference plugins, CHECK without one,
// or with one it cannot read, fails (code 7). A runtime that lost its
// cache of results (libcni's cacheDir) sends none.
func checkPrevResult(netconf []byte, ips []netip.Addr) *types.Error {
	var c struct {
		PrevResult *struct {
			IPs []struct {
				Address string `json:"address"`
			} `json:"ips"`
		} `json:"prevResult"`
	}
	if err := json.Unmarshal(netconf, &c); err != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "prevResult in the network configuration is not a CNI result", err.Error())
	}
	if c.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig,
			"CHECK needs prevResult, the result of the attachment's ADD, in the network configuration (the runtime passes it; libcni from its cache of results): without it reef cannot tell what the runtime expects", "")
	}
	have := map[netip.Addr]bool{}
	for _, x := range c.PrevResult.IPs {
		p, err := netip.ParsePrefix(x.Address)
		if err != nil {
			return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("prevResult: address %q is not a CIDR", x.Address), err.Error())
		}
		have[p.Addr()] = true
	}
	for _, ip := range ips {
		if !have[ip] {
			return types.NewError(ErrDataplaneDiffers, fmt.Sprintf("prevResult does not contain the attachment's address %s", ip), "")
		}
	}
	return nil
}
