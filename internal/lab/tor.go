package lab

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The ToR lab (docs/bgp.md, "Routers"): the router of AddCrossRouter runs
// BIRD 2 or FRR with eBGP to every node (bgp.externalPeers), and a third
// leg to a subnet of its own with a "laptop" behind it, an operator's host
// that reaches pods by their addresses.
var (
	LaptopNet    = netip.MustParsePrefix("198.51.100.0/24")
	LaptopAddr   = netip.MustParseAddr("198.51.100.10")
	RouterLaptop = netip.MustParseAddr("198.51.100.1") // the router's leg on LaptopNet
)

// RouterASN is the router's AS in the ToR lab; the nodes keep reef's 64512.
const RouterASN = 65000

// RouterLeg is the router's address on the subnet of a node at addr: the
// external peer that node lists.
func RouterLeg(addr netip.Addr) netip.Addr {
	if SubnetB.Contains(addr) {
		return RouterB
	}
	return RouterA
}

// AddLaptop gives the router of AddCrossRouter a leg on LaptopNet, with a
// laptop namespace behind it (default route via the router), and gives
// every node, those added later too, a route to LaptopNet through the
// router. It returns the laptop's namespace.
func (l *Lab) AddLaptop() (string, error) {
	router, laptop := l.Prefix+"-xr", l.Prefix+"-laptop"
	if err := l.AddNetns(laptop); err != nil {
		return "", err
	}
	for _, s := range []struct {
		netns string
		args  []string
	}{
		{router, []string{"link", "add", "eth2", "type", "veth", "peer", "name", "eth0", "netns", NetnsPath(laptop)}},
		{router, []string{"addr", "add", netip.PrefixFrom(RouterLaptop, LaptopNet.Bits()).String(), "dev", "eth2"}},
		{router, []string{"link", "set", "eth2", "up"}},
		{laptop, []string{"addr", "add", netip.PrefixFrom(LaptopAddr, LaptopNet.Bits()).String(), "dev", "eth0"}},
		{laptop, []string{"link", "set", "eth0", "up"}},
		{laptop, []string{"link", "set", "lo", "up"}},
		{laptop, []string{"route", "add", "default", "via", RouterLaptop.String()}},
	} {
		if err := l.IP(s.netns, s.args...); err != nil {
			return "", err
		}
	}
	l.mu.Lock()
	l.laptop = true
	nodes := append([]*Node(nil), l.nodes...)
	l.mu.Unlock()
	for _, n := range nodes {
		if err := l.IP(n.Netns, "route", "replace", LaptopNet.String(), "via", RouterLeg(n.Address).String()); err != nil {
			return "", err
		}
	}
	return laptop, nil
}

