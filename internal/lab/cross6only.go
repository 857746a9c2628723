package lab

import (
	"net/netip"
)

// RouterUnderlay6 is the cross router's leg on Underlay6, the IPv6-only
// nodes' subnet A (AddCrossNodes6); its leg on SubnetB6 is RouterB6.
var RouterUnderlay6 = netip.MustParseAddr("fd77::fe")

// routeAcross6 gives an IPv6-only node on one subnet a route to the
// other's IPv6 subnet through the router, once the router exists.
func (l *Lab) routeAcross6(netns string, onB bool) error {
	l.mu.Lock()
	cross := l.cross
	l.mu.Unlock()
	if !cross {
		return nil
	}
	other, via := SubnetB6, RouterUnderlay6
	if onB {
		other, via = Underlay6, RouterB6
	}
	return l.IP(netns, "-6", "route", "replace", other.String(), "via", via.String())
}

// AddCrossNodes6 is AddCrossNodes for IPv6-only nodes: the router with
// IPv6 legs on Underlay6 (RouterUnderlay6) and SubnetB6 (RouterB6), then
// a1 and a2 on Underlay6 and b1 on SubnetB6, with no IPv4 address, meshed
// over IPv6 (peers and voters by IPv6 address, both subnets in
// peerPrefixes). opts carries the rest; the daemons are not started.
func (l *Lab) AddCrossNodes6(opts NodeOptions) ([]*Node, error) {
	router, err := l.AddCrossRouter()
	if err != nil {
		return nil, err
	}
	for _, s := range [][]string{
		{"-6", "addr", "add", netip.PrefixFrom(RouterUnderlay6, Underlay6.Bits()).String(), "dev", "eth0", "nodad"},
		{"-6", "addr", "add", netip.PrefixFrom(RouterB6, SubnetB6.Bits()).String(), "dev", "eth1", "nodad"},
	} {
		if err := l.IP(router, s...); err != nil {
			return nil, err
		}
	}
	if _, err := l.Run(router, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1"); err != nil {
		return nil, err
	}
	onB := []bool{false, false, true}
	var addrs []netip.Addr
	for i, a := range []netip.Addr{NodeAddress(0), NodeAddress(1), NodeAddressB(0)} {
		addrs = append(addrs, NodeAddress6(&Node{Address: a, opts: NodeOptions{IPv6Only: true, SubnetB: onB[i]}}))
	}
	var nodes []*Node
	for i, name := range []string{"a1", "a2", "b1"} {
		o := opts
		o.IPv6Only, o.SubnetB = true, onB[i]
		o.Peers, o.PeerPrefixes = nil, []netip.Prefix{Underlay6, SubnetB6}
		for j, a := range addrs {
			if j != i {
				o.Peers = append(o.Peers, a)
			}
		}
		n, err := l.AddNode(name, o)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}
