package daemon

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Uplink6 is the node's IPv6 address on the uplink: the next hop of its
// IPv6 blocks, announced in its record to the other nodes (which route
// `<block> via <address> dev <uplink> onlink`) and to its external peers.
type Uplink6 struct {
	Address netip.Addr
	Prefix  netip.Prefix // Address with the length of its subnet, e.g. fd77::20/64
	Reason  string       // why this one, for the log
}

// Addr6Info is one IPv6 address of a link, with the kernel's flags.
type Addr6Info struct {
	LinkIndex int
	Prefix    netip.Prefix // the address with its prefix length
	Global    bool         // scope universe
	Flags     int          // IFA_F_*: temporary, deprecated, tentative, DAD failed, permanent
}

// uplink6Hint tells the operator how to overrule the detection.
const uplink6Hint = "set nodeAddressV6 in /etc/reef/config.yaml"

// uplink6WhyNot says why a is not a usable node address, "" when it is:
// the other nodes route to it for as long as the node runs, so an address
// that is about to go (deprecated), one that changes by design
// (temporary), one not yet or never valid (tentative, DAD failed) and a
// link-local one (not routable beside a block) are not the node's.
func uplink6WhyNot(a Addr6Info) string {
	ip := a.Prefix.Addr()
	switch {
	case !ip.Is6() || ip.Is4In6():
		return "is not IPv6"
	case ip.IsLinkLocalUnicast():
		return "is link-local"
	case !a.Global || !ip.IsGlobalUnicast():
		return "is not of global scope"
	case a.Flags&unix.IFA_F_TEMPORARY != 0:
		return "is temporary (privacy extensions)"
	case a.Flags&unix.IFA_F_DEPRECATED != 0:
		return "is deprecated (its preferred lifetime is over)"
	case a.Flags&unix.IFA_F_DADFAILED != 0:
		return "failed duplicate address detection"
	case a.Flags&unix.IFA_F_TENTATIVE != 0:
		return "is tentative (duplicate address detection has not finished)"
	}
	return ""
}

// chooseUplink6 picks the node's IPv6 address on up, the IPv4 uplink: the
// other nodes route its IPv6 blocks through their uplinks onlink, so the
// address must be on the interface their IPv4 sessions reach. A configured
// address (want) wins if it is there. Otherwise, of the usable addresses
// (uplink6WhyNot), the first of: not a /128 (VIPs are), static (not
// SLAAC or DHCPv6), the lowest, so that a restart picks the same one.
// defaults, the IPv6 default routes, only name the interface of the
// default route when the uplink has no usable address.
func chooseUplink6(links []LinkInfo, addrs []Addr6Info, defaults []RouteInfo, up Uplink, want netip.Addr) (Uplink6, error) {
	name := func(index int) string {
		if i := slices.IndexFunc(links, func(l LinkInfo) bool { return l.Index == index }); i >= 0 {
			return links[i].Name
		}
		return fmt.Sprintf("interface %d", index)
	}
	var ok []Addr6Info
	var why []string
	for _, a := range addrs {
		if a.LinkIndex != up.Index {
			continue
		}
		if w := uplink6WhyNot(a); w != "" {
			why = append(why, a.Prefix.String()+" "+w)
		} else {
			ok = append(ok, a)
		}
	}
	if want.IsValid() {
		for _, a := range addrs {
			switch {
			case a.Prefix.Addr() != want:
			case a.LinkIndex == up.Index && a.Flags&unix.IFA_F_DADFAILED != 0:
				return Uplink6{}, fmt.Errorf("nodeAddressV6 %s on %s failed duplicate address detection: another host on the link has it, and the other nodes would route this node's IPv6 pods there; "+
					"set nodeAddressV6 to an address of this node's own (usable: %s)", want, up.Interface, addrList(ok))
			case a.LinkIndex == up.Index:
				// The operator's choice is honoured even for a /128 or a dynamic address.
				return Uplink6{Address: want, Prefix: a.Prefix, Reason: fmt.Sprintf("%s on %s: nodeAddressV6 set in the configuration", want, up.Interface)}, nil
			default:
				return Uplink6{}, fmt.Errorf("nodeAddressV6 %s is on interface %s, not on the uplink %s (of %s): the other nodes route this node's IPv6 blocks through the uplink; "+
					"set nodeAddressV6 to an address of %s (usable: %s), or make %s the uplink (interface, nodeAddress)", want, name(a.LinkIndex), up.Interface, up.Address, up.Interface, addrList(ok), name(a.LinkIndex))
			}
		}
		return Uplink6{}, fmt.Errorf("nodeAddressV6 %s is not on any interface of this node (usable IPv6 addresses on the uplink %s: %s); set nodeAddressV6 to one of them", want, up.Interface, addrList(ok))
	}
	if len(ok) == 0 {
		detail := strings.Join(why, ", ")
		if detail == "" {
			detail = "it has no IPv6 address"
		}
		elsewhere := ""
		if i := slices.IndexFunc(defaults, func(r RouteInfo) bool { return r.LinkIndex != up.Index }); i >= 0 && !slices.ContainsFunc(defaults, func(r RouteInfo) bool { return r.LinkIndex == up.Index }) {
			elsewhere = fmt.Sprintf(" (the IPv6 default route is on %s, not on the uplink)", name(defaults[i].LinkIndex))
		}
		return Uplink6{}, fmt.Errorf("the uplink %s has no usable IPv6 address (%s)%s; add one, or %s", up.Interface, detail, elsewhere, uplink6Hint)
	}
	slices.SortStableFunc(ok, func(a, b Addr6Info) int {
		return cmp.Or(cmp.Compare(bool2int(a.Prefix.Bits() == 128), bool2int(b.Prefix.Bits() == 128)),
			cmp.Compare(bool2int(a.Flags&unix.IFA_F_PERMANENT == 0), bool2int(b.Flags&unix.IFA_F_PERMANENT == 0)),
			a.Prefix.Addr().Compare(b.Prefix.Addr()))
	})
	a := ok[0]
	reason := fmt.Sprintf("%s on %s: global IPv6 address of the uplink", a.Prefix.Addr(), up.Interface)
	if len(ok) > 1 {
		reason += fmt.Sprintf(", the first of %d usable ones (not a /128, static, lowest first): %s", len(ok), addrList(ok))
	}
	return Uplink6{Address: a.Prefix.Addr(), Prefix: a.Prefix, Reason: reason}, nil
}

