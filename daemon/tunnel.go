package daemon

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// netInfo is what the reconcile loop knows of this node's network.
type netInfo struct {
	node    string
	uplink  Uplink
	uplink6 Uplink6 // zero: none (no IPv6 pool, or alone without one)
	pools   []PoolConfig
	podMTU  int
	// identity is the node in the block protocol (DetectNode); invalid:
	// its IPv4 address. It names the node's VTEP MAC.
	identity netip.Addr
	// v6only: an IPv6-only node, whose underlay is IPv6: vxlan.reef
	// sends to the owners' IPv6 addresses, and CrossSubnet compares them
	// with the uplink's IPv6 subnet (docs/design.md, "VXLAN over an IPv6
	// underlay").
	v6only bool
}

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

// subnetOf is the uplink's subnet of a's family, which CrossSubnet
// compares an owner's address with.
func (n netInfo) subnetOf(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return n.uplink.Prefix
	}
	return n.uplink6.Prefix
}

// over6 says whether b's owner is reached over IPv6, at the IPv6 address
// its record gave: this node is IPv6-only, or the owner is.
func (n netInfo) over6(b store.Block) bool { return n.v6only || b.OwnerIPv6Only }

// underlay is the address b's owner is reached at: its IPv4 address (its
// identity), or over IPv6 (over6) its IPv6 address (invalid while its
// record gave none).
func (n netInfo) underlay(b store.Block) netip.Addr {
	if n.over6(b) {
		return b.OwnerAddr6
	}
	return b.OwnerAddr
}

// mixed says whether b's owner and this node have underlays of two
// families (one of them IPv6-only): VXLAN between them is not built, and
// only direct routing over IPv6 reaches the owner.
func (n netInfo) mixed(b store.Block) bool { return n.v6only != b.OwnerIPv6Only }

// vxlanOverheadOf is VXLAN's overhead on an underlay: the outer IPv4 or
// IPv6 header, UDP, VXLAN and the inner Ethernet header.
func vxlanOverheadOf(underlay6 bool) int {
	if underlay6 {
		return vxlanOverhead6
	}
	return vxlanOverhead
}

func (n netInfo) modes(pool netip.Prefix) (vxlan, ipip routes.EncapMode) {
	for _, p := range n.pools {
		if p.CIDR == pool {
			return routes.EncapMode(p.VXLANMode), routes.EncapMode(p.IPIPMode)
		}
	}
	return routes.ModeNever, routes.ModeNever
}

// encapTo says how this node reaches owner's blocks of pool, whatever
// their family: owner is the address it is reached at (underlay), the
// tunnel's destination and what CrossSubnet compares with the uplink's
// subnet of its family. (The config refuses ipipMode on an IPv6 pool.)
func (n netInfo) encapTo(pool netip.Prefix, owner netip.Addr) routes.Encap {
	vx, ip := n.modes(pool)
	return routes.EncapFor(vx, ip, n.subnetOf(owner), owner)
}

// blockEncap says how this node reaches another node's block b.
func (n netInfo) blockEncap(b store.Block) routes.Encap { return n.encapTo(b.Pool, n.underlay(b)) }

// via is the address this node routes b through without encapsulation:
// the owner's address of b's family, for an IPv6 block the IPv6 address
// the owner's record gave (invalid while none did).
func via(b store.Block) netip.Addr {
	if b.CIDR.Addr().Is6() {
		return b.OwnerAddr6
	}
	return b.OwnerAddr
}

// vxlanPool is the first IPv4 pool that may use VXLAN, whose blocks hold
// the tunnel address; invalid if none does.
func (n netInfo) vxlanPool() netip.Prefix { return n.vxlanPoolOf(false) }

// vxlanPool6 is the first IPv6 pool that may use VXLAN, whose blocks hold
// the IPv6 tunnel address; invalid if none does. vxlan.reef then carries
// IPv6 too.
func (n netInfo) vxlanPool6() netip.Prefix { return n.vxlanPoolOf(true) }

func (n netInfo) vxlanPoolOf(v6 bool) netip.Prefix {
	for _, p := range n.pools {
		if p.VXLANMode != EncapNever && p.CIDR.Addr().Is6() == v6 {
			return p.CIDR
		}
	}
	return netip.Prefix{}
}

