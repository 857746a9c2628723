package nat

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/nat/nft"
)

// testNetns creates a throw-away network namespace, deleted when the test
// ends, and returns it and a Kernel bound to it. Nothing here touches the
// caller's namespace.
func testNetns(tb testing.TB) (ns.NetNS, *Kernel) {
	tb.Helper()
	n := netnstest.New(tb)
	return n, NewKernel(nftables.WithNetNSFd(int(n.Fd())))
}

// runNFT runs the nft tool in n; tests that need it skip without it.
func runNFT(t *testing.T, n ns.NetNS, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Skip("nft not installed (the nftables package; make test installs it)")
	}
	return netnstest.Run(t, n, append([]string{"nft"}, args...)...)
}

// converge applies nft.Diff(want, kernel) and checks that the kernel then
// matches want.
func converge(t *testing.T, k *Kernel, want []nft.Table) nft.Plan {
	t.Helper()
	have, err := k.Read(IDs(want))
	if err != nil {
		t.Fatal(err)
	}
	p := nft.Diff(want, have)
	if err := k.Apply(p); err != nil {
		t.Fatalf("apply %+v: %v", p.Changes, err)
	}
	have, err = k.Read(IDs(want))
	if err != nil {
		t.Fatal(err)
	}
	if again := nft.Diff(want, have); !again.Empty() {
		t.Fatalf("after applying, the kernel still differs: %+v", again.Changes)
	}
	return p
}

var counters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

func TestKernelCreateAndList(t *testing.T) {
	ns, k := testNetns(t)
	pools := append(testPools(), masq.Pool{CIDR: pfx("10.246.0.0/16"), NATOutgoing: true}) // touches 10.245.0.0/24's neighbour range
	want := Desired(pools, testPods())
	if p := converge(t, k, want); len(p.Changes) != 3 || p.Changes[0].Kind != nft.CreateTable {
		t.Errorf("first apply: %+v, want three nft.CreateTable", p.Changes)
	}
	// What an operator reads.
	out := counters.ReplaceAllString(runNFT(t, ns, "list", "ruleset"), "counter")
	for _, line := range []string{
		"table inet reef-nat {",
		"set all-pools4 {",
		"set masq-pools6 {",
		"type ipv6_addr",
		"type nat hook postrouting priority srcnat + 10; policy accept;",
		`ip saddr @masq-pools4 ip daddr != @all-pools4 counter masquerade fully-random comment "` + masq.Comment + `"`,
		`ip6 saddr @masq-pools6 ip6 daddr != @all-pools6 counter masquerade fully-random comment "` + masq.Comment + `"`,
		"elements = { 10.244.0.0/16, 10.245.0.0/24,",
		"table arp reef {",
		"type filter hook output priority filter; policy accept;",
		`arp operation reply oifname . arp saddr ip @pod-addrs counter drop comment "` + arpfilter.Comment + `"`,
		`elements = { "reef0123456789a" . 10.244.0.5,`,
		`comment "reef: pools with natOutgoing"`,
	} {
		if !strings.Contains(out, line) {
			t.Errorf("nft list ruleset lacks %q:\n%s", line, out)
		}
	}
}

