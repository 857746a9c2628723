package lab

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/reefcni/reef/internal/poll"
)

// The outside world of a lab: a router on the underlay and a subnet
// behind it that no pool covers.
var (
	RouterAddr  = netip.MustParseAddr("192.168.77.1") // the router on the underlay
	OutsideNet  = netip.MustParsePrefix("203.0.113.0/24")
	OutsideAddr = netip.MustParseAddr("203.0.113.10") // the server host
)

// Outside is a router namespace on the lab's underlay switch, with a
// server host on a subnet of its own behind it: what a pod reaches when it
// talks to the world beyond its node. Like a real router, it knows nothing
// of the pools unless a test adds a route (Route).
type Outside struct {
	Lab    *Lab
	Router string // netns of the router: eth0 on the underlay, eth1 to the server
	Server string // netns of the server host: eth0, default route via the router
}

// AddOutside creates the router and the server host.
func (l *Lab) AddOutside() (*Outside, error) {
	o := &Outside{Lab: l, Router: l.Prefix + "-router", Server: l.Prefix + "-outside"}
	for _, n := range []string{o.Router, o.Server} {
		if err := l.AddNetns(n); err != nil {
			return nil, err
		}
	}
	peer := l.Prefix + "rt"
	if len(peer) > 15 {
		peer = peer[len(peer)-15:]
	}
	routerSide := netip.PrefixFrom(OutsideNet.Addr().Next(), OutsideNet.Bits()) // 203.0.113.1/24
	steps := []struct {
		netns string
		args  []string
	}{
		{o.Router, []string{"link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", NetnsPath(l.Switch)}},
		{o.Router, []string{"addr", "add", netip.PrefixFrom(RouterAddr, Underlay.Bits()).String(), "dev", "eth0"}},
		{o.Router, []string{"link", "set", "eth0", "up"}},
		{l.Switch, []string{"link", "set", peer, "master", "br0", "up"}},
		{o.Router, []string{"link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", NetnsPath(o.Server)}},
		{o.Router, []string{"addr", "add", routerSide.String(), "dev", "eth1"}},
		{o.Router, []string{"link", "set", "eth1", "up"}},
		{o.Server, []string{"addr", "add", netip.PrefixFrom(OutsideAddr, OutsideNet.Bits()).String(), "dev", "eth0"}},
		{o.Server, []string{"link", "set", "eth0", "up"}},
		{o.Server, []string{"route", "add", "default", "via", routerSide.Addr().String()}},
	}
	for _, s := range steps {
		if err := l.IP(s.netns, s.args...); err != nil {
			return nil, err
		}
	}
	if _, err := l.Run(o.Router, "sysctl", "-qw", "net.ipv4.ip_forward=1"); err != nil {
		return nil, err
	}
	return o, nil
}

// The outside world's IPv6 side (AddIPv6): the underlay's IPv6 subnet,
// the router on it, and the server host's subnet behind it.
var (
	Underlay6    = netip.MustParsePrefix("fd77::/64")
	RouterAddr6  = netip.MustParseAddr("fd77::1")
	OutsideNet6  = netip.MustParsePrefix("fd03:113::/64")
	OutsideAddr6 = netip.MustParseAddr("fd03:113::10")
)

// NodeAddress6 is node n's IPv6 address on the underlay (AddIPv6), or
// for an IPv6-only node on SubnetB its address on SubnetB6
// (AddCrossNodes6).
func NodeAddress6(n *Node) netip.Addr {
	b := Underlay6.Addr().As16()
	if n.opts.IPv6Only && n.opts.SubnetB {
		b = SubnetB6.Addr().As16()
	}
	a4 := n.Address.As4()
	b[15] = a4[3]
	return netip.AddrFrom16(b)
}

