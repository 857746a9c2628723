// Package tunnel is reef's tunnels to the nodes in other subnets:
// vxlan.reef (the device, its tunnel addresses, its neighbours of both
// families and its fdb entries) and reef's part of tunl0, each as a
// desired state, a pure diff (Diff, DiffIPIP) and a Kernel that reads and
// applies it; and the choice of encapsulation per block (EncapFor). Its
// one caller that writes is the tunnels' owner (daemon/tunnels.go).
package tunnel

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sort"

	"github.com/reefcni/reef/routes/internal/nl"
)

// VXLAN and IPIP tunnels to nodes in other subnets. The tunnel device is
// reef's own (vxlan.reef, or tunl0 for IPIP); on it, for every node reached
// through it, a permanent neighbour maps the gateway of the routes to its
// blocks to the node's VTEP MAC, and an fdb entry maps that MAC to the
// node's address on the underlay. vxlan.reef carries both inner families
// over the IPv4 underlay: the gateway of IPv4 blocks is the node's IPv4
// address, that of IPv6 blocks the link-local the node's vxlan.reef
// derives from its MAC (VTEPLinkLocal). The VTEP MAC is derived from the
// node address, so nothing but the block claims is distributed.

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
// unicast, 0e:ee followed by the IPv4 address, or on an IPv6-only node by
// its 32-bit identity (bgp.routerID), unique in the cluster as well.
func VTEPMAC(addr netip.Addr) net.HardwareAddr {
	b := addr.As4()
	return net.HardwareAddr{0x0e, 0xee, b[0], b[1], b[2], b[3]}
}

// VTEPLinkLocal is the IPv6 link-local address of the vxlan.reef of the
// node at addr: the kernel's EUI-64 one from VTEPMAC(addr), which the
// device makes itself with IPv6 on and addr_gen_mode 0 (routes/sysctl).
// It is the gateway of the routes to the node's IPv6 blocks through the
// tunnel, so that these need no IPv6 address of the node.
func VTEPLinkLocal(addr netip.Addr) netip.Addr { return nl.LinkLocalEUI64(VTEPMAC(addr)) }

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

// State is reef's part of vxlan.reef: the device itself, its
// addresses (not the kernel's link-local), and its neighbour and fdb
// entries. Both peer sets are keyed by the remote node's IPv4 address (on
// an IPv6 underlay, by its 32-bit identity): a node in Peers has the
// neighbour `<node> lladdr <VTEP MAC>`, a node in Peers6 the neighbour
// `<VTEPLinkLocal(node)> lladdr <VTEP MAC>`, and a node in either the fdb
// entry `<VTEP MAC> dst <Underlay(node)>`, which the two families share.
type State struct {
	Device *VXLANConfig        // nil: no device
	Addrs  map[netip.Addr]bool // read from the kernel: its /32s and global /128s; wanted: Device's tunnel addresses
	Peers  map[netip.Addr]bool // nodes whose IPv4 blocks are reached through the device
	Peers6 map[netip.Addr]bool // nodes whose IPv6 blocks are reached through the device
	// Dst is the underlay address of each peer whose fdb entry does not
	// point at its key: on an IPv6 underlay, the node's IPv6 address. A
	// peer without an entry is reached at its key (the IPv4 underlay).
	Dst map[netip.Addr]netip.Addr
	// Strays and Partial are read from the kernel only. Strays are
	// permanent neighbours whose address and VTEP MAC do not name one
	// node; Partial are the nodes with half a peer's entries (a neighbour
	// without an fdb entry, or an fdb entry without a neighbour), each
	// with what the kernel has. No peer stands for them, so without them
	// a diff would never remove them: a wanted node's half is completed
	// (AddPeers), an unwanted one's pruned.
	Strays  []string
	Partial map[netip.Addr]string
}

// Underlay is the address the fdb entry of node points at: Dst[node], or
// node itself.
func (s State) Underlay(node netip.Addr) netip.Addr {
	if d, ok := s.Dst[node]; ok {
		return d
	}
	return node
}

// VXLANConfig is what vxlan.reef must look like.
type VXLANConfig struct {
	VNI       int
	Port      int
	Local     netip.Addr // node address, the outer source: IPv4, or IPv6 on an IPv6-only node (the underlay's family)
	UplinkIdx int
	MTU       int
	Learning  bool
	MAC       string // VTEPMAC(the node's IPv4 address or identity): what the other nodes' neighbour entries point at
	// TunnelAddr and TunnelAddr6 are the node's tunnel addresses, a /32
	// and a /128 on the device (invalid: none), the source of the node's
	// own packets to pods on other nodes, which the pods' replies route
	// back through the tunnel.
	TunnelAddr, TunnelAddr6 netip.Addr
}

