package lab

import (
	"fmt"
	"net/netip"
	"strings"
)

// A second underlay subnet, joined to the first by a router that knows
// nothing of the pod network: nodes on it are in "another subnet" for
// vxlanMode CrossSubnet.
var (
	SubnetB = netip.MustParsePrefix("192.168.78.0/24")
	RouterA = netip.MustParseAddr("192.168.77.254") // the router on Underlay
	RouterB = netip.MustParseAddr("192.168.78.254") // the router on SubnetB
)

// NodeAddressB is the address of the i-th node (0-based) on SubnetB.
func NodeAddressB(i int) netip.Addr {
	a := SubnetB.Addr()
	for j := 0; j < 10+i+1; j++ {
		a = a.Next()
	}
	return a
}

// AddCrossRouter creates bridge br1 for SubnetB in the switch namespace
// and a router namespace with a leg on each subnet and forwarding on, and
// gives every node a route to the other subnet through it. Call it before
// adding nodes on SubnetB.
func (l *Lab) AddCrossRouter() (string, error) {
	router := l.Prefix + "-xr"
	if err := l.IP(l.Switch, "link", "add", "br1", "type", "bridge"); err != nil {
		return "", err
	}
	if err := l.IP(l.Switch, "link", "set", "br1", "up"); err != nil {
		return "", err
	}
	if err := l.AddNetns(router); err != nil {
		return "", err
	}
	for i, leg := range []struct {
		bridge string
		addr   netip.Addr
	}{{"br0", RouterA}, {"br1", RouterB}} {
		dev := []string{"eth0", "eth1"}[i]
		peer := l.Prefix + []string{"xa", "xb"}[i]
		if len(peer) > 15 {
			peer = peer[len(peer)-15:]
		}
		for _, s := range [][]string{
			{"link", "add", dev, "type", "veth", "peer", "name", peer, "netns", NetnsPath(l.Switch)},
			{"addr", "add", netip.PrefixFrom(leg.addr, 24).String(), "dev", dev},
			{"link", "set", dev, "up"},
		} {
			if err := l.IP(router, s...); err != nil {
				return "", err
			}
		}
		if err := l.IP(l.Switch, "link", "set", peer, "master", leg.bridge, "up"); err != nil {
			return "", err
		}
	}
	if _, err := l.Run(router, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return "", err
	}
	l.mu.Lock()
	l.cross = true
	nodes := append([]*Node(nil), l.nodes...)
	l.mu.Unlock()
	for _, n := range nodes {
		if err := l.routeAcross(n.Netns, SubnetB.Contains(n.Address)); err != nil {
			return "", err
		}
	}
	return router, nil
}

// routeAcross gives a node on one subnet a route to the other through the
// router, once the router exists.
func (l *Lab) routeAcross(netns string, onB bool) error {
	l.mu.Lock()
	cross, laptop := l.cross, l.laptop
	l.mu.Unlock()
	if !cross {
		return nil
	}
	other, via := SubnetB, RouterA
	if onB {
		other, via = Underlay, RouterB
	}
	if err := l.IP(netns, "route", "replace", other.String(), "via", via.String()); err != nil {
		return err
	}
	if laptop {
		return l.IP(netns, "route", "replace", LaptopNet.String(), "via", via.String())
	}
	return nil
}

// AddCrossNodes makes the lab's two-subnet cluster: the router, then a1 and
// a2 on Underlay and b1 on SubnetB, meshed over BGP (every node lists the
// others and accepts both subnets). opts carries the rest (Extra,
// BGPExtra, ReconcileInterval, RouterASN: the router as every node's
// external peer); the daemons are not started.
func (l *Lab) AddCrossNodes(opts NodeOptions) ([]*Node, error) {
	if _, err := l.AddCrossRouter(); err != nil {
		return nil, err
	}
	addrs := []netip.Addr{NodeAddress(0), NodeAddress(1), NodeAddressB(0)}
	var nodes []*Node
	for i, name := range []string{"a1", "a2", "b1"} {
		var peers []string
		for j, a := range addrs {
			if j != i {
				peers = append(peers, a.String())
			}
		}
		o := opts
		o.BGP = fmt.Sprintf("  keepaliveTime: 1s\n  holdTime: 3s\n  peers: [%s]\n  peerPrefixes: [%s, %s]\n  voters: %s\n",
			strings.Join(peers, ", "), Underlay, SubnetB, addrList(addrs))
		if opts.RouterASN != 0 {
			o.BGP += fmt.Sprintf("  externalPeers:\n    - address: %s\n      asn: %d\n", RouterLeg(addrs[i]), opts.RouterASN)
			if opts.RouterPassword != "" {
				o.BGP += fmt.Sprintf("      password: %q\n", opts.RouterPassword)
			}
			o.BGP += opts.RouterExtra
		}
		o.BGP += opts.BGPExtra
		o.SubnetB = i == 2
		n, err := l.AddNode(name, o)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}
