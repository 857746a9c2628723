package e2e

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/reefcni/reef/internal/lab"
)

// TestDualStackNATAndHostIP shows, through the real binaries, two things
// of issue 29 that only unit tests had shown, on two dual-stack nodes (an
// IPv4 and an IPv6 address each, not IPv6-only) behind the lab's router:
//
//   - natOutgoing on an IPv6 pool: a pod of node1's IPv6 pool
//     (natOutgoing: true, the default) reaches the outside server over
//     IPv6 with node1's IPv6 address; a pod of node2's IPv6 pool with
//     natOutgoing: false, with its own (the router routes that pool to
//     node2, as a network that routes a pool without NAT does). A
//     masquerade that ignored the flag fails it.
//   - hostPort with a hostIP on a dual-stack node: a pod on node1 maps
//     8082 on node1's IPv6 address and 8083 on its IPv4 address; the
//     outside server reaches [IPv6]:8082 over IPv6 and IPv4:8083 over
//     IPv4, the pod seeing the server's address of that family, and
//     neither port on the other family's address.
func TestDualStackNATAndHostIP(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	out, err := l.AddOutside()
	if err != nil {
		t.Fatal(err)
	}
	pool4 := "  - cidr: " + dualPool4.String() + "\n"
	plainPool6 := netip.MustParsePrefix("fd00:10:245::/120")
	n1 := startNode(t, l, "node1", lab.NodeOptions{Extra: "pools:\n" + pool4 + "  - cidr: " + dualPool6.String() + "\n"})
	n2 := startNode(t, l, "node2", lab.NodeOptions{Extra: "pools:\n" + pool4 + "  - cidr: " + plainPool6.String() + "\n    natOutgoing: false\n"})
	for _, n := range []*lab.Node{n1, n2} {
		if err := out.DefaultRoute(n); err != nil {
			t.Fatal(err)
		}
	}
	if err := out.AddIPv6(n1, n2); err != nil {
		t.Fatal(err)
	}
	if err := out.Route(plainPool6, lab.NodeAddress6(n2)); err != nil {
		t.Fatal(err)
	}
	srv, err := l.ListenTCP(out.Server, netip.AddrPortFrom(lab.OutsideAddr6, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()

	t.Run("natOutgoing on an IPv6 pool", func(t *testing.T) {
		a, b := newPod(t, n1, "v6nat-a"), newPod(t, n2, "v6nat-b")
		_, a6 := dualPod(t, l, a, dualPool4, dualPool6)
		_, b6 := dualPod(t, l, b, dualPool4, plainPool6)
		if seen, err := l.AskTCP(a.Netns, srv.Addr); err != nil || seen != lab.NodeAddress6(n1) {
			t.Errorf("pod a (%s, natOutgoing: true) to the outside server: it saw %s (%v), want node1's %s", a6, seen, err, lab.NodeAddress6(n1))
		}
		if seen, err := l.AskTCP(b.Netns, srv.Addr); err != nil || seen != b6 {
			t.Errorf("pod b (%s, natOutgoing: false) to the outside server: it saw %s (%v), want b's own %s", b6, seen, err, b6)
		}
		masq := run(t, l, n2.Netns, "nft", "list", "set", "inet", "reef-nat", "masq-pools6")
		all := run(t, l, n2.Netns, "nft", "list", "set", "inet", "reef-nat", "all-pools6")
		if strings.Contains(masq, plainPool6.String()) || !strings.Contains(all, plainPool6.String()) {
			t.Errorf("node2: want %s in all-pools6 and not in masq-pools6:\n%s%s", plainPool6, masq, all)
		}
	})

	t.Run("hostPort on an IPv6 and an IPv4 hostIP of a dual-stack node", func(t *testing.T) {
		node4, node6 := n1.Address, lab.NodeAddress6(n1)
		c, err := n1.NewPodNetns("default", "v6hp")
		if err != nil {
			t.Fatal(err)
		}
		c.CapabilityArgs = map[string]any{"portMappings": []lab.PortMapping{
			{HostPort: 8082, ContainerPort: 80, Protocol: "tcp", HostIP: node6.String()},
			{HostPort: 8083, ContainerPort: 80, Protocol: "tcp", HostIP: node4.String()},
		}}
		if err := c.Add(); err != nil {
			t.Fatal(err)
		}
		c4, c6 := dualPod(t, l, c, dualPool4, dualPool6)
		// The pod answers on port 80 of both its addresses: a port that
		// does not answer on an address is the mapping's doing.
		for _, a := range []netip.Addr{c4, c6} {
			s, err := l.ListenTCP(c.Netns, netip.AddrPortFrom(a, 80))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
		}
		for _, h := range []struct {
			to     netip.AddrPort
			client netip.Addr
		}{{netip.AddrPortFrom(node6, 8082), lab.OutsideAddr6}, {netip.AddrPortFrom(node4, 8083), lab.OutsideAddr}} {
			if seen, err := l.AskTCP(out.Server, h.to); err != nil || seen != h.client {
				t.Errorf("the outside server to hostPort %s: the pod saw %s (%v), want the server's %s", h.to, seen, err, h.client)
			}
		}
		for _, to := range []netip.AddrPort{netip.AddrPortFrom(node4, 8082), netip.AddrPortFrom(node6, 8083)} {
			if seen, err := l.AskTCP(out.Server, to); err == nil {
				t.Errorf("hostPort %d answered on %s, an address of the other family than its hostIP: the pod saw %s", to.Port(), to, seen)
			}
		}
		table := run(t, l, n1.Netns, "nft", "list", "table", "inet", "reef-hostport")
		for _, want := range []string{
			node6.String() + " . tcp . 8082 : " + c6.String() + " . 80",
			node4.String() + " . tcp . 8083 : " + c4.String() + " . 80",
		} {
			if !strings.Contains(table, want) {
				t.Errorf("table inet reef-hostport lacks %q:\n%s", want, table)
			}
		}
	})
}
