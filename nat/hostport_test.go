package nat

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/nat/nft"
)

func hostPortPods() []Pod {
	return []Pod{
		{Veth: "reef0123456789a", IP: addr("10.244.0.5"), Ports: []HostPort{
			{Proto: unix.IPPROTO_TCP, Port: 8080, PodPort: 80},
			{Proto: unix.IPPROTO_UDP, Port: 5353, PodPort: 53},
		}},
		{Veth: "reefbbbbbbbbbbb", IP: addr("10.244.0.6"), Ports: []HostPort{
			{Proto: unix.IPPROTO_TCP, HostIP: addr("192.168.77.1"), Port: 8080, PodPort: 8000},
			{Proto: unix.IPPROTO_SCTP, Port: 9000, PodPort: 9000},
		}},
		{Veth: "reefccccccccccc", IP: addr("10.244.0.7")}, // no hostPorts
	}
}

// TestHostPortTableInKernel: the table as an operator reads it, its maps
// read back equal, elements added and removed per pod, a value changed in
// place (the same hostPort to another pod), and drift found.
func TestHostPortTableInKernel(t *testing.T) {
	ns, k := testNetns(t)
	pods := hostPortPods()
	want := Desired(IPv4, testPools(), pods)
	converge(t, k, want)
	out := counters.ReplaceAllString(runNFT(t, ns, "list", "table", "inet", "reef-hostport"), "counter")
	for _, line := range []string{
		"type inet_proto . inet_service : ipv4_addr . inet_service",
		"tcp . 8080 : 10.244.0.5 . 80",
		"udp . 5353 : 10.244.0.5 . 53",
		"sctp . 9000 : 10.244.0.6 . 9000",
		"type ipv4_addr . inet_proto . inet_service : ipv4_addr . inet_service",
		"192.168.77.1 . tcp . 8080 : 10.244.0.6 . 8000",
		"type nat hook prerouting priority dstnat + 10; policy accept;",
		"type nat hook output priority -90; policy accept;",
		"fib daddr type local jump hostports",
		"meta nfproto ipv4 counter dnat ip to ip daddr . meta l4proto . th dport map @hostports4-ip",
		"meta nfproto ipv4 counter dnat ip to meta l4proto . th dport map @hostports4",
		"meta nfproto ipv6 counter dnat ip6 to ip6 daddr . meta l4proto . th dport map @hostports6-ip",
		"meta nfproto ipv6 counter dnat ip6 to meta l4proto . th dport map @hostports6",
		"type nat hook postrouting priority srcnat + 10; policy accept;",
		"ct status dnat ip saddr . ip daddr @hairpin4 counter masquerade",
		"ct status dnat ip6 saddr . ip6 daddr @hairpin6 counter masquerade",
		`ct status dnat ip saddr 127.0.0.0/8 oifname "reef*" counter masquerade`,
		"10.244.0.5 . 10.244.0.5",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("nft list lacks %q:\n%s", line, out)
		}
	}
	if strings.Contains(out, "10.244.0.7") {
		t.Errorf("a pod without hostPorts is in the table:\n%s", out)
	}

	// Per pod, as ADD and DEL do it.
	p := Pod{Veth: "reefddddddddddd", IP: addr("10.244.0.8"), Ports: []HostPort{{Proto: unix.IPPROTO_TCP, Port: 443, PodPort: 8443}}}
	if err := k.AddPod(p); err != nil {
		t.Fatal(err)
	}
	if out := runNFT(t, ns, "list", "map", "inet", "reef-hostport", "hostports4"); !strings.Contains(out, "tcp . 443 : 10.244.0.8 . 8443") {
		t.Errorf("AddPod's mapping missing:\n%s", out)
	}
	plan := nft.Diff(Desired(IPv4, testPools(), append(pods, p)), mustRead(t, k, want))
	if !plan.Empty() {
		t.Errorf("after AddPod the kernel differs from the desired tables with the pod: %+v", plan.Changes)
	}
	for range 2 {
		if err := k.DelPod(p); err != nil {
			t.Fatal(err)
		}
	}
	if out := runNFT(t, ns, "list", "table", "inet", "reef-hostport"); strings.Contains(out, "10.244.0.8") {
		t.Errorf("DelPod left the pod's elements:\n%s", out)
	}

	// The same hostPort, now another pod's: the value changes in place.
	moved := hostPortPods()
	moved[0].Ports[0].PodPort = 81
	plan = nft.Diff(Desired(IPv4, testPools(), moved), mustRead(t, k, want))
	if len(plan.Changes) != 2 || plan.Changes[0].Kind != nft.DelElems || plan.Changes[1].Kind != nft.AddElems {
		t.Fatalf("a changed value: %+v, want one nft.DelElems and one nft.AddElems", plan.Changes)
	}
	converge(t, k, Desired(IPv4, testPools(), moved))

	// Drift: a mapping deleted by hand, the table deleted.
	runNFT(t, ns, "delete", "element", "inet", "reef-hostport", "hostports4", "{ udp . 5353 }")
	plan = nft.Diff(want, mustRead(t, k, want))
	if plan.Empty() || !strings.Contains(plan.Changes[len(plan.Changes)-1].Why, "udp . 5353 : 10.244.0.5 . 53") {
		t.Errorf("a deleted mapping: %+v", plan.Changes)
	}
	converge(t, k, want)
	runNFT(t, ns, "delete", "table", "inet", "reef-hostport")
	if err := k.AddPod(p); !errors.Is(err, ErrNoTable) {
		t.Errorf("AddPod with hostPorts and no table: %v, want ErrNoTable", err)
	}
	converge(t, k, want)
}