// ofPools are the blocks of the configured pools: other nodes' blocks of a
// retired pool (retiredPools) get no route.
func (n netInfo) ofPools(blocks []store.Block) []store.Block {
	return slices.DeleteFunc(slices.Clone(blocks), func(b store.Block) bool {
		return !slices.ContainsFunc(n.pools, func(p PoolConfig) bool { return p.CIDR == b.Pool })
	})
}

// inPools says whether a block lies in one of the configured pools.
func (n netInfo) inPools(block netip.Prefix) bool {
	return slices.ContainsFunc(n.pools, func(p PoolConfig) bool { return p.CIDR.Contains(block.Addr()) })
}

// usesVXLAN says whether some pool may use VXLAN: vxlan.reef then exists.
func (n netInfo) usesVXLAN() bool { return n.vxlanPool().IsValid() || n.vxlanPool6().IsValid() }

// ipv6Pool says whether a pool is IPv6: the node then forwards IPv6.
func (n netInfo) ipv6Pool() bool {
	return slices.ContainsFunc(n.pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() })
}

// ipipPool is the first pool that may use IPIP; invalid if none does.
func (n netInfo) ipipPool() netip.Prefix {
	for _, p := range n.pools {
		if p.IPIPMode != EncapNever {
			return p.CIDR
		}
	}
	return netip.Prefix{}
}

// tunnelHandle is the IPAM handle of the node's VXLAN tunnel address.
func (n netInfo) tunnelHandle() string { return VXLANTunnelHandle(n.node) }

// tunnelHandle6 is the IPAM handle of the node's IPv6 VXLAN tunnel address.
func (n netInfo) tunnelHandle6() string { return VXLANTunnelHandle6(n.node) }

// ipipHandle is the IPAM handle of the node's IPIP tunnel address.
func (n netInfo) ipipHandle() string { return IPIPTunnelHandle(n.node) }

// VXLANTunnelHandle is the IPAM handle of node's VXLAN tunnel address.
func VXLANTunnelHandle(node string) string { return "vxlan-tunnel-addr-" + node }

// VXLANTunnelHandle6 is the IPAM handle of node's IPv6 VXLAN tunnel
// address.
func VXLANTunnelHandle6(node string) string { return "vxlan-v6-tunnel-addr-" + node }

// IPIPTunnelHandle is the IPAM handle of node's IPIP tunnel address.
func IPIPTunnelHandle(node string) string { return "ipip-tunnel-addr-" + node }

// routed says whether the blocks of pool of the node at owner (its
// underlay address) are routed without encapsulation to a node in another subnet
// (gw, the address routed through, outside the uplink's subnet of its
// family): through the node's own route to gw (a router that knows the
// blocks from bgp.externalPeers), not onlink.
func (n netInfo) routed(pool netip.Prefix, owner, gw netip.Addr) bool {
	subnet := n.uplink.Prefix.Masked()
	if gw.Is6() {
		subnet = n.uplink6.Prefix.Masked()
	}
	return n.encapTo(pool, owner) == routes.Direct && !subnet.Contains(gw)
}