// TestKernelRepairs makes the drift an operator could make with nft, to
// both families' parts of table inet reef-nat and to table arp reef, and
// checks that one nft.Diff and Apply undo it.
func TestKernelRepairs(t *testing.T) {
	ns, k := testNetns(t)
	want := Desired(dualPools(), testPods())
	converge(t, k, want)
	// Table by table: a recreated table is listed after the other.
	runNFT(t, ns, "list", "tables") // skips without nft
	ours := func() string {
		var b strings.Builder
		for _, table := range [][]string{{"inet", "reef-nat"}, {"arp", "reef"}} {
			out, err := netnstest.Output(ns, "nft", "list", "table", table[0], table[1])
			if err != nil {
				out = "(table " + strings.Join(table, " ") + ": " + err.Error() + ")\n"
			}
			b.WriteString(counters.ReplaceAllString(out, "counter"))
		}
		return b.String()
	}
	baseline := ours()
	// ruleHandle is the handle of the chain's rule i (0: the first).
	ruleHandle := func(family, table, chain string, i int) string {
		ms := regexp.MustCompile(`# handle (\d+)`).FindAllStringSubmatch(runNFT(t, ns, "-a", "list", "chain", family, table, chain), -1)
		if len(ms) < 2+i { // the chain's handle, then the rules'
			t.Fatalf("no rule %d in chain %s %s %s", i+1, family, table, chain)
		}
		return ms[1+i][1]
	}
	const v4Rule, v6Rule = 0, 1
	cases := []struct {
		name string
		nft  func() []string
		kind nft.ChangeKind
	}{
		{"delete table inet reef-nat", func() []string { return []string{"delete table inet reef-nat"} }, nft.CreateTable},
		{"delete table arp reef", func() []string { return []string{"delete table arp reef"} }, nft.CreateTable},
		{"flush chain", func() []string { return []string{"flush chain inet reef-nat postrouting"} }, nft.ReplaceRules},
		{"flush table", func() []string { return []string{"flush table arp reef"} }, nft.ReplaceRules},
		{"rule replaced", func() []string {
			return []string{"replace rule inet reef-nat postrouting handle " + ruleHandle("inet", "reef-nat", "postrouting", v4Rule) + " ip saddr @masq-pools4 masquerade"}
		}, nft.ReplaceRules},
		{"IPv6 rule replaced", func() []string {
			return []string{"replace rule inet reef-nat postrouting handle " + ruleHandle("inet", "reef-nat", "postrouting", v6Rule) + " ip6 saddr @masq-pools6 masquerade"}
		}, nft.ReplaceRules},
		{"IPv6 rule deleted", func() []string {
			return []string{"delete rule inet reef-nat postrouting handle " + ruleHandle("inet", "reef-nat", "postrouting", v6Rule)}
		}, nft.ReplaceRules},
		{"rule added", func() []string { return []string{"add rule arp reef output accept"} }, nft.ReplaceRules},
		{"element deleted", func() []string {
			return []string{`delete element arp reef pod-addrs { "reef0123456789a" . 10.244.0.5 }`}
		}, nft.AddElems},
		{"element added", func() []string { return []string{`add element arp reef pod-addrs { "reefzzz" . 10.9.9.9 }`} }, nft.DelElems},
		{"pool deleted", func() []string { return []string{`delete element inet reef-nat all-pools4 { 10.244.0.0/16 }`} }, nft.AddElems},
		{"IPv6 pool deleted from all-pools6", func() []string {
			return []string{`delete element inet reef-nat all-pools6 { fd00:10:245::/64 }`}
		}, nft.AddElems},
		{"IPv6 pool deleted from masq-pools6", func() []string {
			return []string{`delete element inet reef-nat masq-pools6 { fd00:10:244::/56 }`}
		}, nft.AddElems},
		{"pool widened", func() []string {
			return []string{`delete element inet reef-nat masq-pools4 { 10.244.0.0/16 }`, `add element inet reef-nat masq-pools4 { 10.0.0.0/8 }`}
		}, nft.DelElems},
		{"IPv6 pool widened", func() []string {
			return []string{`delete element inet reef-nat masq-pools6 { fd00:10:244::/56 }`, `add element inet reef-nat masq-pools6 { fd00::/8 }`}
		}, nft.DelElems},
		{"IPv6 element no pool has", func() []string { return []string{`add element inet reef-nat all-pools6 { fd99::/64 }`} }, nft.DelElems},
		{"table dormant", func() []string { return []string{"add table inet reef-nat { flags dormant; }"} }, nft.RecreateTable},
		{"chain at another priority", func() []string {
			return []string{"delete chain inet reef-nat postrouting",
				"add chain inet reef-nat postrouting { type nat hook postrouting priority srcnat; policy accept; }"}
		}, nft.RecreateTable},
		{"set deleted", func() []string {
			return []string{"flush chain arp reef output", "delete set arp reef pod-addrs"}
		}, nft.RecreateTable},
		{"IPv6 set deleted", func() []string {
			return []string{"flush chain inet reef-nat postrouting", "delete set inet reef-nat all-pools6"}
		}, nft.RecreateTable},
		{"extra chain", func() []string { return []string{"add chain inet reef-nat mine"} }, nft.RecreateTable},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, cmd := range c.nft() {
				runNFT(t, ns, strings.Fields(cmd)...)
			}
			if ours() == baseline {
				t.Fatalf("%q changed nothing", c.nft())
			}
			p := converge(t, k, want)
			if len(p.Changes) == 0 || p.Changes[0].Kind != c.kind {
				t.Errorf("plan %+v, want first change %s", p.Changes, c.kind)
			}
			if got := ours(); got != baseline {
				t.Errorf("ruleset after repair:\n%s\nwant:\n%s", got, baseline)
			}
		})
	}
}

