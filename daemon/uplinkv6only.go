package daemon

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// An IPv6-only node (docs/design.md, "IPv6-only nodes"): bgp.routerID set
// and nodeAddress not. Its uplink is chosen from IPv6 alone; Uplink.Address
// stays invalid (the node has no IPv4 address reef uses), and the node is
// known in the block protocol by its router ID.

// chooseUplinkV6Only picks the uplink of an IPv6-only node: the configured
// interface, else the one that holds nodeAddressV6 (want), else the
// interface of the IPv6 default route with the lowest metric, else the
// first plausible interface with a usable IPv6 address. The address itself
// is chooseUplink6's choice on it.
func chooseUplinkV6Only(links []LinkInfo, addrs []Addr6Info, defaults []RouteInfo, wantIface string, want netip.Addr) (Uplink, Uplink6, error) {
	links = slices.Clone(links)
	slices.SortFunc(links, func(a, b LinkInfo) int { return a.Index - b.Index })
	byIndex := map[int]LinkInfo{}
	for _, l := range links {
		byIndex[l.Index] = l
	}
	usable := func(index int) bool {
		return slices.ContainsFunc(addrs, func(a Addr6Info) bool { return a.LinkIndex == index && uplink6WhyNot(a) == "" })
	}
	var l LinkInfo
	var why string
	switch {
	case wantIface != "":
		i := slices.IndexFunc(links, func(l LinkInfo) bool { return l.Name == wantIface })
		if i < 0 {
			return Uplink{}, Uplink6{}, fmt.Errorf("interface %s does not exist; set interface to an existing one", wantIface)
		}
		l, why = links[i], "interface set in the configuration"
	case want.IsValid():
		i := slices.IndexFunc(addrs, func(a Addr6Info) bool { return a.Prefix.Addr() == want })
		if i < 0 {
			return Uplink{}, Uplink6{}, fmt.Errorf("nodeAddressV6 %s is not on any interface of this node; set nodeAddressV6 to one of its addresses", want)
		}
		l, why = byIndex[addrs[i].LinkIndex], "interface of nodeAddressV6"
	default:
		var best *RouteInfo
		for i, r := range defaults {
			if _, ok := byIndex[r.LinkIndex]; ok && (best == nil || r.Priority < best.Priority || r.Priority == best.Priority && r.LinkIndex < best.LinkIndex) {
				best = &defaults[i]
			}
		}
		if best != nil {
			l, why = byIndex[best.LinkIndex], fmt.Sprintf("interface of the IPv6 default route (metric %d)", best.Priority)
			break
		}
		i := slices.IndexFunc(links, func(l LinkInfo) bool { return uplinkCandidate(l) && usable(l.Index) })
		if i < 0 {
			return Uplink{}, Uplink6{}, fmt.Errorf("no IPv6 default route and no interface with a usable IPv6 address; set interface or nodeAddressV6 in /etc/reef/config.yaml")
		}
		l, why = links[i], "first interface with a usable IPv6 address (there is no IPv6 default route)"
	}
	up := Uplink{Interface: l.Name, Index: l.Index, MTU: l.MTU}
	up6, err := chooseUplink6(links, addrs, defaults, up, want)
	if err != nil {
		return Uplink{}, Uplink6{}, err
	}
	up.Reason = fmt.Sprintf("no IPv4 address (IPv6-only node, bgp.routerID set): %s: %s", l.Name, why)
	if !l.Up {
		up.Reason += "; it is down"
	}
	return up, up6, nil
}

// DetectUplinkV6Only reads the links, IPv6 addresses and IPv6 default
// routes and chooses an IPv6-only node's uplink (chooseUplinkV6Only).
func DetectUplinkV6Only(wantIface string, want netip.Addr) (Uplink, Uplink6, error) {
	nlLinks, err := uplinkDump(netlink.LinkList)
	if err != nil {
		return Uplink{}, Uplink6{}, fmt.Errorf("list links: %w", err)
	}
	nlAddrs, err := uplinkDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V6) })
	if err != nil {
		return Uplink{}, Uplink6{}, fmt.Errorf("list IPv6 addresses: %w", err)
	}
	nlRoutes, err := uplinkDump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return Uplink{}, Uplink6{}, fmt.Errorf("list IPv6 routes: %w", err)
	}
	links := linkInfos(nlLinks)
	var addrs []Addr6Info
	for _, a := range nlAddrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.IPNet == nil || ip.Is4() || ip.Is4In6() {
			continue
		}
		ones, _ := a.Mask.Size()
		addrs = append(addrs, Addr6Info{LinkIndex: a.LinkIndex, Prefix: netip.PrefixFrom(ip, ones), Global: a.Scope == unix.RT_SCOPE_UNIVERSE, Flags: a.Flags})
	}
	return chooseUplinkV6Only(links, addrs, uplinkDefaults(nlRoutes), wantIface, want)
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