// routedOwners are the addresses (via) of the owners of other nodes'
// blocks that are routed (routed): their routes need the node's route to
// each (routes.HopTo).
func (n netInfo) routedOwners(blocks []store.Block) []netip.Addr {
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	for _, b := range blocks {
		if a := via(b); b.State == store.BlockRemote && a.IsValid() && !seen[a] && n.routed(b.Pool, n.underlay(b), a) {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// vxPeers are the nodes (by IPv4 address or identity) whose blocks of each
// family vxlan.reef reaches, and on an IPv6 underlay each one's IPv6
// address: routes.TunnelState's Peers, Peers6 and Dst.
type vxPeers struct {
	v4, v6 map[netip.Addr]bool
	dst    map[netip.Addr]netip.Addr
}

func (p vxPeers) equal(q vxPeers) bool {
	return maps.Equal(p.v4, q.v4) && maps.Equal(p.v6, q.v6) && maps.Equal(p.dst, q.dst)
}

// remoteRoutes turns other nodes' confirmed blocks into routes, each on the
// device its pool's mode and the owner's subnet call for, and returns the
// nodes reached through VXLAN. Through vxlan.reef an IPv4 block goes
// `via <owner> onlink` and an IPv6 block `via <owner's VTEP link-local>`
// (routes.VTEPLinkLocal), which over the IPv4 underlay needs no IPv6
// address of the owner; over the IPv6 underlay the owner's IPv6 address is
// where its fdb entry points, and without one its blocks get no route
// (unrouted6).
// Without encapsulation a routed owner's blocks go through hops[owner],
// the node's own route to it; without one they get no route, nor does an
// IPv6 block whose owner gave no IPv6 address (unrouted6).
func (n netInfo) remoteRoutes(blocks []store.Block, hops map[netip.Addr]routes.Hop) ([]routes.RemoteBlock, vxPeers) {
	var out []routes.RemoteBlock
	peers := vxPeers{v4: map[netip.Addr]bool{}, v6: map[netip.Addr]bool{}, dst: map[netip.Addr]netip.Addr{}}
	for _, b := range blocks {
		if b.State != store.BlockRemote || !b.OwnerAddr.IsValid() {
			continue
		}
		owner := via(b)
		rb := routes.RemoteBlock{Block: b.CIDR, Node: owner, Dev: n.uplink.Interface}
		switch n.blockEncap(b) {
		case routes.VXLAN:
			if n.mixed(b) {
				continue // not built: mixedUnderlays says so
			}
			rb.Node, rb.Dev = b.OwnerAddr, routes.VXLANDevice
			if n.v6only {
				if !b.OwnerAddr6.IsValid() {
					continue
				}
				peers.dst[b.OwnerAddr] = b.OwnerAddr6
			}
			if b.CIDR.Addr().Is6() {
				rb.Gateway = routes.VTEPLinkLocal(b.OwnerAddr)
				peers.v6[b.OwnerAddr] = true
			} else {
				peers.v4[b.OwnerAddr] = true
			}
		case routes.IPIP:
			rb.Dev = routes.IPIPDevice
		default:
			if !owner.IsValid() {
				continue
			}
			if n.routed(b.Pool, n.underlay(b), owner) {
				hop, ok := hops[owner]
				if !ok {
					continue
				}
				rb.Dev, rb.Gateway = hop.Dev, hop.Gateway
			}
		}
		out = append(out, rb)
	}
	return out, peers
}

// unrouted6 names the owners of IPv6 blocks reached without encapsulation,
// or on an IPv6-only node at all, whose records gave no IPv6 address (an
// owner without nodeAddressV6, or a reef before it): these blocks get no
// route.
func (n netInfo) unrouted6(blocks []store.Block) error {
	seen := map[netip.Addr]bool{}
	var errs []error
	for _, b := range blocks {
		if b.State == store.BlockRemote && b.CIDR.Addr().Is6() && b.OwnerAddr.IsValid() && !b.OwnerAddr6.IsValid() && !seen[b.OwnerAddr] &&
			(n.over6(b) || n.blockEncap(b) == routes.Direct) {
			seen[b.OwnerAddr] = true
			name := b.OwnerAddr.String()
			if b.Owner != "" {
				name = b.Owner + " (" + name + ")"
			}
			if n.v6only {
				errs = append(errs, fmt.Errorf("IPv6 blocks of node %s get no route: its record gives no IPv6 address, and this node, IPv6-only, "+
					"reaches other nodes only at their IPv6 addresses, directly or through VXLAN over IPv6 (nodeAddressV6, docs/bgp.md)", name))
				continue
			}
			errs = append(errs, fmt.Errorf("IPv6 blocks of node %s get no route: its record gives no IPv6 address to route them through "+
				"(every node with an IPv6 pool and peers has one unless every IPv6 pool has vxlanMode Always: nodeAddressV6, docs/bgp.md)", name))
		}
	}
	return errors.Join(errs...)
}

// mixedUnderlays names the owners whose blocks VXLAN would reach though
// their underlay is of another family than this node's (an IPv6-only node
// beside one with an IPv4 address): VXLAN between them is not built, so
// these blocks get no route. With vxlanMode CrossSubnet, an owner in the
// uplink's IPv6 subnet is routed directly instead, over IPv6.
func (n netInfo) mixedUnderlays(blocks []store.Block) error {
	var errs []error
	for _, m := range n.vxlanNotBuilt(blocks) {
		errs = append(errs, fmt.Errorf("blocks of node %s get no route: %s; "+
			"VXLAN between nodes whose underlays differ in family is not built (docs/design.md, \"VXLAN over an IPv6 underlay\"): "+
			"put both on one IPv6 subnet with vxlanMode CrossSubnet (routed directly), or set vxlanMode: Never", m.node, m.why))
	}
	return errors.Join(errs...)
}

// notBuilt is an owner VXLAN would reach across underlay families, and why.
type notBuilt struct{ node, why string }

// vxlanNotBuilt are the owners of blocks whose pool's mode calls for
// VXLAN but whose underlay is of the other family than this node's
// (mixed), once each: what mixedUnderlays reports and reef status shows.
func (n netInfo) vxlanNotBuilt(blocks []store.Block) []notBuilt {
	seen := map[netip.Addr]bool{}
	var out []notBuilt
	for _, b := range blocks {
		if b.State != store.BlockRemote || !b.OwnerAddr.IsValid() || !b.OwnerAddr6.IsValid() || seen[b.OwnerAddr] || !n.mixed(b) ||
			n.blockEncap(b) != routes.VXLAN {
			continue
		}
		seen[b.OwnerAddr] = true
		name := b.OwnerAddr6.String()
		if b.Owner != "" {
			name = b.Owner + " (" + name + ")"
		}
		why := "it is IPv6-only (no IPv4 address) and this node's VXLAN runs over IPv4"
		if n.v6only {
			why = "this node is IPv6-only and its VXLAN runs over IPv6, but that node has an IPv4 address and its VXLAN runs over IPv4"
		}
		out = append(out, notBuilt{name, fmt.Sprintf("pool %s has vxlanMode %s, but %s", b.Pool, n.vxlanMode(b.Pool), why)})
	}
	return out
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

// vxlanMode is pool's vxlanMode.
func (n netInfo) vxlanMode(pool netip.Prefix) routes.EncapMode {
	vx, _ := n.modes(pool)
	return vx
}

// routedBlocks are what the routes are made of: this node's confirmed
// blocks (blackholed; a pending claim may still be lost to another node),
// the other nodes' blocks with the device and next hop that reach each, and
// the nodes VXLAN reaches. Blocks of nodes in other subnets reached without
// encapsulation go where the node's own route to their owner goes; an
// owner the kernel has no route to is an error, and its blocks get none, as
// is an owner of IPv6 blocks without an IPv6 address (unrouted6).
func (r *reconciler) routedBlocks(blocks []store.Block, errs *[]error) (own []netip.Prefix, remote []routes.RemoteBlock, peers vxPeers) {
	for _, b := range blocks {
		if b.State == store.BlockConfirmed {
			own = append(own, b.CIDR)
		}
	}
	// A retired pool's own blocks keep their blackholes: they are still
	// announced, and a router that sends their traffic here must not see
	// it go back out by the default route. Other nodes' get no route.
	blocks = r.net.ofPools(blocks)
	hops := map[netip.Addr]routes.Hop{}
	for _, owner := range r.net.routedOwners(blocks) {
		hop, err := r.kernel.HopTo(owner)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("blocks of node %s get no route: %w", owner, err))
			continue
		}
		hops[owner] = hop
	}
	if err := r.net.unrouted6(blocks); err != nil {
		*errs = append(*errs, err)
	}
	if err := r.net.mixedUnderlays(blocks); err != nil {
		*errs = append(*errs, err)
	}
	remote, peers = r.net.remoteRoutes(blocks, hops)
	return own, remote, peers
}

// tunnelAddress returns the node's tunnel address of a tunnel (handle),
// reserving it in the first confirmed own block of pool when there is
// none yet (with no such block yet, the device runs without one until the
// first pod brings a block). With no pool (none uses the encapsulation, or
// for the IPv6 address of vxlan.reef no IPv6 pool uses VXLAN), it
// releases it.
func (r *reconciler) tunnelAddress(handle string, pool netip.Prefix, errs *[]error) netip.Addr {
	ep, found, err := r.store.Endpoint(handle)
	if err != nil {
		*errs = append(*errs, err)
		return netip.Addr{}
	}
	if !pool.IsValid() {
		if found {
			if _, _, err := r.store.Release(handle); err != nil {
				*errs = append(*errs, err)
			} else {
				r.log.Info("released a tunnel address: no pool uses its encapsulation", "handle", handle, "ip", ep.IP)
			}
		}
		return netip.Addr{}
	}
	if found {
		return ep.IP
	}
	var sp store.Pool
	for _, p := range r.net.pools {
		if p.CIDR == pool {
			sp = store.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize}
		}
	}
	ep, _, err = r.store.Allocate(store.Endpoint{Handle: handle, State: store.EndpointReserved, Network: ""}, sp)
	if errors.Is(err, store.ErrNoFreeAddress) {
		return netip.Addr{}
	}
	if err != nil {
		*errs = append(*errs, fmt.Errorf("reserve tunnel address %s: %w", handle, err))
		return netip.Addr{}
	}
	r.log.Info("reserved a tunnel address", "ip", ep.IP, "handle", handle)
	return ep.IP
}

// tunnelAddrs are the node's tunnel addresses, held in the store: the
// IPv4 and IPv6 ones of vxlan.reef, and tunl0's.
type tunnelAddrs struct{ vxlan, vxlan6, ipip netip.Addr }

// tunnelAddresses is the store's side of the tunnels, before their desired
// state is computed: it reserves each tunnel's address in the first
// confirmed own block of its pool, or releases it when no pool uses the
// encapsulation any more (tunnelAddress).
func (r *reconciler) tunnelAddresses(errs *[]error) tunnelAddrs {
	return tunnelAddrs{
		vxlan:  r.tunnelAddress(r.net.tunnelHandle(), r.net.vxlanPool(), errs),
		vxlan6: r.tunnelAddress(r.net.tunnelHandle6(), r.net.vxlanPool6(), errs),
		ipip:   r.tunnelAddress(r.net.ipipHandle(), r.net.ipipPool(), errs),
	}
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

// desiredIPIP is what tunl0 must be, purely: nil while no pool may use
// IPIP (reef then only takes its own address off it), else up, with the
// uplink's MTU less IPIP's overhead, and addr on it (none yet: the device
// runs without one until the first pod brings a block).
func (n netInfo) desiredIPIP(addr netip.Addr) *routes.IPIPConfig {
	if !n.ipipPool().IsValid() {
		return nil
	}
	return &routes.IPIPConfig{MTU: n.uplink.MTU - ipipOverhead, TunnelAddr: addr}
}

// syncIPIP brings tunl0 in line with desiredIPIP. reef never creates
// tunl0: this lab's kernel has no ipip module, and the error
// (routes.ErrNoIPIP) then says so in the log and reef status.
func (r *reconciler) syncIPIP(addr netip.Addr, errs *[]error) {
	have, err := r.kernel.ReadIPIP()
	if err != nil {
		*errs = append(*errs, err)
		return
	}
	plan, err := routes.DiffIPIP(r.net.desiredIPIP(addr), have)
	if err != nil {
		*errs = append(*errs, err)
		return
	}
	if plan.Empty() {
		return
	}
	var what []any
	if plan.SetMTU != 0 {
		what = append(what, "mtu", plan.SetMTU, "was", have.MTU)
	}
	if plan.AddAddr.IsValid() {
		what = append(what, "addAddress", plan.AddAddr)
	}
	if len(plan.DelAddrs) > 0 {
		what = append(what, "removeAddresses", plan.DelAddrs)
	}
	if plan.SetUp {
		what = append(what, "setUp", true)
	}
	r.log.Info("bringing "+routes.IPIPDevice+" in line", what...)
	if err := r.kernel.ApplyIPIP(plan); err != nil {
		*errs = append(*errs, err)
	}
}

// recordMTUs keeps each record's MTU what its veth pair has, for CHECK,
// which compares the kernel with the record: once the node's end has the
// pods' MTU (veths, as syncRoutes left them), the record gets it too.
// Through the CNI server, under the pod's lock, compare-and-set; a pod a
// CNI operation touched waits for the next pass.
func (r *reconciler) recordMTUs(live []store.Endpoint, veths map[string]int, busy routes.Busy, errs *[]error) {
	mtu := r.net.podMTU
	for _, ep := range live {
		if mtu == 0 || ep.State != store.EndpointReady || ep.HostVeth == "" || ep.MTU == mtu || veths[ep.HostVeth] != mtu ||
			busy.Link(ep.HostVeth) {
			continue
		}
		if _, err := r.cni.Update(ep, func(rec *store.Endpoint) { rec.MTU = mtu }); err != nil {
			*errs = append(*errs, fmt.Errorf("record MTU %d of %s: %w", mtu, ep.IP, err))
		}
	}
}

// reached says how this node reaches the blocks of the peer at addr (its
// session's address), pool by pool, as remoteRoutes routes them, and why
// that cannot work when it cannot: a node in another subnet reached
// without encapsulation needs a router that knows the blocks, which an
// established external peer (bgp.externalPeers) is taken to be. What the
// store has of the peer's blocks says what it is (its identity, IPv6
// address, whether it is IPv6-only) and which pools count; before it has
// any, the first pool of each family it can have counts, and a peer at an
// IPv6 address is taken for an IPv6-only node (a node with an IPv4
// address is named by it). One answer for every pool is given alone,
// else each pool's.
func (n netInfo) reached(addr netip.Addr, blocks []store.Block, externalUp bool) string {
	owner, pools := n.peerBlocks(addr, blocks)
	var rs, each []string
	for _, p := range pools {
		b := owner
		b.Pool, b.CIDR = p, p
		r := n.reachedIn(b, externalUp)
		rs, each = append(rs, r), append(each, p.String()+": "+r)
	}
	switch {
	case len(rs) == 0:
		return ""
	case len(slices.Compact(slices.Clone(rs))) == 1:
		return rs[0]
	}
	return strings.Join(each, "; ")
}

// peerBlocks is what the store says of the owner at addr (a block without
// prefix or pool: owner, identity, IPv6 address, IPv6-only) and the pools
// of its blocks, in the configuration's order (see reached).
func (n netInfo) peerBlocks(addr netip.Addr, blocks []store.Block) (store.Block, []netip.Prefix) {
	var owner store.Block
	in := map[netip.Prefix]bool{}
	for _, b := range blocks {
		if b.State == store.BlockRemote && b.OwnerAddr.IsValid() && (b.OwnerAddr == addr || b.OwnerAddr6 == addr) {
			owner = store.Block{Owner: b.Owner, OwnerAddr: b.OwnerAddr, OwnerAddr6: b.OwnerAddr6, OwnerIPv6Only: b.OwnerIPv6Only}
			in[b.Pool] = true
		}
	}
	if len(in) == 0 {
		owner = store.Block{OwnerAddr: addr}
		if addr.Is6() {
			owner = store.Block{OwnerAddr6: addr, OwnerIPv6Only: true}
		}
	}
	var pools []netip.Prefix
	first := map[bool]bool{} // family (IPv6) -> a pool of it taken
	for _, p := range n.pools {
		v6 := p.CIDR.Addr().Is6()
		switch {
		case len(in) > 0 && !in[p.CIDR]:
		case len(in) == 0 && (first[v6] || owner.OwnerIPv6Only && !v6):
		default:
			first[v6] = true
			pools = append(pools, p.CIDR)
		}
	}
	return owner, pools
}

// reachedIn says how this node reaches b, a block of the peer's in b.Pool.
func (n netInfo) reachedIn(b store.Block, externalUp bool) string {
	v6 := b.CIDR.Addr().Is6()
	switch n.blockEncap(b) {
	case routes.VXLAN:
		switch {
		case n.mixed(b):
			return fmt.Sprintf("not at all: pool %s has vxlanMode %s, and VXLAN between nodes whose underlays differ in family is not built "+
				"(docs/design.md, \"VXLAN over an IPv6 underlay\")", b.Pool, n.vxlanMode(b.Pool))
		case n.v6only:
			return "vxlan over IPv6"
		}
		return "vxlan"
	case routes.IPIP:
		return "ipip"
	}
	gw := via(b)
	switch {
	case !gw.IsValid() && v6:
		return fmt.Sprintf("not at all: its record gives no IPv6 address to route pool %s's blocks through (nodeAddressV6, docs/bgp.md)", b.Pool)
	case !n.routed(b.Pool, n.underlay(b), gw) && v6:
		return "direct over IPv6"
	case !n.routed(b.Pool, n.underlay(b), gw):
		return "direct"
	case externalUp:
		return fmt.Sprintf("routed: through this node's route to %s, whose router learns the blocks from this node's external BGP peers", gw)
	}
	vx, ip := n.modes(b.Pool)
	return fmt.Sprintf("direct, but %s is outside %s and pool %s has vxlanMode %s and ipipMode %s: "+
		"pods there are unreachable unless a router knows the blocks, and no external BGP peer is established (bgp.externalPeers, docs/bgp.md); or set vxlanMode: CrossSubnet",
		gw, n.subnetOf(gw).Masked(), b.Pool, vx, ip)
}
