package conntrack

import (
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
)

// TestFlushAddr: the flush deletes the entries that have the address on
// any side, of its own family (one it opened, one opened to it, one
// DNATed to it: a hostPort's), and keeps every other; a filter the kernel
// ignored would flush them all. The fallback by dump does the same.
func TestFlushAddr(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flush func(netip.Addr) error
	}{{"filtered", FlushAddr}, {"by dump", func(a netip.Addr) error {
		fam := uint8(unix.AF_INET)
		if a.Is6() {
			fam = unix.AF_INET6
		}
		return flushByDump(fam, addrFilters(a))
	}}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := netnstest.New(t)
			netnstest.Run(t, ns, "ip", "link", "set", "lo", "up")
			for _, a := range []string{"192.0.2.1/32", "192.0.2.2/32", "192.0.2.3/32", "192.0.2.4/32", "192.0.2.5/32", "192.0.2.6/32"} {
				netnstest.Run(t, ns, "ip", "addr", "add", a, "dev", "lo")
			}
			for _, a := range []string{"fd00::1/128", "fd00::2/128", "fd00::3/128"} {
				netnstest.Run(t, ns, "ip", "-6", "addr", "add", a, "dev", "lo", "nodad")
			}
			// Conntrack on (of both families: a ct rule), and a hostPort-like DNAT: 192.0.2.5 leads to 192.0.2.6.
			netnstest.Run(t, ns, "nft", "add table inet t; add chain inet t out { type nat hook output priority -100; }; add rule inet t out ip daddr 192.0.2.5 dnat ip to 192.0.2.6;"+
				"add chain inet t track { type filter hook output priority 0; }; add rule inet t track ct state new counter")
			send := func(src, dst string) {
				t.Helper()
				netnstest.SendUDP(t, ns, src, netip.AddrPortFrom(netip.MustParseAddr(dst), 7000).String())
			}
			entries := func() string { return netnstest.Conntrack(t, ns) }
			has := func(s, src, dst string) bool {
				return strings.Contains(s, "src="+src+" dst="+dst+" ")
			}
			send("192.0.2.1", "192.0.2.2") // 192.0.2.1 opened it
			send("192.0.2.3", "192.0.2.4") // opened to 192.0.2.4
			send("192.0.2.3", "192.0.2.5") // DNATed to 192.0.2.6
			send("fd00::1", "fd00::2")
			send("fd00::3", "fd00::2")
			before := entries()
			for _, e := range [][2]string{{"192.0.2.1", "192.0.2.2"}, {"192.0.2.3", "192.0.2.4"}, {"192.0.2.3", "192.0.2.5"}, {"192.0.2.6", "192.0.2.3"}, {"fd00:0000:0000:0000:0000:0000:0000:0001", "fd00:0000:0000:0000:0000:0000:0000:0002"}} {
				if !has(before, e[0], e[1]) {
					t.Fatalf("no entry %s to %s before the test:\n%s", e[0], e[1], before)
				}
			}
			flush := func(a string) {
				t.Helper()
				if err := ns.Do(func(cnins.NetNS) error { return tc.flush(netip.MustParseAddr(a)) }); err != nil {
					t.Fatal(err)
				}
			}
			flush("192.0.2.1")
			after := entries()
			if has(after, "192.0.2.1", "192.0.2.2") {
				t.Errorf("the entry 192.0.2.1 opened survived a flush of 192.0.2.1:\n%s", after)
			}
			if !has(after, "192.0.2.3", "192.0.2.4") || !has(after, "192.0.2.3", "192.0.2.5") || !strings.Contains(after, "ipv6") {
				t.Errorf("a flush of 192.0.2.1 took other entries:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			flush("192.0.2.4")
			flush("192.0.2.6")
			after = entries()
			if has(after, "192.0.2.3", "192.0.2.4") || has(after, "192.0.2.3", "192.0.2.5") {
				t.Errorf("an entry to 192.0.2.4, or one DNATed to 192.0.2.6, survived their flush:\n%s", after)
			}
			flush("fd00::1")
			after = entries()
			if strings.Contains(after, "src=fd00:0000:0000:0000:0000:0000:0000:0001 ") || !strings.Contains(after, "src=fd00:0000:0000:0000:0000:0000:0000:0003 ") {
				t.Errorf("a flush of fd00::1 took the wrong IPv6 entries:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// TestFlushByDumpPort: the fallback for kernels without the flush filter
// takes the entries of a protocol and destination port (a UDP hostPort's)
// of both families, and keeps another port's.
func TestFlushByDumpPort(t *testing.T) {
	ns := netnstest.New(t)
	netnstest.Run(t, ns, "ip", "link", "set", "lo", "up")
	netnstest.Run(t, ns, "nft", "add table inet t; add chain inet t track { type filter hook output priority 0; }; add rule inet t track ct state new counter")
	for _, host := range []string{"127.0.0.1", "::1"} {
		for _, port := range []string{"7080", "7081"} {
			netnstest.SendUDP(t, ns, "", net.JoinHostPort(host, port))
		}
	}
	if err := ns.Do(func(cnins.NetNS) error {
		for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
			if err := flushByDump(fam, []Filter{{Family: fam, Proto: unix.IPPROTO_UDP, DstPort: 7080}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	after := netnstest.Conntrack(t, ns)
	if strings.Contains(after, "dport=7080 ") {
		t.Errorf("an entry of port 7080 survived the dump-and-delete flush:\n%s", after)
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		if !regexp.MustCompile(fam + ` .* dport=7081 `).MatchString(after) {
			t.Errorf("the flush took the %s entry of port 7081:\n%s", fam, after)
		}
	}
}

// TestFlushRefuses: a filter that would take every entry of its family,
// or that the requests cannot say, is refused before anything is sent
// (in a namespace of its own all the same: a filter let through would
// flush every entry there).
func TestFlushRefuses(t *testing.T) {
	ns := netnstest.New(t)
	for _, f := range []Filter{
		{Family: unix.AF_INET},
		{Family: unix.AF_INET6, Reply: true},
		{Family: unix.AF_INET, Dst: netip.MustParseAddr("fd00::1")},
		{Family: unix.AF_INET, DstPort: 53},
		{Family: unix.AF_INET, Reply: true, Proto: unix.IPPROTO_UDP, DstPort: 53},
		{Family: 0, Proto: unix.IPPROTO_UDP},
	} {
		if err := ns.Do(func(cnins.NetNS) error { return Flush(f) }); err == nil {
			t.Errorf("Flush(%+v) = nil, want an error", f)
		}
	}
}
