package daemon

import (
	"net/netip"

	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/routes"
)

// vtepID is what the node's VTEP MAC is made of: its identity, which is
// its IPv4 address where it has one.
func (n netInfo) vtepID() netip.Addr {
	if n.identity.IsValid() {
		return n.identity
	}
	return n.uplink.Address
}

// vtepLocal is vxlan.reef's local address, the node's address on the
// underlay.
func (n netInfo) vtepLocal() netip.Addr {
	if n.v6only {
		return n.uplink6.Address
	}
	return n.uplink.Address
}

// vxlanOverheadOf is VXLAN's overhead on an underlay: the outer IPv4 or
// IPv6 header, UDP, VXLAN and the inner Ethernet header.
func vxlanOverheadOf(underlay6 bool) int {
	if underlay6 {
		return vxlanOverhead6
	}
	return vxlanOverhead
}

// vxlanStatus is vxlan.reef's underlay for reef status: its family and
// local address; "" while no pool uses VXLAN.
func (n netInfo) vxlanStatus() string {
	switch {
	case !n.usesVXLAN():
		return ""
	case n.v6only:
		return "IPv6, local " + n.vtepLocal().String()
	}
	return "IPv4, local " + n.vtepLocal().String()
}

// desiredVXLAN is what vxlan.reef must be, purely: present while some pool
// of either family may use VXLAN, over the node's underlay (IPv4; IPv6 on
// an IPv6-only node, with 20 bytes more overhead), with a neighbour of
// each family (and one fdb entry, to the node's underlay address) for
// every node whose blocks of that family it reaches, and the tunnel
// addresses of addrs on it (none yet: the device runs without until the
// first pod brings a block).
func (n netInfo) desiredVXLAN(peers vxPeers, addrs tunnelAddrs) routes.TunnelState {
	if !n.usesVXLAN() {
		return routes.TunnelState{}
	}
	return routes.TunnelState{Peers: peers.v4, Peers6: peers.v6, Dst: peers.dst, Device: &routes.VXLANConfig{VNI: routes.VXLANVNI, Port: routes.VXLANPort,
		Local: n.vtepLocal(), UplinkIdx: n.uplink.Index, MTU: n.uplink.MTU - vxlanOverheadOf(n.v6only), TunnelAddr: addrs.vxlan,
		TunnelAddr6: addrs.vxlan6, MAC: routes.VTEPMAC(n.vtepID()).String()}}
}

// syncTunnel brings vxlan.reef in line with desiredVXLAN. The device's
// IPv6 settings come from the sysctls' owner, which ApplyTunnel asks
// before it writes addresses and neighbours (and before a new device is
// up): IPv6 turned off by hand is back before an IPv6 neighbour needs it.
func (r *reconciler) syncTunnel(peers vxPeers, addrs tunnelAddrs, errs *[]error) {
	want := r.net.desiredVXLAN(peers, addrs)
	have, err := r.kernel.ReadTunnel()
	if err != nil {
		*errs = append(*errs, err)
		return
	}
	plan := routes.DiffTunnel(want, have)
	if plan.Empty() {
		return
	}
	r.logTunnel(plan, addrs)
	v6 := r.net.vxlanPool6().IsValid()
	settings := func(string) error {
		changes, err := r.sysctls.Tunnel(v6)
		for _, c := range changes {
			if plan.Create {
				r.log.Info("set a sysctl", "sysctl", c.Key, "was", c.Was, "now", c.Value)
				continue
			}
			r.log.Warn("repaired a sysctl", "sysctl", c.Key, "was", c.Was, "now", c.Value)
			r.metrics.Repaired(metrics.RepairSysctl, 1)
		}
		return err
	}
	if err := r.kernel.ApplyTunnel(want, plan, settings); err != nil {
		*errs = append(*errs, err)
	}
}

// logTunnel logs and counts what a plan for vxlan.reef changes.
func (r *reconciler) logTunnel(plan routes.TunnelPlan, addrs tunnelAddrs) {
	switch {
	case len(plan.Recreate) > 0:
		r.log.Warn("recreating "+routes.VXLANDevice+": it differs", "differences", plan.Recreate)
		r.metrics.Repaired(metrics.RepairLink, 1)
	case plan.Create:
		r.log.Info("creating "+routes.VXLANDevice, "vni", routes.VXLANVNI, "port", routes.VXLANPort, "local", r.net.vtepLocal(),
			"tunnelAddress", addrs.vxlan, "tunnelAddressV6", addrs.vxlan6)
	case plan.Delete:
		r.log.Info("deleting " + routes.VXLANDevice + ": no pool uses VXLAN")
	}
	if !plan.Create && (len(plan.AddAddrs) > 0 || len(plan.DelAddrs) > 0) {
		r.log.Info(routes.VXLANDevice+" tunnel addresses", "add", plan.AddAddrs, "remove", plan.DelAddrs)
	}
	if len(plan.AddPeers) > 0 || len(plan.DelPeers) > 0 || len(plan.AddPeers6) > 0 || len(plan.DelPeers6) > 0 {
		r.log.Info("VXLAN peers", "add", plan.AddPeers, "remove", plan.DelPeers, "addIPv6", plan.AddPeers6, "removeIPv6", plan.DelPeers6)
	}
	// A peer's neighbour added again though the last sync was given it
	// too (r.tunnelPeers, set after this returns): someone removed it.
	for _, p := range plan.AddPeers {
		if r.tunnelPeers.v4[p] {
			r.metrics.Repaired(metrics.RepairNeighbour, 1)
		}
	}
	for _, p := range plan.AddPeers6 {
		if r.tunnelPeers.v6[p] {
			r.metrics.Repaired(metrics.RepairNeighbour, 1)
		}
	}
}
