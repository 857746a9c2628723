package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/internal/lab"
)

// nodeBehindRouter is a lab with one running node and the outside world
// (a router and a server host behind it), the node's default route
// through the router.
func nodeBehindRouter(t *testing.T) (*lab.Lab, *lab.Outside, *lab.Node) {
	t.Helper()
	needNATTools(t, "nft")
	l := newLab(t)
	out, err := l.AddOutside()
	if err != nil {
		t.Fatal(err)
	}
	n, err := l.AddNode("node1", lab.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := out.DefaultRoute(n); err != nil {
		t.Fatal(err)
	}
	return l, out, n
}

// hostPortPod adds a pod through libcni with the portMappings a runtime
// passes, and starts the probe agent's servers in it (TCP and UDP 80, 81).
func hostPortPod(t *testing.T, n *lab.Node, name string, maps ...lab.PortMapping) (*lab.Pod, error) {
	t.Helper()
	p, err := n.NewPodNetns("default", name)
	if err != nil {
		t.Fatal(err)
	}
	p.CapabilityArgs = map[string]any{"portMappings": maps}
	if err := p.Add(); err != nil {
		return p, err
	}
	// Lab.Close stops the servers: a pod made in a subtest outlives it.
	if _, err := n.Lab.ServePorts(p.Netns); err != nil {
		t.Fatal(err)
	}
	return p, nil
}

// probeOne probes one target from netns and returns the reply ("" and
// the error when it got none).
func probeOne(t *testing.T, l *lab.Lab, netns, target string) (string, string) {
	t.Helper()
	res, err := l.Probe(netns, 2*time.Second, []string{target})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].OK {
		return "", res[0].Err
	}
	return res[0].Reply, ""
}

