package routes

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ReadTunnel returns the kernel's vxlan.reef: its settings, whether it
// holds tunnelAddr, and the peers with a complete and correct neighbour and
// fdb pair.
func (k *Kernel) ReadTunnel(tunnelAddr netip.Addr) (TunnelState, bool, error) {
	st := TunnelState{Peers: map[netip.Addr]bool{}}
	l, err := k.h.LinkByName(VXLANDevice)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return st, false, nil
		}
		return st, false, fmt.Errorf("find %s: %w", VXLANDevice, err)
	}
	vx, ok := l.(*netlink.Vxlan)
	if !ok {
		// Ours by name but not a VXLAN device: recreate it.
		st.Device = &VXLANConfig{VNI: -1}
		return st, false, nil
	}
	local, _ := netip.AddrFromSlice(vx.SrcAddr.To4())
	st.Device = &VXLANConfig{VNI: vx.VxlanId, Port: vx.Port, Local: local, UplinkIdx: vx.VtepDevIndex,
		MTU: vx.Attrs().MTU, Learning: vx.Learning, MAC: vx.Attrs().HardwareAddr.String()}
	hasAddr := false
	if tunnelAddr.IsValid() {
		addrs, err := k.h.AddrList(l, unix.AF_INET)
		if err != nil {
			return st, false, fmt.Errorf("list addresses of %s: %w", VXLANDevice, err)
		}
		for _, a := range addrs {
			if p, ok := ipNetToPrefix(a.IPNet); ok && p == netip.PrefixFrom(tunnelAddr, 32) {
				hasAddr = true
			}
		}
	}
	neighs, err := k.h.NeighList(l.Attrs().Index, unix.AF_INET)
	if err != nil {
		return st, false, fmt.Errorf("list neighbours of %s: %w", VXLANDevice, err)
	}
	fdb, err := k.h.NeighList(l.Attrs().Index, unix.AF_BRIDGE)
	if err != nil {
		return st, false, fmt.Errorf("list fdb of %s: %w", VXLANDevice, err)
	}
	dst := map[string]netip.Addr{}
	for _, f := range fdb {
		if a, ok := netip.AddrFromSlice(f.IP.To4()); ok {
			dst[f.HardwareAddr.String()] = a
		}
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP.To4())
		if !ok || n.State&netlink.NUD_PERMANENT == 0 || !bytes.Equal(n.HardwareAddr, VTEPMAC(a)) {
			continue
		}
		if dst[VTEPMAC(a).String()] == a {
			st.Peers[a] = true
		}
	}
	return st, hasAddr, nil
}

// ApplyTunnel brings vxlan.reef in line with want: it creates, recreates
// (plan.Recreate says why), resizes or deletes the device, puts the tunnel
// address on it, and makes its neighbour and fdb entries exactly those of
// want.Peers: entries of other nodes, or wrong ones, are deleted. Every
// call is safe to repeat.
func (k *Kernel) ApplyTunnel(want TunnelState, plan TunnelPlan) error {
	if plan.Delete || len(plan.Recreate) > 0 {
		if err := k.deleteTunnel(); err != nil {
			return err
		}
		if plan.Delete {
			return nil
		}
	}
	if want.Device == nil {
		return nil
	}
	d := want.Device
	if plan.Create {
		vx := &netlink.Vxlan{
			LinkAttrs:    netlink.LinkAttrs{Name: VXLANDevice, MTU: d.MTU, HardwareAddr: VTEPMAC(d.Local)},
			VxlanId:      d.VNI,
			VtepDevIndex: d.UplinkIdx,
			SrcAddr:      d.Local.AsSlice(),
			Port:         d.Port,
			Learning:     d.Learning,
		}
		if err := k.h.LinkAdd(vx); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("create %s (vni %d, port %d, local %s): %w", VXLANDevice, d.VNI, d.Port, d.Local, err)
		}
	}
	l, err := k.h.LinkByName(VXLANDevice)
	if err != nil {
		return fmt.Errorf("find %s: %w", VXLANDevice, err)
	}
	var errs []error
	if plan.SetMTU != 0 {
		if err := k.h.LinkSetMTU(l, plan.SetMTU); err != nil {
			errs = append(errs, fmt.Errorf("set MTU %d on %s: %w", plan.SetMTU, VXLANDevice, err))
		}
	}
	if plan.SetAddr {
		a := &netlink.Addr{IPNet: prefixToIPNet(netip.PrefixFrom(d.TunnelAddr, 32))}
		if err := k.h.AddrReplace(l, a); err != nil {
			errs = append(errs, fmt.Errorf("add %s/32 to %s: %w", d.TunnelAddr, VXLANDevice, err))
		}
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := k.h.LinkSetUp(l); err != nil {
			errs = append(errs, fmt.Errorf("set %s up: %w", VXLANDevice, err))
		}
	}
	errs = append(errs, k.syncPeers(l.Attrs().Index, want.Peers)...)
	return errors.Join(errs...)
}

func (k *Kernel) deleteTunnel() error {
	l, err := k.h.LinkByName(VXLANDevice)
	if err != nil {
		return nil // gone already
	}
	if err := k.h.LinkDel(l); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete %s: %w", VXLANDevice, err)
	}
	return nil
}