// AddIPv6 gives the router, the server host and the nodes IPv6 beside
// IPv4: addresses on the underlay and the server's subnet, forwarding on
// the router, and each node a default route through it (an IPv6-only
// node has its address already). Addresses are added without DAD, so
// they are usable at once.
func (o *Outside) AddIPv6(nodes ...*Node) error {
	addr := func(p netip.Addr, bits int) string { return netip.PrefixFrom(p, bits).String() }
	routerSide := OutsideNet6.Addr().Next()
	type step struct {
		netns string
		args  []string
	}
	steps := []step{
		{o.Router, []string{"-6", "addr", "add", addr(RouterAddr6, Underlay6.Bits()), "dev", "eth0", "nodad"}},
		{o.Router, []string{"-6", "addr", "add", addr(routerSide, OutsideNet6.Bits()), "dev", "eth1", "nodad"}},
		{o.Server, []string{"-6", "addr", "add", addr(OutsideAddr6, OutsideNet6.Bits()), "dev", "eth0", "nodad"}},
		{o.Server, []string{"-6", "route", "add", "default", "via", routerSide.String()}},
	}
	for _, n := range nodes {
		if !n.opts.IPv6Only {
			steps = append(steps, step{n.Netns, []string{"-6", "addr", "add", addr(NodeAddress6(n), Underlay6.Bits()), "dev", "eth0", "nodad"}})
		}
		steps = append(steps, step{n.Netns, []string{"-6", "route", "replace", "default", "via", RouterAddr6.String()}})
	}
	for _, s := range steps {
		if err := o.Lab.IP(s.netns, s.args...); err != nil {
			return err
		}
	}
	_, err := o.Lab.Run(o.Router, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	return err
}

// WaitLinkLocal waits until the router's link-local address on the
// underlay is valid (Lab.WaitLinkLocal).
func (o *Outside) WaitLinkLocal() error { return o.Lab.WaitLinkLocal(o.Router) }

// WaitLinkLocal waits until the link-local address of eth0 in netns is
// valid: it is tentative for a second or two after the link comes up
// (DAD). FRR's bgpd, started there with a session to an IPv6 address,
// needs it for the link-local next hop, and waits for good ("does not have
// a v6 LL address") if it starts before the address is valid.
func (l *Lab) WaitLinkLocal(netns string) error {
	return poll.Until(10*time.Second, func() error {
		out, err := l.Run(netns, "ip", "-6", "addr", "show", "dev", "eth0", "scope", "link")
		if err != nil {
			return err
		}
		if !strings.Contains(out, "fe80:") || strings.Contains(out, "tentative") {
			return fmt.Errorf("the link-local address of eth0 in %s is not valid yet: %s", netns, out)
		}
		return nil
	})
}

// DefaultRoute gives a node a default route through the router, as a
// node's uplink gateway.
func (o *Outside) DefaultRoute(n *Node) error {
	return o.Lab.IP(n.Netns, "route", "replace", "default", "via", RouterAddr.String())
}

// Route tells the router that dst is reached through via: what a network
// that routes a pool without NAT has.
func (o *Outside) Route(dst netip.Prefix, via netip.Addr) error {
	return o.Lab.IP(o.Router, "route", "replace", dst.String(), "via", via.String())
}

// TCPServer is a server in some namespace that answers every connection
// with one line, "you are <peer address>", and remembers the peers it saw:
// the server's own view of who talked to it.
type TCPServer struct {
	Addr netip.AddrPort
	ln   net.Listener

	mu    sync.Mutex
	peers []netip.Addr
	done  chan struct{}
}

// ListenTCP starts a TCPServer on addr (such as "203.0.113.10:8080") in a
// lab namespace. The socket is made in that namespace; this process serves
// it. Close stops it.
func (l *Lab) ListenTCP(netns string, addr netip.AddrPort) (*TCPServer, error) {
	var ln net.Listener
	err := ns.WithNetNSPath(NetnsPath(netns), func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on %s in %s: %w", addr, netns, err)
	}
	s := &TCPServer{Addr: addr, ln: ln, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

func (s *TCPServer) serve() {
	defer close(s.done)
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		peer := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap()
		s.mu.Lock()
		s.peers = append(s.peers, peer)
		s.mu.Unlock()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(c, "you are %s\n", peer)
		c.Close()
	}
}

// Peers returns the peer addresses of every connection so far.
func (s *TCPServer) Peers() []netip.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.Addr(nil), s.peers...)
}

// Close stops the server.
func (s *TCPServer) Close() error {
	err := s.ln.Close()
	<-s.done
	return err
}

// AskTCP connects from a lab namespace to a TCPServer at dst and returns
// the address the server says it saw: proof that the reply came back.
func (l *Lab) AskTCP(netns string, dst netip.AddrPort) (netip.Addr, error) {
	var c net.Conn
	err := ns.WithNetNSPath(NetnsPath(netns), func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp", dst.String(), 3*time.Second)
		return err
	})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("connect from %s to %s: %w", netns, dst, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return netip.Addr{}, fmt.Errorf("read the answer of %s in %s: %w", dst, netns, err)
	}
	seen, ok := strings.CutPrefix(strings.TrimSpace(line), "you are ")
	if !ok {
		return netip.Addr{}, errors.New("unexpected answer " + line)
	}
	return netip.ParseAddr(seen)
}
