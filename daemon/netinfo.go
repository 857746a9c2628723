package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/reefcni/reef/routes/tunnel"
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

// subnetOf is the uplink's subnet of a's family, which CrossSubnet
// compares an owner's address with.
func (n netInfo) subnetOf(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return n.uplink.Prefix
	}
	return n.uplink6.Prefix
}

// uplinkOf is the uplink interface of a's family: an IPv6 block owned by
// another node goes `via <owner's IPv6 address> dev <it> onlink`. The IPv6
// uplink is the IPv4 one unless the IPv6 default route is on another
// interface (chooseUplink6), and on an IPv6-only node.
func (n netInfo) uplinkOf(a netip.Addr) string {
	if a.Is6() && n.uplink6.Interface != "" {
		return n.uplink6.Interface
	}
	return n.uplink.Interface
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

func (n netInfo) modes(pool netip.Prefix) (vxlan, ipip tunnel.EncapMode) {
	for _, p := range n.pools {
		if p.CIDR == pool {
			return tunnel.EncapMode(p.VXLANMode), tunnel.EncapMode(p.IPIPMode)
		}
	}
	return tunnel.ModeNever, tunnel.ModeNever
}

// encapTo says how this node reaches owner's blocks of pool, whatever
// their family: owner is the address it is reached at (underlay), the
// tunnel's destination and what CrossSubnet compares with the uplink's
// subnet of its family. (The config refuses ipipMode on an IPv6 pool.)
func (n netInfo) encapTo(pool netip.Prefix, owner netip.Addr) tunnel.Encap {
	vx, ip := n.modes(pool)
	return tunnel.EncapFor(vx, ip, n.subnetOf(owner), owner)
}

// blockEncap says how this node reaches another node's block b.
func (n netInfo) blockEncap(b store.Block) tunnel.Encap { return n.encapTo(b.Pool, n.underlay(b)) }

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
	return n.encapTo(pool, owner) == tunnel.Direct && !subnet.Contains(gw)
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

// vxlanMode is pool's vxlanMode.
func (n netInfo) vxlanMode(pool netip.Prefix) tunnel.EncapMode {
	vx, _ := n.modes(pool)
	return vx
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
	case tunnel.VXLAN:
		switch {
		case n.mixed(b):
			return fmt.Sprintf("not at all: pool %s has vxlanMode %s, and VXLAN between nodes whose underlays differ in family is not built "+
				"(docs/design.md, \"VXLAN over an IPv6 underlay\")", b.Pool, n.vxlanMode(b.Pool))
		case n.v6only:
			return "vxlan over IPv6"
		}
		return "vxlan"
	case tunnel.IPIP:
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
