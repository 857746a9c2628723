package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// ToRPool is a pool whose blocks a ToR takes from the nodes: the
// prefixes of exactly BlockSize bits inside CIDR.
type ToRPool struct {
	CIDR      netip.Prefix
	BlockSize int
}

// DefaultToRPools are the lab's default pool, 10.244.0.0/16 of /26.
var DefaultToRPools = []ToRPool{{netip.MustParsePrefix("10.244.0.0/16"), 26}}

// torMaxLimit caps a ToR's prefix limit per family: an IPv6 pool has
// more blocks than a node will ever own (2^66 /122s in a /56).
const torMaxLimit = 1 << 16

// torFamily is one address family of a ToR's sessions: BIRD's channel
// name, the filters' names, and the pools of that family.
type torFamily struct {
	name, filter, frrList string
	pools                 []ToRPool
}

// torFamilies sorts pools by family: IPv4, then IPv6; a family without
// pools is left out.
func torFamilies(pools []ToRPool) []torFamily {
	fams := []torFamily{{name: "ipv4", filter: "reef_blocks", frrList: "reef-blocks"}, {name: "ipv6", filter: "reef_blocks6", frrList: "reef-blocks6"}}
	for _, p := range pools {
		i := 0
		if p.CIDR.Addr().Is6() {
			i = 1
		}
		fams[i].pools = append(fams[i].pools, p)
	}
	return slices.DeleteFunc(fams, func(f torFamily) bool { return len(f.pools) == 0 })
}

// limit is the prefix limit of a family: its pools' blocks, the most one
// node may own, at most torMaxLimit.
func (f torFamily) limit() int {
	n := 0
	for _, p := range f.pools {
		n += 1 << min(p.BlockSize-p.CIDR.Bits(), 16)
	}
	return min(n, torMaxLimit)
}

// ToRBirdConfig is the BIRD 2 configuration of a ToR for reef nodes
// (docs/bgp.md shows it, and a test checks that the docs show exactly
// this): eBGP from asn to each node in nodes (AS nodeASN), directly
// connected, over the nodes' addresses (IPv4, or IPv6 for IPv6-only
// nodes; self is the router ID, 32 bits either way); from the nodes, only blocks
// of pools (prefixes of exactly their block size inside them) are taken,
// IPv4 ones in the ipv4 channel, IPv6 ones in an ipv6 channel of the
// same session (next hop the node's IPv6 address), and exported to the
// kernel; to the nodes, nothing (reef imports nothing from routers). hold
// is the BGP hold time (keepalive: a third of it).
func ToRBirdConfig(self netip.Addr, asn uint32, nodes []netip.Addr, nodeASN uint32, pools []ToRPool, hold time.Duration) string {
	fams := torFamilies(pools)
	var b strings.Builder
	fmt.Fprintf(&b, `# A BIRD 2 ToR for reef nodes (docs/bgp.md).
router id %s;
log stderr { info, remote, warning, error, auth, fatal, bug };

protocol device {
  scan time 10;
}

# The pod blocks the nodes announce go into the kernel: hosts behind this
# router reach pods by their addresses.
`, self)
	for _, f := range fams {
		fmt.Fprintf(&b, `protocol kernel {
  %s {
    import none;
    export where source = RTS_BGP;
  };
}

`, f.name)
	}
	what := "the pool"
	if len(pools) > 1 {
		what = "the pools"
	}
	fmt.Fprintf(&b, "# A reef node announces its confirmed blocks of %s, nothing else.\n", what)
	for _, f := range fams {
		var set []string
		for _, p := range f.pools {
			set = append(set, fmt.Sprintf("%s{%d,%d}", p.CIDR, p.BlockSize, p.BlockSize))
		}
		fmt.Fprintf(&b, `filter %s {
  if net ~ [ %s ] then accept;
  reject;
}
`, f.filter, strings.Join(set, ", "))
	}
	fmt.Fprintf(&b, `
template bgp reef_node {
  local as %d;
  direct;                       # the nodes share a subnet with the router
  hold time %d;
  keepalive time %d;
  connect retry time 5;
  error wait time 1, 10;
  graceful restart on;          # keep a node's blocks while reef restarts
`, asn, int(hold/time.Second), max(1, int(hold/time.Second)/3))
	for _, f := range fams {
		comment := ""
		if f.name == "ipv6" {
			comment = "                        # next hop: the node's nodeAddressV6"
		}
		fmt.Fprintf(&b, `  %s {%s
    import filter %s;
    export none;                # reef takes nothing from its routers
    receive limit %d action restart;
  };
`, f.name, comment, f.filter, f.limit())
	}
	b.WriteString("}\n")
	for i, n := range nodes {
		fmt.Fprintf(&b, "\nprotocol bgp node%d from reef_node {\n  neighbor %s as %d;\n}\n", i+1, n, nodeASN)
	}
	return b.String()
}