func mustRead(t *testing.T, k *Kernel, want []nft.Table) []nft.Table {
	t.Helper()
	have, err := k.Read(IDs(want))
	if err != nil {
		t.Fatal(err)
	}
	return have
}

func TestHostPortElems(t *testing.T) {
	es := HostPortElems(HostPortPod{IP: addr("10.244.0.5"), Ports: []HostPort{
		{Proto: unix.IPPROTO_TCP, Port: 80, PodPort: 8080},
		{Proto: unix.IPPROTO_TCP, HostIP: addr("fd00::1"), Port: 80, PodPort: 8080}, // another family: not for this pod
	}})
	want := nft.Elem{Proto: unix.IPPROTO_TCP, Port: 80, Value: netip.AddrPortFrom(addr("10.244.0.5"), 8080)}
	if len(es["hostports4"]) != 1 || es["hostports4"][0] != want || len(es["hostports6-ip"]) != 0 || len(es["hairpin4"]) != 1 {
		t.Errorf("elements %v", es)
	}
	if got := want.String(); got != "tcp . 80 : 10.244.0.5 . 8080" {
		t.Errorf("String %q", got)
	}
}

// TestFlushUDPConntrack: the flush deletes the entries of UDP to the
// hostPort and keeps every other (another port, TCP, another address for
// a bound port): a filter the kernel ignored would flush them all.
func TestFlushUDPConntrack(t *testing.T) {
	ns, k := testNetns(t)
	converge(t, k, Desired(IPv4, testPools(), nil)) // nat chains: conntrack on in the namespace
	send := func(proto string, port int) {
		t.Helper()
		err := ns.Do(func(cnins.NetNS) error {
			if proto == "tcp" {
				l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
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
			c, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", port))
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
	runNFT(t, ns, "list", "tables") // skips without nft
	netnstest.Run(t, ns, "ip", "link", "set", "lo", "up")
	entries := func() string {
		out, err := netnstest.Output(ns, "cat", "/proc/net/nf_conntrack")
		if err != nil {
			t.Skipf("no /proc/net/nf_conntrack (nf_conntrack's proc file): %v: %s", err, out)
		}
		return string(out)
	}
	send("udp", 7070)
	send("udp", 7071)
	send("tcp", 7070)
	before := entries()
	for _, want := range []string{"udp      17", "dport=7070", "dport=7071", "tcp      6"} {
		if !strings.Contains(before, want) {
			t.Fatalf("no entry %q to flush before the test:\n%s", want, before)
		}
	}
	// In the test's namespace: the flush works on its caller's.
	flush := func(hp HostPort) {
		t.Helper()
		if err := ns.Do(func(cnins.NetNS) error { return FlushUDPConntrack(hp) }); err != nil {
			t.Fatal(err)
		}
	}
	flush(HostPort{Proto: unix.IPPROTO_UDP, Port: 7070, PodPort: 53})
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
	flush(HostPort{Proto: unix.IPPROTO_UDP, HostIP: addr("192.0.2.1"), Port: 7072, PodPort: 53})
	if !strings.Contains(entries(), "dport=7072") {
		t.Error("a flush bound to 192.0.2.1 took an entry to 127.0.0.1")
	}
}