func bool2int(b bool) int {
	if b {
		return 1
	}
	return 0
}

func addrList(as []Addr6Info) string {
	if len(as) == 0 {
		return "none"
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.Prefix.String()
	}
	return strings.Join(s, ", ")
}

// DetectUplink6 reads the IPv6 addresses and default routes of the current
// network namespace and chooses the node's IPv6 address on up (see
// chooseUplink6).
func DetectUplink6(up Uplink, want netip.Addr) (Uplink6, error) {
	nlLinks, err := uplinkDump(netlink.LinkList)
	if err != nil {
		return Uplink6{}, fmt.Errorf("list links: %w", err)
	}
	nlAddrs, err := uplinkDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V6) })
	if err != nil {
		return Uplink6{}, fmt.Errorf("list IPv6 addresses: %w", err)
	}
	nlRoutes, err := uplinkDump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return Uplink6{}, fmt.Errorf("list IPv6 routes: %w", err)
	}
	var links []LinkInfo
	for _, l := range nlLinks {
		links = append(links, LinkInfo{Index: l.Attrs().Index, Name: l.Attrs().Name})
	}
	var addrs []Addr6Info
	for _, a := range nlAddrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.IPNet == nil || ip.Is4() {
			continue
		}
		ones, _ := a.Mask.Size()
		addrs = append(addrs, Addr6Info{LinkIndex: a.LinkIndex, Prefix: netip.PrefixFrom(ip, ones), Global: a.Scope == unix.RT_SCOPE_UNIVERSE, Flags: a.Flags})
	}
	return chooseUplink6(links, addrs, uplinkDefaults(nlRoutes), up, want)
}

// nodeAddress6 is the node's IPv6 address while it has an IPv6 pool: the
// configured one, checked, or the detected one. Missing, it is an error
// only on a node with peers (bgp.peers, peerPrefixes, routeReflectors)
// and an IPv6 pool whose blocks the other nodes may route directly,
// through this address; a node that runs alone routes none elsewhere, and
// blocks of an IPv6 pool with vxlanMode Always go through vxlan.reef,
// via the node's VTEP link-local. A configured address is checked even
// without an IPv6 pool, and then not used.
func nodeAddress6(cfg Config, up Uplink, log *slog.Logger) (Uplink6, error) {
	v6 := slices.ContainsFunc(cfg.Pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() })
	if !v6 && !cfg.NodeAddressV6.IsValid() {
		return Uplink6{}, nil
	}
	direct6 := slices.ContainsFunc(cfg.Pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() && p.VXLANMode != EncapAlways })
	up6, err := DetectUplink6(up, cfg.NodeAddressV6)
	switch {
	case err != nil && (cfg.NodeAddressV6.IsValid() || (cfg.hasPeers() && direct6)):
		return Uplink6{}, err
	case err != nil && cfg.hasPeers():
		log.Info("no node IPv6 address: every IPv6 pool has vxlanMode Always, whose blocks need none; external peers get no IPv6 blocks", "why", err)
		return Uplink6{}, nil
	case err != nil:
		log.Info("no node IPv6 address: a node that runs alone needs none; external peers get no IPv6 blocks", "why", err)
		return Uplink6{}, nil
	case !v6:
		return Uplink6{}, nil
	}
	log.Info("node IPv6 address chosen", "address", up6.Address, "interface", up.Interface, "why", up6.Reason)
	return up6, nil
}