// syncPeers makes the device's neighbours and fdb entries exactly the
// pairs of peers.
func (k *Kernel) syncPeers(idx int, peers map[netip.Addr]bool) []error {
	var errs []error
	neighs, err := k.h.NeighList(idx, unix.AF_INET)
	if err != nil {
		return []error{fmt.Errorf("list neighbours of %s: %w", VXLANDevice, err)}
	}
	for _, n := range neighs {
		a, ok := netip.AddrFromSlice(n.IP.To4())
		if ok && peers[a] && bytes.Equal(n.HardwareAddr, VTEPMAC(a)) && n.State&netlink.NUD_PERMANENT != 0 {
			continue
		}
		if err := k.h.NeighDel(&n); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete neighbour %s on %s: %w", n.IP, VXLANDevice, err))
		}
	}
	fdb, err := k.h.NeighList(idx, unix.AF_BRIDGE)
	if err != nil {
		return append(errs, fmt.Errorf("list fdb of %s: %w", VXLANDevice, err))
	}
	for _, f := range fdb {
		a, ok := netip.AddrFromSlice(f.IP.To4())
		if ok && peers[a] && bytes.Equal(f.HardwareAddr, VTEPMAC(a)) {
			continue
		}
		if err := k.h.NeighDel(&f); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete fdb %s dst %s on %s: %w", f.HardwareAddr, f.IP, VXLANDevice, err))
		}
	}
	for a := range peers {
		mac := VTEPMAC(a)
		if err := k.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_INET, State: netlink.NUD_PERMANENT,
			Type: unix.RTN_UNICAST, IP: a.AsSlice(), HardwareAddr: mac}); err != nil {
			errs = append(errs, fmt.Errorf("set neighbour %s lladdr %s on %s: %w", a, mac, VXLANDevice, err))
		}
		if err := k.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, State: netlink.NUD_PERMANENT,
			Flags: netlink.NTF_SELF, IP: a.AsSlice(), HardwareAddr: mac}); err != nil {
			errs = append(errs, fmt.Errorf("set fdb %s dst %s on %s: %w", mac, a, VXLANDevice, err))
		}
	}
	return errs
}

// ErrNoIPIP says the kernel has no ipip module: tunl0, which the module
// creates in every namespace, is missing.
var ErrNoIPIP = errors.New("ipipMode needs the kernel's ipip module, and tunl0 is missing: run `modprobe ipip`, or use vxlanMode instead")

// ReadIPIP returns tunl0 as the kernel has it: absent without the ipip
// module; else whether it is up, its MTU and its /32 addresses, reef's
// told by their label (IPIPLabel).
func (k *Kernel) ReadIPIP() (IPIPState, error) {
	st := IPIPState{Addrs: map[netip.Addr]bool{}}
	l, err := k.h.LinkByName(IPIPDevice)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return st, nil
		}
		return st, fmt.Errorf("find %s: %w", IPIPDevice, err)
	}
	st.Present, st.Up, st.MTU = true, l.Attrs().Flags&net.FlagUp != 0, l.Attrs().MTU
	addrs, err := k.h.AddrList(l, unix.AF_INET)
	if err != nil {
		return st, fmt.Errorf("list addresses of %s: %w", IPIPDevice, err)
	}
	for _, a := range addrs {
		if p, ok := ipNetToPrefix(a.IPNet); ok && p.IsSingleIP() {
			st.Addrs[p.Addr()] = st.Addrs[p.Addr()] || a.Label == IPIPLabel
		}
	}
	return st, nil
}

// ApplyIPIP carries out a plan of DiffIPIP on tunl0: its MTU, reef's
// address (added before the ones reef no longer wants are deleted), up.
// It never creates or deletes tunl0, which belongs to the ipip module;
// without it, it returns ErrNoIPIP. It goes on after a failed step and
// returns every failure; every step is safe to repeat.
func (k *Kernel) ApplyIPIP(p IPIPPlan) error {
	l, err := k.h.LinkByName(IPIPDevice)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return ErrNoIPIP
		}
		return fmt.Errorf("find %s: %w", IPIPDevice, err)
	}
	var errs []error
	if p.SetMTU != 0 {
		if err := k.h.LinkSetMTU(l, p.SetMTU); err != nil {
			errs = append(errs, fmt.Errorf("set MTU %d on %s: %w", p.SetMTU, IPIPDevice, err))
		}
	}
	if p.AddAddr.IsValid() {
		na := &netlink.Addr{IPNet: prefixToIPNet(netip.PrefixFrom(p.AddAddr, 32)), Label: IPIPLabel}
		if err := k.h.AddrReplace(l, na); err != nil {
			errs = append(errs, fmt.Errorf("add %s/32 to %s: %w", p.AddAddr, IPIPDevice, err))
		}
	}
	for _, a := range p.DelAddrs {
		na := &netlink.Addr{IPNet: prefixToIPNet(netip.PrefixFrom(a, 32)), Label: IPIPLabel}
		// With the label, the kernel deletes the address only if it is
		// still reef's.
		if err := k.h.AddrDel(l, na); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete %s/32 from %s: %w", a, IPIPDevice, err))
		}
	}
	if p.SetUp {
		if err := k.h.LinkSetUp(l); err != nil {
			errs = append(errs, fmt.Errorf("set %s up: %w", IPIPDevice, err))
		}
	}
	return errors.Join(errs...)
}
