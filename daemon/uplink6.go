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

// Uplink6 is the node's IPv6 uplink: the interface its IPv6 traffic to the
// other nodes leaves by, and its IPv6 address there, the next hop of its
// IPv6 blocks, announced in its record to the other nodes (which route
// `<block> via <address> dev <their IPv6 uplink> onlink`) and to its
// external peers. On a node with an IPv4 address it is the IPv4 uplink's
// interface unless the IPv6 default route is on another one
// (chooseUplink6).
type Uplink6 struct {
	Interface string // "" in tests that build one by hand: the IPv4 uplink's
	Index     int
	MTU       int
	Address   netip.Addr
	Prefix    netip.Prefix // Address with the length of its subnet, e.g. fd77::20/64
	Reason    string       // why this one, for the log
}

// Addr6Info is one IPv6 address of a link, with the kernel's flags.
type Addr6Info struct {
	LinkIndex int
	Prefix    netip.Prefix // the address with its prefix length
	Global    bool         // scope universe
	Flags     int          // IFA_F_*: temporary, deprecated, tentative, DAD failed, permanent
}

// uplink6Hint tells the operator how to overrule the detection.
const uplink6Hint = "set nodeAddressV6 or interface in reef's config file (--config; /etc/reef/config.yaml by default)"

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

// chooseUplink6 picks the IPv6 uplink from a snapshot of the links, IPv6
// addresses and IPv6 default routes, by the IPv4 uplink's rules
// (chooseUplink): the interface is, first that matches,
//   - interface (wantIface), set in the configuration: the uplink of both
//     families, as it always was;
//   - the interface of nodeAddressV6 (want);
//   - the interface of the IPv6 default route with the lowest metric;
//   - with no IPv6 default route, the IPv4 uplink v4 if it has a usable
//     address (a node whose IPv6 is only on its LAN), else the first
//     plausible interface with one (uplinkCandidate, as the IPv4 scan).
//
// v4 is the IPv4 uplink (zero on an IPv6-only node). The address on that
// interface is the configured one (want), honoured even as a /128, or,
// of the usable ones (uplink6WhyNot), the first of: not a /128 (VIPs
// are), static (not SLAAC or DHCPv6), the lowest, so that a restart
// picks the same one. An interface without a usable address is an error
// naming it, each of its addresses and why not, and what to set.
func chooseUplink6(links []LinkInfo, addrs []Addr6Info, defaults []RouteInfo, v4 Uplink, wantIface string, want netip.Addr) (Uplink6, error) {
	l, why, none, err := chooseLink6(links, addrs, defaults, v4, wantIface, want)
	if err != nil {
		return Uplink6{}, err
	}
	up6 := Uplink6{Interface: l.Name, Index: l.Index, MTU: l.MTU}
	var ok []Addr6Info
	var whyNot []string
	for _, a := range addrs {
		if a.LinkIndex != l.Index {
			continue
		}
		if w := uplink6WhyNot(a); w != "" {
			whyNot = append(whyNot, a.Prefix.String()+" "+w)
		} else {
			ok = append(ok, a)
		}
	}
	if want.IsValid() {
		i := slices.IndexFunc(addrs, func(a Addr6Info) bool { return a.LinkIndex == l.Index && a.Prefix.Addr() == want })
		if addrs[i].Flags&unix.IFA_F_DADFAILED != 0 {
			return Uplink6{}, fmt.Errorf("nodeAddressV6 %s on %s failed duplicate address detection: another host on the link has it, and the other nodes would route this node's IPv6 pods there; "+
				"set nodeAddressV6 to an address of this node's own (usable: %s)", want, l.Name, addrList(ok))
		}
		// The operator's choice is honoured even for a /128 or a dynamic address.
		up6.Address, up6.Prefix, up6.Reason = want, addrs[i].Prefix, fmt.Sprintf("%s on %s: %s", want, l.Name, why)
		return up6, nil
	}
	if len(ok) == 0 {
		detail := strings.Join(whyNot, ", ")
		if detail == "" {
			detail = "it has no IPv6 address"
		}
		return Uplink6{}, fmt.Errorf(none, detail)
	}
	slices.SortStableFunc(ok, func(a, b Addr6Info) int {
		return cmp.Or(cmp.Compare(bool2int(a.Prefix.Bits() == 128), bool2int(b.Prefix.Bits() == 128)),
			cmp.Compare(bool2int(a.Flags&unix.IFA_F_PERMANENT == 0), bool2int(b.Flags&unix.IFA_F_PERMANENT == 0)),
			a.Prefix.Addr().Compare(b.Prefix.Addr()))
	})
	a := ok[0]
	up6.Address, up6.Prefix = a.Prefix.Addr(), a.Prefix
	up6.Reason = fmt.Sprintf("%s on %s: %s", a.Prefix.Addr(), l.Name, why)
	if len(ok) > 1 {
		up6.Reason += fmt.Sprintf(", the first of %d usable ones (not a /128, static, lowest first): %s", len(ok), addrList(ok))
	}
	return up6, nil
}

