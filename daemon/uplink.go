package daemon

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Uplink is the interface and address the node talks to other nodes over.
type Uplink struct {
	Interface string
	Index     int
	Address   netip.Addr
	Prefix    netip.Prefix // Address with the length of its subnet, e.g. 192.168.10.20/24
	MTU       int
	Reason    string // why this one, for the log
}

// LinkInfo is what chooseUplink needs to know of a link.
type LinkInfo struct {
	Index int
	Name  string
	Kind  string // netlink Link.Type(): "bridge", "veth", "device", ...; "loopback" for lo
	Up    bool
	MTU   int
}

// AddrInfo is one address of a link.
type AddrInfo struct {
	LinkIndex int
	Prefix    netip.Prefix // the address with its prefix length
	Secondary bool         // IFA_F_SECONDARY
	Global    bool         // scope universe
}

// RouteInfo is one IPv4 default route of the main table (one per next hop).
type RouteInfo struct {
	LinkIndex int
	Priority  int
}

// uplinkHint tells the operator how to overrule the autodetection.
const uplinkHint = "set nodeAddress or interface in reef's config file (--config; /etc/reef/config.yaml by default)"

// uplinkUsable reports whether a is an address the node can be reached at.
// A /32 is left out because VIPs (kube-vip, keepalived) are added as /32s
// and float between nodes; a secondary address is an extra, not the node's.
func uplinkUsable(a AddrInfo) bool {
	return a.Prefix.Addr().Is4() && a.Global && !a.Secondary && a.Prefix.Bits() < 32
}

// uplinkWhyNot says why no address of a link is usable, listing each.
func uplinkWhyNot(addrs []AddrInfo, index int) string {
	var why []string
	for _, a := range addrs {
		if a.LinkIndex != index {
			continue
		}
		switch {
		case !a.Prefix.Addr().Is4():
			why = append(why, a.Prefix.String()+" is not IPv4")
		case !a.Global:
			why = append(why, a.Prefix.String()+" is not of global scope")
		case a.Secondary:
			why = append(why, a.Prefix.String()+" is secondary")
		case a.Prefix.Bits() == 32:
			why = append(why, a.Prefix.String()+" is a /32 (a VIP?)")
		}
	}
	if len(why) == 0 {
		return "it has no IPv4 address"
	}
	return strings.Join(why, ", ")
}

// uplinkPrimary returns the first usable address of a link: the kernel lists
// the primary address of a subnet first.
func uplinkPrimary(addrs []AddrInfo, index int) (AddrInfo, bool) {
	for _, a := range addrs {
		if a.LinkIndex == index && uplinkUsable(a) {
			return a, true
		}
	}
	return AddrInfo{}, false
}

// chooseUplink picks the uplink from a snapshot of the links, addresses and
// IPv4 default routes. An address or interface the operator configured wins;
// otherwise the interface of the default route with the lowest metric;
// otherwise the first plausible interface.
func chooseUplink(links []LinkInfo, addrs []AddrInfo, defaults []RouteInfo, wantIface string, wantAddr netip.Addr) (Uplink, error) {
	links = slices.SortedFunc(slices.Values(links), func(a, b LinkInfo) int { return cmp.Compare(a.Index, b.Index) })
	byIndex := map[int]LinkInfo{}
	for _, l := range links {
		byIndex[l.Index] = l
	}
	pick := func(l LinkInfo, a AddrInfo, reason string) Uplink {
		if l.Kind == "bridge" {
			reason += "; it is a bridge"
		}
		if !l.Up {
			reason += "; it is down"
		}
		return Uplink{
			Interface: l.Name, Index: l.Index, Address: a.Prefix.Addr(), Prefix: a.Prefix, MTU: l.MTU,
			Reason: fmt.Sprintf("%s on %s: %s", a.Prefix.Addr(), l.Name, reason),
		}
	}

	if wantAddr.IsValid() {
		elsewhere := ""
		for _, a := range addrs {
			l, ok := byIndex[a.LinkIndex]
			switch {
			case !ok || a.Prefix.Addr() != wantAddr:
			case wantIface != "" && l.Name != wantIface:
				elsewhere = l.Name
			default:
				// The operator's choice is honoured even for a /32 or a secondary.
				return pick(l, a, "nodeAddress set in the configuration"), nil
			}
		}
		if elsewhere != "" {
			return Uplink{}, fmt.Errorf("nodeAddress %s is on interface %s, but interface is set to %s; make them agree or leave one out", wantAddr, elsewhere, wantIface)
		}
		return Uplink{}, fmt.Errorf("nodeAddress %s is not on any interface of this node (usable addresses: %s); set nodeAddress to one of them", wantAddr, uplinkList(links, addrs))
	}

	if wantIface != "" {
		i := slices.IndexFunc(links, func(l LinkInfo) bool { return l.Name == wantIface })
		if i < 0 {
			return Uplink{}, fmt.Errorf("interface %s does not exist (usable addresses: %s); set interface to an existing one", wantIface, uplinkList(links, addrs))
		}
		a, ok := uplinkPrimary(addrs, links[i].Index)
		if !ok {
			return Uplink{}, fmt.Errorf("interface %s has no usable IPv4 address (%s); set nodeAddress or another interface", wantIface, uplinkWhyNot(addrs, links[i].Index))
		}
		return pick(links[i], a, "interface set in the configuration"), nil
	}

	var best *RouteInfo
	for i, r := range defaults {
		if _, ok := byIndex[r.LinkIndex]; !ok {
			continue
		}
		if best == nil || r.Priority < best.Priority || r.Priority == best.Priority && r.LinkIndex < best.LinkIndex {
			best = &defaults[i]
		}
	}
	if best != nil {
		l := byIndex[best.LinkIndex]
		a, ok := uplinkPrimary(addrs, l.Index)
		if !ok {
			return Uplink{}, fmt.Errorf("the IPv4 default route (metric %d) is on %s, which has no usable IPv4 address (%s); %s", best.Priority, l.Name, uplinkWhyNot(addrs, l.Index), uplinkHint)
		}
		return pick(l, a, fmt.Sprintf("interface of the default route (metric %d)", best.Priority)), nil
	}

	for _, l := range links {
		if !uplinkCandidate(l) {
			continue
		}
		if a, ok := uplinkPrimary(addrs, l.Index); ok {
			return pick(l, a, "first interface with a usable IPv4 address (there is no IPv4 default route)"), nil
		}
	}
	return Uplink{}, fmt.Errorf("no IPv4 default route and no usable interface; %s", uplinkHint)
}

