package e2e

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/reefcni/reef/internal/lab"
)

var (
	dualPool4 = netip.MustParsePrefix("10.244.0.0/16")
	dualPool6 = netip.MustParsePrefix("fd00:10:244::/56")
)

// dualPod checks that p got one address of each family, IPv4 first, from
// the pools, in the CNI result and on its eth0, and returns them.
func dualPod(t *testing.T, l *lab.Lab, p *lab.Pod, pool4, pool6 netip.Prefix) (v4, v6 netip.Addr) {
	t.Helper()
	if len(p.IPs) != 2 || !pool4.Contains(p.IPs[0]) || !pool6.Contains(p.IPs[1]) {
		t.Fatalf("pod %s got %v, want one address of %s and one of %s", p.Name, p.IPs, pool4, pool6)
	}
	v4, v6 = p.IPs[0], p.IPs[1]
	want := map[string]string{v4.String() + "/32": "169.254.1.1", v6.String() + "/128": "fe80::ecee:eeff:feee:eeee"}
	for _, c := range p.Result.IPs {
		if gw, ok := want[c.Address.String()]; !ok || c.Gateway.String() != gw || c.Interface == nil || *c.Interface != 1 {
			t.Errorf("pod %s: result address %s gateway %s, want one of %v on interface 1", p.Name, c.Address.String(), c.Gateway, want)
		}
	}
	var routes []string
	for _, r := range p.Result.Routes {
		routes = append(routes, r.Dst.String()+" via "+r.GW.String())
	}
	if got := strings.Join(routes, ", "); got != "0.0.0.0/0 via 169.254.1.1, ::/0 via fe80::ecee:eeff:feee:eeee" {
		t.Errorf("pod %s: result routes %s, want a default route per family", p.Name, got)
	}
	if a := run(t, l, p.Netns, "ip", "-4", "-o", "addr", "show", "dev", "eth0"); !strings.Contains(a, "inet "+v4.String()+"/32 ") {
		t.Errorf("pod %s eth0: want %s/32 in\n%s", p.Name, v4, a)
	}
	if a := run(t, l, p.Netns, "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "global"); !strings.Contains(a, "inet6 "+v6.String()+"/128 ") {
		t.Errorf("pod %s eth0: want %s/128 in\n%s", p.Name, v6, a)
	}
	for _, c := range []struct{ family, want string }{{"-4", "default via 169.254.1.1 dev eth0"}, {"-6", "default via fe80::ecee:eeff:feee:eeee dev eth0"}} {
		if r := run(t, l, p.Netns, "ip", c.family, "route", "show", "default"); !strings.Contains(r, c.want) {
			t.Errorf("pod %s: want %q in\n%s", p.Name, c.want, r)
		}
	}
	return v4, v6
}

// pings sends one echo from netns to each address, IPv4 or IPv6, and
// fails the test for each that gets no reply: the first try must work.
func pings(t *testing.T, l *lab.Lab, from, what string, to ...netip.Addr) {
	t.Helper()
	for _, a := range to {
		args := []string{"ping", "-c", "1", "-W", "2", a.String()}
		if a.Is6() {
			args = append([]string{"ping", "-6"}, args[1:]...)
		}
		if out, err := l.Run(from, args...); err != nil {
			t.Errorf("%s: %s: %v\n%s", what, strings.Join(args, " "), err, out)
		}
	}
}

// podRoutesOf are the node's routes of reef's protocol to single
// addresses, both families: "10.244.0.5 dev reef..." lines.
func podRoutesOf(t *testing.T, l *lab.Lab, n *lab.Node) string {
	t.Helper()
	return run(t, l, n.Netns, "ip", "-4", "route", "show", "proto", "238") + run(t, l, n.Netns, "ip", "-6", "route", "show", "proto", "238")
}

