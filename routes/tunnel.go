package routes

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
)

// VXLAN and IPIP tunnels to nodes in other subnets. The tunnel device is
// reef's own (vxlan.reef, or tunl0 for IPIP); on it, for every node reached
// through it, a permanent neighbour maps the node's address (the gateway of
// the routes to its blocks) to the node's VTEP MAC, and an fdb entry maps
// that MAC to the node's address on the underlay. The VTEP MAC is derived
// from the node address, so nothing but the block claims is distributed.

// VXLANDevice is the name of reef's VXLAN device.
const VXLANDevice = "vxlan.reef"

// IPIPDevice is the kernel's IPIP fallback device that reef uses.
const IPIPDevice = "tunl0"

// VXLAN parameters, as Calico's.
const (
	VXLANVNI  = 4096
	VXLANPort = 4789
)

// VTEPMAC is the VXLAN MAC of the node at addr: locally administered,
// unicast, 0e:ee followed by the IPv4 address.
func VTEPMAC(addr netip.Addr) net.HardwareAddr {
	b := addr.As4()
	return net.HardwareAddr{0x0e, 0xee, b[0], b[1], b[2], b[3]}
}

// Encap is how traffic to another node's blocks leaves this node.
type Encap int

const (
	Direct Encap = iota // routed on the uplink, pod addresses on the wire
	VXLAN
	IPIP
)

func (e Encap) String() string {
	switch e {
	case VXLAN:
		return "vxlan"
	case IPIP:
		return "ipip"
	}
	return "direct"
}

// EncapMode mirrors a pool's vxlanMode/ipipMode.
type EncapMode string

const (
	ModeNever       EncapMode = "Never"
	ModeCrossSubnet EncapMode = "CrossSubnet"
	ModeAlways      EncapMode = "Always"
)

// EncapFor decides how a block of a pool with the given modes is reached on
// a node at owner, from a node whose uplink subnet is local: VXLAN (or
// IPIP) when the mode is Always, or CrossSubnet and the owner is outside
// the local subnet; direct otherwise.
func EncapFor(vxlan, ipip EncapMode, local netip.Prefix, owner netip.Addr) Encap {
	cross := !local.Masked().Contains(owner)
	use := func(m EncapMode) bool { return m == ModeAlways || (m == ModeCrossSubnet && cross) }
	switch {
	case use(vxlan):
		return VXLAN
	case use(ipip):
		return IPIP
	}
	return Direct
}

// TunnelState is reef's part of a tunnel device: the device itself and its
// neighbour and fdb entries, keyed by the remote node address.
type TunnelState struct {
	Device *VXLANConfig        // nil: no device
	Peers  map[netip.Addr]bool // nodes with a neighbour+fdb pair
}

// VXLANConfig is what vxlan.reef must look like.
type VXLANConfig struct {
	VNI        int
	Port       int
	Local      netip.Addr // node address, the outer source
	UplinkIdx  int
	MTU        int
	Learning   bool
	MAC        string     // VTEPMAC(Local): what the other nodes' neighbour entries point at
	TunnelAddr netip.Addr // the node's tunnel address, /32 on the device
}

// Differences explains why an existing device does not match want, one
// entry per field, as "vni: 1 vs 4096"; empty if it matches.
func (c VXLANConfig) Differences(want VXLANConfig) []string {
	var out []string
	add := func(field string, have, want any) {
		if have != want {
			out = append(out, fmt.Sprintf("%s: %v vs %v", field, have, want))
		}
	}
	add("vni", c.VNI, want.VNI)
	add("port", c.Port, want.Port)
	add("local", c.Local, want.Local)
	add("dev", c.UplinkIdx, want.UplinkIdx)
	add("learning", c.Learning, want.Learning)
	add("mac", c.MAC, want.MAC)
	return out
}

// TunnelPlan is what it takes to bring the VXLAN device in line.
type TunnelPlan struct {
	Recreate []string // why the device must be deleted first; empty: keep it
	Create   bool
	Delete   bool // no pool uses VXLAN any more
	SetMTU   int  // 0: leave
	SetAddr  bool // the tunnel address is missing
	AddPeers []netip.Addr
	DelPeers []netip.Addr
}

