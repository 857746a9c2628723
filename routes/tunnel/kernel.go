package tunnel

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"sort"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/reefcni/reef/routes/internal/nl"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Kernel reads and writes reef's tunnels in the current network namespace.
type Kernel struct {
	h netlinksafe.Handle
}

// NewKernel opens a netlink handle (nl.NewHandle) in the caller's
// network namespace.
func NewKernel() (*Kernel, error) {
	h, err := nl.NewHandle()
	if err != nil {
		return nil, err
	}
	return &Kernel{h: h}, nil
}

// Close releases the netlink handle.
func (k *Kernel) Close() { k.h.Close() }

// ReadTunnel returns the kernel's vxlan.reef: its settings, its addresses
// but the link-local, and the peers with a complete and correct neighbour
// of each family and an fdb entry, whose destination it reports where it
// is not the peer's key (Dst: on an IPv6 underlay).
func (k *Kernel) ReadTunnel() (State, error) {
	st := State{Addrs: map[netip.Addr]bool{}, Peers: map[netip.Addr]bool{}, Peers6: map[netip.Addr]bool{}, Dst: map[netip.Addr]netip.Addr{},
		Partial: map[netip.Addr]string{}}
	l, err := k.link(VXLANDevice)
	if l == nil {
		return st, err
	}
	vx, ok := l.(*netlink.Vxlan)
	if !ok {
		// Ours by name but not a VXLAN device: recreate it.
		st.Device = &VXLANConfig{VNI: -1}
		return st, nil
	}
	local, _ := netip.AddrFromSlice(vx.SrcAddr)
	st.Device = &VXLANConfig{VNI: vx.VxlanId, Port: vx.Port, Local: local.Unmap(), UplinkIdx: vx.VtepDevIndex,
		MTU: vx.Attrs().MTU, Learning: vx.Learning, MAC: vx.Attrs().HardwareAddr.String()}
	addrs, err := k.h.AddrList(l, unix.AF_UNSPEC)
	if err != nil {
		return st, fmt.Errorf("list addresses of %s: %w", VXLANDevice, err)
	}
	for _, a := range addrs {
		if p, ok := nl.Prefix(a.IPNet); ok && tunnelAddr(p) {
			st.Addrs[p.Addr()] = true
		}
	}
	idx := l.Attrs().Index
	fdb, err := k.h.NeighList(idx, unix.AF_BRIDGE)
	if err != nil {
		return st, fmt.Errorf("list fdb of %s: %w", VXLANDevice, err)
	}
	dst := map[netip.Addr]netip.Addr{} // node -> where its fdb entry points
	for _, f := range fdb {
		node, ok := vtepNode(f.HardwareAddr)
		a, aok := netip.AddrFromSlice(f.IP)
		if ok && aok {
			dst[node] = a.Unmap()
		}
	}
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		neighs, err := k.h.NeighList(idx, fam)
		if err != nil {
			return st, fmt.Errorf("list neighbours of %s: %w", VXLANDevice, err)
		}
		for _, n := range neighs {
			node, v6, ok := tunnelNeighNode(n)
			d, hasFDB := dst[node]
			if !ok || !hasFDB {
				switch {
				case ok:
					st.Partial[node] = fmt.Sprintf("neighbour %s lladdr %s without an fdb entry", n.IP, n.HardwareAddr)
				case n.State&netlink.NUD_PERMANENT != 0:
					st.Strays = append(st.Strays, fmt.Sprintf("neighbour %s lladdr %s", n.IP, n.HardwareAddr))
				}
				continue
			}
			if v6 {
				st.Peers6[node] = true
			} else {
				st.Peers[node] = true
			}
			if d != node {
				st.Dst[node] = d
			}
		}
	}
	for node, d := range dst {
		if _, neigh := st.Partial[node]; !st.Peers[node] && !st.Peers6[node] && !neigh {
			st.Partial[node] = fmt.Sprintf("fdb %s dst %s without a neighbour", VTEPMAC(node), d)
		}
	}
	sort.Strings(st.Strays)
	return st, nil
}

// link is the device named name; nil and no error where there is none.
func (k *Kernel) link(name string) (netlink.Link, error) {
	l, err := k.h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, nil
		}
		return nil, fmt.Errorf("find %s: %w", name, err)
	}
	return l, nil
}

