package lab

import (
	"net/netip"
)

// IPv6 beside IPv4 in the ToR lab (AddCrossIPv6): a /64 on each subnet
// and on the laptop's, the router's legs at ::fe (::1 on the laptop's).
var (
	UnderlayCross6 = netip.MustParsePrefix("fd77:a::/64")
	SubnetB6       = netip.MustParsePrefix("fd77:b::/64")
	RouterA6       = netip.MustParseAddr("fd77:a::fe")
	RouterB6       = netip.MustParseAddr("fd77:b::fe")
	LaptopNet6     = netip.MustParsePrefix("2001:db8:5100::/64")
	LaptopAddr6    = netip.MustParseAddr("2001:db8:5100::10")
	RouterLaptop6  = netip.MustParseAddr("2001:db8:5100::1")
)

// CrossAddress6 is the IPv6 address of the node at addr (IPv4) in the
// ToR lab: the last byte of addr in its subnet's /64.
func CrossAddress6(addr netip.Addr) netip.Addr {
	net := UnderlayCross6
	if SubnetB.Contains(addr) {
		net = SubnetB6
	}
	b := net.Addr().As16()
	b[15] = addr.As4()[3]
	return netip.AddrFrom16(b)
}

// RouterLeg6 is the router's IPv6 address on the subnet of a node at
// addr (IPv4).
func RouterLeg6(addr netip.Addr) netip.Addr {
	if SubnetB.Contains(addr) {
		return RouterB6
	}
	return RouterA6
}

// AddCrossIPv6 gives the ToR lab (AddCrossNodes, and AddLaptop if it
// ran) IPv6 beside IPv4: the router's legs, forwarding on it, the laptop
// with a default route through it, and each node its CrossAddress6 on
// eth0 with routes to the other subnet and the laptop's through its
// router leg. Addresses are added without DAD, usable at once. Call it
// before the daemons start, so that they find their IPv6 address.
func (l *Lab) AddCrossIPv6(nodes []*Node) error {
	router, laptop := l.Prefix+"-xr", l.Prefix+"-laptop"
	l.mu.Lock()
	withLaptop := l.laptop
	l.mu.Unlock()
	type step struct {
		netns string
		args  []string
	}
	steps := []step{
		{router, []string{"-6", "addr", "add", netip.PrefixFrom(RouterA6, 64).String(), "dev", "eth0", "nodad"}},
		{router, []string{"-6", "addr", "add", netip.PrefixFrom(RouterB6, 64).String(), "dev", "eth1", "nodad"}},
	}
	if withLaptop {
		steps = append(steps,
			step{router, []string{"-6", "addr", "add", netip.PrefixFrom(RouterLaptop6, 64).String(), "dev", "eth2", "nodad"}},
			step{laptop, []string{"-6", "addr", "add", netip.PrefixFrom(LaptopAddr6, 64).String(), "dev", "eth0", "nodad"}},
			step{laptop, []string{"-6", "route", "add", "default", "via", RouterLaptop6.String()}})
	}
	for _, n := range nodes {
		other, leg := SubnetB6, RouterLeg6(n.Address)
		if SubnetB.Contains(n.Address) {
			other = UnderlayCross6
		}
		steps = append(steps,
			step{n.Netns, []string{"-6", "addr", "add", netip.PrefixFrom(CrossAddress6(n.Address), 64).String(), "dev", "eth0", "nodad"}},
			step{n.Netns, []string{"-6", "route", "replace", other.String(), "via", leg.String()}})
		if withLaptop {
			steps = append(steps, step{n.Netns, []string{"-6", "route", "replace", LaptopNet6.String(), "via", leg.String()}})
		}
	}
	for _, s := range steps {
		if err := l.IP(s.netns, s.args...); err != nil {
			return err
		}
	}
	_, err := l.Run(router, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	return err
}
