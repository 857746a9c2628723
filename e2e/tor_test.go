package e2e

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/internal/lab"
	reefv1 "github.com/reefcni/reef/proto"
)

// Routers (docs/bgp.md, "Routers"): a1 and a2 on one subnet, b1 on another,
// joined only by a router that runs BIRD 2 (TestToRBird) or FRR
// (TestToRFRR) with eBGP to every node (bgp.externalPeers, with a TCP MD5
// password), and a laptop
// on a third subnet behind the router; vxlanMode Never. Then:
//
//   - the router learns each node's confirmed blocks, next hop the owner,
//     and nothing else, and its kernel routes them;
//   - a pod on a1 pings a pod on b1 through the router: pod addresses on
//     the wire, no VXLAN device, one more routed hop in the TTL; a1 routes
//     b1's block through the router, not onlink, and reef status calls b1
//     routed;
//   - the laptop reaches a pod by its address, and the pod sees the
//     laptop's;
//   - a planned restart of the pod's node loses no ping from the laptop at
//     10 per second (graceful restart: the router keeps the block);
//   - the router turns hostile (sends everything it has and a default
//     route, the pool, a node's /32, a /32 inside a block, a block of its
//     own): the nodes install none of it, and reef status counts it by
//     reason.
func TestToRBird(t *testing.T) { testToR(t, "bird") }

func TestToRFRR(t *testing.T) {
	slowSuite(t)
	testToR(t, "frr")
}

const torPool = "pools:\n  - cidr: 10.244.0.0/16\n    blockSize: 26\n    vxlanMode: Never\n"