// vtepNode is the node (IPv4 address or identity) a VTEP MAC names.
func vtepNode(mac net.HardwareAddr) (netip.Addr, bool) {
	if len(mac) != 6 || mac[0] != 0x0e || mac[1] != 0xee {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4([4]byte(mac[2:6])), true
}

// tunnelAddr says whether an address of vxlan.reef is one of reef's tunnel
// addresses: a /32 or a /128 that is not link-local (the kernel's own).
func tunnelAddr(p netip.Prefix) bool {
	return p.IsSingleIP() && !p.Addr().IsLinkLocalUnicast()
}

// tunnelNeighNode is the node a neighbour entry of vxlan.reef is right
// for, and whether it is the IPv6 one: permanent, with the VTEP MAC of the
// node its address names (the node's IPv4 address, or the link-local
// derived from its VTEP MAC).
func tunnelNeighNode(n netlink.Neigh) (node netip.Addr, v6, ok bool) {
	node, ok = vtepNode(n.HardwareAddr)
	if n.State&netlink.NUD_PERMANENT == 0 || !ok {
		return netip.Addr{}, false, false
	}
	if a, ok := netip.AddrFromSlice(n.IP.To4()); ok {
		return node, false, a == node
	}
	a, _ := netip.AddrFromSlice(n.IP)
	return node, true, a == VTEPLinkLocal(node)
}

// ApplyTunnel brings vxlan.reef in line with want: it creates, recreates
// (plan.Recreate says why), resizes or deletes the device, puts the tunnel
// addresses on it and takes others off, and makes its neighbour and fdb
// entries exactly those of want.Peers and want.Peers6: entries of other
// nodes, or wrong ones, are deleted. settings (the sysctls' owner, for
// the device's IPv6 settings; nil: none) runs before the addresses and
// neighbours are written, and before a device it creates is up, so that
// an IPv6 address or neighbour never meets IPv6 turned off. Every call is
// safe to repeat.
func (k *Kernel) ApplyTunnel(want State, plan Plan, settings func(link string) error) error {
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
		mac, err := net.ParseMAC(d.MAC)
		if err != nil {
			return fmt.Errorf("create %s: MAC %q: %w", VXLANDevice, d.MAC, err)
		}
		vx := &netlink.Vxlan{
			LinkAttrs:    netlink.LinkAttrs{Name: VXLANDevice, MTU: d.MTU, HardwareAddr: mac},
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
	if settings != nil {
		if err := settings(VXLANDevice); err != nil {
			errs = append(errs, err)
		}
	}
	if plan.SetMTU != 0 {
		if err := k.h.LinkSetMTU(l, plan.SetMTU); err != nil {
			errs = append(errs, fmt.Errorf("set MTU %d on %s: %w", plan.SetMTU, VXLANDevice, err))
		}
	}
	errs = append(errs, k.syncTunnelAddrs(l, plan)...)
	if l.Attrs().Flags&net.FlagUp == 0 {
		if err := k.h.LinkSetUp(l); err != nil {
			errs = append(errs, fmt.Errorf("set %s up: %w", VXLANDevice, err))
		}
	}
	errs = append(errs, k.syncPeers(l.Attrs().Index, want)...)
	return errors.Join(errs...)
}

// syncTunnelAddrs adds the plan's tunnel addresses (an IPv6 one without
// DAD: the VXLAN device answers no neighbour solicitation, and the address
// is usable at once) before it deletes the ones no longer wanted.
func (k *Kernel) syncTunnelAddrs(l netlink.Link, plan Plan) []error {
	var errs []error
	for _, a := range plan.AddAddrs {
		na := &netlink.Addr{IPNet: nl.IPNet(netip.PrefixFrom(a, a.BitLen()))}
		if a.Is6() {
			na.Flags = unix.IFA_F_NODAD
		}
		if err := k.h.AddrReplace(l, na); err != nil {
			errs = append(errs, fmt.Errorf("add %s/%d to %s: %w", a, a.BitLen(), VXLANDevice, err))
		}
	}
	for _, a := range plan.DelAddrs {
		na := &netlink.Addr{IPNet: nl.IPNet(netip.PrefixFrom(a, a.BitLen()))}
		if err := k.h.AddrDel(l, na); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete %s/%d from %s: %w", a, a.BitLen(), VXLANDevice, err))
		}
	}
	return errs
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

// syncPeers makes the device's neighbours exactly those of want.Peers
// (IPv4) and want.Peers6 (IPv6), and its fdb entries exactly one per node
// of either, to the node's underlay address (want.Underlay).
func (k *Kernel) syncPeers(idx int, want State) []error {
	peers, peers6 := want.Peers, want.Peers6
	var errs []error
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		neighs, err := k.h.NeighList(idx, fam)
		if err != nil {
			return []error{fmt.Errorf("list neighbours of %s: %w", VXLANDevice, err)}
		}
		for _, n := range neighs {
			node, v6, ok := tunnelNeighNode(n)
			if ok && ((!v6 && peers[node]) || (v6 && peers6[node])) {
				continue
			}
			if fam == unix.AF_INET6 && n.State&netlink.NUD_PERMANENT == 0 {
				// The kernel's own (its link-local's multicast and such):
				// only permanent entries are ever reef's.
				continue
			}
			if err := k.h.NeighDel(&n); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("delete neighbour %s on %s: %w", n.IP, VXLANDevice, err))
			}
		}
	}
	fdb, err := k.h.NeighList(idx, unix.AF_BRIDGE)
	if err != nil {
		return append(errs, fmt.Errorf("list fdb of %s: %w", VXLANDevice, err))
	}
	for _, f := range fdb {
		node, ok := vtepNode(f.HardwareAddr)
		a, aok := netip.AddrFromSlice(f.IP)
		if ok && aok && (peers[node] || peers6[node]) && a.Unmap() == want.Underlay(node) {
			continue
		}
		if err := k.h.NeighDel(&f); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("delete fdb %s dst %s on %s: %w", f.HardwareAddr, f.IP, VXLANDevice, err))
		}
	}
	set := func(a, ip netip.Addr, family int) {
		mac := VTEPMAC(a)
		if err := k.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: family, State: netlink.NUD_PERMANENT,
			Type: unix.RTN_UNICAST, IP: ip.AsSlice(), HardwareAddr: mac}); err != nil {
			errs = append(errs, fmt.Errorf("set neighbour %s lladdr %s on %s: %w", ip, mac, VXLANDevice, err))
		}
	}
	for a := range peers {
		set(a, a, unix.AF_INET)
	}
	for a := range peers6 {
		set(a, VTEPLinkLocal(a), unix.AF_INET6)
	}
	for a := range union(peers, peers6) {
		mac, dst := VTEPMAC(a), want.Underlay(a)
		if err := k.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, State: netlink.NUD_PERMANENT,
			Flags: netlink.NTF_SELF, IP: dst.AsSlice(), HardwareAddr: mac}); err != nil {
			errs = append(errs, fmt.Errorf("set fdb %s dst %s on %s: %w", mac, dst, VXLANDevice, err))
		}
	}
	return errs
}

