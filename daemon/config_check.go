package daemon

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The semantic checks of a configuration (Validate): what each key may be.

// configProblem is one failed check: the key path and what is wrong.
type configProblem struct{ path, msg string }

// problems collects configProblems.
type problems []configProblem

func (ps *problems) bad(path, format string, args ...any) {
	*ps = append(*ps, configProblem{path, fmt.Sprintf(format, args...)})
}

// fileSets reports whether the file ParseConfig read sets the key at path.
func (c *Config) fileSets(path string) bool {
	_, ok := c.source.lines[path]
	return ok
}

// lineOf is " at line N" for a key the file sets at line N, else "": for
// a problem that names a second key, where to find that one.
func (c *Config) lineOf(path string) string {
	if l, ok := c.source.lines[path]; ok {
		return fmt.Sprintf(" at line %d", l)
	}
	return ""
}

func (c *Config) configProblems() []configProblem {
	var ps problems
	c.nodeProblems(&ps)
	c.poolProblems(&ps)
	c.bgpProblems(&ps)
	c.serviceProblems(&ps)
	return ps
}

// nodeProblems checks the node's own keys: name, address, interface, paths, MTU.
func (c *Config) nodeProblems(ps *problems) {
	bad := ps.bad
	if c.NodeName != "" && !configValidNodeName(c.NodeName) {
		bad("nodeName", "value %q is not a valid node name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)", c.NodeName)
	}
	if a := c.NodeAddress; a.IsValid() {
		switch {
		case !a.Is4():
			bad("nodeAddress", "value %q is not IPv4; nodeAddress is the node's IPv4 address (its IPv6 address is nodeAddressV6)", a)
		case a.IsLoopback() || a.IsUnspecified() || a.IsMulticast():
			bad("nodeAddress", "value %q is a loopback, unspecified or multicast address; give the node's own address", a)
		default:
			c.nodeInPool(ps, "nodeAddress", a)
		}
	}
	if a := c.NodeAddressV6; a.IsValid() {
		if !a.Is6() || a.Is4In6() || !a.IsGlobalUnicast() {
			bad("nodeAddressV6", "value %q is not a global unicast IPv6 address (not IPv4, link-local, loopback or multicast); give the node's IPv6 address on its uplink", a)
		}
		c.nodeInPool(ps, "nodeAddressV6", a)
	}
	if i := c.Interface; i != "" && (len(i) > 15 || i == "." || i == ".." || strings.ContainsAny(i, "/: \t\n\r\v\f")) {
		bad("interface", "value %q is not an interface name (at most 15 characters, no '/', ':' or spaces)", i)
	}
	for _, p := range []struct{ key, val string }{{"stateDir", c.StateDir}, {"socket", c.Socket}, {"pendingDeleteDir", c.PendingDeleteDir},
		{"cniConfDir", c.CNIConfDir}, {"cniBinDir", c.CNIBinDir}} {
		if (p.val != "" || p.key != "pendingDeleteDir") && !filepath.IsAbs(p.val) {
			bad(p.key, "value %q is not an absolute path", p.val)
		}
	}
	if len(c.Socket) >= 108 {
		bad("socket", "value %q is %d bytes long; a unix socket path must be shorter than 108", c.Socket, len(c.Socket))
	}
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 9216) {
		bad("mtu", "value %d is outside 576..9216 (or 0 to derive it from the uplink)", c.MTU)
	} else if i := slices.IndexFunc(c.Pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() }); c.MTU != 0 && c.MTU < minMTU6 && i >= 0 {
		bad("mtu", "value %d is below %d, the least IPv6 runs on, and pools[%d].cidr %s%s is IPv6: the kernel takes IPv6 off a pod's interface with a smaller MTU and every ADD fails; set mtu to %d or more (or 0 to derive it from the uplink)",
			c.MTU, minMTU6, i, c.Pools[i].CIDR, c.lineOf(fmt.Sprintf("pools[%d].cidr", i)), minMTU6)
	}
}

