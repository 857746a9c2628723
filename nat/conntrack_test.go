package nat

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	cnins "github.com/containernetworking/plugins/pkg/ns"

	"github.com/reefcni/reef/internal/netnstest"
)

// conntrackEntries inserts entries with conntrack(8) into a throw-away
// namespace: of the pod's address 10.9.0.1 (and fd00:9::1) as the
// original source, as the original destination, as the reply source of a
// DNAT to it; and of other addresses, which must stay.
func conntrackEntries(t *testing.T) cnins.NetNS {
	t.Helper()
	if _, err := exec.LookPath("conntrack"); err != nil {
		t.Skip("no conntrack(8) to make entries with")
	}
	ns := netnstest.New(t)
	for _, args := range [][]string{
		{"-s", "10.9.0.1", "-d", "10.9.0.2", "-p", "udp", "--sport", "1000", "--dport", "2000"},
		{"-s", "10.9.0.3", "-d", "10.9.0.1", "-p", "tcp", "--sport", "1000", "--dport", "80", "--state", "ESTABLISHED"},
		{"-s", "192.0.2.7", "-d", "10.96.0.10", "-r", "10.9.0.1", "-q", "192.0.2.7", "-p", "udp", "--sport", "1001", "--dport", "53", "--reply-port-src", "53", "--reply-port-dst", "1001"},
		{"-s", "fd00:9::1", "-d", "fd00:9::2", "-p", "udp", "--sport", "1000", "--dport", "2000"},
		{"-s", "10.9.0.4", "-d", "10.9.0.5", "-p", "udp", "--sport", "1000", "--dport", "2000"},
		{"-s", "10.9.0.11", "-d", "10.9.0.5", "-p", "udp", "--sport", "1000", "--dport", "2000"},
		{"-s", "11.9.0.1", "-d", "10.9.0.5", "-p", "udp", "--sport", "1000", "--dport", "2000"},
		{"-s", "fd01:9::1", "-d", "fd00:9::5", "-p", "udp", "--sport", "1000", "--dport", "2000"},
		{"-s", "fd00:9::4", "-d", "fd00:9::1:1", "-p", "udp", "--sport", "1000", "--dport", "2000"},
	} {
		netnstest.Run(t, ns, append([]string{"conntrack", "-I", "-t", "100"}, args...)...)
	}
	return ns
}

func listConntrack(t *testing.T, ns cnins.NetNS) string {
	t.Helper()
	out, err := netnstest.Output(ns, "conntrack", "-L", "-f", "ipv4")
	if err != nil {
		t.Fatalf("conntrack -L: %v: %s", err, out)
	}
	out6, err := netnstest.Output(ns, "conntrack", "-L", "-f", "ipv6")
	if err != nil {
		t.Fatalf("conntrack -L -f ipv6: %v: %s", err, out6)
	}
	return out + out6
}

// checkFlushed: every entry naming 10.9.0.1 (fd00:9::1 for v6) is gone,
// and every other entry stays (a filter the kernel ignored would take
// them all).
func checkFlushed(t *testing.T, ns cnins.NetNS, v6 bool) {
	t.Helper()
	got := listConntrack(t, ns)
	gone, stay := []string{"src=10.9.0.1 ", "dst=10.9.0.1 "}, []string{"src=10.9.0.4 ", "src=10.9.0.11 ", "src=11.9.0.1 ", "src=fd00:9::4 ", "src=fd01:9::1 ", "src=fd00:9::1 "}
	if v6 {
		gone, stay = []string{"src=fd00:9::1 ", "dst=fd00:9::1 "}, []string{"src=10.9.0.4 ", "src=10.9.0.11 ", "src=11.9.0.1 ", "src=fd00:9::4 ", "src=fd01:9::1 ", "src=10.9.0.1 ", "src=10.9.0.3 ", "src=192.0.2.7 "}
	}
	for _, s := range gone {
		if strings.Contains(got, s) {
			t.Errorf("an entry with %q survived:\n%s", s, got)
		}
	}
	for _, s := range stay {
		if !strings.Contains(got, s) {
			t.Errorf("the entry with %q was taken:\n%s", s, got)
		}
	}
}

// TestFlushConntrackOf: the pod's address in the original source, the
// original destination, and the reply source (a DNAT to it); not an
// address that only starts like it, nor the other family's entries.
func TestFlushConntrackOf(t *testing.T) {
	for _, a := range []string{"10.9.0.1", "fd00:9::1"} {
		t.Run(a, func(t *testing.T) {
			ns := conntrackEntries(t)
			if err := ns.Do(func(cnins.NetNS) error { return FlushConntrackOf(netip.MustParseAddr(a)) }); err != nil {
				t.Fatal(err)
			}
			checkFlushed(t, ns, strings.Contains(a, ":"))
		})
	}
}

// TestFlushConntrackOfByDump: the IPv4 fallback takes the same entries.
func TestFlushConntrackOfByDump(t *testing.T) {
	ns := conntrackEntries(t)
	if err := ns.Do(func(cnins.NetNS) error { return flushAddrByDump(netip.MustParseAddr("10.9.0.1"), 2) }); err != nil {
		t.Fatal(err)
	}
	checkFlushed(t, ns, false)
}
