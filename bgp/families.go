package bgp

import (
	"fmt"
	"net/netip"
	"slices"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// This file holds the address families of the global RIB and of the
// cluster's sessions, and the prefix limit of each.

// families are the families of the global RIB: IPv4 unicast and both VPN
// families always, IPv6 unicast when the node has an IPv6 address to be the
// next hop of its IPv6 blocks.
func (cfg *Config) families() []uint32 {
	fs := []uint32{
		uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_L3VPN_IPV4_UNICAST]),
		uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_L3VPN_IPV6_UNICAST]),
	}
	if cfg.NodeAddress.IsValid() {
		fs = append(fs, uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]))
	}
	if cfg.NodeAddressV6.IsValid() {
		fs = append(fs, uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST]))
	}
	return fs
}

// v6Withheld says why the node's IPv6 blocks are not exported to its
// external peers, or "" when they are, or there is nothing to say (no IPv6
// pool, no external peer).
func (cfg *Config) v6Withheld() string {
	if len(cfg.ExternalPeers) == 0 || cfg.NodeAddressV6.IsValid() || !slices.ContainsFunc(cfg.Pools, func(p Pool) bool { return p.CIDR.Addr().Is6() }) {
		return ""
	}
	return "IPv6 blocks are not exported to external peers: the node has no IPv6 address (nodeAddressV6) to be their next hop"
}

// afiSafis are the families of every session of the cluster (mesh, route
// reflectors, their clients): IPv4 unicast (confirmed IPv4 blocks, for the
// network to route by), VPN-IPv4 (the block protocol) and VPN-IPv6 (the
// block protocol's paths about IPv6 blocks), each with graceful restart
// and a prefix limit (PrefixLimits). A peer that offers only some of them
// (an older reef: no VPN-IPv6) gets a session in those it offers.
func (sp *Speaker) afiSafis() []*api.AfiSafi {
	lim := PrefixLimits(sp.cfg.Pools)
	fs := []*api.AfiSafi{
		afiSafi(api.Family_AFI_IP, api.Family_SAFI_MPLS_VPN, lim.VPN),
		afiSafi(api.Family_AFI_IP6, api.Family_SAFI_MPLS_VPN, lim.VPNv6),
	}
	if sp.cfg.NodeAddress.IsValid() {
		// An IPv6-only node has no IPv4 address to be the next hop of
		// IPv4 blocks (and no IPv4 pool).
		fs = append([]*api.AfiSafi{afiSafi(api.Family_AFI_IP, api.Family_SAFI_UNICAST, lim.Unicast)}, fs...)
	}
	return fs
}

// afiSafi is one family of a session, with graceful restart and a prefix
// limit.
func afiSafi(afi api.Family_Afi, safi api.Family_Safi, limit uint32) *api.AfiSafi {
	f := &api.Family{Afi: afi, Safi: safi}
	return &api.AfiSafi{
		Config:            &api.AfiSafiConfig{Family: f, Enabled: true},
		MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}},
		PrefixLimits:      &api.PrefixLimit{Family: f, MaxPrefixes: limit, ShutdownThresholdPct: prefixWarnPct},
	}
}

// Every BGP session has a prefix limit: a speaker that announces more
// than its family can legitimately hold is cut off before it can fill the
// node's memory. GoBGP sends a Cease NOTIFICATION ("maximum number of
// prefixes reached") and keeps the session down (admin state PFX_CT; reef
// re-enables only peers left down by its own resets), so a flooding peer
// stays cut off until `reef peer reset` or a restart (reset.go). The import filter already drops what is not a reef path; the
// limit bounds what it has to look at. The limits are generous, from the
// pools: a full mesh session carries only its peer's paths, but a route
// reflector's carries every speaker's, so the limit is what the whole
// cluster may announce, with room to spare:
//
//   - IPv4 unicast holds one path per confirmed IPv4 block: twice the
//     blocks of the IPv4 pools, at least 16,384;
//   - VPN-IPv4 holds, per IPv4 block, its confirmed claim, the few pending
//     or released claims of a contest and one grant per voter, plus one
//     record per node and one forget per node ever forgotten: 16 paths per
//     block of the IPv4 pools, at least 131,072;
//   - VPN-IPv6 holds the same per IPv6 block, and nothing else: 16 paths
//     per block of the IPv6 pools, at least 131,072. The blocks of a pool
//     are those the protocol uses (blockproto.Pool.NumBlocks: at most 2^32
//     of an IPv6 pool), so an IPv6 pool of the usual size (a /56 of /122)
//     saturates the limit, as all of IPv4 in /32s does.
//
// GoBGP logs a warning once a session passes prefixWarnPct of its limit.
const (
	minUnicastPrefixes = 16384
	minVPNPrefixes     = 131072
	// maxVPNv6Blocks is the most IPv6 blocks the VPN-IPv6 limit counts:
	// 65,536 blocks of /122 hold four million pods.
	maxVPNv6Blocks = 1 << 16
	prefixWarnPct  = 80
)

// limitOf describes the prefix limit of the session with peer.
func (sp *Speaker) limitOf(peer netip.Addr) string {
	if p, ok := sp.cfg.external(peer); ok {
		switch fams := sp.cfg.externalFamilies(peer); {
		case len(fams) == 2:
			return fmt.Sprintf("%d IPv4 or %d IPv6 unicast routes (bgp.externalPeers maxPrefixes)", p.MaxPrefixes, p.MaxPrefixes)
		case fams[0] == bgppkt.RF_IPv6_UC:
			return fmt.Sprintf("%d IPv6 unicast routes (bgp.externalPeers maxPrefixes)", p.MaxPrefixes)
		}
		return fmt.Sprintf("%d IPv4 unicast routes (bgp.externalPeers maxPrefixes)", p.MaxPrefixes)
	}
	lim := PrefixLimits(sp.cfg.Pools)
	return fmt.Sprintf("%d IPv4 unicast, %d IPv4 VPN or %d IPv6 VPN paths (from the pools)", lim.Unicast, lim.VPN, lim.VPNv6)
}

// Limits are the prefix limits of a session, per family: IPv4 unicast,
// VPN-IPv4 and VPN-IPv6.
type Limits struct{ Unicast, VPN, VPNv6 uint32 }

// PrefixLimits returns the prefix limits of every session for pools.
func PrefixLimits(pools []Pool) Limits {
	var blocks4, blocks6 uint64
	for _, p := range pools {
		n := uint64(blockproto.Pool(p).NumBlocks())
		if p.CIDR.Addr().Is6() {
			blocks6 += n
		} else {
			blocks4 += n
		}
	}
	clamp := func(v uint64, floor uint32) uint32 {
		return uint32(min(max(v, uint64(floor)), 1<<32-1))
	}
	// An IPv6 pool's blocks (2^32 of a /56 of /122s) say nothing about how
	// many a cluster uses: count at most maxVPNv6Blocks of them, so that a
	// peer that floods claims is cut off long before memory runs out.
	return Limits{Unicast: clamp(2*blocks4, minUnicastPrefixes), VPN: clamp(16*blocks4, minVPNPrefixes),
		VPNv6: clamp(16*min(blocks6, maxVPNv6Blocks), minVPNPrefixes)}
}
