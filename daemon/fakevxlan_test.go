package daemon

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"

	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/sysctl"
	"github.com/reefcni/reef/routes/tunnel"
)

// fakeVXLAN is vxlan.reef in the fake kernel, with the kernel's rules that
// matter to a pass: the device takes its addresses, neighbours, fdb
// entries, routes and sysctls with it; an IPv6 address or neighbour needs
// IPv6 on the device, and turning it off takes them (and the IPv6 routes
// through it) away; the link-local exists while IPv6 is on and
// addr_gen_mode is 0, as the kernel makes it when the device comes up.
type fakeVXLAN struct {
	dev    tunnel.VXLANConfig
	up     bool
	addrs  map[netip.Addr]bool
	neigh4 map[netip.Addr]bool       // nodes with a right IPv4 neighbour
	neigh6 map[netip.Addr]bool       // nodes with a right IPv6 neighbour
	fdb    map[netip.Addr]netip.Addr // node -> where its fdb entry points
}

// ipv6On says whether the device has IPv6, as its sysctl says.
func (k *fakeKernel) vxlanIPv6On() bool {
	v, err := k.sys.Get(sysctl.DisableIPv6(tunnel.VXLANDevice))
	return err == nil && v == "0"
}

// vxlanSync applies the kernel's rule for IPv6 turned off on the device:
// its IPv6 addresses, neighbours and routes go. It runs before each read.
func (k *fakeKernel) vxlanSyncLocked() {
	if k.vxlan == nil || k.vxlanIPv6On() {
		return
	}
	for a := range k.vxlan.addrs {
		if a.Is6() {
			delete(k.vxlan.addrs, a)
		}
	}
	clear(k.vxlan.neigh6)
	for dst, r := range k.routes {
		if r.Dev == tunnel.VXLANDevice && dst.Addr().Is6() {
			delete(k.routes, dst)
		}
	}
}

func (k *fakeKernel) ReadTunnel() (tunnel.State, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.vxlanSyncLocked()
	st := tunnel.State{Addrs: map[netip.Addr]bool{}, Peers: map[netip.Addr]bool{}, Peers6: map[netip.Addr]bool{}, Dst: map[netip.Addr]netip.Addr{}}
	v := k.vxlan
	if v == nil {
		return st, nil
	}
	d := v.dev
	st.Device, st.Addrs = &d, maps.Clone(v.addrs)
	for a, d := range v.fdb {
		if v.neigh4[a] {
			st.Peers[a] = true
		}
		if v.neigh6[a] {
			st.Peers6[a] = true
		}
		if d != a && (v.neigh4[a] || v.neigh6[a]) {
			st.Dst[a] = d
		}
	}
	return st, nil
}

func (k *fakeKernel) ApplyTunnel(want tunnel.State, plan tunnel.Plan, settings func(link string) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if plan.Delete || len(plan.Recreate) > 0 {
		k.delVXLANLocked()
		if plan.Delete {
			return nil
		}
	}
	if want.Device == nil {
		return nil
	}
	if plan.Create && k.vxlan == nil {
		if want.Device.UplinkIdx != k.linkIndexLocked("eth0") {
			return fmt.Errorf("create vxlan.reef over link %d: no such device", want.Device.UplinkIdx)
		}
		k.vxlan = &fakeVXLAN{dev: *want.Device, addrs: map[netip.Addr]bool{}, neigh4: map[netip.Addr]bool{}, neigh6: map[netip.Addr]bool{},
			fdb: map[netip.Addr]netip.Addr{}}
		k.vxlan.dev.TunnelAddr, k.vxlan.dev.TunnelAddr6 = netip.Addr{}, netip.Addr{}
		k.sys.AddLink(tunnel.VXLANDevice)
		if k.vxlanIPv6Off { // the node's net.ipv6.conf.default
			k.sys.Put(sysctl.DisableIPv6(tunnel.VXLANDevice), "1")
			k.sys.Put(sysctl.AddrGenMode(tunnel.VXLANDevice), "1")
		}
	}
	v := k.vxlan
	if v == nil {
		return errors.New("find vxlan.reef: Link not found")
	}
	var errs []error
	if settings != nil {
		k.mu.Unlock() // the owner writes through k.sys, which has its own lock
		errs = append(errs, settings(tunnel.VXLANDevice))
		k.mu.Lock()
	}
	if plan.SetMTU != 0 {
		v.dev.MTU = plan.SetMTU
	}
	v6 := k.vxlanIPv6On()
	for _, a := range plan.AddAddrs {
		if a.Is6() && !v6 {
			errs = append(errs, fmt.Errorf("add %s/128 to vxlan.reef: permission denied", a))
			continue
		}
		v.addrs[a] = true
	}
	for _, a := range plan.DelAddrs {
		delete(v.addrs, a)
	}
	v.up = true
	v.neigh4, v.neigh6, v.fdb = maps.Clone(want.Peers), map[netip.Addr]bool{}, map[netip.Addr]netip.Addr{}
	if v.neigh4 == nil {
		v.neigh4 = map[netip.Addr]bool{}
	}
	for a := range want.Peers6 {
		if !v6 {
			errs = append(errs, fmt.Errorf("set neighbour %s on vxlan.reef: invalid argument", tunnel.VTEPLinkLocal(a)))
			continue
		}
		v.neigh6[a] = true
	}
	for a := range want.Peers {
		v.fdb[a] = want.Underlay(a)
	}
	for a := range want.Peers6 {
		v.fdb[a] = want.Underlay(a)
	}
	k.holesLocked("a tunnel plan")
	return errors.Join(errs...)
}