// TestKernelForeignTables: a kube-proxy-like table with a nat chain at
// srcnat, and a table of another name in the arp family, are neither read
// nor changed, while reef's are created, repaired and deleted beside them.
func TestKernelForeignTables(t *testing.T) {
	ns, k := testNetns(t)
	f, err := os.CreateTemp(t.TempDir(), "kp*.nft")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, `table ip kube-proxy {
	set cluster-ips { type ipv4_addr; elements = { 10.96.0.1 } }
	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		meta mark & 0x00004000 == 0x00004000 masquerade fully-random
	}
}
table arp other {
	chain output {
		type filter hook output priority filter; policy accept;
	}
}
`)
	f.Close()
	runNFT(t, ns, "-f", f.Name())
	foreign := func() string {
		return runNFT(t, ns, "list", "table", "ip", "kube-proxy") + runNFT(t, ns, "list", "table", "arp", "other")
	}
	before := foreign()
	want := Desired(testPools(), testPods())
	converge(t, k, want)
	have, err := k.Read(IDs(want))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range have {
		if !Ours(h.ID) {
			t.Errorf("Read returned %s", h.ID)
		}
	}
	runNFT(t, ns, "delete", "table", "inet", "reef-nat")
	converge(t, k, want)
	if err := k.AddPod(Pod{Veth: "reefnew", IPs: []netip.Addr{addr("10.244.0.99")}}); err != nil {
		t.Fatal(err)
	}
	ids, err := k.OwnTables()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.DeleteTables(ids); err != nil {
		t.Fatal(err)
	}
	if after := foreign(); after != before {
		t.Errorf("foreign tables changed:\n%s\nwas:\n%s", after, before)
	}
	if out := runNFT(t, ns, "list", "tables"); strings.Contains(out, " reef") {
		t.Errorf("reef tables left after DeleteTables:\n%s", out)
	}
}

func TestKernelPodElements(t *testing.T) {
	ns, k := testNetns(t)
	p := Pod{Veth: "reef0123456789a", IPs: []netip.Addr{addr("10.244.0.5")}}
	if err := k.AddPod(p); !errors.Is(err, ErrNoTable) {
		t.Errorf("AddPod without the table: %v, want ErrNoTable", err)
	}
	if err := k.DelPod(p); err != nil {
		t.Errorf("DelPod without the table: %v", err)
	}
	converge(t, k, Desired(testPools(), nil))
	for i := 0; i < 2; i++ {
		if err := k.AddPod(p); err != nil {
			t.Fatalf("AddPod #%d: %v", i+1, err)
		}
	}
	if out := runNFT(t, ns, "list", "set", "arp", "reef", "pod-addrs"); !strings.Contains(out, `"reef0123456789a" . 10.244.0.5`) {
		t.Errorf("element missing after AddPod:\n%s", out)
	}
	for i := 0; i < 2; i++ {
		if err := k.DelPod(p); err != nil {
			t.Fatalf("DelPod #%d: %v", i+1, err)
		}
	}
	if out := runNFT(t, ns, "list", "set", "arp", "reef", "pod-addrs"); strings.Contains(out, "reef0123456789a") {
		t.Errorf("element left after DelPod:\n%s", out)
	}
	if err := k.AddPod(Pod{Veth: "reef-name-too-long", IPs: []netip.Addr{addr("10.244.0.5")}}); err == nil {
		t.Error("AddPod took a 18-character interface name")
	}
}

