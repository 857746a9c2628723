package daemon

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"

	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/routes/tunnel"
	"github.com/reefcni/reef/store"
)

// vxPeers are the nodes (by IPv4 address or identity) whose blocks of each
// family vxlan.reef reaches, and on an IPv6 underlay each one's IPv6
// address: tunnel.State's Peers, Peers6 and Dst.
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
// (tunnel.VTEPLinkLocal), which over the IPv4 underlay needs no IPv6
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
		rb := routes.RemoteBlock{Block: b.CIDR, Node: owner, Dev: n.uplinkOf(b.CIDR.Addr())}
		switch n.blockEncap(b) {
		case tunnel.VXLAN:
			if n.mixed(b) {
				continue // not built: mixedUnderlays says so
			}
			rb.Node, rb.Dev = b.OwnerAddr, tunnel.VXLANDevice
			if n.v6only {
				if !b.OwnerAddr6.IsValid() {
					continue
				}
				peers.dst[b.OwnerAddr] = b.OwnerAddr6
			}
			if b.CIDR.Addr().Is6() {
				rb.Gateway = tunnel.VTEPLinkLocal(b.OwnerAddr)
				peers.v6[b.OwnerAddr] = true
			} else {
				peers.v4[b.OwnerAddr] = true
			}
		case tunnel.IPIP:
			rb.Dev = tunnel.IPIPDevice
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
// route. An owner whose record is still awaited (awaiting) is not named:
// its blocks get their route once the record is learned.
func (n netInfo) unrouted6(blocks []store.Block, awaiting func(netip.Addr) bool) error {
	seen := map[netip.Addr]bool{}
	var errs []error
	for _, b := range blocks {
		if b.State == store.BlockRemote && b.CIDR.Addr().Is6() && b.OwnerAddr.IsValid() && !b.OwnerAddr6.IsValid() && !seen[b.OwnerAddr] &&
			(n.over6(b) || n.blockEncap(b) == tunnel.Direct) && !awaiting(b.OwnerAddr) {
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
			n.blockEncap(b) != tunnel.VXLAN {
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
	awaiting := func(netip.Addr) bool { return false }
	if r.blocks != nil {
		awaiting = r.blocks.awaitingRecord
	}
	if err := r.net.unrouted6(blocks, awaiting); err != nil {
		*errs = append(*errs, err)
	}
	if err := r.net.mixedUnderlays(blocks); err != nil {
		*errs = append(*errs, err)
	}
	remote, peers = r.net.remoteRoutes(blocks, hops)
	return own, remote, peers
}
