package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/poll"
	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/routes/tunnel"
)

// AddMesh adds n nodes ("node1".."nodeN") that peer with each other: each
// lists the others as bgp.peers and accepts the whole underlay through
// bgp.peerPrefixes, so a node added later with only its own peers joins
// without edits to these. extra is appended to every config (pools).
func (l *Lab) AddMesh(n int, extra string) ([]*Node, error) {
	return l.AddMeshWith(n, NodeOptions{Extra: extra})
}

// AddMeshWith is AddMesh with more options for every node; its Peers and
// PeerPrefixes are set by the mesh.
func (l *Lab) AddMeshWith(n int, base NodeOptions) ([]*Node, error) {
	first := len(l.Nodes())
	var addrs []netip.Addr
	for i := 0; i < n; i++ {
		a := NodeAddress(first + i)
		if base.IPv6Only {
			a = NodeAddress6(&Node{Address: a})
		}
		addrs = append(addrs, a)
	}
	prefix := Underlay
	if base.IPv6Only {
		prefix = Underlay6
	}
	l.mu.Lock()
	if len(l.Voters) == 0 {
		l.Voters = addrs[:min(n, 5)]
	}
	l.mu.Unlock()
	var nodes []*Node
	for i := 0; i < n; i++ {
		var peers []netip.Addr
		for j, a := range addrs {
			if j != i {
				peers = append(peers, a)
			}
		}
		opts := base
		opts.Peers, opts.PeerPrefixes = peers, []netip.Prefix{prefix}
		node, err := l.AddNode(fmt.Sprintf("node%d", first+i+1), opts)
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

// StartAll starts the daemons of nodes at the same moment and waits until
// all serve ADD.
func StartAll(nodes []*Node) error {
	for _, n := range nodes {
		if err := n.StartNoWait(); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := n.WaitReady(30e9); err != nil {
			return err
		}
	}
	return nil
}

// WaitConverged waits until every running node has its BGP session to
// every other running node established and a route to every confirmed block
// of every other running node, through that node's address.
func WaitConverged(nodes []*Node, timeout time.Duration) error {
	return waitRouted(nodes, timeout, func(owner *Node, st *reefv1.StatusReply) string {
		state := map[string]string{}
		for _, p := range st.GetPeers() {
			state[p.GetAddress()] = p.GetState()
		}
		for _, n := range nodes {
			if a := n.PeerAddress().String(); n != owner && n.Running() && state[a] != "established" {
				return fmt.Sprintf("%s's BGP session to %s is %q", owner.Name, n.Name, state[a])
			}
		}
		return ""
	})
}

// waitRouted waits until, on every running node, sessions (what its
// sessions must look like; "" when they do) holds and every running node
// routes its confirmed blocks through its address.
func waitRouted(nodes []*Node, timeout time.Duration, sessions func(owner *Node, st *reefv1.StatusReply) string) error {
	err := poll.Until(timeout, func() error {
		for _, owner := range nodes {
			if !owner.Running() {
				continue
			}
			st, err := owner.Status()
			if err != nil {
				return fmt.Errorf("status of %s: %v", owner.Name, err)
			}
			if missing := sessions(owner, st); missing != "" {
				return errors.New(missing)
			}
			if missing := unrouted(owner, st, nodes); missing != "" {
				return errors.New(missing)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("not converged: %w", err)
	}
	return nil
}

// unrouted says which running node has no route to one of owner's
// confirmed blocks through owner's address, where both have the block's
// pool in their config; "" when all have. (A pool gone from a node's
// config keeps its blocks, unrouted.)
func unrouted(owner *Node, st *reefv1.StatusReply, nodes []*Node) string {
	pools := map[*Node]map[string]bool{}
	for _, n := range nodes {
		if !n.Running() {
			continue
		}
		ipam, err := n.IPAM()
		if err != nil {
			return fmt.Sprintf("reef ipam show of %s: %v", n.Name, err)
		}
		pools[n] = map[string]bool{}
		for _, p := range ipam.GetPools() {
			// A retired pool (gone from the config, its blocks kept) is
			// listed, but not routed.
			if !p.GetRetired() {
				pools[n][p.GetCidr()] = true
			}
		}
	}
	for _, b := range st.GetBlocks() {
		if b.GetState() != "confirmed" || !pools[owner][b.GetPool()] {
			continue
		}
		for _, n := range nodes {
			if n == owner || !n.Running() || !pools[n][b.GetPool()] {
				continue
			}
			if strings.Contains(b.GetCidr(), ":") {
				// An IPv6 block goes through the owner's IPv6 address, or
				// across the ToR lab's subnets through the router's, or
				// through VXLAN via its VTEP's link-local.
				out, err := n.Lab.Run(n.Netns, "ip", "-6", "route", "show", "exact", b.GetCidr())
				a6 := st.GetNodeAddressV6()
				direct := a6 != "" && strings.Contains(out, "via "+a6+" ")
				routed := SubnetB.Contains(owner.Address) != SubnetB.Contains(n.Address) && strings.Contains(out, "via "+RouterLeg6(n.Address).String()+" ")
				vxlan := strings.Contains(out, "via "+tunnel.VTEPLinkLocal(owner.Address).String()+" dev "+tunnel.VXLANDevice+" ")
				if err != nil || !direct && !routed && !vxlan {
					return fmt.Sprintf("%s has no route to %s's IPv6 block %s via its IPv6 address %q, the router or its VTEP (%q)", n.Name, owner.Name, b.GetCidr(), a6, strings.TrimSpace(out))
				}
				continue
			}
			out, err := n.Lab.Run(n.Netns, "ip", "-4", "route", "show", "exact", b.GetCidr())
			// Across the lab's subnets without encapsulation, the route goes
			// through the router (bgp.externalPeers).
			routed := SubnetB.Contains(owner.Address) != SubnetB.Contains(n.Address) && strings.Contains(out, "via "+RouterLeg(n.Address).String()+" ")
			if err != nil || !strings.Contains(out, "via "+owner.Address.String()) && !routed {
				return fmt.Sprintf("%s has no route to %s's block %s (%q)", n.Name, owner.Name, b.GetCidr(), strings.TrimSpace(out))
			}
		}
	}
	return ""
}

// AddHost adds a bare namespace on the underlay with address addr (a rogue
// BGP speaker, a client): eth0 in it, its peer on the switch. An IPv6
// address goes on Underlay6, without DAD.
func (l *Lab) AddHost(name string, addr netip.Addr) (string, error) {
	ns := l.Prefix + "-" + name
	if err := l.AddNetns(ns); err != nil {
		return "", err
	}
	peer := l.Prefix + name
	if len(peer) > 15 {
		peer = peer[len(peer)-15:]
	}
	steps := [][]string{
		{"link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", NetnsPath(l.Switch)},
		{"addr", "add", netip.PrefixFrom(addr, Underlay.Bits()).String(), "dev", "eth0"},
		{"link", "set", "eth0", "up"},
	}
	if addr.Is6() {
		steps[1] = []string{"-6", "addr", "add", netip.PrefixFrom(addr, Underlay6.Bits()).String(), "dev", "eth0", "nodad"}
	}
	for _, s := range steps {
		if err := l.IP(ns, s...); err != nil {
			return "", err
		}
	}
	if err := l.IP(l.Switch, "link", "set", peer, "master", "br0", "up"); err != nil {
		return "", err
	}
	return ns, nil
}

// Spawn runs a long-lived command in a namespace; the returned stop kills
// it. Lab.Close kills what is still running.
func (l *Lab) Spawn(netns, logName string, args ...string) (stop func(), err error) {
	logf, err := os.Create(filepath.Join(l.Dir, logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + NetnsPath(netns), "--"}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	stop = func() {
		cmd.Process.Kill()
		<-done
	}
	l.mu.Lock()
	l.spawned = append(l.spawned, stop)
	l.mu.Unlock()
	return stop, nil
}

// CutNode takes a node's switch port down (cut=true) or up again: a network
// partition of that node.
func (l *Lab) CutNode(n *Node, cut bool) error {
	peer := l.Prefix + n.Name
	if len(peer) > 15 {
		peer = peer[len(peer)-15:]
	}
	state := "up"
	if cut {
		state = "down"
	}
	return l.IP(l.Switch, "link", "set", peer, state)
}

// DropNode makes the switch drop every frame to and from a node (drop=true)
// or stops doing so, with an nftables bridge table in the switch's
// namespace: the node's link stays up and its BGP sessions stay
// established until their hold time runs out, as when a switch port or a
// cable fails silently. Nodes may be dropped and restored independently.
func (l *Lab) DropNode(n *Node, drop bool) error { return l.Drop(n.Name, drop) }

// Drop is DropNode for any namespace on the underlay by its name: a node,
// or a host of AddHost (BIRD, FRR).
func (l *Lab) Drop(name string, drop bool) error {
	port := l.Prefix + name
	if len(port) > 15 {
		port = port[len(port)-15:]
	}
	l.mu.Lock()
	if l.dropped == nil {
		l.dropped = map[string]bool{}
	}
	if drop {
		l.dropped[port] = true
	} else {
		delete(l.dropped, port)
	}
	var rules strings.Builder
	for p := range l.dropped {
		fmt.Fprintf(&rules, "    iifname %q drop\n    oifname %q drop\n", p, p)
	}
	l.mu.Unlock()
	script := "table bridge reeflab\ndelete table bridge reeflab\ntable bridge reeflab {\n  chain forward {\n    type filter hook forward priority 0; policy accept;\n" +
		rules.String() + "  }\n}\n"
	cmd := exec.Command("nsenter", "--net="+NetnsPath(l.Switch), "--", "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s", l.Switch, err, out)
	}
	return nil
}