// ToRBirdHostile is a ToR gone wrong: on top of ToRBirdConfig, it sends
// the nodes everything it has (every node's blocks, now with itself as
// next hop) and static routes that would steal traffic if a node took
// them (HostileRoutes), each in the channel of its family.
func ToRBirdHostile(base string, routes []netip.Prefix) string {
	var b strings.Builder
	b.WriteString(strings.ReplaceAll(base, "    export none;                # reef takes nothing from its routers\n", "    export all;\n"))
	for _, fam := range []string{"ipv4", "ipv6"} {
		var rs []netip.Prefix
		for _, r := range routes {
			if r.Addr().Is4() == (fam == "ipv4") {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\nprotocol static hostile_%s {\n  %s;\n", fam, fam)
		for _, r := range rs {
			fmt.Fprintf(&b, "  route %s blackhole;\n", r)
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// HostileRoutes are the routes a hostile ToR sends besides what it
// re-advertises, of the pool's family: a default route, the pool, a
// node's address (node, of the pool's family), an address inside a block
// and the pool's last block, which nobody owns in the lab.
func HostileRoutes(pool ToRPool, node netip.Addr) []netip.Prefix {
	bits := pool.CIDR.Addr().BitLen()
	unspecified := netip.IPv4Unspecified()
	if bits == 128 {
		unspecified = netip.IPv6Unspecified()
	}
	inside := pool.CIDR.Addr()
	for range 5 {
		inside = inside.Next()
	}
	return []netip.Prefix{
		netip.PrefixFrom(unspecified, 0),
		pool.CIDR,
		netip.PrefixFrom(node, bits),
		netip.PrefixFrom(inside, bits),
		netip.PrefixFrom(lastAddr(pool.CIDR), pool.BlockSize).Masked(),
	}
}

// lastAddr is the last address of p: every bit past the prefix set.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 1 << (7 - i%8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// ToRFRRConfig is the FRR configuration of the same ToR (docs/bgp.md):
// the blocks of pools from the nodes, each family in its address family
// of the same session, nothing to them, a prefix limit on each, graceful
// restart.
func ToRFRRConfig(self netip.Addr, asn uint32, nodes []netip.Addr, nodeASN uint32, pools []ToRPool, hold time.Duration) string {
	fams := torFamilies(pools)
	var b strings.Builder
	b.WriteString(`! An FRR ToR for reef nodes (docs/bgp.md).
frr defaults traditional
hostname reef-tor
log stdout informational
!
`)
	for _, f := range fams {
		for i, p := range f.pools {
			fmt.Fprintf(&b, "%s prefix-list %s seq %d permit %s ge %d le %d\n", strings.TrimSuffix(f.name, "v4"), f.frrList, 10*(i+1), p.CIDR, p.BlockSize, p.BlockSize)
		}
	}
	b.WriteString("!\n")
	for _, f := range fams {
		seq := 10
		if f.name == "ipv6" {
			seq = 20
		}
		fmt.Fprintf(&b, "route-map reef-in permit %d\n match %s address prefix-list %s\nexit\n!\n", seq, strings.TrimSuffix(f.name, "v4"), f.frrList)
	}
	fmt.Fprintf(&b, `route-map reef-out deny 10
exit
!
router bgp %d
 bgp router-id %s
 bgp graceful-restart
 no bgp default ipv4-unicast
 neighbor reef peer-group
 neighbor reef remote-as %d
 neighbor reef timers %d %d
`, asn, self, nodeASN, max(1, int(hold/time.Second)/3), int(hold/time.Second))
	for _, n := range nodes {
		fmt.Fprintf(&b, " neighbor %s peer-group reef\n", n)
	}
	for _, f := range fams {
		fmt.Fprintf(&b, ` !
 address-family %s unicast
  neighbor reef activate
  neighbor reef route-map reef-in in
  neighbor reef route-map reef-out out
  neighbor reef maximum-prefix %d
 exit-address-family
`, f.name, f.limit())
	}
	b.WriteString("exit\n!\n")
	return b.String()
}

// A ToR is the lab router's BGP daemon: BIRD or FRR.
type ToR interface {
	Log() string
	// Hostile makes the router send the nodes everything it has and
	// routes (HostileRoutes).
	Hostile(routes []netip.Prefix) error
	// NextHops are the next hops of the router's BGP paths to exactly
	// prefix, one per path, sorted.
	NextHops(prefix netip.Prefix) ([]netip.Addr, error)
	// Multipath makes the router install equal BGP paths from several
	// nodes as one ECMP route (BIRDMultipath, FRRMultipath).
	Multipath() error
	// BFDSessions are the router's BFD sessions by node address: up,
	// down, init or admindown (bfd.go).
	BFDSessions() (map[netip.Addr]string, error)
	// Session is the router's BGP session with a node.
	Session(node netip.Addr) (ToRSession, error)
	// PathsTo are the router's BGP paths to exactly prefix, sorted by node.
	PathsTo(prefix netip.Prefix) ([]ToRPath, error)
}

// BIRDMultipath is what Multipath adds to each kernel protocol of
// ToRBirdConfig (docs/bgp.md, "Services").
const BIRDMultipath = "  merge paths on;              # equal paths from several nodes: one ECMP route\n"

// FRRMultipath is what Multipath adds to each address family of
// ToRFRRConfig (docs/bgp.md, "Services").
const FRRMultipath = "maximum-paths 8"

func (b *birdToR) Multipath() error {
	const kernelEnd = "    export where source = RTS_BGP;\n  };\n"
	if !strings.Contains(b.base, kernelEnd) {
		return fmt.Errorf("lab: BIRD's ToR config has no kernel protocol to merge paths in")
	}
	b.base = strings.ReplaceAll(b.base, kernelEnd, kernelEnd+BIRDMultipath)
	if err := os.WriteFile(b.Conf, []byte(b.base), 0o644); err != nil {
		return err
	}
	_, err := b.Birdc("configure")
	return err
}

func (f *frrToR) Multipath() error {
	args := []string{"--vty_socket", f.Dir, "-c", "configure terminal", "-c", fmt.Sprintf("router bgp %d", RouterASN)}
	for _, fam := range []string{"ipv4", "ipv6"} {
		args = append(args, "-c", "address-family "+fam+" unicast", "-c", FRRMultipath, "-c", "exit-address-family")
	}
	if out, err := exec.Command(Vtysh, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("vtysh %v: %v: %s", args, err, out)
	}
	return nil
}

// birdToR is BIRD as the ToR.
type birdToR struct {
	*Bird
	base string
}

func (b *birdToR) Hostile(routes []netip.Prefix) error {
	if err := os.WriteFile(b.Conf, []byte(ToRBirdHostile(b.base, routes)), 0o644); err != nil {
		return err
	}
	_, err := b.Birdc("configure")
	return err
}

// frrToR is FRR as the ToR.
type frrToR struct{ *FRR }

func (b *birdToR) NextHops(prefix netip.Prefix) ([]netip.Addr, error) {
	table := "master4"
	if prefix.Addr().Is6() {
		table = "master6"
	}
	paths, err := b.Paths(table)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, p := range paths {
		if p.Net == prefix.String() {
			out = append(out, p.NextHop)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out, nil
}

func (f *frrToR) NextHops(prefix netip.Prefix) ([]netip.Addr, error) {
	fam := "ipv4"
	if prefix.Addr().Is6() {
		fam = "ipv6"
	}
	out, err := f.Vtysh(fmt.Sprintf("show bgp %s unicast %s json", fam, prefix))
	if err != nil {
		return nil, err
	}
	var r struct {
		Paths []struct {
			Nexthops []struct {
				IP string `json:"ip"`
			} `json:"nexthops"`
		} `json:"paths"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		return nil, fmt.Errorf("show bgp %s unicast %s json: %v: %s", fam, prefix, err, out)
	}
	var hops []netip.Addr
	for _, p := range r.Paths {
		if len(p.Nexthops) > 0 {
			a, err := netip.ParseAddr(p.Nexthops[0].IP)
			if err != nil {
				return nil, fmt.Errorf("show bgp %s unicast %s json: next hop %q: %v", fam, prefix, p.Nexthops[0].IP, err)
			}
			hops = append(hops, a)
		}
	}
	slices.SortFunc(hops, netip.Addr.Compare)
	return hops, nil
}

func (f *frrToR) Hostile(routes []netip.Prefix) error {
	// BGP networks without routes behind them (no staticd runs here).
	cmds := []string{"route-map reef-out permit 5", "exit", fmt.Sprintf("router bgp %d", RouterASN), "no bgp network import-check"}
	for _, fam := range []string{"ipv4", "ipv6"} {
		cmds = append(cmds, "address-family "+fam+" unicast")
		for _, r := range routes {
			if r.Addr().Is4() == (fam == "ipv4") {
				cmds = append(cmds, "network "+r.String())
			}
		}
		cmds = append(cmds, "exit-address-family")
	}
	args := []string{"--vty_socket", f.Dir, "-c", "configure terminal"}
	for _, c := range cmds {
		args = append(args, "-c", c)
	}
	if out, err := exec.Command(Vtysh, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("vtysh %v: %v: %s", cmds, err, out)
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		if _, err := f.Vtysh("clear bgp " + fam + " unicast * soft out"); err != nil {
			return err
		}
	}
	return nil
}

// StartToR runs kind ("bird" or "frr") in the router of AddCrossRouter
// as the ToR of nodes, for the blocks of pools (DefaultToRPools: the
// lab's default pool); password, if set, is the TCP MD5 key of every
// session.
func (l *Lab) StartToR(kind string, nodes []netip.Addr, pools []ToRPool, password string) (ToR, error) {
	return l.StartToRIn(kind, l.Prefix+"-xr", RouterA, nodes, pools, password)
}

// StartToRIn runs kind as the ToR of nodes in the namespace router, whose
// router ID is self.
func (l *Lab) StartToRIn(kind, router string, self netip.Addr, nodes []netip.Addr, pools []ToRPool, password string) (ToR, error) {
	return l.StartToRWith(kind, router, self, nodes, pools, ToROptions{Password: password})
}

// StartToRWith is StartToRIn with the options of bfd.go: the hold time,
// BFD, graceful shutdown.
func (l *Lab) StartToRWith(kind, router string, self netip.Addr, nodes []netip.Addr, pools []ToRPool, o ToROptions) (ToR, error) {
	password := o.Password
	dir := filepath.Join(l.Dir, "tor-"+kind)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	switch kind {
	case "bird":
		if _, err := os.Stat(BirdBinary); err != nil {
			return nil, fmt.Errorf("lab: BIRD 2 not installed (make deps-test installs bird2): %w", err)
		}
		conf, err := withToROptions(kind, ToRBirdConfig(self, RouterASN, nodes, 64512, pools, o.hold()), o)
		if err != nil {
			return nil, err
		}
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
		if o.BFD > 0 {
			f.BFDConf = filepath.Join(dir, "bfdd.conf")
			if err := os.WriteFile(f.BFDConf, []byte(FRRBFD(o.BFD, o.multiplier())), 0o644); err != nil {
				return nil, err
			}
		}
		conf, err := withToROptions(kind, ToRFRRConfig(self, RouterASN, nodes, 64512, pools, o.hold()), o)
		if err != nil {
			return nil, err
		}
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
