package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/routes"
)

// needNATTools fails the test when a tool it drives is missing.
func needNATTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed (make test-e2e installs it: TEST_PKGS in the Makefile)", tool)
		}
	}
}

var nftCounters = regexp.MustCompile(`counter packets \d+ bytes \d+`)

// nftReefTables is reef's masquerade and ARP tables as `nft list` prints
// them, counters blanked, or a note of what is missing.
func nftReefTables(n *lab.Node) string {
	var b strings.Builder
	for _, table := range []string{"inet reef-nat", "arp reef"} {
		out, err := n.Lab.Run(n.Netns, append([]string{"nft", "list", "table"}, strings.Fields(table)...)...)
		if err != nil {
			out = "(table " + table + " missing)\n"
		}
		b.WriteString(nftCounters.ReplaceAllString(out, "counter"))
	}
	return b.String()
}

// nftPodSet returns the elements of set arp reef pod-addrs as `veth . ip`,
// read with nft.
func nftPodSet(t *testing.T, n *lab.Node) map[string]bool {
	t.Helper()
	out := run(t, n.Lab, n.Netns, "nft", "-j", "list", "set", "arp", "reef", "pod-addrs")
	var doc struct {
		Nftables []struct {
			Set *struct {
				Elem []struct {
					Concat []string `json:"concat"`
				} `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("nft -j list set: %v\n%s", err, out)
	}
	got := map[string]bool{}
	for _, o := range doc.Nftables {
		if o.Set == nil {
			continue
		}
		for _, e := range o.Set.Elem {
			got[strings.Join(e.Concat, " . ")] = true
		}
	}
	return got
}

func podSetKey(p *lab.Pod) string { return p.Result.Interfaces[0].Name + " . " + p.IP.String() }

func nftRepairLines(n *lab.Node) int { return strings.Count(n.Log(), "repairing nftables") }

// TestNATOutgoing sends TCP from pods and asks the receiver whom it saw:
// beyond the pools, the node's address (masquerade); to another pod, on
// this node or another, the pod's own; from a pool with natOutgoing false,
// the pod's own, everywhere. Three nodes in a BGP mesh have the same pools;
// node3 lists the pool without NAT first, so its pods come from it (the
// first pool is the default).
func TestNATOutgoing(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	out, err := l.AddOutside()
	if err != nil {
		t.Fatal(err)
	}
	masqPool := "  - cidr: 10.244.0.0/16\n"
	plain := "  - cidr: 10.245.0.0/24\n    natOutgoing: false\n"
	var nodes []*lab.Node
	for i, pools := range []string{masqPool + plain, masqPool + plain, plain + masqPool} {
		var peers []netip.Addr
		for j := 0; j < 3; j++ {
			if j != i {
				peers = append(peers, lab.NodeAddress(j))
			}
		}
		n, err := l.AddNode(fmt.Sprintf("node%d", i+1), lab.NodeOptions{Peers: peers, PeerPrefixes: []netip.Prefix{lab.Underlay},
			Extra: "pools:\n" + pools})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	n1, n2, n3 := nodes[0], nodes[1], nodes[2]
	for _, n := range nodes {
		if err := out.DefaultRoute(n); err != nil {
			t.Fatal(err)
		}
	}
	// The router learns the pool without NAT, as a network that routes it.
	if err := out.Route(netip.MustParsePrefix("10.245.0.0/24"), n3.Address); err != nil {
		t.Fatal(err)
	}
	a1, b1 := newPod(t, n1, "a1"), newPod(t, n1, "b1")
	a2 := newPod(t, n2, "a2")
	a3 := newPod(t, n3, "a3")
	if err := lab.WaitConverged(nodes, 30*time.Second); err != nil { // routes to every node's blocks, over BGP
		t.Fatal(err)
	}

	listen := func(netns string, at netip.Addr) *lab.TCPServer {
		s, err := l.ListenTCP(netns, netip.AddrPortFrom(at, 8080))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	server := listen(out.Server, lab.OutsideAddr)
	onB1, onA2 := listen(b1.Netns, b1.IP), listen(a2.Netns, a2.IP)
	ask := func(t *testing.T, from *lab.Pod, to *lab.TCPServer, want netip.Addr) {
		t.Helper()
		seen, err := l.AskTCP(from.Netns, to.Addr)
		if err != nil {
			t.Fatal(err)
		}
		if seen != want {
			t.Errorf("%s -> %s: the receiver saw %s, want %s", from.IP, to.Addr, seen, want)
		}
		if peers := to.Peers(); len(peers) == 0 || peers[len(peers)-1] != want {
			t.Errorf("%s -> %s: the server's log of peers is %v, want %s last", from.IP, to.Addr, peers, want)
		}
	}

	t.Run("pod to outside: the server sees the node's address, the reply reaches the pod", func(t *testing.T) {
		ask(t, a1, server, n1.Address)
		ask(t, a2, server, n2.Address)
		ruleset := run(t, l, n1.Netns, "nft", "list", "table", "inet", "reef-nat")
		if m := regexp.MustCompile(`counter packets (\d+) bytes \d+ masquerade fully-random`).FindStringSubmatch(ruleset); m == nil || m[1] == "0" {
			t.Errorf("masquerade rule did not count the connection:\n%s", ruleset)
		}
	})
	t.Run("pod to pod on one node: the receiver sees the sender's pod address", func(t *testing.T) {
		ask(t, a1, onB1, a1.IP)
	})
	t.Run("pod to pod across nodes: the receiver sees the sender's pod address", func(t *testing.T) {
		ask(t, a1, onA2, a1.IP)
		ask(t, a2, onB1, a2.IP)
	})
	t.Run("natOutgoing false: the pod leaves with its own address", func(t *testing.T) {
		ask(t, a3, server, a3.IP)
		ask(t, a3, onB1, a3.IP)
	})
	t.Run("nft list ruleset explains reef's rules", func(t *testing.T) {
		rs := run(t, l, n1.Netns, "nft", "list", "ruleset")
		for _, want := range []string{
			"table inet reef-nat {", "table arp reef {",
			"type nat hook postrouting priority srcnat + 10; policy accept;",
			`ip saddr @masq-pools4 ip daddr != @all-pools4 counter`, `masquerade fully-random comment "` + masq.Comment + `"`,
			`ip6 saddr @masq-pools6 ip6 daddr != @all-pools6 counter`,
			`arp operation reply oifname . arp saddr ip @pod-addrs counter`, `drop comment "` + arpfilter.Comment + `"`,
			"elements = { 10.244.0.0/16, 10.245.0.0/24 }", `"` + a1.Result.Interfaces[0].Name + `" . ` + a1.IP.String(),
		} {
			if !strings.Contains(rs, want) {
				t.Errorf("nft list ruleset lacks %q:\n%s", want, rs)
			}
		}
	})
}

// arpingFrom sends two ARP requests from the pod's eth0 for target and
// returns the MAC of the first reply, or "" when none came.
func arpingFrom(t *testing.T, p *lab.Pod, target string) string {
	t.Helper()
	out, err := p.Run("arping", "-c", "2", "-w", "3", "-I", "eth0", target)
	if m := regexp.MustCompile(`reply from \S+ \[([0-9A-Fa-f:]+)\]`).FindStringSubmatch(out); m != nil {
		return strings.ToLower(m[1])
	}
	if err == nil || !strings.Contains(out, "Received 0 response") {
		t.Fatalf("arping %s: %v\n%s", target, err, out)
	}
	return ""
}

// TestPodARPFilter: a pod's ARP for the gateway gets the node's answer;
// for its own address, none, even when proxy ARP would answer; and it is
// the rule that keeps the node quiet.
func TestPodARPFilter(t *testing.T) {
	needNATTools(t, "nft", "arping")
	l := newLab(t)
	// No pass of the loop during the test: the test breaks routes itself.
	n := startNode(t, l, "node1", lab.NodeOptions{ReconcileInterval: 10 * time.Minute})
	p := newPod(t, n, "web-1")
	veth := p.Result.Interfaces[0].Name
	// Proxy ARP answers for what the node routes through another
	// interface: give it the default route a real node has.
	run(t, l, n.Netns, "ip", "route", "add", "default", "via", lab.RouterAddr.String())
	if !nftPodSet(t, n)[podSetKey(p)] {
		t.Fatalf("ADD did not add %s to the pods' set: %v", podSetKey(p), nftPodSet(t, n))
	}
	if mac := arpingFrom(t, p, "169.254.1.1"); mac != "ee:ee:ee:ee:ee:ee" {
		t.Errorf("ARP for 169.254.1.1: reply from %q, want ee:ee:ee:ee:ee:ee", mac)
	}
	if mac := arpingFrom(t, p, p.IP.String()); mac != "" {
		t.Errorf("ARP for the pod's own address %s: reply from %s, want none", p.IP, mac)
	}
	// Take away what keeps proxy ARP quiet on its own: the pod's /32 route
	// (it goes back out the veth) and the block's blackhole. Now the node
	// routes the pod's address out of eth0 and would answer for it.
	run(t, l, n.Netns, "ip", "route", "del", p.IP.String()+"/32", "dev", veth)
	run(t, l, n.Netns, "ip", "route", "del", "blackhole", netip.PrefixFrom(p.IP, 26).Masked().String())
	if mac := arpingFrom(t, p, p.IP.String()); mac != "" {
		t.Errorf("ARP for the pod's own address without its route: reply from %s, want none (the rule drops it)", mac)
	}
	if rs := run(t, l, n.Netns, "nft", "list", "table", "arp", "reef"); regexp.MustCompile(`counter packets [1-9]\d* bytes \d+ drop`).FindString(rs) == "" {
		t.Errorf("the ARP rule dropped nothing:\n%s", rs)
	}
	// The control: without reef's rule the node answers the pod about its
	// own address with its MAC, the duplicate the rule is there to stop.
	// The pass that follows the ADD (and its block's claim) may come after
	// the routes were taken away and put them back, or the table: both are
	// taken away again until the node answers. No other pass comes for ten
	// minutes.
	eventually(t, 20*time.Second, func() string {
		l.Run(n.Netns, "ip", "route", "del", p.IP.String()+"/32", "dev", veth) // gone already: fine
		l.Run(n.Netns, "ip", "route", "del", "blackhole", netip.PrefixFrom(p.IP, 26).Masked().String())
		l.Run(n.Netns, "nft", "delete", "table", "arp", "reef")
		if mac := arpingFrom(t, p, p.IP.String()); mac != "ee:ee:ee:ee:ee:ee" {
			return fmt.Sprintf("without the rule: reply from %q, want ee:ee:ee:ee:ee:ee (else this test proves nothing)", mac)
		}
		return ""
	})
	// A restart repairs what differs: the routes and the table.
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	if mac := arpingFrom(t, p, p.IP.String()); mac != "" {
		t.Errorf("after the restart's repair: reply from %s, want none", mac)
	}
	if !nftPodSet(t, n)[podSetKey(p)] {
		t.Errorf("the restart did not put %s back: %v", podSetKey(p), nftPodSet(t, n))
	}
}

// TestNFTDriftRepair changes reef's tables by hand, one way at a time, and
// waits for the loop (1s interval) to put them back as they were.
func TestNFTDriftRepair(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	p := newPod(t, n, "web-1")
	newPod(t, n, "web-2")
	veth := p.Result.Interfaces[0].Name
	waitPass(t, n) // with the pods in place
	baseline := nftReefTables(n)
	if strings.Contains(baseline, "missing") || !strings.Contains(baseline, p.IP.String()) {
		t.Fatalf("tables after ADD:\n%s", baseline)
	}
	if r := nftRepairLines(n); r != 0 {
		t.Fatalf("%d repairs before any drift:\n%s", r, n.Log())
	}
	// The first rule's handle: the IPv4 masquerade.
	ruleHandle := func(fam, table, chain string) string {
		ms := regexp.MustCompile(`# handle (\d+)`).FindAllStringSubmatch(run(t, l, n.Netns, "nft", "-a", "list", "chain", fam, table, chain), -1)
		if len(ms) < 2 {
			t.Fatalf("no rule in chain %s %s %s", fam, table, chain)
		}
		return ms[1][1]
	}
	cases := []struct {
		name string
		nft  func() []string
	}{
		{"nft delete table inet reef-nat", func() []string { return []string{"delete table inet reef-nat"} }},
		{"nft delete table arp reef", func() []string { return []string{"delete table arp reef"} }},
		{"nft flush ruleset", func() []string { return []string{"flush ruleset"} }},
		{"nft flush chain inet reef-nat postrouting", func() []string { return []string{"flush chain inet reef-nat postrouting"} }},
		{"nft flush chain arp reef output", func() []string { return []string{"flush chain arp reef output"} }},
		{"masquerade rule changed", func() []string {
			return []string{"replace rule inet reef-nat postrouting handle " + ruleHandle("inet", "reef-nat", "postrouting") + " ip saddr @masq-pools4 masquerade"}
		}},
		{"a pod's element deleted", func() []string {
			return []string{fmt.Sprintf(`delete element arp reef pod-addrs { "%s" . %s }`, veth, p.IP)}
		}},
		{"an element no pod has", func() []string { return []string{`add element arp reef pod-addrs { "reefdeadbeef000" . 10.244.9.9 }`} }},
		{"a pool deleted from all-pools4", func() []string { return []string{"delete element inet reef-nat all-pools4 { 10.244.0.0/16 }"} }},
		{"table made dormant", func() []string { return []string{"add table inet reef-nat { flags dormant; }"} }},
		{"chain moved to priority srcnat", func() []string {
			return []string{"delete chain inet reef-nat postrouting",
				"add chain inet reef-nat postrouting { type nat hook postrouting priority srcnat; policy accept; }"}
		}},
	}
	var worst time.Duration
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := nftRepairLines(n)
			start := time.Now()
			for _, cmd := range c.nft() {
				run(t, l, n.Netns, append([]string{"nft"}, strings.Fields(cmd)...)...)
			}
			// A pass may repair the change before it is read back: then the
			// log says so.
			if nftReefTables(n) == baseline && nftRepairLines(n) == before {
				t.Fatalf("%q changed nothing", c.nft())
			}
			eventually(t, 5*time.Second, func() string {
				if got := nftReefTables(n); got != baseline {
					return "tables not repaired yet:\n" + got
				}
				return ""
			})
			// How long it took is logged, not asserted: no timing
			// thresholds in tests (the repair comes with the next 1s
			// interval's pass).
			took := time.Since(start)
			worst = max(worst, took)
			t.Logf("repaired in %s", took.Round(time.Millisecond))
			if nftRepairLines(n) == before {
				t.Errorf("the daemon logged no repair")
			}
		})
	}
	t.Logf("slowest repair: %s", worst.Round(time.Millisecond))
	for _, line := range strings.Split(n.Log(), "\n") {
		if strings.Contains(line, "repairing nftables") {
			t.Log(line)
		}
	}
}

