package daemon

import (
	"errors"
	"net/netip"

	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/routes/tunnel"
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
func (n netInfo) desiredVXLAN(peers vxPeers, addrs tunnelAddrs) tunnel.State {
	if !n.usesVXLAN() {
		return tunnel.State{}
	}
	return tunnel.State{Peers: peers.v4, Peers6: peers.v6, Dst: peers.dst, Device: &tunnel.VXLANConfig{VNI: tunnel.VXLANVNI, Port: tunnel.VXLANPort,
		Local: n.vtepLocal(), UplinkIdx: n.uplink.Index, MTU: n.uplink.MTU - vxlanOverheadOf(n.v6only), TunnelAddr: addrs.vxlan,
		TunnelAddr6: addrs.vxlan6, MAC: tunnel.VTEPMAC(n.vtepID()).String()}}
}

// syncVXLAN brings vxlan.reef in line with desiredVXLAN, its tunnel
// addresses reserved or released in the store first. The device's IPv6
// settings come from the sysctls' owner, which ApplyTunnel asks before it
// writes addresses and neighbours (and before a new device is up): IPv6
// turned off by hand is back before an IPv6 neighbour needs it. With
// keep, the peers and the device that are no longer wanted stay
// (tunnel.Keeping), and kept says whether there were any.
func (t *tunnels) syncVXLAN(s tunnelSnapshot, keep bool) (kept bool, err error) {
	var errs []error
	addrs := tunnelAddrs{
		vxlan:  t.address(s.net, s.net.tunnelHandle(), s.net.vxlanPool(), &errs),
		vxlan6: t.address(s.net, s.net.tunnelHandle6(), s.net.vxlanPool6(), &errs),
	}
	want := s.net.desiredVXLAN(s.peers, addrs)
	have, err := t.kernel.ReadTunnel()
	if err != nil {
		return false, errors.Join(append(errs, err)...)
	}
	if keep {
		var apply bool
		if want, apply, kept = tunnel.Keeping(want, have); !apply {
			return kept, errors.Join(errs...)
		}
	}
	plan := tunnel.Diff(want, have)
	if plan.Empty() {
		return kept, errors.Join(errs...)
	}
	t.logVXLAN(s, plan, addrs)
	v6 := s.net.vxlanPool6().IsValid()
	settings := func(string) error {
		changes, err := t.sysctls.Tunnel(v6)
		for _, c := range changes {
			if plan.Create {
				t.log.Info("set a sysctl", "sysctl", c.Key, "was", c.Was, "now", c.Value)
				continue
			}
			t.log.Warn("repaired a sysctl", "sysctl", c.Key, "was", c.Was, "now", c.Value)
			t.metrics.Repaired(metrics.RepairSysctl, 1)
		}
		return err
	}
	return kept, errors.Join(append(errs, t.kernel.ApplyTunnel(want, plan, settings))...)
}

// logVXLAN logs and counts what a plan for vxlan.reef changes.
func (t *tunnels) logVXLAN(s tunnelSnapshot, plan tunnel.Plan, addrs tunnelAddrs) {
	switch {
	case len(plan.Recreate) > 0:
		t.log.Warn("recreating "+tunnel.VXLANDevice+": it differs", "differences", plan.Recreate)
		t.metrics.Repaired(metrics.RepairLink, 1)
	case plan.Create && t.vxlanIn != nil && t.vxlanIn.net.usesVXLAN():
		// The last sync that ended without error left the device: it was
		// deleted since.
		t.log.Warn("repairing "+tunnel.VXLANDevice+": it was deleted; creating it again", "vni", tunnel.VXLANVNI, "port", tunnel.VXLANPort, "local", s.net.vtepLocal(),
			"tunnelAddress", addrs.vxlan, "tunnelAddressV6", addrs.vxlan6)
		t.metrics.Repaired(metrics.RepairLink, 1)
	case plan.Create:
		t.log.Info("creating "+tunnel.VXLANDevice, "vni", tunnel.VXLANVNI, "port", tunnel.VXLANPort, "local", s.net.vtepLocal(),
			"tunnelAddress", addrs.vxlan, "tunnelAddressV6", addrs.vxlan6)
	case plan.Delete:
		t.log.Info("deleting " + tunnel.VXLANDevice + ": no pool uses VXLAN")
	}
	if !plan.Create && (len(plan.AddAddrs) > 0 || len(plan.DelAddrs) > 0) {
		t.log.Info(tunnel.VXLANDevice+" tunnel addresses", "add", plan.AddAddrs, "remove", plan.DelAddrs)
	}
	if len(plan.AddPeers) > 0 || len(plan.DelPeers) > 0 || len(plan.AddPeers6) > 0 || len(plan.DelPeers6) > 0 {
		t.log.Info("VXLAN peers", "add", plan.AddPeers, "remove", plan.DelPeers, "addIPv6", plan.AddPeers6, "removeIPv6", plan.DelPeers6)
	}
	if len(plan.Prune) > 0 {
		t.log.Warn("repairing "+tunnel.VXLANDevice+": removing entries no peer has", "entries", plan.Prune)
		t.metrics.Repaired(metrics.RepairNeighbour, len(plan.Prune))
	}
	// A peer's neighbour added again though the last sync that ended
	// without error had it too: someone removed it.
	if t.vxlanIn == nil {
		return
	}
	for _, p := range plan.AddPeers {
		if t.vxlanIn.peers.v4[p] {
			t.metrics.Repaired(metrics.RepairNeighbour, 1)
		}
	}
	for _, p := range plan.AddPeers6 {
		if t.vxlanIn.peers.v6[p] {
			t.metrics.Repaired(metrics.RepairNeighbour, 1)
		}
	}
}
