package e2e

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// natIPv6Only is table inet reef-nat and table inet reef-hostport on
// IPv6-only nodes (TestIPv6OnlyNodes' mesh, pods a on node1 and b on
// node2): pod a reaches a server beyond the pools with node1's IPv6
// address (masquerade), and pod b with its own (the pools are exempt);
// a pod's hostPort on every address answers the server on node2's IPv6
// addresses, and one with node2's IPv6 address as hostIP answers there
// and nowhere else, leading to the pod's IPv6 address; an IPv6 pool
// deleted by hand from the masquerade table is put back (a warning in
// node1's log: call it after the test's noWarnings). It returns how long
// it took.
func natIPv6Only(t *testing.T, l *lab.Lab, nodes []*lab.Node, a, b *lab.Pod) time.Duration {
	t.Helper()
	start := time.Now()
	n1, n2 := nodes[0], nodes[1]
	out, err := l.AddOutside()
	if err != nil {
		t.Fatal(err)
	}
	if err := out.AddIPv6(nodes...); err != nil {
		t.Fatal(err)
	}
	srv, err := l.ListenTCP(out.Server, netip.AddrPortFrom(lab.OutsideAddr6, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if seen, err := l.AskTCP(a.Netns, srv.Addr); err != nil || seen != lab.NodeAddress6(n1) {
		t.Errorf("pod a %s to the outside server: it saw %s (%v), want node1's %s", a.IP, seen, err, lab.NodeAddress6(n1))
	}
	table := run(t, l, n1.Netns, "nft", "list", "table", "inet", "reef-nat")
	if m := regexp.MustCompile(`ip6 saddr @masq-pools6 ip6 daddr != @all-pools6 counter packets (\d+)`).FindStringSubmatch(table); m == nil || m[1] == "0" {
		t.Errorf("node1's IPv6 masquerade rule did not count the connection:\n%s", table)
	}
	onB, err := l.ListenTCP(b.Netns, netip.AddrPortFrom(b.IP, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer onB.Close()
	if seen, err := l.AskTCP(a.Netns, onB.Addr); err != nil || seen != a.IP {
		t.Errorf("pod a to pod b across nodes: b saw %s (%v), want a's own %s", seen, err, a.IP)
	}

	// hostPorts on node2: 8081 on every address, 8082 on its underlay
	// address only. A second address on node2's uplink shows the
	// difference.
	other := netip.MustParseAddr("fd77::2:1")
	run(t, l, n2.Netns, "ip", "-6", "addr", "add", other.String()+"/64", "dev", "eth0", "nodad")
	hp, err := n2.NewPodNetns("default", "hp6")
	if err != nil {
		t.Fatal(err)
	}
	node6 := lab.NodeAddress6(n2)
	hp.CapabilityArgs = map[string]any{"portMappings": []lab.PortMapping{
		{HostPort: 8081, ContainerPort: 80, Protocol: "tcp"},
		{HostPort: 8082, ContainerPort: 80, Protocol: "tcp", HostIP: node6.String()},
	}}
	if err := hp.Add(); err != nil {
		t.Fatal(err)
	}
	podSrv, err := l.ListenTCP(hp.Netns, netip.AddrPortFrom(hp.IP, 80))
	if err != nil {
		t.Fatal(err)
	}
	defer podSrv.Close()
	for _, to := range []netip.AddrPort{netip.AddrPortFrom(node6, 8081), netip.AddrPortFrom(other, 8081), netip.AddrPortFrom(node6, 8082)} {
		if seen, err := l.AskTCP(out.Server, to); err != nil || seen != lab.OutsideAddr6 {
			t.Errorf("the outside server to hostPort %s of pod %s: the pod saw %s (%v), want the server's %s", to, hp.IP, seen, err, lab.OutsideAddr6)
		}
	}
	if seen, err := l.AskTCP(out.Server, netip.AddrPortFrom(other, 8082)); err == nil {
		t.Errorf("hostPort 8082, bound to %s, answered on %s: the pod saw %s", node6, other, seen)
	}
	maps := run(t, l, n2.Netns, "nft", "list", "table", "inet", "reef-hostport")
	if want := node6.String() + " . tcp . 8082 : " + hp.IP.String() + " . 80"; !strings.Contains(maps, want) {
		t.Errorf("table inet reef-hostport lacks %q:\n%s", want, maps)
	}
	if m := regexp.MustCompile(`map hostports4(-ip)? \{[^}]*elements`).FindString(maps); m != "" {
		t.Errorf("an IPv4 hostPort element on an IPv6-only node: %s\n%s", m, maps)
	}

	// The rest of TestIPv6OnlyNodes finds node2 as it was.
	if err := hp.Del(); err != nil {
		t.Fatal(err)
	}
	run(t, l, n2.Netns, "ip", "-6", "addr", "del", other.String()+"/64", "dev", "eth0")

	// Drift: node1's IPv6 pool taken out of the masquerade's exemption.
	pool := "fd00:10:247::/56"
	run(t, l, n1.Netns, "nft", "delete", "element", "inet", "reef-nat", "all-pools6", "{", pool, "}")
	eventually(t, 10*time.Second, func() string {
		if set := run(t, l, n1.Netns, "nft", "list", "set", "inet", "reef-nat", "all-pools6"); !strings.Contains(set, pool) {
			return "all-pools6 not repaired:\n" + set
		}
		return ""
	})
	if !strings.Contains(n1.Log(), "repairing nftables: set inet reef-nat all-pools6 lacks 1 element(s): "+pool) {
		t.Errorf("node1 logged no repair of all-pools6")
	}
	return time.Since(start)
}