// union is the nodes of either set.
func union(a, b map[netip.Addr]bool) map[netip.Addr]bool {
	m := maps.Clone(a)
	if m == nil {
		m = map[netip.Addr]bool{}
	}
	maps.Copy(m, b)
	return m
}

// ErrNoIPIP says the kernel has no ipip module: tunl0, which the module
// creates in every namespace, is missing.
var ErrNoIPIP = errors.New("ipipMode needs the kernel's ipip module, and tunl0 is missing: run `modprobe ipip`, or use vxlanMode instead")

// ReadIPIP returns tunl0 as the kernel has it: absent without the ipip
// module; else whether it is up, its MTU and its /32 addresses, reef's
// told by their label (IPIPLabel).
func (k *Kernel) ReadIPIP() (IPIPState, error) {
	st := IPIPState{Addrs: map[netip.Addr]bool{}}
	l, err := k.link(IPIPDevice)
	if l == nil {
		return st, err
	}
	st.Present, st.Up, st.MTU = true, l.Attrs().Flags&net.FlagUp != 0, l.Attrs().MTU
	addrs, err := k.h.AddrList(l, unix.AF_INET)
	if err != nil {
		return st, fmt.Errorf("list addresses of %s: %w", IPIPDevice, err)
	}
	for _, a := range addrs {
		if p, ok := nl.Prefix(a.IPNet); ok && p.IsSingleIP() {
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
	l, err := k.link(IPIPDevice)
	if err != nil {
		return err
	}
	if l == nil {
		return ErrNoIPIP
	}
	var errs []error
	if p.SetMTU != 0 {
		if err := k.h.LinkSetMTU(l, p.SetMTU); err != nil {
			errs = append(errs, fmt.Errorf("set MTU %d on %s: %w", p.SetMTU, IPIPDevice, err))
		}
	}
	if p.AddAddr.IsValid() {
		na := &netlink.Addr{IPNet: nl.IPNet(netip.PrefixFrom(p.AddAddr, 32)), Label: IPIPLabel}
		if err := k.h.AddrReplace(l, na); err != nil {
			errs = append(errs, fmt.Errorf("add %s/32 to %s: %w", p.AddAddr, IPIPDevice, err))
		}
	}
	for _, a := range p.DelAddrs {
		na := &netlink.Addr{IPNet: nl.IPNet(netip.PrefixFrom(a, 32)), Label: IPIPLabel}
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