func hostPortPods() []Pod {
	return []Pod{
		{Veth: "reef0123456789a", IPs: []netip.Addr{addr("10.244.0.5")}, Ports: []hostport.Mapping{
			{Proto: unix.IPPROTO_TCP, Port: 8080, PodPort: 80},
			{Proto: unix.IPPROTO_UDP, Port: 5353, PodPort: 53},
		}},
		{Veth: "reefbbbbbbbbbbb", IPs: []netip.Addr{addr("10.244.0.6")}, Ports: []hostport.Mapping{
			{Proto: unix.IPPROTO_TCP, HostIP: addr("192.168.77.1"), Port: 8080, PodPort: 8000},
			{Proto: unix.IPPROTO_SCTP, Port: 9000, PodPort: 9000},
		}},
		{Veth: "reefccccccccccc", IPs: []netip.Addr{addr("10.244.0.7")}}, // no hostPorts
	}
}

// TestHostPortTableInKernel: table inet reef-hostport as an operator
// reads it, its maps read back equal, elements added and removed per pod,
// a value changed in place (the same hostPort to another pod), and drift
// found.
func TestHostPortTableInKernel(t *testing.T) {
	ns, k := testNetns(t)
	pods := hostPortPods()
	want := Desired(testPools(), pods)
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
	p := Pod{Veth: "reefddddddddddd", IPs: []netip.Addr{addr("10.244.0.8")}, Ports: []hostport.Mapping{{Proto: unix.IPPROTO_TCP, Port: 443, PodPort: 8443}}}
	if err := k.AddPod(p); err != nil {
		t.Fatal(err)
	}
	if out := runNFT(t, ns, "list", "map", "inet", "reef-hostport", "hostports4"); !strings.Contains(out, "tcp . 443 : 10.244.0.8 . 8443") {
		t.Errorf("AddPod's mapping missing:\n%s", out)
	}
	plan := nft.Diff(Desired(testPools(), append(pods, p)), mustRead(t, k, want))
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
	plan = nft.Diff(Desired(testPools(), moved), mustRead(t, k, want))
	if len(plan.Changes) != 2 || plan.Changes[0].Kind != nft.DelElems || plan.Changes[1].Kind != nft.AddElems {
		t.Fatalf("a changed value: %+v, want one nft.DelElems and one nft.AddElems", plan.Changes)
	}
	converge(t, k, Desired(testPools(), moved))

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

// TestKernelIPv6: IPv6 pools in table inet reef-nat beside the IPv4 ones,
// as an operator reads it, and an IPv6 pod's elements: its hostPort, its
// NDP-filter element and no ARP-filter element (ARP has no IPv6), added
// and removed by AddPod and DelPod. Without an IPv6 pool any more, the NDP
// filter is retired and table inet reef-nat keeps its shape, its IPv6
// sets empty.
func TestKernelIPv6(t *testing.T) {
	ns, k := testNetns(t)
	pod := Pod{Veth: "reef0123456789b", IPs: []netip.Addr{addr("fd00:10:244::5")}, Ports: []hostport.Mapping{{Proto: unix.IPPROTO_TCP, Port: 8080, PodPort: 80}}}
	converge(t, k, Desired(dualPools(), nil))
	out := counters.ReplaceAllString(runNFT(t, ns, "list", "table", "inet", "reef-nat"), "counter")
	for _, line := range []string{
		`ip6 saddr @masq-pools6 ip6 daddr != @all-pools6 counter masquerade fully-random comment "` + masq.Comment + `"`,
		"elements = { fd00:10:244::/56,",
		"fd00:10:245::/64 }",
		"elements = { fd00:10:244::/56 }",
		"elements = { 10.244.0.0/16,",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("nft list table inet reef-nat lacks %q:\n%s", line, out)
		}
	}
	for _, set := range []string{"all-pools4", "masq-pools4"} {
		if out := runNFT(t, ns, "list", "set", "inet", "reef-nat", set); strings.Contains(out, "fd00") {
			t.Errorf("an IPv6 pool in set %s:\n%s", set, out)
		}
	}
	if err := k.AddPod(pod); err != nil {
		t.Fatalf("AddPod of an IPv6 pod: %v", err)
	}
	if out := runNFT(t, ns, "list", "table", "inet", "reef-hostport"); !strings.Contains(out, "fd00:10:244::5") {
		t.Errorf("the IPv6 pod's hostPort is missing:\n%s", out)
	}
	if out := runNFT(t, ns, "list", "set", "arp", "reef", "pod-addrs"); strings.Contains(out, "reef0123456789b") {
		t.Errorf("an ARP-filter element for an IPv6 pod:\n%s", out)
	}
	if out := runNFT(t, ns, "list", "set", "ip6", "reef-ndp", "pod-addrs"); !strings.Contains(out, `"reef0123456789b" . fd00:10:244::5`) {
		t.Errorf("the IPv6 pod's NDP-filter element is missing:\n%s", out)
	}
	if err := k.DelPod(pod); err != nil {
		t.Fatalf("DelPod of an IPv6 pod: %v", err)
	}
	if out := runNFT(t, ns, "list", "set", "ip6", "reef-ndp", "pod-addrs"); strings.Contains(out, "fd00:10:244::5") {
		t.Errorf("the IPv6 pod's NDP-filter element is left after DelPod:\n%s", out)
	}

	// No pool IPv6 any more: the NDP filter is retired, the others kept.
	retired := Retired(testPools())
	want := Desired(testPools(), nil)
	have, err := k.Read(append(IDs(want), retired...))
	if err != nil {
		t.Fatal(err)
	}
	plan := nft.Diff(want, have)
	plan.Changes = append(plan.Changes, nft.Retire(retired, have)...)
	if err := k.Apply(plan); err != nil {
		t.Fatalf("apply %+v: %v", plan.Changes, err)
	}
	for _, c := range plan.Changes {
		if c.Kind != nft.DelElems && c.Kind != nft.DeleteTable {
			t.Errorf("without the IPv6 pools: %s %s (%s), want only their elements deleted and the NDP filter", c.Kind, c.Table.ID, c.Why)
		}
	}
	out = runNFT(t, ns, "list", "tables")
	if strings.Contains(out, "table ip6 reef-ndp") {
		t.Errorf("table ip6 reef-ndp is left after retiring it:\n%s", out)
	}
	for _, kept := range []string{"table inet reef-nat", "table arp reef", "table inet reef-hostport"} {
		if !strings.Contains(out, kept) {
			t.Errorf("%q is gone after the IPv6 pools went:\n%s", kept, out)
		}
	}
	if out := runNFT(t, ns, "list", "table", "inet", "reef-nat"); strings.Contains(out, "fd00") || !strings.Contains(out, "10.244.0.0/16") {
		t.Errorf("table inet reef-nat without the IPv6 pools:\n%s", out)
	}
	if out := runNFT(t, ns, "list", "table", "inet", "reef-hostport"); strings.Contains(out, "fd00:10:244::5") {
		t.Errorf("the IPv6 pod's hostPort is left after DelPod:\n%s", out)
	}
}