// chooseLink6 is chooseUplink6's interface, why it, and the error when it
// has no usable IPv6 address (a format for the list of its addresses and
// why not).
func chooseLink6(links []LinkInfo, addrs []Addr6Info, defaults []RouteInfo, v4 Uplink, wantIface string, want netip.Addr) (l LinkInfo, why, none string, err error) {
	links = slices.SortedFunc(slices.Values(links), func(a, b LinkInfo) int { return cmp.Compare(a.Index, b.Index) })
	byIndex := map[int]LinkInfo{}
	for _, l := range links {
		byIndex[l.Index] = l
	}
	usable := func(index int) bool {
		return slices.ContainsFunc(addrs, func(a Addr6Info) bool { return a.LinkIndex == index && uplink6WhyNot(a) == "" })
	}
	var at *LinkInfo // the interface of want
	if want.IsValid() {
		if i := slices.IndexFunc(addrs, func(a Addr6Info) bool { return a.Prefix.Addr() == want }); i >= 0 {
			if l, ok := byIndex[addrs[i].LinkIndex]; ok {
				at = &l
			}
		}
		if at == nil {
			return l, "", "", fmt.Errorf("nodeAddressV6 %s is not on any interface of this node (usable IPv6 addresses: %s); set nodeAddressV6 to one of them", want, addr6List(links, addrs))
		}
	}
	switch {
	case wantIface != "":
		i := slices.IndexFunc(links, func(l LinkInfo) bool { return l.Name == wantIface })
		switch {
		case i < 0:
			return l, "", "", fmt.Errorf("interface %s does not exist; set interface to an existing one", wantIface)
		case at != nil && at.Index != links[i].Index:
			return l, "", "", fmt.Errorf("nodeAddressV6 %s is on interface %s, but interface is set to %s (the uplink of both families); make them agree or leave one out", want, at.Name, wantIface)
		}
		return links[i], "interface set in the configuration",
			"interface " + wantIface + " has no usable IPv6 address (%s); add one, or set nodeAddressV6 or another interface", nil
	case at != nil:
		return *at, "nodeAddressV6 set in the configuration", "", nil
	}
	var best *RouteInfo
	for i, r := range defaults {
		if _, ok := byIndex[r.LinkIndex]; ok && (best == nil || r.Priority < best.Priority || r.Priority == best.Priority && r.LinkIndex < best.LinkIndex) {
			best = &defaults[i]
		}
	}
	switch {
	case best != nil && !usable(best.LinkIndex) && v4.Index != 0 && usable(v4.Index):
		// As releases before this rule chose: a node that ran with the IPv4
		// uplink's IPv6 address keeps it over an upgrade, rather than
		// refusing to start (the default route on an unnumbered link).
		if l, ok := byIndex[v4.Index]; ok {
			return l, fmt.Sprintf("the IPv4 uplink: the IPv6 default route (metric %d) is on %s, which has no usable IPv6 address", best.Priority, byIndex[best.LinkIndex].Name), "", nil
		}
		fallthrough
	case best != nil:
		l = byIndex[best.LinkIndex]
		why = fmt.Sprintf("interface of the IPv6 default route (metric %d)", best.Priority)
		if l.Index != v4.Index && v4.Index != 0 && usable(v4.Index) {
			// Releases before this rule took the IPv4 uplink's address.
			why += fmt.Sprintf("; the IPv4 uplink %s has a usable IPv6 address too, which releases before 2026-12 chose: set nodeAddressV6 to keep that one over an upgrade", v4.Interface)
		}
		return l, why,
			fmt.Sprintf("the IPv6 default route (metric %d) is on %s, which has no usable IPv6 address (%%s); add one, or %s", best.Priority, l.Name, uplink6Hint), nil
	case v4.Index != 0 && usable(v4.Index):
		if l, ok := byIndex[v4.Index]; ok {
			return l, "the IPv4 uplink (there is no IPv6 default route)", "", nil
		}
	}
	i := slices.IndexFunc(links, func(l LinkInfo) bool { return uplinkCandidate(l) && usable(l.Index) })
	if i < 0 {
		return l, "", "", fmt.Errorf("no IPv6 default route and no interface with a usable IPv6 address (usable: %s); %s", addr6List(links, addrs), uplink6Hint)
	}
	return links[i], "first interface with a usable IPv6 address (there is no IPv6 default route)", "", nil
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

// addr6List lists the usable IPv6 addresses with their interfaces.
func addr6List(links []LinkInfo, addrs []Addr6Info) string {
	var s []string
	for _, l := range links {
		for _, a := range addrs {
			if a.LinkIndex == l.Index && uplink6WhyNot(a) == "" {
				s = append(s, fmt.Sprintf("%s on %s", a.Prefix.Addr(), l.Name))
			}
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// DetectUplink6 reads the links, IPv6 addresses and IPv6 default routes of
// the current network namespace and chooses the IPv6 uplink beside the
// IPv4 uplink up (see chooseUplink6).
func DetectUplink6(up Uplink, wantIface string, want netip.Addr) (Uplink6, error) {
	links, addrs, defaults, err := uplink6ReadKernel()
	if err != nil {
		return Uplink6{}, err
	}
	return chooseUplink6(links, addrs, defaults, up, wantIface, want)
}

// uplink6ReadKernel takes the snapshot chooseUplink6 works on.
func uplink6ReadKernel() ([]LinkInfo, []Addr6Info, []RouteInfo, error) {
	nlLinks, err := uplinkDump(netlink.LinkList)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list links: %w", err)
	}
	nlAddrs, err := uplinkDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V6) })
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list IPv6 addresses: %w", err)
	}
	nlRoutes, err := uplinkDump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_V6, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list IPv6 routes: %w", err)
	}
	var addrs []Addr6Info
	for _, a := range nlAddrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || a.IPNet == nil || ip.Is4() || ip.Is4In6() {
			continue
		}
		ones, _ := a.Mask.Size()
		addrs = append(addrs, Addr6Info{LinkIndex: a.LinkIndex, Prefix: netip.PrefixFrom(ip, ones), Global: a.Scope == unix.RT_SCOPE_UNIVERSE, Flags: a.Flags})
	}
	return linkInfos(nlLinks), addrs, uplinkDefaults(nlRoutes), nil
}