// minMTU6 is the least MTU of a link that carries IPv6 (RFC 8200, 5).
const minMTU6 = 1280

// nodeInPool reports the node or router address a at key when a pool
// holds it: a pod address is never a node's, and the other nodes drop
// every path whose next hop is one (bgp: "is a pod address").
func (c *Config) nodeInPool(ps *problems, key string, a netip.Addr) {
	for i, p := range c.Pools {
		if p.CIDR.IsValid() && p.CIDR.Contains(a) {
			ps.bad(key, "value %q is inside pools[%d].cidr %s%s: a pod address is never a node's", a, i, p.CIDR, c.lineOf(fmt.Sprintf("pools[%d].cidr", i)))
			return
		}
	}
}

// notPodRangeOf is one of notPodRanges: the range and what it is.
type notPodRangeOf struct {
	cidr netip.Prefix
	what string
}

// notPodRanges are what no pool may overlap: addresses that are not
// routed unicast (Calico refuses link-local pools as well).
var notPodRanges = []notPodRangeOf{
	{netip.MustParsePrefix("0.0.0.0/8"), "\"this network\" range"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback range"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local range"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast range"},
	{netip.MustParsePrefix("255.255.255.255/32"), "limited broadcast address"},
	{netip.MustParsePrefix("::/127"), "unspecified and loopback addresses"},
	{netip.MustParsePrefix("fe80::/10"), "link-local range"},
	{netip.MustParsePrefix("ff00::/8"), "multicast range"},
}

// notPodRange is the index of the first of notPodRanges that p overlaps, or -1.
func notPodRange(p netip.Prefix) int {
	return slices.IndexFunc(notPodRanges, func(r notPodRangeOf) bool { return r.cidr.Overlaps(p) })
}

// poolProblems checks pools: CIDRs, block sizes, encapsulation modes, overlaps.
func (c *Config) poolProblems(ps *problems) {
	bad := ps.bad
	if len(c.Pools) == 0 {
		bad("pools", "no pool; give at least one, e.g. - cidr: 10.244.0.0/16")
	}
	for i, p := range c.Pools {
		at := fmt.Sprintf("pools[%d]", i)
		switch {
		case !p.CIDR.IsValid():
			bad(at+".cidr", "missing; every pool needs one, e.g. cidr: 10.244.0.0/16")
		case p.CIDR.Addr().Is4In6():
			bad(at+".cidr", "value %q is an IPv4-mapped IPv6 CIDR; write the IPv4 pool itself", p.CIDR)
		case p.CIDR != p.CIDR.Masked():
			bad(at+".cidr", "value %q has host bits set (did you mean %s?)", p.CIDR, p.CIDR.Masked())
		case notPodRange(p.CIDR) >= 0:
			r := notPodRanges[notPodRange(p.CIDR)]
			bad(at+".cidr", "value %q overlaps the %s %s: pod addresses must be routable unicast (e.g. 10.244.0.0/16, fd00:10:244::/56)", p.CIDR, r.what, r.cidr)
		case p.CIDR.Addr().Is4() && p.BlockSize < p.CIDR.Bits() && p.BlockSize == configPoolDefaults().BlockSize && !c.fileSets(at+".blockSize"):
			// The default block size is what is wrong only if the file
			// gave it; else the place to look at is the cidr.
			bad(at+".cidr", "value %q is smaller than one block of the default blockSize %d; set blockSize to %d..32 under it, or widen the cidr", p.CIDR, p.BlockSize, p.CIDR.Bits())
		case p.CIDR.Addr().Is6() && p.BlockSize < p.CIDR.Bits() && p.BlockSize == defaultBlockSize6 && !c.fileSets(at+".blockSize"):
			bad(at+".cidr", "value %q is smaller than one block of the default blockSize %d; set blockSize to %d..128 under it, or widen the cidr", p.CIDR, p.BlockSize, p.CIDR.Bits())
		case p.CIDR.Addr().Is4() && (p.BlockSize < p.CIDR.Bits() || p.BlockSize > 32):
			bad(at+".blockSize", "value %d is outside %d..32 (from the /%d of cidr %s to 32)", p.BlockSize, p.CIDR.Bits(), p.CIDR.Bits(), p.CIDR)
		case p.CIDR.Addr().Is6() && (p.BlockSize < max(p.CIDR.Bits(), 116) || p.BlockSize > 128):
			bad(at+".blockSize", "value %d is outside %d..128 (an IPv6 block is /116 to /128, and no shorter than cidr %s)", p.BlockSize, max(p.CIDR.Bits(), 116), p.CIDR)
		case p.CIDR.Addr().Is6() && p.IPIPMode != EncapNever:
			bad(at+".ipipMode", "value %q on an IPv6 pool: IPIP carries IPv4 only; set ipipMode: Never (vxlanMode encapsulates IPv6)", p.IPIPMode)
		}
		modesOK := true
		for _, m := range []struct {
			key  string
			mode EncapMode
		}{{"vxlanMode", p.VXLANMode}, {"ipipMode", p.IPIPMode}} {
			if m.mode != EncapNever && m.mode != EncapCrossSubnet && m.mode != EncapAlways {
				bad(at+"."+m.key, "value %q is not one of Never, CrossSubnet, Always", m.mode)
				modesOK = false
			}
		}
		if modesOK && p.VXLANMode != EncapNever && p.IPIPMode != EncapNever {
			vx := "vxlanMode defaults to CrossSubnet"
			if l := c.lineOf(at + ".vxlanMode"); l != "" {
				vx = "vxlanMode" + l
			}
			bad(at+".ipipMode", "value %q and vxlanMode %q both encapsulate (%s); set one of them to Never", p.IPIPMode, p.VXLANMode, vx)
		}
		for j, q := range c.Pools[:i] {
			if p.CIDR.IsValid() && q.CIDR.IsValid() && p.CIDR.Overlaps(q.CIDR) {
				bad(at+".cidr", "value %q overlaps pools[%d].cidr %q%s; pools must not share addresses", p.CIDR, j, q.CIDR, c.lineOf(fmt.Sprintf("pools[%d].cidr", j)))
			}
		}
	}
}

// bgpProblems checks the bgp section.
func (c *Config) bgpProblems(ps *problems) {
	bad := ps.bad
	b := c.BGP
	if b.ASN == 0 {
		bad("bgp.asn", "value 0 is not an AS number; use a private one such as 64512")
	}
	if b.Port < 1 || b.Port > 65535 {
		bad("bgp.port", "value %d is outside 1..65535", b.Port)
	}
	for i, a := range b.Peers {
		if !peerAddr(a) {
			bad(fmt.Sprintf("bgp.peers[%d]", i), "value %q is not a unicast IPv4 or global IPv6 address", a)
		} else {
			c.nodeInPool(ps, fmt.Sprintf("bgp.peers[%d]", i), a)
		}
	}
	if a := b.RouterID; a.IsValid() {
		switch {
		case !a.Is4() || a.IsUnspecified() || a.IsMulticast() || a.IsLoopback():
			bad("bgp.routerID", "value %q is not a unicast IPv4 address; a router ID is 32 bits, written as an IPv4 address, unique in the cluster", a)
		case c.NodeAddress.IsValid() && a != c.NodeAddress:
			bad("bgp.routerID", "value %q is not nodeAddress %s: a node with an IPv4 address is known by it; leave bgp.routerID out (it is for nodes with no IPv4 address)", a, c.NodeAddress)
		}
	}
	for i, p := range b.PeerPrefixes {
		at := fmt.Sprintf("bgp.peerPrefixes[%d]", i)
		if !peerAddr(p.Addr()) {
			bad(at, "value %q is not an IPv4 or global IPv6 prefix", p)
		} else if p != p.Masked() {
			bad(at, "value %q has host bits set (did you mean %s?)", p, p.Masked())
		}
	}
	if b.KeepaliveTime <= 0 {
		bad("bgp.keepaliveTime", "value %q must be positive", b.KeepaliveTime)
	}
	if len(b.Voters) == 0 && (len(b.Peers) > 0 || len(b.PeerPrefixes) > 0) {
		// The problem is where the file makes the node a cluster's.
		key, val := "bgp.peers", fmt.Sprint(b.Peers)
		if len(b.Peers) == 0 {
			key, val = "bgp.peerPrefixes", fmt.Sprint(b.PeerPrefixes)
		}
		bad(key, "value %s, but bgp.voters is not set: a node of a cluster must name the cluster's voters, "+
			"the same 3 or 5 nodes on every node (their majority confirms each address block), e.g. voters: %s under bgp:; "+
			"docs/ipam.md, \"Starting a cluster\"", val, exampleVoters(c.NodeAddress, b.Peers))
	}
	c.bgpAddressLists(ps)
	*ps = append(*ps, b.reflectorProblems()...)
	*ps = append(*ps, c.externalPeerProblems()...)
	c.serviceCIDRProblems(ps)
	if t := b.GracefulShutdownTime; t < 0 || t > maxGracefulShutdownTime {
		bad("bgp.gracefulShutdownTime", "value %q is outside 0s..%s (0: exit at once; reef.service allows 30s for the whole stop)", t, maxGracefulShutdownTime)
	}
	if b.KeepaliveTime > 0 && b.KeepaliveTime%time.Second != 0 {
		bad("bgp.keepaliveTime", "value %q is not a whole number of seconds (BGP's timers are seconds)", b.KeepaliveTime)
	}
	switch {
	case b.HoldTime < 3*time.Second:
		bad("bgp.holdTime", "value %q is below the 3s BGP allows", b.HoldTime)
	case b.HoldTime > maxHoldTime:
		bad("bgp.holdTime", "value %q is above the %s a BGP OPEN message carries (65535 seconds)", b.HoldTime, maxHoldTime)
	case b.HoldTime%time.Second != 0:
		bad("bgp.holdTime", "value %q is not a whole number of seconds (BGP's timers are seconds)", b.HoldTime)
	}
	if b.HoldTime >= 3*time.Second && b.KeepaliveTime >= b.HoldTime {
		if c.fileSets("bgp.keepaliveTime") || !c.fileSets("bgp.holdTime") {
			bad("bgp.keepaliveTime", "value %q is not below bgp.holdTime %q%s (a third of it is usual)", b.KeepaliveTime, b.HoldTime, c.lineOf("bgp.holdTime"))
		} else {
			bad("bgp.holdTime", "value %q is not above bgp.keepaliveTime %q, its default; give bgp.keepaliveTime too (a third of the hold time is usual)", b.HoldTime, b.KeepaliveTime)
		}
	}
}

// maxHoldTime is the longest hold time: the OPEN message carries it in
// 16 bits of seconds (RFC 4271, 4.2); a longer one would be sent cut.
const maxHoldTime = 65535 * time.Second

// bgpAddressLists checks bgp.voters and bgp.routeReflectors: unicast IPv4, each once.
func (c *Config) bgpAddressLists(ps *problems) {
	bad, b := ps.bad, c.BGP
	seen := map[netip.Addr]int{}
	for i, a := range b.Peers {
		if j, dup := seen[a]; dup && peerAddr(a) {
			bad(fmt.Sprintf("bgp.peers[%d]", i), "value %q is listed twice (also bgp.peers[%d]%s)", a, j, c.lineOf(fmt.Sprintf("bgp.peers[%d]", j)))
		}
		seen[a] = i
	}
	seen = map[netip.Addr]int{}
	for i, a := range b.Voters {
		at := fmt.Sprintf("bgp.voters[%d]", i)
		if !peerAddr(a) {
			bad(at, "value %q is not a unicast IPv4 or global IPv6 address", a)
		} else if j, dup := seen[a]; dup {
			bad(at, "value %q is listed twice (also bgp.voters[%d]%s)", a, j, c.lineOf(fmt.Sprintf("bgp.voters[%d]", j)))
		} else {
			c.nodeInPool(ps, at, a)
		}
		seen[a] = i
	}
	seen = map[netip.Addr]int{}
	for i, a := range b.RouteReflectors {
		at := fmt.Sprintf("bgp.routeReflectors[%d]", i)
		if !peerAddr(a) {
			bad(at, "value %q is not a unicast IPv4 or global IPv6 address", a)
		} else if j, dup := seen[a]; dup {
			bad(at, "value %q is listed twice (also bgp.routeReflectors[%d]%s)", a, j, c.lineOf(fmt.Sprintf("bgp.routeReflectors[%d]", j)))
		} else {
			c.nodeInPool(ps, at, a)
		}
		seen[a] = i
	}
}

// serviceProblems checks metrics, kubernetes, reconcileInterval and logLevel.
func (c *Config) serviceProblems(ps *problems) {
	bad := ps.bad
	if m := c.Metrics; m != "" {
		if _, port, err := net.SplitHostPort(m); err != nil {
			bad("metrics", "value %q is not host:port such as 127.0.0.1:9099 (or \"\" to disable)", m)
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			bad("metrics", "value %q has no port number 1..65535", m)
		}
	}
	if k := c.Kubernetes.Kubeconfig; k != "" && !filepath.IsAbs(k) {
		bad("kubernetes.kubeconfig", "value %q is not an absolute path (such as /etc/reef/kubeconfig; \"\" turns NetworkPolicy off)", k)
	}
	if c.ReconcileInterval < time.Second {
		bad("reconcileInterval", "value %q is below 1s", c.ReconcileInterval)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("logLevel", "value %q is not one of debug, info, warn, error", c.LogLevel)
	}
}

// peerAddr reports whether a may name another node (bgp.peers, voters,
// routeReflectors): a unicast IPv4 address, or a global unicast IPv6 one
// (an IPv6-only node; docs/design.md, "IPv6-only nodes").
func peerAddr(a netip.Addr) bool {
	if a.Is6() && !a.Is4In6() {
		return a.IsGlobalUnicast()
	}
	return a.Is4() && !a.IsUnspecified() && !a.IsMulticast()
}

// hasPeers says whether the node talks to other nodes: it runs alone
// without bgp.peers, bgp.peerPrefixes and bgp.routeReflectors.
func (c *Config) hasPeers() bool {
	return len(c.BGP.Peers) > 0 || len(c.BGP.PeerPrefixes) > 0 || len(c.BGP.RouteReflectors) > 0
}

// exampleVoters is a voter list to suggest: the three lowest addresses of
// this node (when the file gives it) and its peers, or placeholders.
func exampleVoters(self netip.Addr, peers []netip.Addr) string {
	all := slices.Clone(peers)
	if self.IsValid() {
		all = append(all, self)
	}
	slices.SortFunc(all, netip.Addr.Compare)
	all = slices.Compact(all)
	if len(all) < 3 {
		return "[NODE1, NODE2, NODE3]"
	}
	return fmt.Sprintf("[%s, %s, %s]", all[0], all[1], all[2])
}

// reflectorProblems are the checks of bgp.routeReflectors and
// bgp.routeReflector against the rest of the bgp section. Each names the
// key the file sets, so that ParseConfig can give its line.
func (b BGPConfig) reflectorProblems() []configProblem {
	var ps []configProblem
	bad := func(path, format string, args ...any) {
		ps = append(ps, configProblem{path, fmt.Sprintf(format, args...)})
	}
	// Route reflectors do not vote: the default voters (this node and its
	// peers) would be the reflectors themselves, on a client, and the
	// other reflectors, on a reflector; neither is the same list on every
	// node.
	const pickVoters = "set bgp.voters to the same 3 or 5 nodes of the cluster on every node, reflectors included (route reflectors do not vote; docs/bgp.md)"
	rrs := fmt.Sprint(b.RouteReflectors)
	switch {
	case len(b.RouteReflectors) > 0 && len(b.Peers) > 0:
		bad("bgp.routeReflectors", "value %s and bgp.peers %v are both set; a node peers either with route reflectors or with a full mesh: keep one of them", rrs, b.Peers)
	case len(b.RouteReflectors) > 0 && b.RouteReflector:
		bad("bgp.routeReflectors", "value %s is set on a route reflector (bgp.routeReflector: true); a reflector lists the other reflectors in bgp.peers", rrs)
	case len(b.RouteReflectors) > 0 && len(b.Voters) == 0:
		bad("bgp.routeReflectors", "value %s is set but bgp.voters is not; %s", rrs, pickVoters)
	}
	if b.RouteReflector {
		if len(b.PeerPrefixes) == 0 {
			bad("bgp.routeReflector", "value true, but bgp.peerPrefixes is empty: a route reflector takes its clients in through bgp.peerPrefixes; set it to the clients' subnets")
		}
		if len(b.Voters) == 0 {
			bad("bgp.routeReflector", "value true, but bgp.voters is not set; %s", pickVoters)
		}
	}
	return ps
}

// serviceCIDRProblems checks bgp.serviceClusterIPs,
// bgp.serviceExternalIPs and bgp.serviceLoadBalancerIPs: CIDRs without
// host bits, each once in its list, outside every pool (a route to a
// Service address that covers pod blocks would steal pod traffic at the
// router) and away from every node and router address (it would steer
// node traffic, and the block protocol's paths name nodes by their /32),
// an IPv6 one only beside an IPv6 pool (the node has an IPv6 address only
// then), and external peers to announce them to. The two lists of Service
// addresses need the Kubernetes API too: the addresses are read from it.
func (c *Config) serviceCIDRProblems(ps *problems) {
	b := c.BGP
	hasPool6 := slices.ContainsFunc(c.Pools, func(p PoolConfig) bool { return p.CIDR.Addr().Is6() })
	for _, l := range []struct {
		key     string
		cidrs   []netip.Prefix
		example string
	}{
		{"bgp.serviceClusterIPs", b.ServiceClusterIPs, "give the cluster's Service CIDR, e.g. 10.96.0.0/12"},
		{"bgp.serviceExternalIPs", b.ServiceExternalIPs, "give the range the Services' externalIPs come from, e.g. 198.51.100.0/24"},
		{"bgp.serviceLoadBalancerIPs", b.ServiceLoadBalancerIPs, "give the range the LoadBalancer addresses come from, e.g. 203.0.113.0/24"},
	} {
		for i, p := range l.cidrs {
			at := fmt.Sprintf("%s[%d]", l.key, i)
			switch {
			case p.Addr().Is4In6():
				ps.bad(at, "value %q is an IPv4 CIDR written as IPv6; write it as IPv4", p)
				continue
			case p.Bits() == 0:
				ps.bad(at, "value %q covers every address; %s", p, l.example)
				continue
			case p != p.Masked():
				ps.bad(at, "value %q has host bits set (did you mean %s?)", p, p.Masked())
				continue
			case p.Addr().Is6() && !hasPool6:
				ps.bad(at, "value %q is IPv6, but no pool is: the node has an IPv6 address (nodeAddressV6) to be its next hop only beside an IPv6 pool; add one, or leave the CIDR out", p)
			}
			if j := slices.Index(l.cidrs[:i], p); j >= 0 {
				ps.bad(at, "value %q is listed twice (also %s[%d]%s)", p, l.key, j, c.lineOf(fmt.Sprintf("%s[%d]", l.key, j)))
			}
			for j, q := range c.Pools {
				if q.CIDR.IsValid() && p.Overlaps(q.CIDR) {
					ps.bad(at, "value %q overlaps pools[%d].cidr %q%s: Service addresses and pod addresses must not overlap (kubeadm's default service CIDR is 10.96.0.0/12)", p, j, q.CIDR, c.lineOf(fmt.Sprintf("pools[%d].cidr", j)))
				}
			}
			if key, a := c.nodeAddressIn(p); key != "" {
				ps.bad(at, "value %q overlaps %s %s: a route to it at the router would steer node traffic; %s, which holds no node or router", p, key, a, l.example)
			}
		}
		// A node that assigns LoadBalancer addresses need not announce
		// them (its routers may be other nodes').
		assigns := l.key == "bgp.serviceLoadBalancerIPs" && c.assignsLoadBalancerIPs()
		if len(l.cidrs) > 0 && len(b.ExternalPeers) == 0 && !assigns {
			ps.bad(l.key, "value %v, but bgp.externalPeers is empty: Service addresses are announced to the node's routers only; add the routers under bgp.externalPeers (docs/bgp.md)", l.cidrs)
		}
		if len(l.cidrs) > 0 && l.key != "bgp.serviceClusterIPs" && c.Kubernetes.Kubeconfig == "" {
			ps.bad(l.key, "value %v, but kubernetes.kubeconfig is empty: the Services' addresses are read from the Kubernetes API; give the node a kubeconfig (docs/policy.md, reef kubeconfig)", l.cidrs)
		}
	}
	if b.AssignLoadBalancerIPs != nil && *b.AssignLoadBalancerIPs {
		switch {
		case len(b.ServiceLoadBalancerIPs) == 0:
			ps.bad("bgp.assignLoadBalancerIPs", "value true, but bgp.serviceLoadBalancerIPs is empty: give the CIDRs to assign from (docs/lbipam.md)")
		case c.Kubernetes.Kubeconfig == "":
			ps.bad("bgp.assignLoadBalancerIPs", "value true, but kubernetes.kubeconfig is not set: assignment writes the Services' status through the API (docs/lbipam.md)")
		}
	}
}

// nodeAddressIn names the first node or router address of the config that
// p covers (nodeAddress, nodeAddressV6, bgp.peers, bgp.voters,
// bgp.routeReflectors, the external peers) or bgp.peerPrefixes entry it
// overlaps; "" when none.
func (c *Config) nodeAddressIn(p netip.Prefix) (key string, what string) {
	b := c.BGP
	lists := []struct {
		key   string
		addrs []netip.Addr
	}{
		{"nodeAddress", []netip.Addr{c.NodeAddress}}, {"nodeAddressV6", []netip.Addr{c.NodeAddressV6}},
		{"bgp.peers", b.Peers}, {"bgp.voters", b.Voters}, {"bgp.routeReflectors", b.RouteReflectors},
	}
	var ext []netip.Addr
	for _, e := range b.ExternalPeers {
		ext = append(ext, e.Address)
	}
	lists = append(lists, struct {
		key   string
		addrs []netip.Addr
	}{"bgp.externalPeers", ext})
	for _, l := range lists {
		for _, a := range l.addrs {
			if a.IsValid() && p.Contains(a) {
				return l.key, a.String()
			}
		}
	}
	for _, q := range b.PeerPrefixes {
		if p.Overlaps(q) {
			return "bgp.peerPrefixes", q.String()
		}
	}
	return "", ""
}

// configValidNodeName is a loose DNS-1123 subdomain check, the rule for
// Kubernetes node names.
func configValidNodeName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for i := range len(s) {
		ch := s[i]
		alnum := ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9'
		if !alnum && (ch != '-' && ch != '.' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