// addrs are the tunnel addresses the device must hold.
func (c VXLANConfig) addrs() map[netip.Addr]bool {
	m := map[netip.Addr]bool{}
	for _, a := range []netip.Addr{c.TunnelAddr, c.TunnelAddr6} {
		if a.IsValid() {
			m[a] = true
		}
	}
	return m
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

// Plan is what it takes to bring the VXLAN device in line. Peers
// are nodes' IPv4 addresses, as in State: AddPeers6 and DelPeers6
// are the nodes whose IPv6 neighbour is added or deleted. An fdb entry
// goes with the last neighbour of its node.
type Plan struct {
	Recreate  []string // why the device must be deleted first; empty: keep it
	Create    bool
	Delete    bool // no pool uses VXLAN any more
	SetMTU    int  // 0: leave
	AddAddrs  []netip.Addr
	DelAddrs  []netip.Addr
	AddPeers  []netip.Addr
	DelPeers  []netip.Addr
	AddPeers6 []netip.Addr
	DelPeers6 []netip.Addr
	Prune     []string // stray entries to delete (have.Strays)
}

// Empty reports whether nothing needs doing.
func (p Plan) Empty() bool {
	return len(p.Recreate) == 0 && !p.Create && !p.Delete && p.SetMTU == 0 && len(p.AddAddrs) == 0 && len(p.DelAddrs) == 0 &&
		len(p.AddPeers) == 0 && len(p.DelPeers) == 0 && len(p.AddPeers6) == 0 && len(p.DelPeers6) == 0 && len(p.Prune) == 0
}

// Keeping is want for the sync before the routes are brought in line
// (make before break): have's peers that want drops stay, each with its
// fdb entry, as the routes through them have not been changed yet; kept
// says whether there are any. The sync after the routes, with want
// itself, removes them. A device want no longer has stays as well: keep
// is then false, kept true, and that sync applies nothing (deleting the
// device would take the routes through it with it).
func Keeping(want, have State) (keeping State, keep, kept bool) {
	switch {
	case have.Device == nil:
		return want, true, false
	case want.Device == nil:
		return want, false, true
	}
	keeping = want
	keeping.Peers, keeping.Peers6 = union(want.Peers, have.Peers), union(want.Peers6, have.Peers6)
	keeping.Dst = maps.Clone(want.Dst)
	for a, d := range have.Dst {
		if _, ok := want.Dst[a]; !ok && !want.Peers[a] && !want.Peers6[a] {
			if keeping.Dst == nil {
				keeping.Dst = map[netip.Addr]netip.Addr{}
			}
			keeping.Dst[a] = d
		}
	}
	kept = len(keeping.Peers) > len(want.Peers) || len(keeping.Peers6) > len(want.Peers6)
	return keeping, true, kept
}

// Diff compares the desired VXLAN state with the kernel's (have:
// what ReadTunnel reports). A device that differs in what only its
// creation sets is recreated, with everything on it.
func Diff(want, have State) Plan {
	var p Plan
	switch {
	case want.Device == nil && have.Device == nil:
		return p
	case want.Device == nil:
		p.Delete = true
		return p
	case have.Device == nil:
		p.Create = true
	case len(have.Device.Differences(*want.Device)) > 0:
		p.Recreate, p.Create = have.Device.Differences(*want.Device), true
	}
	if p.Create {
		have = State{}
	} else if have.Device.MTU != want.Device.MTU {
		p.SetMTU = want.Device.MTU
	}
	p.AddAddrs, p.DelAddrs = diffSet(want.Device.addrs(), have.Addrs)
	// A peer whose fdb entry points elsewhere than want's (its IPv6
	// address changed) is not there: it is added again, which rewrites
	// the entry.
	right := func(peers map[netip.Addr]bool) map[netip.Addr]bool {
		m := map[netip.Addr]bool{}
		for a := range peers {
			if have.Underlay(a) == want.Underlay(a) {
				m[a] = true
			}
		}
		return m
	}
	p.AddPeers, _ = diffSet(want.Peers, right(have.Peers))
	_, p.DelPeers = diffSet(want.Peers, have.Peers)
	p.AddPeers6, _ = diffSet(want.Peers6, right(have.Peers6))
	_, p.DelPeers6 = diffSet(want.Peers6, have.Peers6)
	p.Prune = slices.Clone(have.Strays)
	for node, what := range have.Partial {
		if !want.Peers[node] && !want.Peers6[node] {
			p.Prune = append(p.Prune, what)
		}
	}
	slices.Sort(p.Prune)
	return p
}

// diffSet is what want has and have has not, and the reverse, sorted.
func diffSet(want, have map[netip.Addr]bool) (add, del []netip.Addr) {
	for a := range want {
		if !have[a] {
			add = append(add, a)
		}
	}
	for a := range have {
		if !want[a] {
			del = append(del, a)
		}
	}
	sortAddrs(add)
	sortAddrs(del)
	return add, del
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