func testToR(t *testing.T, kind string) {
	needNATTools(t, "ping", "tcpdump")
	l := newLab(t)
	// Peers are told to keep a node's routes for 8s after its sessions
	// drop (120s in production): long enough for a planned restart here,
	// short enough to watch the router give up on a node that does not
	// come back.
	// The sessions to the router carry a TCP MD5 key (bgp.externalPeers
	// password), as a ToR's often do.
	const password = "reef-tor-key"
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: torPool, RouterASN: lab.RouterASN, RouterPassword: password,
		Binary: "reef-test", Env: []string{"REEF_TEST_BGP_RESTART_TIME=8s"}})
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := l.AddLaptop()
	if err != nil {
		t.Fatal(err)
	}
	tor := startToR(t, l, kind, nodes, lab.DefaultToRPools, password)
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a1, a2, b1 := nodes[0], nodes[1], nodes[2]
	pa1, pa2, pb1 := newPod(t, a1, "pa1"), newPod(t, a2, "pa2"), newPod(t, b1, "pb1")
	converge(t, nodes...)
	router := l.Prefix + "-xr"

	// The router has every node's confirmed blocks, next hop the owner, in
	// its kernel, and no other route into the pool.
	want := map[string]string{}
	for _, n := range nodes {
		for _, b := range blocksOf(t, n) {
			want[b] = n.Address.String()
		}
	}
	eventually(t, 20*time.Second, func() string {
		got := poolRoutes(t, l, router)
		if !maps.Equal(got, want) {
			return "router's kernel routes into the pool: " + strings.Join(sortedPairs(got), ", ") + "; want " + strings.Join(sortedPairs(want), ", ")
		}
		return ""
	})

	t.Logf("the router's kernel routes into the pool: %v", sortedPairs(want))

	// What the nodes say of the router.
	eventually(t, 10*time.Second, func() string {
		for _, n := range nodes {
			st := mustStatus(t, n)
			ext := st.GetExternalPeers()
			if len(ext) != 1 || ext[0].GetState() != "established" || ext[0].GetAsn() != lab.RouterASN ||
				ext[0].GetAddress() != lab.RouterLeg(n.Address).String() || ext[0].GetSent() != uint64(len(blocksOf(t, n))) || ext[0].GetReceived() != 0 {
				return n.Name + "'s external peers: " + ext2s(ext)
			}
			for _, p := range st.GetPeers() {
				if p.GetType() == string(bgp.PeerExternal) {
					return n.Name + " lists its router among the cluster's peers"
				}
			}
		}
		return ""
	})
	for _, p := range mustStatus(t, a1).GetPeers() {
		if p.GetAddress() == b1.Address.String() && !strings.HasPrefix(p.GetReached(), "routed") {
			t.Errorf("a1's status says b1 is reached %q, want routed", p.GetReached())
		}
	}

	// a1 routes b1's block through the router, not onlink, without VXLAN.
	b1block := blocksOf(t, b1)[0]
	if r := run(t, l, a1.Netns, "ip", "route", "show", "exact", b1block); !strings.Contains(r, "via "+lab.RouterA.String()+" dev eth0 proto reef") || strings.Contains(r, "onlink") {
		t.Errorf("a1's route to b1's block %s: %q, want via the router %s, not onlink", b1block, r, lab.RouterA)
	}
	if out, err := l.Run(a1.Netns, "ip", "link", "show", "vxlan.reef"); err == nil {
		t.Errorf("a1 has a VXLAN device with vxlanMode Never: %s", out)
	}
	out := capture(t, l, "br0", "icmp", func() { pa1.Ping(pb1.IP) })
	if !strings.Contains(out, pa1.IP.String()+" > "+pb1.IP.String()) {
		t.Errorf("pod addresses are not on the wire between subnets:\n%s", out)
	}
	// 64, less one for b1, one for the router and one for a1; and one hop
	// fewer within a subnet.
	if ttl, err := pa1.Ping(pb1.IP); err != nil || ttl != 61 {
		t.Errorf("pa1 -> pb1 across the router: ttl %d, %v; want 61", ttl, err)
	}
	if ttl, err := pa1.Ping(pa2.IP); err != nil || ttl != 62 {
		t.Errorf("pa1 -> pa2 in one subnet: ttl %d, %v; want 62", ttl, err)
	}

	// The laptop reaches pods by their addresses, and is seen as itself.
	srv, err := l.ListenTCP(pa1.Netns, netip.AddrPortFrom(pa1.IP, 8080))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if seen, err := l.AskTCP(laptop, netip.AddrPortFrom(pa1.IP, 8080)); err != nil || seen != lab.LaptopAddr {
		t.Errorf("laptop -> pa1:8080: the pod saw %s, %v; want the laptop's %s", seen, err, lab.LaptopAddr)
	}
	if _, err := l.Ping(laptop, pb1.IP); err != nil {
		t.Errorf("laptop -> pb1: %v", err)
	}

	// A planned restart of a1 loses no ping from the laptop to its pod.
	ping := pingFrom(t, l, laptop, pa1.IP.String(), 80)
	time.Sleep(2 * time.Second) // two seconds of pings before the restart: the scenario, not a wait
	if err := a1.Restart(); err != nil {
		t.Fatal(err)
	}
	if recv, sent := ping(); recv != sent {
		t.Errorf("laptop -> pa1 over a planned restart of a1: %d of %d pings answered", recv, sent)
	} else {
		t.Logf("laptop -> pa1 over a planned restart of a1: %d of %d pings answered", recv, sent)
	}
	converge(t, nodes...)

	// The router turns hostile.
	before := map[string][]string{}
	for _, n := range nodes {
		before[n.Name] = reefRoutes(t, n)
	}
	if err := tor.Hostile(lab.HostileRoutes(lab.DefaultToRPools[0], a2.Address)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		for _, n := range nodes {
			ext := mustStatus(t, n).GetExternalPeers()
			if len(ext) != 1 {
				return n.Name + ": " + ext2s(ext)
			}
			d := ext[0].GetDropped()
			for _, r := range []string{bgp.DropDefault, bgp.DropPoolAggregate, bgp.DropInsideBlock, bgp.DropNodeAddress, bgp.DropBlock} {
				if d[r] == 0 {
					return n.Name + " counts no " + r + " from the router: " + ext2s(ext)
				}
			}
		}
		return ""
	})
	for _, n := range nodes {
		if got := reefRoutes(t, n); !slices.Equal(got, before[n.Name]) {
			t.Errorf("%s's routes changed when the router turned hostile:\n%s\nwas\n%s", n.Name, strings.Join(got, "\n"), strings.Join(before[n.Name], "\n"))
		}
		if r := run(t, l, n.Netns, "ip", "-4", "route", "show", "default"); r != "" {
			t.Errorf("%s has a default route: %q", n.Name, r)
		}
		if r := run(t, l, n.Netns, "ip", "-4", "route", "show", "exact", "10.244.0.0/16"); r != "" {
			t.Errorf("%s has a route to the pool: %q", n.Name, r)
		}
	}
	if _, err := pa1.Ping(pb1.IP); err != nil {
		t.Errorf("pa1 -> pb1 with a hostile router: %v", err)
	}
	if out, err := a1.Reef("status"); err != nil || !strings.Contains(out, "External BGP peers") || !strings.Contains(out, bgp.DropDefault+" 1") {
		t.Errorf("reef status on a1: %v\n%s", err, out)
	} else {
		t.Logf("reef status on a1 with a hostile router:\n%s", out[strings.Index(out, "External BGP peers"):])
	}
	if out, err := a1.Reef("status", "-o", "json"); err != nil || !strings.Contains(out, `"externalPeers"`) || !strings.Contains(out, `"`+bgp.DropDefault+`": "1"`) {
		t.Errorf("reef status -o json on a1 has no external peer with its drops: %v\n%s", err, out)
	}

	// An unplanned stop: the router keeps a1's block for the restart time
	// (the pods there still answer), and not past it.
	a1block := blocksOf(t, a1)[0]
	if err := a1.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if got := poolRoutes(t, l, router); got[a1block] != a1.Address.String() {
		t.Errorf("right after a1 was killed, the router has no route to its block %s: %v", a1block, sortedPairs(got))
	}
	eventually(t, 30*time.Second, func() string {
		if via, ok := poolRoutes(t, l, router)[a1block]; ok {
			return "the router still routes " + a1block + " via " + via
		}
		return ""
	})
	t.Logf("the router dropped the killed a1's block %s %s after the kill (restart time 8s)", a1block, time.Since(killed).Round(100*time.Millisecond))
}