// TestDualStackPod: a node with an IPv4 and an IPv6 pool (issue 29,
// dual-stack pods on a node) gives each pod one address of each family —
// in the CNI result, on eth0, routed on the node — and everything reef
// does for a pod works over both: pod to pod and node to pod, masquerade
// to an outside server, a hostPort from outside, reef ipam show and check,
// CHECK, DEL freeing both for the next pod, a daemon restart, and a
// damaged store rebuilt by reef store recover.
func TestDualStackPod(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{Extra: "pools:\n  - cidr: " + dualPool4.String() + "\n  - cidr: " + dualPool6.String() + "\n"})
	a, b := newPod(t, n, "ds-a"), newPod(t, n, "ds-b")
	a4, a6 := dualPod(t, l, a, dualPool4, dualPool6)
	b4, b6 := dualPod(t, l, b, dualPool4, dualPool6)
	for _, args := range [][]string{{"ip", "addr", "show", "eth0"}, {"ip", "route"}, {"ip", "-6", "route"}} {
		t.Logf("pod: %s\n%s", strings.Join(args, " "), run(t, l, a.Netns, args...))
	}

	// Node side: a /32 and a /128 to each pod's veth, both blocks
	// blackholed, both masquerade tables.
	waitBlackholes(t, n, netip.PrefixFrom(a4, 26).Masked(), netip.PrefixFrom(a6, 122).Masked())
	routes := podRoutesOf(t, l, n)
	t.Logf("node: routes of proto 238\n%s", routes)
	for _, want := range []string{a4.String() + " dev reef", a6.String() + " dev reef", b4.String() + " dev reef", b6.String() + " dev reef",
		"blackhole " + netip.PrefixFrom(a4, 26).Masked().String(), "blackhole " + netip.PrefixFrom(a6, 122).Masked().String()} {
		if !strings.Contains(routes, want) {
			t.Errorf("node routes with proto 238: %q missing", want)
		}
	}
	for _, c := range []struct{ set, pool string }{{"masq-pools4", dualPool4.String()}, {"masq-pools6", dualPool6.String()}} {
		if masq := run(t, l, n.Netns, "nft", "list", "set", "inet", "reef-nat", c.set); !strings.Contains(masq, c.pool) {
			t.Errorf("set inet reef-nat %s lacks pool %s:\n%s", c.set, c.pool, masq)
		}
	}
	if arp := run(t, l, n.Netns, "nft", "list", "set", "arp", "reef", "pod-addrs"); !strings.Contains(arp, a4.String()) {
		t.Errorf("the ARP filter lacks %s:\n%s", a4, arp)
	}
	if ndp := run(t, l, n.Netns, "nft", "list", "set", "ip6", "reef-ndp", "pod-addrs"); !strings.Contains(ndp, a6.String()) || !strings.Contains(ndp, b6.String()) {
		t.Errorf("the NDP filter lacks %s or %s:\n%s", a6, b6, ndp)
	}

	// Packets, first try, both families.
	pings(t, l, a.Netns, "a to b", b4, b6)
	pings(t, l, b.Netns, "b to a", a4, a6)
	pings(t, l, n.Netns, "node to a", a4, a6)
	if err := a.Check(); err != nil {
		t.Errorf("CNI CHECK of a dual-stack pod: %v", err)
	}

	// Beyond the node: masquerade to the outside server over both
	// families, and a hostPort reachable from it over both.
	out, err := l.AddOutside()
	if err != nil {
		t.Fatal(err)
	}
	if err := out.DefaultRoute(n); err != nil {
		t.Fatal(err)
	}
	if err := out.AddIPv6(n); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ server, node netip.Addr }{{lab.OutsideAddr, n.Address}, {lab.OutsideAddr6, lab.NodeAddress6(n)}} {
		srv, err := l.ListenTCP(out.Server, netip.AddrPortFrom(c.server, 8080))
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		if seen, err := l.AskTCP(a.Netns, srv.Addr); err != nil || seen != c.node {
			t.Errorf("pod a to the outside server %s: it saw %s (%v), want the node's %s", c.server, seen, err, c.node)
		}
	}
	c, err := n.NewPodNetns("default", "ds-c")
	if err != nil {
		t.Fatal(err)
	}
	c.CapabilityArgs = map[string]any{"portMappings": []lab.PortMapping{{HostPort: 8081, ContainerPort: 80, Protocol: "tcp"}}}
	if err := c.Add(); err != nil {
		t.Fatal(err)
	}
	c4, c6 := dualPod(t, l, c, dualPool4, dualPool6)
	for _, h := range []struct{ pod, node, client netip.Addr }{{c4, n.Address, lab.OutsideAddr}, {c6, lab.NodeAddress6(n), lab.OutsideAddr6}} {
		podSrv, err := l.ListenTCP(c.Netns, netip.AddrPortFrom(h.pod, 80))
		if err != nil {
			t.Fatal(err)
		}
		defer podSrv.Close()
		if seen, err := l.AskTCP(out.Server, netip.AddrPortFrom(h.node, 8081)); err != nil || seen != h.client {
			t.Errorf("the outside server to hostPort %s of pod c: the pod (%s) saw %s (%v), want the server's %s",
				netip.AddrPortFrom(h.node, 8081), h.pod, seen, err, h.client)
		}
	}

	// What an operator reads.
	ipam, err := n.Reef("ipam", "show", "--show-allocations")
	if err != nil {
		t.Fatalf("reef ipam show: %v\n%s", err, ipam)
	}
	t.Logf("reef ipam show --show-allocations:\n%s", ipam)
	for _, want := range []netip.Addr{a4, a6, b4, b6, c4, c6} {
		if !strings.Contains(ipam, want.String()) {
			t.Errorf("reef ipam show --show-allocations lacks %s", want)
		}
	}
	if out, err := n.Reef("ipam", "check"); err != nil {
		t.Errorf("reef ipam check: %v\n%s", err, out)
	}

	// DEL takes both routes away and frees both addresses: the next pod
	// gets them.
	if err := a.Del(); err != nil {
		t.Fatal(err)
	}
	routes = podRoutesOf(t, l, n)
	for _, gone := range []netip.Addr{a4, a6} {
		if strings.Contains(routes, gone.String()+" dev") {
			t.Errorf("DEL left the route to %s:\n%s", gone, routes)
		}
	}
	got := allocations(t, n)
	if _, ok := got[a4.String()]; ok || len(got) != 4 {
		t.Errorf("allocations after DEL of a: %v, want b's and c's 4", got)
	}
	d := newPod(t, n, "ds-d")
	if d4, d6 := dualPod(t, l, d, dualPool4, dualPool6); d4 != a4 || d6 != a6 {
		t.Errorf("the pod after a's DEL got %s and %s, want a's freed %s and %s", d4, d6, a4, a6)
	}
	for _, line := range strings.Split(n.Log(), "\n") {
		if strings.Contains(line, "level=ERROR") || strings.Contains(line, "level=WARN") {
			t.Errorf("daemon log: %s", line)
		}
	}

	// A restart keeps both routes of every pod.
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	routes = podRoutesOf(t, l, n)
	for _, want := range []netip.Addr{b4, b6, c4, c6, a4, a6} {
		if !strings.Contains(routes, want.String()+" dev reef") {
			t.Errorf("after a restart, the route to %s is missing:\n%s", want, routes)
		}
	}
	pings(t, l, b.Netns, "b to d after a restart", a4, a6)

	// A damaged store: reef store recover makes one endpoint of each
	// veth's /32 and /128.
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(n.StateDir, "reef.db"), 0); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Run(n.Netns, filepath.Join(binDir, "reef"), "store", "recover", "--config", n.Config)
	if err != nil {
		t.Fatalf("reef store recover: %v\n%s", err, rec)
	}
	t.Logf("reef store recover:\n%s", rec)
	for _, want := range []string{"addresses kept: 3 of pods", b4.String() + "," + b6.String(), c4.String() + "," + c6.String(), "blocks kept (2)"} {
		if !strings.Contains(rec, want) {
			t.Errorf("reef store recover does not say %q", want)
		}
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if got := allocations(t, n); len(got) != 6 || got[b6.String()] == "" || got[c6.String()] == "" || got[a6.String()] == "" {
		t.Errorf("allocations after the recovery: %v, want both addresses of b, c and d", got)
	}
	// (The recovered pods, whose netns it could not name, are its only
	// findings: no address is out of the index.)
	if out, _ := n.Reef("ipam", "check"); strings.Contains(out, "endpoint-without-allocation") || strings.Contains(out, "address-without-endpoint") {
		t.Errorf("reef ipam check after the recovery:\n%s", out)
	}
	pings(t, l, b.Netns, "b to c after the recovery", c4, c6)
	// The recovered pod's DEL finds its endpoint by its veth and frees both.
	if err := c.Del(); err != nil {
		t.Fatal(err)
	}
	if got := allocations(t, n); len(got) != 4 {
		t.Errorf("allocations after DEL of the recovered pod c: %v, want b's and d's 4", got)
	}
}