// TestKernelDualStack: a dual-stack pod has an ARP-filter element for its
// IPv4 address only, and its hostPort leads to both addresses; DelPod
// removes all of it.
func TestKernelDualStack(t *testing.T) {
	ns, k := testNetns(t)
	pools := append(testPools(), masq.Pool{CIDR: pfx("fd00:10:244::/56"), NATOutgoing: true})
	converge(t, k, Desired(pools, nil))
	pod := Pod{Veth: "reef0123456789d", IPs: []netip.Addr{addr("10.244.0.9"), addr("fd00:10:244::9")},
		Ports: []hostport.Mapping{{Proto: unix.IPPROTO_TCP, Port: 8080, PodPort: 80}}}
	if err := k.AddPod(pod); err != nil {
		t.Fatalf("AddPod of a dual-stack pod: %v", err)
	}
	hp := runNFT(t, ns, "list", "table", "inet", "reef-hostport")
	for _, want := range []string{"tcp . 8080 : 10.244.0.9 . 80", "tcp . 8080 : fd00:10:244::9 . 80"} {
		if !strings.Contains(hp, want) {
			t.Errorf("table inet reef-hostport lacks %q:\n%s", want, hp)
		}
	}
	if arp := runNFT(t, ns, "list", "set", "arp", "reef", "pod-addrs"); !strings.Contains(arp, `"reef0123456789d" . 10.244.0.9`) {
		t.Errorf("the ARP-filter element of the pod's IPv4 address is missing:\n%s", arp)
	}
	if ndp := runNFT(t, ns, "list", "set", "ip6", "reef-ndp", "pod-addrs"); !strings.Contains(ndp, `"reef0123456789d" . fd00:10:244::9`) {
		t.Errorf("the NDP-filter element of the pod's IPv6 address is missing:\n%s", ndp)
	}
	// The table the reconcile pass wants has the same elements.
	want := Desired(pools, []Pod{pod})
	have, err := k.Read(IDs(want))
	if err != nil {
		t.Fatal(err)
	}
	if plan := nft.Diff(want, have); len(plan.Changes) != 0 {
		t.Errorf("the kernel after AddPod differs from Desired: %+v", plan.Changes)
	}
	if err := k.DelPod(pod); err != nil {
		t.Fatalf("DelPod of a dual-stack pod: %v", err)
	}
	out := runNFT(t, ns, "list", "ruleset")
	for _, gone := range []string{"10.244.0.9", "fd00:10:244::9"} {
		if strings.Contains(out, gone) {
			t.Errorf("%s is left after DelPod:\n%s", gone, out)
		}
	}
}

