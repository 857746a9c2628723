package cniserver

import (
	"bytes"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// result builds the ADD result in the version the runtime asked for. The
// interface MTU is only part of the spec from 1.1.0 on.
func (s *Server) result(r *request, ep store.Endpoint, podMAC string) ([]byte, error) {
	mtu := 0
	if r.conf.CNIVersion == "1.1.0" {
		mtu = ep.MTU
	}
	gw := net.IP(routes.PodGateway.AsSlice())
	podIdx := 1
	res := &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{
			{Name: ep.HostVeth, Mac: routes.HostVethMAC.String(), Mtu: mtu},
			{Name: r.ifName, Mac: podMAC, Sandbox: r.netns, Mtu: mtu},
		},
		IPs: []*types100.IPConfig{{
			Interface: &podIdx,
			Address:   net.IPNet{IP: ep.IP.AsSlice(), Mask: net.CIDRMask(32, 32)},
			Gateway:   gw,
		}},
		Routes: []*types.Route{{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: gw}},
		DNS:    r.conf.DNS,
	}
	versioned, err := res.GetAsVersion(r.conf.CNIVersion)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := versioned.PrintTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