// nodeAddress6 is the node's IPv6 uplink while it has an IPv6 pool: the
// configured address, checked, or the detected one (chooseUplink6).
// Missing, it is an error only on a node with peers (bgp.peers,
// peerPrefixes, routeReflectors) and an IPv6 pool whose blocks the other
// nodes may route directly, through this address; a node that runs alone
// routes none elsewhere, and blocks of an IPv6 pool with vxlanMode Always
// go through vxlan.reef, via the node's VTEP link-local. (An IPv6 peer
// without it is checkPeerFamilies' error.) A configured address is checked
// even without an IPv6 pool, and then not used.
func nodeAddress6(cfg Config, up Uplink, log *slog.Logger) (Uplink6, error) {
	v6 := slices.ContainsFunc(cfg.Pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() })
	if !v6 && !cfg.NodeAddressV6.IsValid() {
		return Uplink6{}, nil
	}
	direct6 := slices.ContainsFunc(cfg.Pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() && p.VXLANMode != EncapAlways })
	up6, err := DetectUplink6(up, cfg.Interface, cfg.NodeAddressV6)
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
	if up6.Interface != up.Interface {
		log.Warn("node IPv6 address chosen on another interface than the IPv4 uplink's: other nodes route this node's IPv6 blocks there", "address", up6.Address, "interface", up6.Interface, "uplink", up.Interface, "why", up6.Reason)
		return up6, nil
	}
	log.Info("node IPv6 address chosen", "address", up6.Address, "interface", up6.Interface, "why", up6.Reason)
	return up6, nil
}

// mtu6 is the pods' MTU mtu (DeriveMTU, from the IPv4 uplink) lowered to
// the IPv6 uplink's MTU when that is another interface with a smaller one
// and some IPv6 pool's blocks may go out there unencapsulated (vxlanMode
// other than Always: with Always they go through vxlan.reef over the IPv4
// uplink). A pod has one MTU for both families. A configured mtu wins.
func mtu6(cfg Config, up Uplink, up6 Uplink6, mtu int) int {
	direct6 := slices.ContainsFunc(cfg.Pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() && p.VXLANMode != EncapAlways })
	if cfg.MTU != 0 || !direct6 || up6.Interface == "" || up6.Index == up.Index || up6.MTU <= 0 {
		return mtu
	}
	return min(mtu, up6.MTU)
}

// interfaces are reef status' interface and interface6: the uplink's
// (the IPv6 uplink's on a node with no IPv4 uplink), and the IPv6
// uplink's when that is another interface ("" when they are one).
func interfaces(up Uplink, up6 Uplink6) (iface, iface6 string) {
	iface = up.Interface
	if iface == "" {
		iface = up6.Interface
	}
	if up6.Interface != iface {
		iface6 = up6.Interface
	}
	return iface, iface6
}
