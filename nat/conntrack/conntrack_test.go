package conntrack

import (
	"net/netip"
	"strings"
	"testing"

	cnins "github.com/containernetworking/plugins/pkg/ns"

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
	}{{"filtered", FlushAddr}, {"by dump", flushByDump}} {
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