// TestDualStackAddFailure: an ADD that cannot get an address of one
// family (the IPv6 pool is one block of two addresses) fails with "pool
// exhausted" and leaves nothing behind — no address of the other family
// in the store, no veth, no route — and a DEL frees both addresses of a
// pod for the next.
func TestDualStackAddFailure(t *testing.T) {
	l := newLab(t)
	pool4, pool6 := netip.MustParsePrefix("10.244.0.0/24"), netip.MustParsePrefix("fd00:10:244::/127")
	n := startNode(t, l, "node1", lab.NodeOptions{Extra: "pools:\n  - cidr: " + pool4.String() +
		"\n  - cidr: " + pool6.String() + "\n    blockSize: 127\n    vxlanMode: Never\n"}) // with VXLAN, vxlan.reef's IPv6 tunnel address would take one of the two
	a, b := newPod(t, n, "full-a"), newPod(t, n, "full-b")
	dualPod(t, l, a, pool4, pool6)
	dualPod(t, l, b, pool4, pool6)
	before, beforeRoutes := allocations(t, n), podRoutesOf(t, l, n)

	c, err := n.NewPodNetns("default", "full-c")
	if err != nil {
		t.Fatal(err)
	}
	err = c.Add()
	if err == nil || !strings.Contains(err.Error(), "exhausted") {
		t.Fatalf("ADD with the IPv6 pool full: %v, want pool exhausted", err)
	}
	t.Logf("ADD with the IPv6 pool full: %v", err)
	if got := allocations(t, n); len(got) != len(before) {
		t.Errorf("allocations after the failed ADD: %v, want only %v", got, before)
	}
	if r := podRoutesOf(t, l, n); r != beforeRoutes {
		t.Errorf("routes after the failed ADD:\n%s\nwant as before:\n%s", r, beforeRoutes)
	}
	if links := run(t, l, n.Netns, "ip", "-o", "link", "show"); strings.Count(links, ": reef") != 2 {
		t.Errorf("veths after the failed ADD, want a's and b's only:\n%s", links)
	}
	if links := run(t, l, c.Netns, "ip", "-o", "link", "show"); strings.Contains(links, "eth0") {
		t.Errorf("the failed ADD left eth0 in the pod:\n%s", links)
	}
	if out, err := n.Reef("ipam", "check"); err != nil {
		t.Errorf("reef ipam check: %v\n%s", err, out)
	}

	// a's DEL frees both its addresses; c gets them.
	if err := a.Del(); err != nil {
		t.Fatal(err)
	}
	if err := c.Add(); err != nil {
		t.Fatalf("ADD after a's DEL: %v", err)
	}
	if c4, c6 := dualPod(t, l, c, pool4, pool6); c4 != a.IPs[0] || c6 != a.IPs[1] {
		t.Errorf("c got %s and %s, want a's freed %v", c4, c6, a.IPs)
	}
	pings(t, l, b.Netns, "b to c", c.IPs...)
}
