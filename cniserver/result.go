package cniserver

import (
	"bytes"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	"github.com/reefcni/reef/routes/veth"
	"github.com/reefcni/reef/store"
)

// result builds the ADD result in the version the runtime asked for: each
// of the pod's addresses (ips) as a host route, through the gateway of its
// family, and a default route per family. The interface MTU is only part
// of the spec from 1.1.0 on.
func (s *Server) result(r *request, ep store.Endpoint, podMAC string) ([]byte, error) {
	mtu := 0
	if r.conf.CNIVersion == "1.1.0" {
		mtu = ep.MTU
	}
	podIdx := 1
	res := &types100.Result{
		CNIVersion: types100.ImplementedSpecVersion,
		Interfaces: []*types100.Interface{
			{Name: ep.HostVeth, Mac: veth.HostMAC.String(), Mtu: mtu},
			{Name: r.ifName, Mac: podMAC, Sandbox: r.netns, Mtu: mtu},
		},
		DNS: r.conf.DNS,
	}
	for _, ip := range ep.Addrs() {
		gw, bits := veth.Gateway, 32
		if ip.Is6() {
			gw, bits = veth.Gateway6, 128
		}
		res.IPs = append(res.IPs, &types100.IPConfig{Interface: &podIdx,
			Address: net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(bits, bits)}, Gateway: gw.AsSlice()})
		res.Routes = append(res.Routes, &types.Route{Dst: net.IPNet{IP: make(net.IP, bits/8), Mask: net.CIDRMask(0, bits)}, GW: gw.AsSlice()})
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
