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