// uplinkCandidate reports whether the fallback scan may pick l. Bridges
// (docker0, cni0, virbr0) and veths carry addresses of containers or VMs,
// and reef's own devices carry pod addresses: none is the node's.
func uplinkCandidate(l LinkInfo) bool {
	switch {
	case !l.Up, l.Kind == "loopback", l.Name == "lo", l.Kind == "bridge", l.Kind == "veth":
		return false
	case strings.HasPrefix(l.Name, "reef"), strings.HasPrefix(l.Name, "vxlan.reef"):
		return false
	}
	return true
}

// uplinkList lists the usable addresses, to show the operator the choices.
func uplinkList(links []LinkInfo, addrs []AddrInfo) string {
	var s []string
	for _, l := range links {
		for _, a := range addrs {
			if a.LinkIndex == l.Index && uplinkUsable(a) {
				s = append(s, fmt.Sprintf("%s on %s", a.Prefix.Addr(), l.Name))
			}
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// DetectUplink reads the links, IPv4 addresses and IPv4 default routes of the
// current network namespace and chooses the uplink (see chooseUplink).
func DetectUplink(wantIface string, wantAddr netip.Addr) (Uplink, error) {
	links, addrs, defaults, err := uplinkReadKernel()
	if err != nil {
		return Uplink{}, err
	}
	return chooseUplink(links, addrs, defaults, wantIface, wantAddr)
}

// uplinkReadKernel takes the snapshot chooseUplink works on.
func uplinkReadKernel() ([]LinkInfo, []AddrInfo, []RouteInfo, error) {
	nlLinks, err := uplinkDump(netlink.LinkList)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list links: %w", err)
	}
	nlAddrs, err := uplinkDump(func() ([]netlink.Addr, error) { return netlink.AddrList(nil, netlink.FAMILY_V4) })
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list IPv4 addresses: %w", err)
	}
	nlRoutes, err := uplinkDump(func() ([]netlink.Route, error) {
		return netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("list IPv4 routes: %w", err)
	}

	links := linkInfos(nlLinks)
	var addrs []AddrInfo
	for _, a := range nlAddrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		if !ok || a.IPNet == nil {
			continue
		}
		ones, _ := a.Mask.Size()
		addrs = append(addrs, AddrInfo{
			LinkIndex: a.LinkIndex,
			Prefix:    netip.PrefixFrom(ip, ones),
			Secondary: a.Flags&unix.IFA_F_SECONDARY != 0,
			Global:    a.Scope == unix.RT_SCOPE_UNIVERSE,
		})
	}
	return links, addrs, uplinkDefaults(nlRoutes), nil
}

// uplinkDefaults are the default routes among rs, one per next hop.
func uplinkDefaults(rs []netlink.Route) []RouteInfo {
	var defaults []RouteInfo
	for _, r := range rs {
		// Depending on the version, netlink reports the default route's
		// destination as nil or as 0.0.0.0/0 (::/0).
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		if r.Type != unix.RTN_UNICAST {
			continue // blackhole, unreachable: no interface
		}
		if r.LinkIndex > 0 {
			defaults = append(defaults, RouteInfo{LinkIndex: r.LinkIndex, Priority: r.Priority})
		}
		for _, nh := range r.MultiPath {
			defaults = append(defaults, RouteInfo{LinkIndex: nh.LinkIndex, Priority: r.Priority})
		}
	}
	return defaults
}

// uplinkDump retries a netlink dump the kernel interrupted because the table
// changed meanwhile; its partial result could miss the very interface we want.
func uplinkDump[T any](dump func() ([]T, error)) ([]T, error) {
	var err error
	for range 5 {
		var out []T
		if out, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return out, err
		}
	}
	return nil, err
}

// linkInfos is what uplink choice reads of each link.
func linkInfos(nlLinks []netlink.Link) []LinkInfo {
	links := make([]LinkInfo, 0, len(nlLinks))
	for _, l := range nlLinks {
		at := l.Attrs()
		kind := l.Type()
		if at.Flags&net.FlagLoopback != 0 {
			kind = "loopback"
		}
		links = append(links, LinkInfo{Index: at.Index, Name: at.Name, Kind: kind, Up: at.Flags&net.FlagUp != 0, MTU: at.MTU})
	}
	return links
}