// holesLocked notes each IPv4 route through vxlan.reef whose next hop
// (the owner's address) the device has no neighbour or fdb entry for, as
// the kernel would drop its packets at that moment.
func (k *fakeKernel) holesLocked(after string) {
	if k.vxlan == nil {
		return
	}
	for _, r := range k.routes {
		if r.Dev != tunnel.VXLANDevice || !r.Dst.Addr().Is4() {
			continue
		}
		if _, fdb := k.vxlan.fdb[r.Via]; !fdb || !k.vxlan.neigh4[r.Via] {
			k.holes = append(k.holes, fmt.Sprintf("after %s: %s, and no neighbour %s on %s", after, r, r.Via, tunnel.VXLANDevice))
		}
	}
}

// delVXLANLocked deletes the device, and with it its routes and sysctls:
// a route of a remote block that goes with it is a hole (holesLocked)
// until the routes' owner routes the block otherwise.
func (k *fakeKernel) delVXLANLocked() {
	k.vxlan = nil
	k.sys.DelLink(tunnel.VXLANDevice)
	for dst, r := range k.routes {
		if r.Dev == tunnel.VXLANDevice {
			k.holes = append(k.holes, fmt.Sprintf("%s deleted with %s", r, tunnel.VXLANDevice))
			delete(k.routes, dst)
		}
	}
}

// vxlanLines are the device's lines of the fake's text.
func (k *fakeKernel) vxlanLines() []string {
	v := k.vxlan
	if v == nil {
		return nil
	}
	lines := []string{fmt.Sprintf("link %s local %s mac %s mtu %d up %v", tunnel.VXLANDevice, v.dev.Local, v.dev.MAC, v.dev.MTU, v.up)}
	if k.vxlanIPv6On() {
		if m, err := k.sys.Get(sysctl.AddrGenMode(tunnel.VXLANDevice)); err == nil && m == "0" {
			// The kernel's EUI-64 link-local of the device's MAC.
			mac, _ := net.ParseMAC(v.dev.MAC)
			lines = append(lines, fmt.Sprintf("addr %s/64 dev %s scope link", tunnel.VTEPLinkLocal(netip.AddrFrom4([4]byte(mac[2:6]))), tunnel.VXLANDevice))
		}
	}
	for a := range v.addrs {
		lines = append(lines, fmt.Sprintf("addr %s/%d dev %s", a, a.BitLen(), tunnel.VXLANDevice))
	}
	for a := range v.neigh4 {
		lines = append(lines, fmt.Sprintf("neigh %s lladdr %s dev %s PERMANENT", a, tunnel.VTEPMAC(a), tunnel.VXLANDevice))
	}
	for a := range v.neigh6 {
		lines = append(lines, fmt.Sprintf("neigh %s lladdr %s dev %s PERMANENT", tunnel.VTEPLinkLocal(a), tunnel.VTEPMAC(a), tunnel.VXLANDevice))
	}
	for a, d := range v.fdb {
		lines = append(lines, fmt.Sprintf("fdb %s dst %s dev %s", tunnel.VTEPMAC(a), d, tunnel.VXLANDevice))
	}
	return lines
}

// LinkIndex: the fake kernel's uplinks keep the index they had at start
// (newNode's 2) unless uplinkIndex says otherwise; 0 there: gone.
func (k *fakeKernel) LinkIndex(name string) (int, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i := k.linkIndexLocked(name); i != 0 {
		return i, nil
	}
	return 0, fmt.Errorf("link %s: %w", name, routes.ErrLinkGone)
}

func (k *fakeKernel) linkIndexLocked(name string) int {
	if i, ok := k.uplinkIndex[name]; ok {
		return i
	}
	return 2
}
