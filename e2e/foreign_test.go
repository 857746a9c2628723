package e2e

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/reefcni/reef/internal/lab"
)

// foreignObjects is what a node holds of others' before reef starts:
// routes of other protocols in and over the pools and the node's block
// (reef's own blocks are 10.244.29.0/26 and fd00:10:244::3:d38a:1d00/122
// here, but a route in exactly a block's place would be in reef's way, see
// TestRoutesForeignInTheWay), a route of reef's protocol in another table,
// a policy rule, a veth pair of another CNI with tc and sysctls of its
// own, a bridge named reef* (not a veth: the daemon leaves it, though
// reef cleanup would take it by its name), nftables tables of every
// family, some named like reef's in another family, one with sets named
// like reef's, and iptables-nft rules.
const foreignObjects = `
ip link add cali1234 type veth peer name cali1234p
ip link set cali1234 up
ip link set cali1234p up
ip link add reefbr0 type bridge
ip link set reefbr0 up
ip route add 10.244.0.0/16 dev cali1234 proto static metric 500
ip route add 10.244.29.0/26 dev cali1234 proto boot metric 400
ip route add 10.244.29.16/28 dev cali1234 proto bird
ip route add 10.244.29.5/32 dev cali1234 proto 186 metric 300
ip route add 10.244.9.0/24 dev cali1234 proto 238 table 100
ip route add blackhole 10.244.29.0/26 proto 238 table 101
ip -6 route add fd00:10:244::/56 dev cali1234 proto static metric 2000
ip -6 route add fd00:10:244::3:d38a:1d00/122 dev cali1234 proto boot metric 1500
ip -6 route add fd00:10:244::3:d38a:1d05/128 dev cali1234 proto bird metric 1100
ip -6 route add fd00:10:244::/122 dev cali1234 proto 238 table 100
ip rule add from 10.244.0.0/16 lookup 100 pref 5000
nft add table ip reef-nat
nft add chain ip reef-nat postrouting { type nat hook postrouting priority 100 \; }
nft add rule ip reef-nat postrouting ip saddr 10.244.0.0/16 counter
nft add table ip6 reef-hostport
nft add table inet reef-ndp
nft add table inet reef-other
nft add table arp reef-nat
nft add table bridge reef
nft add table netdev reef
nft add table inet fw
nft add set inet fw masq-pools4 { type ipv4_addr \; flags interval \; elements = { 10.244.0.0/16 } \; }
nft add chain inet fw forward { type filter hook forward priority 0 \; policy accept \; }
nft add rule inet fw forward ip saddr @masq-pools4 counter accept
iptables -t nat -A POSTROUTING -s 10.244.0.0/16 ! -d 10.244.0.0/16 -j MASQUERADE
iptables -A FORWARD -i cali+ -j ACCEPT
ip6tables -A FORWARD -i cali+ -j ACCEPT
tc qdisc add dev cali1234 root handle 1: htb default 10
tc qdisc add dev cali1234 ingress
tc filter add dev cali1234 parent ffff: protocol ip u32 match u32 0 0 action mirred egress redirect dev cali1234p
echo 0 > /proc/sys/net/ipv4/conf/cali1234/proxy_arp
echo 2 > /proc/sys/net/ipv4/conf/cali1234/rp_filter
echo 1 > /proc/sys/net/ipv4/conf/cali1234/route_localnet
echo 0 > /proc/sys/net/ipv6/conf/cali1234/accept_dad
echo 1 > /proc/sys/net/ipv4/conf/reefbr0/proxy_arp
`

var (
	bridgeTimers = regexp.MustCompile(`(hello|tcn|topology_change|gc)_timer +[0-9.]+`)
	tcStats      = regexp.MustCompile(`direct_packets_stat \d+`)
)