// Empty reports whether nothing needs doing.
func (p TunnelPlan) Empty() bool {
	return len(p.Recreate) == 0 && !p.Create && !p.Delete && p.SetMTU == 0 && !p.SetAddr && len(p.AddPeers) == 0 && len(p.DelPeers) == 0
}

// DiffTunnel compares the desired VXLAN state with the kernel's. have.Device
// carries what the kernel reports; haveAddr whether the tunnel address is
// on it.
func DiffTunnel(want, have TunnelState, haveAddr bool) TunnelPlan {
	var p TunnelPlan
	switch {
	case want.Device == nil && have.Device == nil:
		return p
	case want.Device == nil:
		p.Delete = true
		return p
	case have.Device == nil:
		p.Create, p.SetAddr = true, want.Device.TunnelAddr.IsValid()
		for a := range want.Peers {
			p.AddPeers = append(p.AddPeers, a)
		}
		sortAddrs(p.AddPeers)
		return p
	}
	if d := have.Device.Differences(*want.Device); len(d) > 0 {
		p.Recreate, p.Create, p.SetAddr = d, true, want.Device.TunnelAddr.IsValid()
		for a := range want.Peers {
			p.AddPeers = append(p.AddPeers, a)
		}
		sortAddrs(p.AddPeers)
		return p
	}
	if have.Device.MTU != want.Device.MTU {
		p.SetMTU = want.Device.MTU
	}
	p.SetAddr = want.Device.TunnelAddr.IsValid() && !haveAddr
	for a := range want.Peers {
		if !have.Peers[a] {
			p.AddPeers = append(p.AddPeers, a)
		}
	}
	for a := range have.Peers {
		if !want.Peers[a] {
			p.DelPeers = append(p.DelPeers, a)
		}
	}
	sortAddrs(p.AddPeers)
	sortAddrs(p.DelPeers)
	return p
}

func sortAddrs(as []netip.Addr) {
	sort.Slice(as, func(i, j int) bool { return as[i].Less(as[j]) })
}

// IPIPLabel marks the addresses reef puts on tunl0. The device is the ipip
// module's and may carry addresses of others; only one with reef's label
// is reef's to remove.
const IPIPLabel = IPIPDevice + ":reef"

// IPIPConfig is what tunl0 must be while some pool may use IPIP: up, with
// MTU and the node's tunnel address (invalid: none yet).
type IPIPConfig struct {
	MTU        int
	TunnelAddr netip.Addr
}

// IPIPState is tunl0 as the kernel has it.
type IPIPState struct {
	Present bool // the ipip module made it
	Up      bool
	MTU     int
	Addrs   map[netip.Addr]bool // its /32 addresses: true for reef's (IPIPLabel)
}

// IPIPPlan is what it takes to bring tunl0 in line. reef never creates or
// deletes tunl0.
type IPIPPlan struct {
	SetMTU   int        // 0: leave
	AddAddr  netip.Addr // invalid: none to add
	DelAddrs []netip.Addr
	SetUp    bool
}

// Empty reports whether nothing needs doing.
func (p IPIPPlan) Empty() bool {
	return p.SetMTU == 0 && !p.AddAddr.IsValid() && len(p.DelAddrs) == 0 && !p.SetUp
}

// DiffIPIP compares the desired tunl0 (nil: no pool may use IPIP) with the
// kernel's. While no pool uses IPIP, reef only takes its own addresses
// off the device and leaves its MTU and state as they are; a wanted tunl0
// that is missing is ErrNoIPIP. The tunnel address counts as there with
// or without reef's label; any other address with the label goes.
func DiffIPIP(want *IPIPConfig, have IPIPState) (IPIPPlan, error) {
	var p IPIPPlan
	if want == nil && !have.Present {
		return p, nil
	}
	if !have.Present {
		return p, ErrNoIPIP
	}
	for a, ours := range have.Addrs {
		if ours && (want == nil || a != want.TunnelAddr) {
			p.DelAddrs = append(p.DelAddrs, a)
		}
	}
	sortAddrs(p.DelAddrs)
	if want == nil {
		return p, nil
	}
	if have.MTU != want.MTU {
		p.SetMTU = want.MTU
	}
	if _, ok := have.Addrs[want.TunnelAddr]; want.TunnelAddr.IsValid() && !ok {
		p.AddAddr = want.TunnelAddr
	}
	p.SetUp = !have.Up
	return p, nil
}