// TestKernelCheckPod: CheckPod (CNI CHECK) lists each of a pod's elements
// the kernel lacks, a map element that leads elsewhere, and a missing
// table, and nothing for a pod whose elements are all there.
func TestKernelCheckPod(t *testing.T) {
	ns, k := testNetns(t)
	p := Pod{Veth: "reef0123456789a", IPs: []netip.Addr{addr("10.244.0.5")}, Ports: []hostport.Mapping{
		{Proto: unix.IPPROTO_TCP, Port: 8080, PodPort: 80},
		{Proto: unix.IPPROTO_UDP, HostIP: addr("192.168.77.1"), Port: 5353, PodPort: 53},
	}}
	check := func(want ...string) {
		t.Helper()
		got, err := k.CheckPod(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("CheckPod:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	converge(t, k, Desired(testPools(), nil))
	if err := k.AddPod(p); err != nil {
		t.Fatal(err)
	}
	check()
	runNFT(t, ns, "delete", "element", "inet", "reef-hostport", "hostports4", "{ tcp . 8080 }")
	runNFT(t, ns, "add", "element", "inet", "reef-hostport", "hostports4", "{ tcp . 8080 : 10.244.0.9 . 80 }")
	runNFT(t, ns, "flush", "set", "arp", "reef", "pod-addrs")
	check(`element "reef0123456789a" . 10.244.0.5 of set pod-addrs in table arp reef is missing`,
		"element tcp . 8080 : 10.244.0.5 . 80 of set hostports4 in table inet reef-hostport is missing")
	runNFT(t, ns, "delete", "table", "inet", "reef-hostport")
	check(`element "reef0123456789a" . 10.244.0.5 of set pod-addrs in table arp reef is missing`,
		"table inet reef-hostport is missing")
}