// ToRBirdConfig is the BIRD 2 configuration of a ToR for reef nodes
// (docs/bgp.md shows it, and a test checks that the docs show exactly
// this): eBGP from asn to each node in nodes (AS nodeASN), directly
// connected; from the nodes, only blocks of pool (prefixes of exactly
// blockSize bits inside it) are taken, with the node as next hop, and
// exported to the kernel; to the nodes, nothing (reef imports nothing from
// routers). hold is the BGP hold time (keepalive: a third of it).
func ToRBirdConfig(self netip.Addr, asn uint32, nodes []netip.Addr, nodeASN uint32, pool netip.Prefix, blockSize int, hold time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# A BIRD 2 ToR for reef nodes (docs/bgp.md).
router id %[1]s;
log stderr { info, remote, warning, error, auth, fatal, bug };

protocol device {
  scan time 10;
}

# The pod blocks the nodes announce go into the kernel: hosts behind this
# router reach pods by their addresses.
protocol kernel {
  ipv4 {
    import none;
    export where source = RTS_BGP;
  };
}

# A reef node announces its confirmed blocks of the pool, nothing else.
filter reef_blocks {
  if net ~ [ %[2]s{%[3]d,%[3]d} ] then accept;
  reject;
}

template bgp reef_node {
  local as %[4]d;
  direct;                       # the nodes share a subnet with the router
  hold time %[5]d;
  keepalive time %[6]d;
  connect retry time 5;
  error wait time 1, 10;
  graceful restart on;          # keep a node's blocks while reef restarts
  ipv4 {
    import filter reef_blocks;
    export none;                # reef takes nothing from its routers
    receive limit %[7]d action restart;
  };
}
`, self, pool, blockSize, asn, int(hold/time.Second), max(1, int(hold/time.Second)/3), 1<<(blockSize-pool.Bits()))
	for i, n := range nodes {
		fmt.Fprintf(&b, "\nprotocol bgp node%d from reef_node {\n  neighbor %s as %d;\n}\n", i+1, n, nodeASN)
	}
	return b.String()
}

// ToRBirdHostile is a ToR gone wrong: on top of ToRBirdConfig, it sends
// the nodes everything it has (every node's blocks, now with itself as
// next hop) and a set of static routes that would steal traffic if a node
// took them: a default route, the pool, a node's address, a /32 inside a
// block and a block nobody owns.
func ToRBirdHostile(base string, pool netip.Prefix, node netip.Addr) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(base, "    export none;                # reef takes nothing from its routers\n", "    export all;\n"))
	b.WriteString("\nprotocol static hostile {\n  ipv4;\n")
	for _, r := range hostileRoutes(pool, node) {
		fmt.Fprintf(&b, "  route %s blackhole;\n", r)
	}
	b.WriteString("}\n")
	return b.String()
}

// hostileRoutes are the routes a hostile ToR sends besides what it
// re-advertises: a default route, the pool, a node's /32, a /32 inside a
// block and a block nobody owns (the pool's x.y.255.192/26).
func hostileRoutes(pool netip.Prefix, node netip.Addr) []netip.Prefix {
	p := pool.Addr().As4()
	return []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"),
		pool,
		netip.PrefixFrom(node, 32),
		netip.PrefixFrom(pool.Addr().Next().Next().Next().Next().Next(), 32),
		netip.PrefixFrom(netip.AddrFrom4([4]byte{p[0], p[1], 255, 192}), 26),
	}
}

// ToRFRRConfig is the FRR configuration of the same ToR (docs/bgp.md):
// the blocks of pool from the nodes, nothing to them, a prefix limit on
// each session, graceful restart.
func ToRFRRConfig(self netip.Addr, asn uint32, nodes []netip.Addr, nodeASN uint32, pool netip.Prefix, blockSize int, hold time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, `! An FRR ToR for reef nodes (docs/bgp.md).
frr defaults traditional
hostname reef-tor
log stdout informational
!
ip prefix-list reef-blocks seq 10 permit %[2]s ge %[3]d le %[3]d
!
route-map reef-in permit 10
 match ip address prefix-list reef-blocks
exit
!
route-map reef-out deny 10
exit
!
router bgp %[4]d
 bgp router-id %[1]s
 bgp graceful-restart
 no bgp default ipv4-unicast
 neighbor reef peer-group
 neighbor reef remote-as %[8]d
 neighbor reef timers %[6]d %[5]d
`, self, pool, blockSize, asn, int(hold/time.Second), max(1, int(hold/time.Second)/3), 1<<(blockSize-pool.Bits()), nodeASN)
	for _, n := range nodes {
		fmt.Fprintf(&b, " neighbor %s peer-group reef\n", n)
	}
	fmt.Fprintf(&b, ` !
 address-family ipv4 unicast
  neighbor reef activate
  neighbor reef route-map reef-in in
  neighbor reef route-map reef-out out
  neighbor reef maximum-prefix %d
 exit-address-family
exit
!
`, 1<<(blockSize-pool.Bits()))
	return b.String()
}

// A ToR is the lab router's BGP daemon: BIRD or FRR.
type ToR interface {
	Log() string
	// Hostile makes the router send the nodes everything it has and the
	// routes of ToRBirdHostile.
	Hostile(pool netip.Prefix, node netip.Addr) error
}

// birdToR is BIRD as the ToR.
type birdToR struct {
	*Bird
	base string
}

func (b *birdToR) Hostile(pool netip.Prefix, node netip.Addr) error {
	if err := os.WriteFile(b.Conf, []byte(ToRBirdHostile(b.base, pool, node)), 0o644); err != nil {
		return err
	}
	_, err := b.Birdc("configure")
	return err
}

// frrToR is FRR as the ToR.
type frrToR struct{ *FRR }

func (f *frrToR) Hostile(pool netip.Prefix, node netip.Addr) error {
	// BGP networks without routes behind them (no staticd runs here).
	cmds := []string{"route-map reef-out permit 5", "exit", fmt.Sprintf("router bgp %d", RouterASN), "no bgp network import-check", "address-family ipv4 unicast"}
	for _, r := range hostileRoutes(pool, node) {
		cmds = append(cmds, "network "+r.String())
	}
	args := []string{"--vty_socket", f.Dir, "-c", "configure terminal"}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	if out, err := exec.Command(Vtysh, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("vtysh %v: %v: %s", cmds, err, out)
	}
	_, err := f.Vtysh("clear bgp ipv4 unicast * soft out")
	return err
}

// StartToR runs kind ("bird" or "frr") in the router of AddCrossRouter
// as the ToR of nodes, for the lab's default pool; password, if set, is
// the TCP MD5 key of every session.
func (l *Lab) StartToR(kind string, nodes []netip.Addr, password string) (ToR, error) {
	return l.StartToRIn(kind, l.Prefix+"-xr", RouterA, nodes, password)
}

// StartToRIn runs kind as the ToR of nodes in the namespace router, whose
// router ID is self.
func (l *Lab) StartToRIn(kind, router string, self netip.Addr, nodes []netip.Addr, password string) (ToR, error) {
	dir := filepath.Join(l.Dir, "tor-"+kind)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pool := netip.MustParsePrefix("10.244.0.0/16")
	switch kind {
	case "bird":
		if _, err := os.Stat(BirdBinary); err != nil {
			return nil, fmt.Errorf("lab: BIRD 2 not installed (make deps-test installs bird2): %w", err)
		}
		conf := ToRBirdConfig(self, RouterASN, nodes, 64512, pool, 26, 3*time.Second)
		if password != "" {
			conf = strings.Replace(conf, "  direct; ", fmt.Sprintf("  password %q;\n  direct; ", password), 1)
		}
		b := &Bird{Lab: l, Name: "tor-bird", Netns: router, Address: self, Conf: filepath.Join(dir, "bird.conf"), Sock: filepath.Join(dir, "bird.ctl")}
		if err := os.WriteFile(b.Conf, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		if err := b.Start(); err != nil {
			return nil, err
		}
		return &birdToR{Bird: b, base: conf}, nil
	case "frr":
		if _, err := os.Stat(filepath.Join(FRRDir, "bgpd")); err != nil {
			return nil, fmt.Errorf("lab: FRR not installed (make deps-test installs frr): %w", err)
		}
		f := &FRR{Lab: l, Name: "tor-frr", Netns: router, Address: self, Dir: dir, Conf: filepath.Join(dir, "frr.conf")}
		conf := ToRFRRConfig(self, RouterASN, nodes, 64512, pool, 26, 3*time.Second)
		if password != "" {
			conf = strings.Replace(conf, " neighbor reef remote-as", fmt.Sprintf(" neighbor reef password %s\n neighbor reef remote-as", password), 1)
		}
		if err := os.WriteFile(f.Conf, []byte(conf), 0o644); err != nil {
			return nil, err
		}
		if err := f.Start(); err != nil {
			return nil, err
		}
		return &frrToR{FRR: f}, nil
	}
	return nil, fmt.Errorf("lab: no ToR of kind %q (bird, frr)", kind)
}
