package daemon

import (
	"fmt"
	"net/netip"
	"slices"
)

// An IPv6-only node (docs/design.md, "IPv6-only nodes"): bgp.routerID set
// and nodeAddress not. Its uplink is chosen from IPv6 alone; Uplink.Address
// stays invalid (the node has no IPv4 address reef uses), and the node is
// known in the block protocol by its router ID.

// chooseUplinkV6Only picks the uplink of an IPv6-only node: the IPv6
// uplink (chooseUplink6, with no IPv4 uplink): the configured interface,
// else the one that holds nodeAddressV6 (want), else the interface of the
// IPv6 default route with the lowest metric, else the first plausible
// interface with a usable IPv6 address.
func chooseUplinkV6Only(links []LinkInfo, addrs []Addr6Info, defaults []RouteInfo, wantIface string, want netip.Addr) (Uplink, Uplink6, error) {
	up6, err := chooseUplink6(links, addrs, defaults, Uplink{}, wantIface, want)
	if err != nil {
		return Uplink{}, Uplink6{}, err
	}
	up := Uplink{Interface: up6.Interface, Index: up6.Index, MTU: up6.MTU}
	up.Reason = "no IPv4 address (IPv6-only node, bgp.routerID set)" // the start log adds up6.Reason
	if i := slices.IndexFunc(links, func(l LinkInfo) bool { return l.Index == up6.Index }); i >= 0 && !links[i].Up {
		up.Reason += "; it is down"
	}
	return up, up6, nil
}

// DetectUplinkV6Only reads the links, IPv6 addresses and IPv6 default
// routes and chooses an IPv6-only node's uplink (chooseUplinkV6Only).
func DetectUplinkV6Only(wantIface string, want netip.Addr) (Uplink, Uplink6, error) {
	links, addrs, defaults, err := uplink6ReadKernel()
	if err != nil {
		return Uplink{}, Uplink6{}, err
	}
	return chooseUplinkV6Only(links, addrs, defaults, wantIface, want)
}

// ipv6OnlyProblems are what an IPv6-only node cannot do: IPv4 pools (no
// IPv4 address to route them through), and no IPv6 pool at all. VXLAN
// runs over its IPv6 underlay (IPIP, IPv4 only, the config refuses on an
// IPv6 pool).
func ipv6OnlyProblems(cfg Config) error {
	has6 := false
	for i, p := range cfg.Pools {
		if p.CIDR.Addr().Is4() {
			return cfg.KeyError(fmt.Sprintf("pools[%d].cidr", i), fmt.Sprintf("value %q is IPv4, but this node has no IPv4 address (bgp.routerID set, nodeAddress not: an IPv6-only node); an IPv6-only node has IPv6 pools only", p.CIDR))
		}
		has6 = true
	}
	if !has6 {
		return cfg.KeyError("pools", "has no IPv6 pool, but this node has no IPv4 address (bgp.routerID set, nodeAddress not): an IPv6-only node needs an IPv6 pool")
	}
	return nil
}