const kubeProxyTable = `table ip kube-proxy {
	set cluster-ips {
		type ipv4_addr
		elements = { 10.96.0.1 }
	}

	chain nat-postrouting {
		type nat hook postrouting priority srcnat; policy accept;
		meta mark & 0x00004000 == 0x00004000 masquerade fully-random
	}

	chain nat-prerouting {
		type nat hook prerouting priority dstnat; policy accept;
		ip daddr @cluster-ips counter
	}
}
`

// TestKubeProxyCoexistence: a kube-proxy table (its name, a nat chain at
// srcnat, a set) beside reef's. reef's creation, ADD/DEL, repairs and
// restarts change nothing of it; changes to it change nothing of reef's and
// trigger no repair; masquerade works with both in place.
func TestKubeProxyCoexistence(t *testing.T) {
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
	file := filepath.Join(t.TempDir(), "kube-proxy.nft")
	if err := os.WriteFile(file, []byte(kubeProxyTable), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, l, n.Netns, "nft", "-f", file)
	kubeProxy := func() string {
		return nftCounters.ReplaceAllString(run(t, l, n.Netns, "nft", "list", "table", "ip", "kube-proxy"), "counter")
	}
	theirs := kubeProxy()
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := out.DefaultRoute(n); err != nil {
		t.Fatal(err)
	}
	server, err := l.ListenTCP(out.Server, netip.AddrPortFrom(lab.OutsideAddr, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	pods := []*lab.Pod{newPod(t, n, "a"), newPod(t, n, "b")}
	if seen, err := l.AskTCP(pods[0].Netns, server.Addr); err != nil || seen != n.Address {
		t.Errorf("pod to outside with kube-proxy's chain in place: seen %s, %v; want %s", seen, err, n.Address)
	}
	// reef repairs its own table beside kube-proxy's.
	run(t, l, n.Netns, "nft", "delete", "table", "inet", "reef-nat")
	eventually(t, 5*time.Second, func() string {
		if strings.Contains(nftReefTables(n), "missing") {
			return "table inet reef-nat not back"
		}
		return ""
	})
	if err := pods[1].Del(); err != nil {
		t.Fatal(err)
	}
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	waitPass(t, n) // the start's pass, before ready, and one more
	if got := kubeProxy(); got != theirs {
		t.Errorf("kube-proxy's table changed:\n%s\nwas:\n%s", got, theirs)
	}

	// Now kube-proxy changes its table; reef's stays as it is.
	ours := nftReefTables(n)
	repairs := nftRepairLines(n)
	for _, cmd := range []string{
		"add element ip kube-proxy cluster-ips { 10.96.0.10 }",
		"flush chain ip kube-proxy nat-postrouting",
		"add rule ip kube-proxy nat-postrouting ip saddr 10.244.0.0/16 masquerade",
		"add chain ip kube-proxy services",
	} {
		run(t, l, n.Netns, append([]string{"nft"}, strings.Fields(cmd)...)...)
	}
	if err := n.WaitPasses(3, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := nftReefTables(n); got != ours {
		t.Errorf("reef's tables changed after kube-proxy's did:\n%s\nwas:\n%s", got, ours)
	}
	if r := nftRepairLines(n); r != repairs {
		t.Errorf("%d repairs after kube-proxy changed its own table", r-repairs)
	}
}

// TestPodSet200: 200 pods ADDed 8 at a time, then DELed in two halves:
// after each step the pods' set holds exactly the live pods, by ADD and
// DEL alone (no repair by the loop).
func TestPodSet200(t *testing.T) {
	slowSuite(t)
	needNATTools(t, "nft")
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{Extra: "pools:\n  - cidr: 10.244.0.0/16\n    blockSize: 28\n"})
	const total, workers = 200, 8
	pods := make([]*lab.Pod, total)
	for i := range pods {
		p, err := n.NewPodNetns("default", fmt.Sprintf("set-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pods[i] = p
	}
	each := func(ps []*lab.Pod, f func(*lab.Pod) error) {
		t.Helper()
		if errs := inParallel(ps, workers, f); len(errs) > 0 {
			t.Fatalf("%d failed, first: %v", len(errs), errs[0])
		}
	}
	check := func(step string, live []*lab.Pod) {
		t.Helper()
		want := map[string]bool{}
		for _, p := range live {
			want[podSetKey(p)] = true
		}
		got := nftPodSet(t, n)
		for k := range want {
			if !got[k] {
				t.Errorf("%s: %s missing from the set", step, k)
			}
		}
		for k := range got {
			if !want[k] {
				t.Errorf("%s: %s in the set, but no such pod", step, k)
			}
		}
		t.Logf("%s: %d elements, %d live pods", step, len(got), len(live))
	}
	each(pods, (*lab.Pod).Add)
	check("after 200 ADDs", pods)
	var even, odd []*lab.Pod
	for i, p := range pods {
		if i%2 == 0 {
			even = append(even, p)
		} else {
			odd = append(odd, p)
		}
	}
	each(even, (*lab.Pod).Del)
	check("after 100 DELs", odd)
	each(odd, (*lab.Pod).Del)
	check("after 200 DELs", nil)
	waitPass(t, n)
	check("a pass later", nil)
	if r := nftRepairLines(n); r != 0 {
		t.Errorf("the loop repaired the set %d times: ADD and DEL should keep it exact", r)
	}
	if all := run(t, l, n.Netns, "nft", "list", "set", "inet", "reef-nat", "all-pools4"); !strings.Contains(all, "elements = { 10.244.0.0/16 }") {
		t.Errorf("all-pools4:\n%s", all)
	}
}

// TestCleanup: the daemon leaves its tables on stop; `reef cleanup`
// refuses while a daemon serves, asks before it removes, removes reef's
// tables, routes, links, tunnel address on tunl0 and state, and leaves
// everything not reef's.
func TestCleanup(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	p := newPod(t, n, "web-1")
	newPod(t, n, "web-2")
	// Not reef's: a link, a route of another protocol, a table, a file.
	run(t, l, n.Netns, "ip", "link", "add", "other0", "type", "veth", "peer", "name", "other1")
	run(t, l, n.Netns, "ip", "link", "set", "other0", "up")
	run(t, l, n.Netns, "ip", "route", "add", "10.99.0.0/24", "dev", "other0", "proto", "static")
	run(t, l, n.Netns, "nft", "add", "table", "ip", "kube-proxy")
	notes := filepath.Join(n.StateDir, "notes.txt")
	if err := os.WriteFile(notes, []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cleanup := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command("nsenter", append([]string{"--net=" + lab.NetnsPath(n.Netns), "--",
			filepath.Join(binDir, "reef"), "cleanup", "--config", n.Config}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	reefStillThere := func(step string) {
		t.Helper()
		if tables := nftReefTables(n); strings.Contains(tables, "missing") || !strings.Contains(tables, p.IP.String()) {
			t.Errorf("%s: reef's tables are not all there:\n%s", step, tables)
		}
		if len(reefRoutes(t, n)) == 0 || len(reefVeths(t, n)) != 2 {
			t.Errorf("%s: routes %v, veths %v", step, reefRoutes(t, n), reefVeths(t, n))
		}
		if _, err := os.Stat(filepath.Join(n.StateDir, "reef.db")); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}

	out, err := cleanup("", "--yes")
	if err == nil || !strings.Contains(out, "is serving "+n.Socket) {
		t.Errorf("cleanup while the daemon serves: %v\n%s", err, out)
	}
	reefStillThere("refused while serving")

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	reefStillThere("daemon stopped") // stopping leaves the dataplane, tables included
	// tunl0 is the ipip module's (this lab's kernel has none: a stand-in
	// of that name): reef's tunnel address on it goes, by its label; the
	// device and another address stay.
	run(t, l, n.Netns, "ip", "link", "add", "tunl0", "type", "veth", "peer", "name", "tunl0p")
	run(t, l, n.Netns, "ip", "addr", "add", "10.244.250.1/32", "dev", "tunl0", "label", "tunl0:reef")
	run(t, l, n.Netns, "ip", "addr", "add", "10.98.0.1/32", "dev", "tunl0")

	out, err = cleanup("n\n")
	if err == nil || !strings.Contains(out, "nothing was removed") || !strings.Contains(out, "nftables table arp reef") {
		t.Errorf("cleanup answered no: %v\n%s", err, out)
	}
	reefStillThere("answered no")

	out, err = cleanup("y\n")
	t.Logf("reef cleanup:\n%s", out)
	if err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	if tables := run(t, l, n.Netns, "nft", "list", "tables"); strings.Contains(tables, " reef") || !strings.Contains(tables, "table ip kube-proxy") {
		t.Errorf("tables after cleanup:\n%s", tables)
	}
	if r := reefRoutes(t, n); len(r) != 0 {
		t.Errorf("reef routes after cleanup: %v", r)
	}
	if v := reefVeths(t, n); len(v) != 0 {
		t.Errorf("reef veths after cleanup: %v", v)
	}
	if _, err := os.Stat(filepath.Join(n.StateDir, "reef.db")); !os.IsNotExist(err) {
		t.Errorf("reef.db after cleanup: %v", err)
	}
	if _, err := os.Stat(notes); err != nil {
		t.Errorf("a file not reef's in the state dir: %v", err)
	}
	if !strings.Contains(out, "keep the directory "+n.StateDir) {
		t.Errorf("cleanup did not say it keeps the state dir with a file not its own:\n%s", out)
	}
	if a := run(t, l, n.Netns, "ip", "-4", "addr", "show", "dev", "tunl0"); strings.Contains(a, "10.244.250.1") || !strings.Contains(a, "10.98.0.1/32") {
		t.Errorf("tunl0 after cleanup, want reef's address (label tunl0:reef) gone and the other kept:\n%s", a)
	}
	if r := run(t, l, n.Netns, "ip", "route", "show", "10.99.0.0/24"); !strings.Contains(r, "other0") {
		t.Errorf("a static route was removed: %q", r)
	}
	run(t, l, n.Netns, "ip", "link", "show", "other0")

	out, err = cleanup("", "--yes")
	if err != nil || !strings.Contains(out, "nothing of reef's found") {
		t.Errorf("second cleanup: %v\n%s", err, out)
	}
}

// TestCleanupIPIPAddress: reef cleanup takes reef's tunnel address off
// tunl0 (the one labelled tunl0:reef) and leaves the device, which is the
// ipip module's, and an address of the operator's on it.
func TestCleanupIPIPAddress(t *testing.T) {
	l := newLab(t)
	n := ipipNode(t, l)
	run(t, l, n.Netns, "ip", "addr", "add", "192.0.2.7/32", "dev", "tunl0")
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	newPod(t, n, "web-1")
	labelled := regexp.MustCompile(`inet (\S+) .*tunl0:reef`)
	var reefs string
	eventually(t, 10*time.Second, func() string {
		out, _ := l.Run(n.Netns, "ip", "-4", "-o", "addr", "show", "dev", "tunl0")
		m := labelled.FindStringSubmatch(out)
		if m == nil {
			return "no address labelled tunl0:reef on tunl0:\n" + out
		}
		reefs = m[1]
		return ""
	})
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nsenter", "--net="+lab.NetnsPath(n.Netns), "--", filepath.Join(binDir, "reef"), "cleanup", "--config", n.Config, "--yes")
	b, err := cmd.CombinedOutput()
	out := string(b)
	t.Logf("reef cleanup:\n%s", out)
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if !strings.Contains(out, "the address "+reefs+" on tunl0") {
		t.Errorf("cleanup does not list reef's address %s on tunl0", reefs)
	}
	addrs := run(t, l, n.Netns, "ip", "-4", "-o", "addr", "show", "dev", "tunl0")
	if strings.Contains(addrs, "tunl0:reef") || strings.Contains(addrs, " "+reefs+" ") {
		t.Errorf("reef's address %s is still on tunl0 after cleanup:\n%s", reefs, addrs)
	}
	if !strings.Contains(addrs, "192.0.2.7/32") {
		t.Errorf("the operator's address on tunl0 is gone:\n%s", addrs)
	}
}

// TestARPFilterFailureRollsBackADD: when the pod's element cannot be added
// (here: set pod-addrs replaced by hand with one of another type), the ADD
// fails, names the ARP filter, and leaves no veth, ifb, hostPort element
// and no address behind.
// A restart repairs the table and the next ADD works.
func TestARPFilterFailureRollsBackADD(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{ReconcileInterval: 10 * time.Minute})
	// A first pod claims the block; the pass its claim triggers is over
	// before the set is broken, and no later ADD claims another. With a
	// reconcile interval of 10 minutes no other pass comes.
	passes, err := n.Passes()
	if err != nil {
		t.Fatal(err)
	}
	first := newPod(t, n, "web-0")
	eventually(t, 10*time.Second, func() string {
		if now, err := n.Passes(); err != nil || now <= passes {
			return fmt.Sprintf("no pass after the first pod's claim (%d passes, %v)", now, err)
		}
		return ""
	})
	for _, cmd := range []string{
		"flush chain arp reef output",
		"delete set arp reef pod-addrs",
		"add set arp reef pod-addrs { type ipv4_addr; }",
	} {
		run(t, l, n.Netns, append([]string{"nft"}, strings.Fields(cmd)...)...)
	}
	p, err := n.NewPodNetns("default", "web-1")
	if err != nil {
		t.Fatal(err)
	}
	// A hostPort and a limit: the ADD gets past its wiring and its tc
	// before the filter fails, so both are undone.
	p.CapabilityArgs = map[string]any{
		"portMappings": []lab.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
		"bandwidth":    lab.Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 10e6, EgressBurst: 80e3},
	}
	err = p.Add()
	if err == nil || !strings.Contains(err.Error(), "ARP filter") {
		t.Fatalf("ADD with a broken ARP filter: %v, want an error naming the ARP filter", err)
	}
	veth := routes.HostVethName(p.Namespace, p.Name, p.ContainerID)
	if left := podLeftovers(t, n, veth, "none"); len(left) != 0 {
		t.Errorf("left by the failed ADD: %v", left)
	}
	if hp := run(t, l, n.Netns, "nft", "list", "table", "inet", "reef-hostport"); strings.Contains(hp, "8080") {
		t.Errorf("the failed ADD's hostPort is left in table inet reef-hostport:\n%s", hp)
	}
	if v := reefVeths(t, n); len(v) != 1 || v[0] != first.Result.Interfaces[0].Name {
		t.Errorf("veths after the failed ADD: %v, want only the first pod's", v)
	}
	if a := allocations(t, n); len(a) != 1 {
		t.Errorf("allocations after the failed ADD: %v, want only the first pod's", a)
	}
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(); err != nil {
		t.Fatalf("ADD after the restart's repair: %v", err)
	}
	if set := nftPodSet(t, n); !set[podSetKey(p)] || !set[podSetKey(first)] || len(set) != 2 {
		t.Errorf("set after the repair and ADD: %v, want both pods", set)
	}
}

// TestTableMissingAtADD: with table arp reef deleted by hand, an ADD still
// succeeds, and the whole pass it asks for once it has ended recreates the
// table with the new pod's element, long before the next interval (1h
// here). A pass during the ADD leaves the pod alone, so a pass asked for
// from inside the ADD would recreate the table without it.
func TestTableMissingAtADD(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{ReconcileInterval: time.Hour})
	newPod(t, n, "web-1")
	run(t, l, n.Netns, "nft", "delete", "table", "arp", "reef")
	p := newPod(t, n, "web-2")
	eventually(t, 20*time.Second, func() string {
		if !nftPodSet(t, n)[podSetKey(p)] {
			return "table arp reef lacks the new pod's element " + podSetKey(p)
		}
		return ""
	})
	if !strings.Contains(n.Log(), "a whole reconcile pass after this ADD recreates it") {
		t.Errorf("the ADD did not say the table was missing:\n%s", n.Log())
	}
}

// ipipNode adds a node, not started, whose pool always uses IPIP, with a
// tunl0: the ipip module's, or, in a kernel without it (this lab's), a
// stand-in of that name, as routes/tunnel's TestIPIPStandIn uses (there
// is no dummy module either).
func ipipNode(t *testing.T, l *lab.Lab) *lab.Node {
	t.Helper()
	n, err := l.AddNode("node1", lab.NodeOptions{Extra: "pools:\n  - cidr: 10.244.0.0/16\n    vxlanMode: Never\n    ipipMode: Always\n"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Run(n.Netns, "ip", "link", "show", "tunl0"); err != nil {
		run(t, l, n.Netns, "ip", "link", "add", "tunl0", "type", "veth", "peer", "name", "tunl0peer")
	}
	return n
}
