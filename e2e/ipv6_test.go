package e2e

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// waitBlackholes waits for n's blackholes of its blocks: the pass after a
// block's claim adds it, and may end after the ADD that made the claim
// returned (seen in TestIPv6Pod: the pods' ADDs at .197 and .225, the
// blackhole at .306, after the pass had reserved the IPv6 tunnel address).
func waitBlackholes(t *testing.T, n *lab.Node, blocks ...netip.Prefix) {
	t.Helper()
	eventually(t, 10*time.Second, func() string {
		for _, b := range blocks {
			fam := "-4"
			if b.Addr().Is6() {
				fam = "-6"
			}
			if r := run(t, n.Lab, n.Netns, "ip", fam, "route", "show", "exact", b.String(), "proto", "238"); !strings.HasPrefix(r, "blackhole ") {
				return fmt.Sprintf("%s has no blackhole for its block %s yet: %q", n.Name, b, r)
			}
		}
		return ""
	})
}

// TestIPv6Pod: a node whose pool is IPv6 (issue 29, the first slice: a
// node that runs alone) wires pods as Calico does for IPv6 — a /128 on
// eth0, the default route through the host veth's link-local, a
// permanent neighbour for it — routes each /128 and blackholes its block,
// forwards IPv6, masquerades in table inet reef-nat, and sends real packets on
// the first try. DEL takes the pod's route away.
func TestIPv6Pod(t *testing.T) {
	l := newLab(t)
	pool := netip.MustParsePrefix("fd00:10:244::/120")
	n := startNode(t, l, "node1", lab.NodeOptions{Extra: "pools:\n  - cidr: " + pool.String() + "\n"})
	a, b := newPod(t, n, "v6-a"), newPod(t, n, "v6-b")
	for _, p := range []*lab.Pod{a, b} {
		if !pool.Contains(p.IP) {
			t.Fatalf("pod %s got %s, not an address of pool %s", p.Name, p.IP, pool)
		}
	}
	const gw = "fe80::ecee:eeff:feee:eeee"
	if got := a.Result.IPs[0].Address.String(); got != a.IP.String()+"/128" {
		t.Errorf("result address %s, want %s/128", got, a.IP)
	}
	if got := a.Result.IPs[0].Gateway.String(); got != gw {
		t.Errorf("result gateway %s, want %s", got, gw)
	}

	// Pod side, as the README shows it.
	for _, args := range [][]string{{"ip", "-6", "addr", "show", "eth0", "scope", "global"}, {"ip", "-6", "route"}, {"ip", "-6", "neigh"}} {
		t.Logf("pod: %s\n%s", strings.Join(args, " "), run(t, l, a.Netns, args...))
	}
	if addr := run(t, l, a.Netns, "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "global"); !strings.Contains(addr, "inet6 "+a.IP.String()+"/128 ") {
		t.Errorf("pod eth0: want %s/128 in\n%s", a.IP, addr)
	}
	if r := run(t, l, a.Netns, "ip", "-6", "route", "show", "default"); !strings.Contains(r, "default via "+gw+" dev eth0") {
		t.Errorf("pod default route: want via %s dev eth0 in\n%s", gw, r)
	}
	if neigh := run(t, l, a.Netns, "ip", "-6", "neigh", "show", gw); !strings.Contains(neigh, "lladdr ee:ee:ee:ee:ee:ee PERMANENT") {
		t.Errorf("pod neighbour %s: want lladdr ee:ee:ee:ee:ee:ee PERMANENT in\n%s", gw, neigh)
	}

	// Node side.
	if got := strings.TrimSpace(run(t, l, n.Netns, "sysctl", "-n", "net.ipv6.conf.all.forwarding")); got != "1" {
		t.Errorf("node net.ipv6.conf.all.forwarding = %s, want 1", got)
	}
	block := netip.PrefixFrom(a.IP, 122).Masked()
	waitBlackholes(t, n, block)
	routes := run(t, l, n.Netns, "ip", "-6", "route", "show", "proto", "238")
	for _, want := range []string{a.IP.String() + " dev reef", b.IP.String() + " dev reef", "blackhole " + block.String()} {
		if !strings.Contains(routes, want) {
			t.Errorf("node IPv6 routes with proto 238: %q missing in\n%s", want, routes)
		}
	}
	if masq := run(t, l, n.Netns, "nft", "list", "set", "inet", "reef-nat", "masq-pools6"); !strings.Contains(masq, "elements = { "+pool.String()+" }") {
		t.Errorf("set inet reef-nat masq-pools6 lacks pool %s:\n%s", pool, masq)
	}
	// The NDP filter: an element per pod (nat/ndpfilter's kernel test shows
	// what it keeps from the pod).
	if ndp := run(t, l, n.Netns, "nft", "list", "set", "ip6", "reef-ndp", "pod-addrs"); !strings.Contains(ndp, a.IP.String()) || !strings.Contains(ndp, b.IP.String()) {
		t.Errorf("the NDP filter lacks %s or %s:\n%s", a.IP, b.IP, ndp)
	}

	// Packets, first try: pod to pod, node to pod.
	for _, c := range []struct{ from, to string }{{a.Netns, b.IP.String()}, {b.Netns, a.IP.String()}, {n.Netns, a.IP.String()}} {
		if out, err := l.Run(c.from, "ping", "-6", "-c", "1", "-W", "2", c.to); err != nil {
			t.Errorf("ping -6 %s from %s: %v\n%s", c.to, c.from, err, out)
		}
	}

	// Beyond the node, over an IPv6 underlay: a pod reaches the server
	// with the node's address (table inet reef-nat masquerades), and the server
	// reaches a pod's hostPort on the node's address with its own.
	out, err := l.AddOutside()
	if err != nil {
		t.Fatal(err)
	}
	if err := out.AddIPv6(n); err != nil {
		t.Fatal(err)
	}
	srv, err := l.ListenTCP(out.Server, netip.AddrPortFrom(lab.OutsideAddr6, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if seen, err := l.AskTCP(a.Netns, srv.Addr); err != nil || seen != lab.NodeAddress6(n) {
		t.Errorf("pod %s to the outside server: it saw %s (%v), want the node's %s", a.IP, seen, err, lab.NodeAddress6(n))
	}
	c, err := n.NewPodNetns("default", "v6-c")
	if err != nil {
		t.Fatal(err)
	}
	c.CapabilityArgs = map[string]any{"portMappings": []lab.PortMapping{{HostPort: 8081, ContainerPort: 80, Protocol: "tcp"}}}
	if err := c.Add(); err != nil {
		t.Fatal(err)
	}
	podSrv, err := l.ListenTCP(c.Netns, netip.AddrPortFrom(c.IP, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer podSrv.Close()
	if seen, err := l.AskTCP(out.Server, netip.AddrPortFrom(lab.NodeAddress6(n), 8081)); err != nil || seen != lab.OutsideAddr6 {
		t.Errorf("the outside server to hostPort [%s]:8081 of pod %s: the pod saw %s (%v), want the server's %s", lab.NodeAddress6(n), c.IP, seen, err, lab.OutsideAddr6)
	}

	// What an operator reads: the pool's size and blocks, the pods'
	// addresses, the routes reef keeps.
	ipam, err := n.Reef("ipam", "show", "--show-blocks", "--show-allocations")
	if err != nil {
		t.Fatalf("reef ipam show: %v\n%s", err, ipam)
	}
	for _, want := range []string{pool.String(), block.String(), a.IP.String(), b.IP.String()} {
		if !strings.Contains(ipam, want) {
			t.Errorf("reef ipam show lacks %s:\n%s", want, ipam)
		}
	}
	for _, args := range [][]string{{"status"}, {"routes"}, {"ipam", "check"}} {
		if out, err := n.Reef(args...); err != nil {
			t.Errorf("reef %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// reef routes lists the IPv6 routes it wants, in sync: each pod's
	// /128 and the block's blackhole (an exit status 0 alone would hold
	// for a command that left IPv6 out).
	if out, err := n.Reef("routes"); err == nil {
		for _, want := range []string{a.IP.String() + "/128", b.IP.String() + "/128", block.String()} {
			if !regexp.MustCompile(`(?m)^route\s+` + regexp.QuoteMeta(want) + `\s+in-sync\s`).MatchString(out) {
				t.Errorf("reef routes has no in-sync route %s:\n%s", want, out)
			}
		}
	}

	if err := a.Del(); err != nil {
		t.Fatal(err)
	}
	if routes := run(t, l, n.Netns, "ip", "-6", "route", "show", "proto", "238"); strings.Contains(routes, a.IP.String()+" dev") {
		t.Errorf("DEL left %s's route:\n%s", a.IP, routes)
	}
	if out, err := l.Run(b.Netns, "ping", "-6", "-c", "1", "-W", "2", a.IP.String()); err == nil {
		t.Errorf("ping -6 %s after its DEL answered:\n%s", a.IP, out)
	}
	t.Logf("pods %s and %s", a.IP, b.IP)
	for _, line := range strings.Split(n.Log(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			t.Errorf("daemon log: %s", line)
		}
	}
}