// startToR runs kind ("bird", "frr") in the ToR lab's router as the
// external peer of nodes, for pools; its log goes into a failed test's.
func startToR(t *testing.T, l *lab.Lab, kind string, nodes []*lab.Node, pools []lab.ToRPool, password string) lab.ToR {
	t.Helper()
	return startToRWith(t, l, kind, nodes, pools, lab.ToROptions{Password: password})
}

// poolRoutes are the routes into 10.244.0.0/16 in netns: prefix -> next hop.
func poolRoutes(t *testing.T, l *lab.Lab, netns string) map[string]string {
	t.Helper()
	pool := netip.MustParsePrefix("10.244.0.0/16")
	out := map[string]string{}
	for _, line := range nonEmptyLines(run(t, l, netns, "ip", "-4", "route", "show")) {
		f := strings.Fields(line)
		p, err := netip.ParsePrefix(f[0])
		if err != nil || !pool.Overlaps(p) {
			continue
		}
		via := "-"
		if i := slices.Index(f, "via"); i >= 0 && i+1 < len(f) {
			via = f[i+1]
		}
		out[p.String()] = via
	}
	return out
}

func sortedPairs(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+" via "+v)
	}
	slices.Sort(out)
	return out
}

func ext2s(ext []*reefv1.ExternalPeer) string {
	var out []string
	for _, e := range ext {
		out = append(out, e.String())
	}
	return "[" + strings.Join(out, "; ") + "]"
}

// TestToRPasswordMismatchBird: a TCP MD5 password that differs at the
// router leaves no error anywhere (each kernel drops the other's
// segments), so `reef status` says, beside the session that only waits,
// what a differing password looks like and which key to compare.
func TestToRPasswordMismatchBird(t *testing.T) {
	l := newLab(t)
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: torPool, RouterASN: lab.RouterASN, RouterPassword: "not-the-routers-key"})
	if err != nil {
		t.Fatal(err)
	}
	startToR(t, l, "bird", nodes, lab.DefaultToRPools, "reef-tor-key")
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() string {
		out, err := nodes[0].Reef("status")
		if err != nil {
			return "reef status: " + err.Error() + "\n" + out
		}
		if !strings.Contains(out, "its TCP MD5 password differs from bgp.externalPeers[].password") {
			return "reef status does not say what a differing password looks like:\n" + out
		}
		return ""
	})
	// The cluster's own sessions, which have no password, are not told so.
	out, _ := nodes[0].Reef("status")
	if n := strings.Count(out, "TCP MD5 password differs"); n != 1 {
		t.Errorf("the password hint is on %d lines, want the router's alone:\n%s", n, out)
	}
}