// TestHostPort drives hostPorts through libcni with the capability
// arguments a runtime passes, on one node with an outside client behind a
// router: TCP and UDP from outside (the pod sees the client's address),
// from another pod, from the pod itself (hairpin), from the node (its
// address and 127.0.0.1); a mapping bound to one of the node's addresses;
// a port another pod holds refused and free after its DEL; reef's table
// deleted and flushed by hand and repaired; a kube-proxy table beside
// reef's; the stale UDP conntrack entry of a client flushed at ADD.
func TestHostPort(t *testing.T) {
	l, out, n := nodeBehindRouter(t)
	// A second address of the node, for a mapping bound to one address.
	other := netip.MustParseAddr("192.168.77.250")
	run(t, l, n.Netns, "ip", "addr", "add", other.String()+"/24", "dev", "eth0")
	node := n.Address.String()

	web, err := hostPortPod(t, n, "web",
		lab.PortMapping{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
		lab.PortMapping{HostPort: 8080, ContainerPort: 81, Protocol: "udp"},
		lab.PortMapping{HostPort: 9090, ContainerPort: 81, Protocol: "tcp", HostIP: other.String()})
	if err != nil {
		t.Fatal(err)
	}
	client := newPod(t, n, "client")

	// seen: the probe got an answer, from whom the server says it saw.
	seen := func(t *testing.T, from, target, who string) {
		t.Helper()
		reply, why := probeOne(t, l, from, target)
		if reply == "" {
			t.Errorf("%s from %s: no answer: %s", target, from, why)
			return
		}
		if !strings.Contains(reply, " "+who+":") {
			t.Errorf("%s from %s: the pod saw %q, want the source %s", target, from, reply, who)
		}
	}
	refused := func(t *testing.T, from, target string) {
		t.Helper()
		if reply, _ := probeOne(t, l, from, target); reply != "" {
			t.Errorf("%s from %s answered %q, want no answer", target, from, reply)
		}
	}

	t.Run("from outside: the pod sees the client's address", func(t *testing.T) {
		seen(t, out.Server, "tcp:"+node+":8080", lab.OutsideAddr.String())
		seen(t, out.Server, "udp:"+node+":8080", lab.OutsideAddr.String())
	})
	t.Run("from another pod: the pod sees the other pod's address", func(t *testing.T) {
		seen(t, client.Netns, "tcp:"+node+":8080", client.IP.String())
		seen(t, client.Netns, "udp:"+node+":8080", client.IP.String())
	})
	t.Run("from the pod itself (hairpin): masqueraded to the node", func(t *testing.T) {
		seen(t, web.Netns, "tcp:"+node+":8080", node)
		seen(t, web.Netns, "udp:"+node+":8080", node)
	})
	t.Run("from the node: its own address and 127.0.0.1", func(t *testing.T) {
		seen(t, n.Netns, "tcp:"+node+":8080", node)
		reply, why := probeOne(t, l, n.Netns, "tcp:127.0.0.1:8080")
		if reply == "" {
			t.Errorf("tcp:127.0.0.1:8080 from the node: no answer: %s", why)
		}
	})
	t.Run("a mapping bound to one address answers there only", func(t *testing.T) {
		seen(t, out.Server, "tcp:"+other.String()+":9090", lab.OutsideAddr.String())
		refused(t, out.Server, "tcp:"+node+":9090")
	})
	t.Run("nft list shows the mappings", func(t *testing.T) {
		table := run(t, l, n.Netns, "nft", "list", "table", "inet", "reef-hostport")
		for _, want := range []string{
			"tcp . 8080 : " + web.IP.String() + " . 80",
			"udp . 8080 : " + web.IP.String() + " . 81",
			other.String() + " . tcp . 9090 : " + web.IP.String() + " . 81",
		} {
			if !strings.Contains(table, want) {
				t.Errorf("table inet reef-hostport lacks %q:\n%s", want, table)
			}
		}
	})

	t.Run("reef status and ipam show list the mappings", func(t *testing.T) {
		st, err := n.Reef("status")
		if err != nil {
			t.Fatal(err)
		}
		ipam, err := n.Reef("ipam", "show", "--show-allocations")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"tcp 8080 -> 80 (default/web)", "udp 8080 -> 81 (default/web)", "tcp " + other.String() + ":9090 -> 81 (default/web)"} {
			if !strings.Contains(st, want) {
				t.Errorf("reef status lacks %q:\n%s", want, st)
			}
		}
		if want := "tcp 8080 -> 80, udp 8080 -> 81, tcp " + other.String() + ":9090 -> 81"; !strings.Contains(ipam, want) {
			t.Errorf("reef ipam show --show-allocations lacks %q:\n%s", want, ipam)
		}
	})
	t.Run("a port another pod holds is refused, and free after its DEL", func(t *testing.T) {
		_, err := hostPortPod(t, n, "web2", lab.PortMapping{HostPort: 8080, ContainerPort: 80, Protocol: "tcp", HostIP: other.String()})
		var cerr *types.Error
		if !errors.As(err, &cerr) || cerr.Code != cniserver.ErrHostPortTaken {
			t.Fatalf("ADD of a second pod with hostPort 8080: %v, want CNI code %d", err, cniserver.ErrHostPortTaken)
		}
		for _, want := range []string{"pod default/web2: ", "8080", "held by pod default/web ("} {
			if !strings.Contains(cerr.Msg, want) {
				t.Errorf("the error %q does not name %q", cerr.Msg, want)
			}
		}
		if err := web.Del(); err != nil {
			t.Fatal(err)
		}
		refused(t, out.Server, "tcp:"+node+":8080")
		web2, err := hostPortPod(t, n, "web3", lab.PortMapping{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"})
		if err != nil {
			t.Fatalf("ADD after the holder's DEL: %v", err)
		}
		seen(t, out.Server, "tcp:"+node+":8080", lab.OutsideAddr.String())
		web = web2
	})

	t.Run("drift: the table deleted and a mapping deleted by hand come back", func(t *testing.T) {
		run(t, l, n.Netns, "nft", "delete", "table", "inet", "reef-hostport")
		refused(t, out.Server, "tcp:"+node+":8080")
		eventually(t, 10*time.Second, func() string {
			if reply, why := probeOne(t, l, out.Server, "tcp:"+node+":8080"); reply == "" {
				return "no answer after the table was deleted: " + why
			}
			return ""
		})
		run(t, l, n.Netns, "nft", "delete", "element", "inet", "reef-hostport", "hostports4", "{ tcp . 8080 }")
		eventually(t, 10*time.Second, func() string {
			if reply, why := probeOne(t, l, out.Server, "tcp:"+node+":8080"); reply == "" {
				return "no answer after the element was deleted: " + why
			}
			return ""
		})
		if !strings.Contains(n.Log(), "repairing nftables") {
			t.Error("the daemon logged no repair")
		}
	})

	t.Run("the daemon stopped and restarted: the mapping answers throughout, nothing repaired", func(t *testing.T) {
		if err := n.Stop(); err != nil {
			t.Fatal(err)
		}
		seen(t, out.Server, "tcp:"+node+":8080", lab.OutsideAddr.String())
		repairs := strings.Count(n.Log(), "repairing nftables")
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		seen(t, out.Server, "tcp:"+node+":8080", lab.OutsideAddr.String())
		waitPass(t, n)
		if got := strings.Count(n.Log(), "repairing nftables"); got != repairs {
			t.Errorf("the restarted daemon repaired nftables %d time(s): its tables were in line", got-repairs)
		}
	})
	t.Run("beside a kube-proxy table", func(t *testing.T) {
		// kube-proxy's nftables mode, cut down: a Service address DNATed to
		// the pod at dstnat, before reef's hostPorts (dstnat + 10).
		f, err := os.CreateTemp(t.TempDir(), "kube-proxy-*.nft")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, `table ip kube-proxy {
	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr 10.96.0.10 tcp dport 80 dnat to %s:80
	}
	chain nat-output {
		type nat hook output priority -100; policy accept;
		ip daddr 10.96.0.10 tcp dport 80 dnat to %s:80
	}
	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
	}
}
`, web.IP, web.IP)
		f.Close()
		run(t, l, n.Netns, "nft", "-f", f.Name())
		before := run(t, l, n.Netns, "nft", "list", "table", "ip", "kube-proxy")
		run(t, l, n.Netns, "ip", "route", "add", "10.96.0.10/32", "dev", "eth0")
		seen(t, client.Netns, "tcp:10.96.0.10:80", client.IP.String())
		seen(t, out.Server, "tcp:"+node+":8080", lab.OutsideAddr.String())
		seen(t, n.Netns, "tcp:"+node+":8080", node)
		if err := n.WaitPasses(2, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if after := run(t, l, n.Netns, "nft", "list", "table", "ip", "kube-proxy"); nftCounters.ReplaceAllString(after, "") != nftCounters.ReplaceAllString(before, "") {
			t.Errorf("kube-proxy's table changed:\n%s\nwas:\n%s", after, before)
		}
	})

	t.Run("a client's stale UDP conntrack entry is flushed at ADD", func(t *testing.T) {
		// A client sends to UDP 7070 before any pod maps it, from a fixed
		// source port: conntrack keeps an entry to the node itself. A pod
		// then maps 7070; without the flush, the client's datagrams would
		// follow the old entry for as long as it keeps sending.
		var c *net.UDPConn
		err := ns.WithNetNSPath(lab.NetnsPath(out.Server), func(ns.NetNS) error {
			var err error
			c, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lab.OutsideAddr, 40123)),
				net.UDPAddrFromAddrPort(netip.AddrPortFrom(n.Address, 7070)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range 3 {
			c.Write([]byte("before"))
			time.Sleep(100 * time.Millisecond) // a client that keeps sending, 10 a second: traffic, not a wait
		}
		if _, err := hostPortPod(t, n, "udp", lab.PortMapping{HostPort: 7070, ContainerPort: 80, Protocol: "udp"}); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 256)
		var got string
		for range 10 {
			c.Write([]byte("after"))
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if k, err := c.Read(buf); err == nil {
				got = string(buf[:k])
				break
			}
		}
		if !strings.HasPrefix(got, "after from "+lab.OutsideAddr.String()+":40123") {
			t.Errorf("the client's datagrams after the ADD got %q, want the pod's echo", got)
		}
	})

	t.Run("a deleted pod's conntrack entries are not its address's next pod's", func(t *testing.T) {
		// A client talks to a pod through UDP hostPort 7071 and keeps
		// sending after the pod's DEL. The next pod gets the same address
		// (the lowest free) and asks for no hostPort: the client's old
		// DNAT entry must not lead to it.
		a, err := hostPortPod(t, n, "reused-a", lab.PortMapping{HostPort: 7071, ContainerPort: 80, Protocol: "udp"})
		if err != nil {
			t.Fatal(err)
		}
		var c *net.UDPConn
		err = ns.WithNetNSPath(lab.NetnsPath(out.Server), func(ns.NetNS) error {
			var err error
			c, err = net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(lab.OutsideAddr, 40124)),
				net.UDPAddrFromAddrPort(netip.AddrPortFrom(n.Address, 7071)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// ask returns the echo of msg: echoes of an earlier message (sent
		// again while its first echo was slow) are skipped, or the
		// client would take one of pod a's for pod b's answer.
		ask := func(msg string) string {
			buf := make([]byte, 256)
			for range 10 {
				c.Write([]byte(msg))
				c.SetReadDeadline(time.Now().Add(300 * time.Millisecond)) // a client that keeps sending: traffic, not a wait
				for {
					k, err := c.Read(buf)
					if err != nil {
						break
					}
					if got := string(buf[:k]); strings.HasPrefix(got, msg+" from ") {
						return got
					}
				}
			}
			return ""
		}
		if got := ask("to a"); !strings.HasPrefix(got, "to a from ") {
			t.Fatalf("the client got %q from pod a's hostPort, want its echo", got)
		}
		if err := a.Del(); err != nil {
			t.Fatal(err)
		}
		ask("gap") // the client keeps sending, and its old entry with it
		b, err := hostPortPod(t, n, "reused-b")
		if err != nil {
			t.Fatal(err)
		}
		if b.IP != a.IP {
			t.Fatalf("pod b got %s, not pod a's freed %s: nothing to show", b.IP, a.IP)
		}
		if got := ask("to b"); got != "" {
			t.Errorf("pod b, at pod a's address %s with no hostPort, answered on a's hostPort 7071: %q", b.IP, got)
		}
	})
}

// TestCRIHostPort: a pod sandbox through containerd's CRI (crictl runp)
// with port_mappings and bandwidth annotations, as kubelet writes them:
// containerd passes them to reef through the conflist's capabilities, the
// hostPort answers from outside with the client's address, reef records
// the limits, and the pod's removal frees the port.
func TestCRIHostPort(t *testing.T) {
	l, out, n := nodeBehindRouter(t)
	c := startContainerd(t, n, lab.ContainerdOptions{})
	ctx := criCtx(t)
	p, err := c.RunPodWith(ctx, "default", "ingress", lab.CRIPodOptions{
		PortMappings: []lab.CRIPortMapping{{Protocol: 0, ContainerPort: 80, HostPort: 8080}, {Protocol: 1, ContainerPort: 81, HostPort: 8081}},
		Annotations:  map[string]string{"kubernetes.io/ingress-bandwidth": "10M", "kubernetes.io/egress-bandwidth": "20M"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.ServePorts(p.Netns()); err != nil {
		t.Fatal(err)
	}
	node := n.Address.String()
	for _, target := range []string{"tcp:" + node + ":8080", "udp:" + node + ":8081"} {
		reply, why := probeOne(t, l, out.Server, target)
		if !strings.Contains(reply, " "+lab.OutsideAddr.String()+":") {
			t.Errorf("%s from outside: %q %s, want an answer that saw %s", target, reply, why, lab.OutsideAddr)
		}
	}
	ipam, err := n.Reef("ipam", "show", "--show-allocations")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tcp 8080 -> 80, udp 8081 -> 81", "in 10Mbit/s", "out 20Mbit/s"} {
		if !strings.Contains(ipam, want) {
			t.Errorf("reef ipam show --show-allocations lacks %q:\n%s", want, ipam)
		}
	}
	t.Logf("reef ipam show --show-allocations:\n%s", ipam)
	if _, err := c.Run(ctx, "stopp", p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(ctx, "rmp", p.ID); err != nil {
		t.Fatal(err)
	}
	if table := run(t, l, n.Netns, "nft", "list", "table", "inet", "reef-hostport"); strings.Contains(table, "8080") {
		t.Errorf("the mapping is left after the sandbox's removal:\n%s", table)
	}
}
