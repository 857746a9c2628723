package hostport

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"testing"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/nat/nft"
)

// TestFlushUDPConntrack: the flush deletes the entries of UDP to the
// hostPort, of both families when it has no hostIP, and keeps every other
// (another port, TCP, another address for a bound port): a filter the
// kernel ignored would flush them all.
func TestFlushUDPConntrack(t *testing.T) {
	ns := netnstest.New(t)
	// The table's nat chains: conntrack on in the namespace.
	if err := nft.NewKernel(nftables.WithNetNSFd(int(ns.Fd()))).Apply(nft.Diff([]nft.Table{Table(nil)}, nil)); err != nil {
		t.Fatal(err)
	}
	send := func(proto string, port int) {
		t.Helper()
		host := "127.0.0.1"
		if proto == "udp6" {
			proto, host = "udp", "::1"
		}
		err := ns.Do(func(cnins.NetNS) error {
			if proto == "tcp" {
				l, err := net.Listen("tcp", net.JoinHostPort(host, fmt.Sprint(port)))
				if err != nil {
					return err
				}
				defer l.Close()
				c, err := net.Dial("tcp", l.Addr().String())
				if err != nil {
					return err
				}
				return c.Close()
			}
			c, err := net.Dial("udp", net.JoinHostPort(host, fmt.Sprint(port)))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte("x"))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	netnstest.Run(t, ns, "ip", "link", "set", "lo", "up")
	entries := func() string { return netnstest.Conntrack(t, ns) }
	send("udp", 7070)
	send("udp6", 7070) // a hostPort without hostIP answers over IPv6 too
	send("udp", 7071)
	send("tcp", 7070)
	before := entries()
	for _, want := range []string{"ipv4     2 udp      17", "ipv6     10 udp      17", "dport=7070", "dport=7071", "tcp      6"} {
		if !strings.Contains(before, want) {
			t.Fatalf("no entry %q to flush before the test:\n%s", want, before)
		}
	}
	// In the test's namespace: the flush works on its caller's.
	flush := func(hp Mapping) {
		t.Helper()
		if err := ns.Do(func(cnins.NetNS) error { return FlushUDPConntrack(hp) }); err != nil {
			t.Fatal(err)
		}
	}
	flush(Mapping{Proto: unix.IPPROTO_UDP, Port: 7070, PodPort: 53})
	after := entries()
	for _, line := range strings.Split(after, "\n") {
		if strings.Contains(line, "udp") && strings.Contains(line, "dport=7070 ") {
			t.Errorf("the hostPort's UDP entry survived: %s", line)
		}
	}
	if !strings.Contains(after, "dport=7071") || !regexp.MustCompile(`tcp .* dport=7070 `).MatchString(after) {
		t.Errorf("the flush took other entries (UDP 7071, TCP 7070):\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Bound to an address: an entry to another address stays.
	send("udp", 7072)
	flush(Mapping{Proto: unix.IPPROTO_UDP, HostIP: addr("192.0.2.1"), Port: 7072, PodPort: 53})
	if !strings.Contains(entries(), "dport=7072") {
		t.Error("a flush bound to 192.0.2.1 took an entry to 127.0.0.1")
	}
}

// TestFlushUDPConntrackIPv6HostIP: a hostPort bound to an IPv6 address
// flushes the entries to that address and keeps those to the port at
// another: the kernel's filter inverts its IPv6 address match, so a
// filtered flush would do the opposite.
func TestFlushUDPConntrackIPv6HostIP(t *testing.T) {
	ns := netnstest.New(t)
	if err := nft.NewKernel(nftables.WithNetNSFd(int(ns.Fd()))).Apply(nft.Diff([]nft.Table{Table(nil)}, nil)); err != nil {
		t.Fatal(err)
	}
	netnstest.Run(t, ns, "ip", "link", "set", "lo", "up")
	netnstest.Run(t, ns, "ip", "-6", "addr", "add", "fd00::9/128", "dev", "lo", "nodad")
	netnstest.Run(t, ns, "nft", "add table inet t; add chain inet t track { type filter hook output priority 0; }; add rule inet t track ct state new counter")
	for _, host := range []string{"::1", "fd00::9"} {
		netnstest.SendUDP(t, ns, "", net.JoinHostPort(host, "7090"))
	}
	out := netnstest.Conntrack(t, ns)
	const to9 = "dst=fd00:0000:0000:0000:0000:0000:0000:0009 sport="
	const to1 = "dst=0000:0000:0000:0000:0000:0000:0000:0001 sport="
	if !strings.Contains(out, to9) || !strings.Contains(out, to1) {
		t.Fatalf("no entries to flush before the test:\n%s", out)
	}
	if err := ns.Do(func(cnins.NetNS) error {
		return FlushUDPConntrack(Mapping{Proto: unix.IPPROTO_UDP, HostIP: addr("fd00::9"), Port: 7090, PodPort: 53})
	}); err != nil {
		t.Fatal(err)
	}
	after := netnstest.Conntrack(t, ns)
	if strings.Contains(after, to9) {
		t.Errorf("the entry to the hostIP fd00::9 survived its flush:\n%s", after)
	}
	if !strings.Contains(after, to1) {
		t.Errorf("the flush of a hostPort bound to fd00::9 took the entry to ::1:\n%s", after)
	}
}
