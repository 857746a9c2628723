package e2e

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

var upgradePool6 = netip.MustParsePrefix("fd00:10:247::/56")

// The pools of TestIPv6PoolAddRemove: the daemon's default IPv4 pool,
// then that and an IPv6 pool routed directly.
const (
	upgradePools4  = "pools:\n  - cidr: 10.244.0.0/16\n"
	upgradePools46 = upgradePools4 + "  - cidr: fd00:10:247::/56\n    vxlanMode: Never\n"
)

// TestIPv6PoolAddRemove is the upgrade procedure of docs/ipam.md ("Adding
// an IPv6 pool to a running cluster"), with the real daemons: two IPv4
// nodes, each with an IPv6 address on its uplink, get an IPv6 pool, one
// node restarted after the other; pods made before keep their IPv4
// address and their traffic (no ping lost across either restart), pods
// made after are dual-stack and reach each other over both families. Then
// the pool goes again: the dual-stack pods are deleted, the config loses
// the pool, the nodes restart one by one, again without a lost ping; no
// IPv6 route to another node's block, IPv6 nftables table of reef's or
// IPv6 pool in table inet reef-nat is left,
// and no error: the pool's blocks stay owned in the block protocol, each
// node's blackholed. Between two restarts the nodes run with different
// pools, also without an error.
func TestIPv6PoolAddRemove(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	nodes, err := l.AddMesh(2, upgradePools4)
	if err != nil {
		t.Fatal(err)
	}
	addNodeAddrs6(t, nodes...)
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a, b := newPod(t, nodes[0], "old-a"), newPod(t, nodes[1], "old-b")
	converge(t, nodes...)
	if len(a.IPs) != 1 || !a.IP.Is4() {
		t.Fatalf("pod a got %v before the IPv6 pool, want one IPv4 address", a.IPs)
	}

	restartWith := func(extra, what string) {
		t.Helper()
		for _, n := range nodes {
			wAB, wBA := pingFor(t, a, b.IP.String(), 40), pingFor(t, b, a.IP.String(), 40)
			time.Sleep(500 * time.Millisecond) // traffic before the restart, as part of the scenario
			opts := n.Options()
			opts.Extra = extra
			if err := n.SetOptions(opts); err != nil {
				t.Fatal(err)
			}
			if err := n.Restart(); err != nil {
				t.Fatalf("%s: restart %s: %v\n%s", what, n.Name, err, n.LogTail(30))
			}
			for dir, w := range map[string]func() (int, int){"a to b": wAB, "b to a": wBA} {
				if recv, sent := w(); recv != sent {
					t.Errorf("%s: %s: %d of %d pings lost across %s's restart", what, dir, sent-recv, sent, n.Name)
				}
			}
			// The sessions are back before the next node restarts: the
			// nodes run with different pools in between, and must do so
			// without an error (checked at the end).
			converge(t, nodes...)
		}
	}

	// Adding the pool.
	restartWith(upgradePools46, "adding the IPv6 pool")
	for _, p := range []*lab.Pod{a, b} {
		if err := p.Check(); err != nil {
			t.Errorf("CHECK of pod %s, made before the IPv6 pool: %v", p.Name, err)
		}
		// A repeated ADD (a runtime retrying) answers what the pod has:
		// its one IPv4 address, no IPv6 one.
		before := p.IP
		if err := p.Add(); err != nil {
			t.Errorf("repeated ADD of pod %s, made before the IPv6 pool: %v", p.Name, err)
		} else if len(p.IPs) != 1 || p.IP != before {
			t.Errorf("repeated ADD of pod %s, made before the IPv6 pool: result %v, want its address %s alone", p.Name, p.IPs, before)
		}
		if out := run(t, l, p.Netns, "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "global"); strings.TrimSpace(out) != "" {
			t.Errorf("pod %s, made before the IPv6 pool, has an IPv6 address now:\n%s", p.Name, out)
		}
	}
	c, d := newPod(t, nodes[0], "new-c"), newPod(t, nodes[1], "new-d")
	converge(t, nodes...)
	c4, c6 := dualPod(t, l, c, dualPool4, upgradePool6)
	d4, d6 := dualPod(t, l, d, dualPool4, upgradePool6)
	pings(t, l, c.Netns, "c to d", d4, d6)
	pings(t, l, d.Netns, "d to c", c4, c6)
	pings(t, l, c.Netns, "c to old b", b.IP)
	for _, n := range nodes {
		if out, err := n.Reef("ipam", "check"); err != nil {
			t.Errorf("%s: reef ipam check with the IPv6 pool: %v\n%s", n.Name, err, out)
		}
	}

	// Removing it: the dual-stack pods first, then the pool.
	for _, p := range []*lab.Pod{c, d} {
		if err := p.Del(); err != nil {
			t.Fatal(err)
		}
	}
	restartWith(upgradePools4, "removing the IPv6 pool")
	for _, n := range nodes {
		// Only the blackholes of the node's own blocks stay: the blocks are
		// still announced, so their traffic must not leave by the default
		// route. The routes to the other node's blocks are gone.
		for _, line := range strings.Split(strings.TrimSpace(run(t, l, n.Netns, "ip", "-6", "route", "show", "proto", "238")), "\n") {
			if line != "" && !strings.HasPrefix(line, "blackhole ") {
				t.Errorf("%s: an IPv6 route of reef's left after the pool went: %s", n.Name, line)
			}
		}
		if out := run(t, l, n.Netns, "nft", "list", "tables"); strings.Contains(out, "ip6 reef") {
			t.Errorf("%s: IPv6 tables of reef's left after the pool went:\n%s", n.Name, out)
		}
		// The masquerade table holds both families: the IPv6 pool's
		// elements go, the table and its IPv4 pool stay.
		if out := run(t, l, n.Netns, "nft", "list", "table", "inet", "reef-nat"); strings.Contains(out, upgradePool6.String()) || !strings.Contains(out, "10.244.0.0/16") {
			t.Errorf("%s: table inet reef-nat after the IPv6 pool went:\n%s", n.Name, out)
		}
		// The blocks stay in the block protocol (it cannot give up a
		// confirmed block yet), blackholed by their owners (above).
		v6 := 0
		for _, blk := range blocksOf(t, n) {
			if strings.Contains(blk, ":") {
				v6++
			}
		}
		if v6 == 0 {
			t.Errorf("%s has no IPv6 block left after the pool went: the test no longer tests a retired pool", n.Name)
		}
		if !strings.Contains(n.Log(), "a pool gone from the config keeps its blocks") {
			t.Errorf("%s: no log line about the retired pool", n.Name)
		}
		if out, err := n.Reef("ipam", "check"); err != nil {
			t.Errorf("%s: reef ipam check after the pool went: %v\n%s", n.Name, err, out)
		}
		// ipam show lists the retired pool, marked.
		if out, err := n.Reef("ipam", "show"); err != nil || !strings.Contains(out, upgradePool6.String()+" (retired)") {
			t.Errorf("%s: reef ipam show does not list the retired pool (err %v):\n%s", n.Name, err, out)
		}
	}
	pings(t, l, a.Netns, "a to b after", b.IP)
	noWarnings(t, nodes, gobgpIdleRefused, gobgpSendOnClosed)
}