// notReefs is the node's kernel state less reef's own (its routes in the
// main table, its veths, ifbs and vxlan.reef with what the kernel puts
// on them, its nftables tables) and less what the kernel changes by
// itself (IPv6 link-local addresses and their routes, which come with
// DAD; counters and timers), as sorted-stable text.
func notReefs(t *testing.T, n *lab.Node) string {
	t.Helper()
	l := n.Lab
	var b strings.Builder
	ours := func(line string) bool {
		return strings.Contains(line, "table main proto reef") || regexp.MustCompile(`\breef[0-9a-f]{11}\b|vxlan[./]reef`).MatchString(line) ||
			strings.Contains(line, "fe80")
	}
	for _, fam := range []string{"-4", "-6"} {
		for _, line := range nonEmptyLines(run(t, l, n.Netns, "ip", fam, "-d", "route", "show", "table", "all")) {
			if !ours(line) {
				b.WriteString(line + "\n")
			}
		}
		b.WriteString(run(t, l, n.Netns, "ip", fam, "rule"))
		b.WriteString(run(t, l, n.Netns, "ip", fam, "neigh", "show", "nud", "permanent"))
	}
	for _, line := range append(nonEmptyLines(run(t, l, n.Netns, "ip", "-o", "-d", "link")), nonEmptyLines(run(t, l, n.Netns, "ip", "-o", "addr"))...) {
		if !ours(line) {
			b.WriteString(bridgeTimers.ReplaceAllString(line, "") + "\n")
		}
	}
	for _, line := range nonEmptyLines(run(t, l, n.Netns, "nft", "list", "tables")) {
		f := strings.Fields(line) // table FAMILY NAME
		switch f[1] + " " + f[2] {
		case "inet reef-nat", "arp reef", "ip6 reef-ndp", "inet reef-hostport", "inet reef":
			continue
		}
		b.WriteString(nftCounters.ReplaceAllString(run(t, l, n.Netns, "nft", "-a", "list", "table", f[1], f[2]), "counter"))
	}
	for _, dev := range []string{"cali1234", "eth0"} {
		b.WriteString(tcStats.ReplaceAllString(run(t, l, n.Netns, "tc", "qdisc", "show", "dev", dev), ""))
		b.WriteString(run(t, l, n.Netns, "tc", "filter", "show", "dev", dev, "ingress"))
	}
	for _, line := range nonEmptyLines(run(t, l, n.Netns, "sh", "-c", "grep -r . /proc/sys/net/ipv4/conf /proc/sys/net/ipv6/conf 2>/dev/null || true")) {
		if !ours(line) && !strings.Contains(line, "/forwarding:") && !strings.Contains(line, "/stable_secret") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// diffLines says which lines of a are gone in b and which are new.
func diffLines(a, b string) string {
	count := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ca, cb := count(a), count(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if cb[l] < ca[l] {
			out.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if ca[l] < cb[l] {
			out.WriteString("+ " + l + "\n")
		}
	}
	return out.String()
}

// TestForeignStateKept: what is not reef's (foreignObjects, and more put
// in while the daemon runs) is the same after reef's start, its passes, a
// SIGTERM restart and a kill -9 restart, to the last route, rule, link,
// table, qdisc and sysctl; only IPv6 forwarding, which reef turns on
// with an IPv6 pool, is left out. reef's own are in place meanwhile.
func TestForeignStateKept(t *testing.T) {
	needNATTools(t, "nft", "tc")
	l := newLab(t)
	n, err := l.AddNode("node1", lab.NodeOptions{Extra: "pools:\n  - cidr: " + dualPool4.String() + "\n  - cidr: " + dualPool6.String() + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	plant := func(cmds string) {
		t.Helper()
		for _, c := range nonEmptyLines(cmds) {
			if tool, _, _ := strings.Cut(c, " "); strings.HasSuffix(tool, "tables") && tool != "nft" {
				if _, err := exec.LookPath(tool); err != nil {
					t.Logf("%s not installed: skipping %q", tool, c)
					continue
				}
			}
			run(t, l, n.Netns, "sh", "-c", c)
		}
	}
	// A node that forwards already, as a Kubernetes node does: the
	// kernel turns conf/all/accept_redirects off when ip_forward goes
	// on (inet_forward_change), so on a host whose ip_forward is 0,
	// which a new netns inherits, reef's start would change it.
	plant("echo 1 > /proc/sys/net/ipv4/ip_forward")
	plant(foreignObjects)
	before := notReefs(t, n)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	a, b := newPod(t, n, "web-1"), newPod(t, n, "web-2")
	waitPass(t, n)
	if d := diffLines(before, notReefs(t, n)); d != "" {
		t.Errorf("reef's start changed what is not reef's:\n%s", d)
	}
	// More while it runs: a route over the block, a /32 and a /128 of it
	// beside where reef would route a pod, another CNI's veth.
	plant(`
ip route add 10.244.29.32/27 dev cali1234 proto static
ip route add 10.244.29.40/32 dev cali1234 proto 186
ip -6 route add fd00:10:244::3:d38a:1d28/128 dev cali1234 proto static
ip link add cali5678 type veth peer name cali5678p
`)
	running := notReefs(t, n)
	waitPass(t, n)
	waitPass(t, n)
	if d := diffLines(running, notReefs(t, n)); d != "" {
		t.Errorf("reef's passes changed what is not reef's:\n%s", d)
	}
	for _, step := range []struct {
		name    string
		restart func() error
	}{
		{"SIGTERM", n.Restart},
		{"kill -9", func() error {
			if err := n.Kill(); err != nil {
				return err
			}
			return n.Start()
		}},
	} {
		if err := step.restart(); err != nil {
			t.Fatal(err)
		}
		waitPass(t, n)
		if d := diffLines(running, notReefs(t, n)); d != "" {
			t.Errorf("a %s restart changed what is not reef's:\n%s", step.name, d)
		}
	}
	if _, err := a.Ping(b.IP); err != nil {
		t.Errorf("web-1 -> web-2: %v", err)
	}
	if out, err := n.Reef("routes"); err != nil {
		t.Errorf("reef's own are not in place: %v\n%s", err, out)
	}
}
