package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/store"
)

// startMesh adds n meshed nodes with extra config and starts them together.
func startMesh(t *testing.T, l *lab.Lab, n int, extra string) []*lab.Node {
	t.Helper()
	nodes, err := l.AddMesh(n, extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	return nodes
}

func converge(t *testing.T, nodes ...*lab.Node) {
	t.Helper()
	if err := lab.WaitConverged(nodes, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// blocksOf returns a node's own confirmed blocks.
func blocksOf(t *testing.T, n *lab.Node) []string {
	t.Helper()
	st, err := n.Status()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, b := range st.GetBlocks() {
		if b.GetState() == "confirmed" {
			out = append(out, b.GetCidr())
		}
	}
	return out
}

// ownersSeenBy maps block -> owner address as node n's IPAM shows it.
func ownersSeenBy(t *testing.T, n *lab.Node) map[string]string {
	t.Helper()
	rep, err := n.IPAM()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, b := range rep.GetBlocks() {
		m[b.GetCidr()] = b.GetOwnerAddress()
	}
	return m
}

// TestMeshThreeNodes: 3 nodes, 4 pods each. All pairs ping, TTL shows one
// routed hop on a node and two across nodes, the underlay carries pod
// addresses unwrapped, and reef status / ipam show agree with the kernel.
func TestMeshThreeNodes(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 3, "")
	var pods []*lab.Pod
	for _, n := range nodes {
		for i := 0; i < 4; i++ {
			pods = append(pods, newPod(t, n, fmt.Sprintf("%s-p%d", n.Name, i)))
		}
	}
	converge(t, nodes...)
	seen := map[netip.Addr]string{}
	for _, p := range pods {
		if other, dup := seen[p.IP]; dup {
			t.Fatalf("address %s given to %s and %s", p.IP, other, p.Name)
		}
		seen[p.IP] = p.Name
	}
	for _, a := range pods {
		for _, b := range pods {
			if a == b {
				continue
			}
			want := 62
			if a.Node == b.Node {
				want = 63
			}
			if ttl, err := a.Ping(b.IP); err != nil || ttl != want {
				t.Errorf("%s -> %s: ttl %d, %v; want ttl %d", a.Name, b.Name, ttl, err, want)
			}
		}
	}

	// The underlay sees pod addresses, not node addresses: capture on the
	// switch while a pod on node1 pings a pod on node2.
	a, b := pods[0], pods[4]
	out := capture(t, l, "br0", "icmp", func() { a.Ping(b.IP) })
	if !strings.Contains(out, a.IP.String()+" > "+b.IP.String()) {
		t.Errorf("underlay capture does not show %s > %s unwrapped:\n%s", a.IP, b.IP, out)
	}

	// reef status and ipam show agree with BGP and the kernel.
	for _, n := range nodes {
		st, err := n.Status()
		if err != nil {
			t.Fatal(err)
		}
		if len(st.GetPeers()) != 2 {
			t.Errorf("%s: %d BGP peers, want 2", n.Name, len(st.GetPeers()))
		}
		for _, p := range st.GetPeers() {
			if p.GetState() != "established" || p.GetHostname() == "" {
				t.Errorf("%s: peer %s is %s (hostname %q)", n.Name, p.GetAddress(), p.GetState(), p.GetHostname())
			}
		}
		owners := ownersSeenBy(t, n)
		for _, m := range nodes {
			for _, blk := range blocksOf(t, m) {
				if owners[blk] != m.Address.String() {
					t.Errorf("%s's ipam shows %s owned by %q, want %s", n.Name, blk, owners[blk], m.Address)
				}
				route := run(t, l, n.Netns, "ip", "-4", "route", "show", "exact", blk, "proto", "238")
				want := "via " + m.Address.String() + " dev eth0"
				if n == m {
					want = "blackhole"
				}
				if !strings.Contains(route, want) {
					t.Errorf("%s: route to %s is %q, want %q", n.Name, blk, route, want)
				}
			}
		}
		js, err := n.Reef("status", "-o", "json")
		if err != nil || !json.Valid([]byte(js)) {
			t.Errorf("reef status -o json on %s: %v", n.Name, err)
		}
		if txt, err := n.Reef("status"); err != nil || !strings.Contains(txt, "established") {
			t.Errorf("reef status on %s: %v\n%s", n.Name, err, txt)
		}
	}
}

// TestSimultaneousStartUnique: three nodes start at the same moment from
// empty stores and ADD 50 pods each in parallel, several times over, in a
// pool small enough that their block searches collide. Every address is
// unique and every block has one owner in everyone's eyes.
func TestSimultaneousStartUnique(t *testing.T) {
	const rounds, perNode = 3, 50
	for round := 1; round <= rounds; round++ {
		t.Run(fmt.Sprintf("round%d", round), func(t *testing.T) {
			l := newLab(t)
			// 16 blocks of 16: each node needs 4, and searches start from
			// offsets derived from the names, so claims meet.
			nodes := startMesh(t, l, 3, "pools:\n  - cidr: 10.245.0.0/24\n    blockSize: 28\n")
			var mu sync.Mutex
			ips := map[netip.Addr]string{}
			var wg sync.WaitGroup
			errs := make(chan error, 3*perNode)
			for _, n := range nodes {
				pods := make([]*lab.Pod, perNode)
				for i := range pods {
					p, err := n.NewPodNetns("default", fmt.Sprintf("%s-r%d-%d", n.Name, round, i))
					if err != nil {
						t.Fatal(err)
					}
					pods[i] = p
				}
				for _, p := range pods {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := p.Add(); err != nil {
							errs <- err
							return
						}
						mu.Lock()
						defer mu.Unlock()
						if other, dup := ips[p.IP]; dup {
							errs <- fmt.Errorf("address %s given to %s and %s", p.IP, other, p.Name)
						}
						ips[p.IP] = p.Name
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if len(ips) != 3*perNode {
				t.Errorf("%d distinct addresses, want %d", len(ips), 3*perNode)
			}
			converge(t, nodes...)
			owner := map[string]string{}
			for _, n := range nodes {
				for _, blk := range blocksOf(t, n) {
					if o, dup := owner[blk]; dup {
						t.Errorf("block %s confirmed by both %s and %s", blk, o, n.Name)
					}
					owner[blk] = n.Name
				}
			}
			lost := 0
			for _, n := range nodes {
				lost += strings.Count(n.Log(), "gave up a pending claim")
				if strings.Contains(n.Log(), "block conflict") {
					t.Errorf("%s logged a block conflict after confirmation:\n%s", n.Name, n.LogTail(30))
				}
			}
			t.Logf("%d competing claims were resolved by the conflict rule", lost)
		})
	}
}

// TestNodeRestartNoLoss: node 2's daemon restarts while pods on nodes 1
// and 3 ping node 2's pods at 10 per second: nothing is lost, and node 2
// keeps its blocks.
func TestNodeRestartNoLoss(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 3, "")
	p1, p2, p3 := newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b"), newPod(t, nodes[2], "c")
	converge(t, nodes...)
	before := blocksOf(t, nodes[1])
	w1 := pingFor(t, p1, p2.IP.String(), 60)
	w3 := pingFor(t, p3, p2.IP.String(), 60)
	// A second of traffic before the restart, as part of the scenario: the
	// pings span the restart (6 s of them), whenever it comes.
	time.Sleep(time.Second)
	if err := nodes[1].Restart(); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]func() (int, int){"node1": w1, "node3": w3} {
		if recv, sent := w(); recv != sent {
			t.Errorf("%s's pod lost %d of %d pings to node2's pod across node2's restart", name, sent-recv, sent)
		}
	}
	if after := blocksOf(t, nodes[1]); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("node2's blocks changed across its restart: %v -> %v", before, after)
	}
	if !strings.Contains(nodes[1].Log(), "plannedRestart=true") {
		t.Error("node2 did not start as a planned restart after SIGTERM")
	}
	converge(t, nodes...)
}

// TestPartitionKeepsBlocks: node 2 is cut off longer than the hold time.
// The others keep its blocks (and the routes to them) and, claiming more
// blocks meanwhile, never take one of node 2's; node 2 cannot claim
// without a majority; after the cut heals, everything is reachable again.
func TestPartitionKeepsBlocks(t *testing.T) {
	l := newLab(t)
	// 4 blocks of 8: one each, one spare (no VXLAN: no tunnel address to count).
	nodes := startMesh(t, l, 3, "pools:\n  - cidr: 10.246.0.0/27\n    blockSize: 29\n    vxlanMode: Never\n")
	p1, p2 := newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b")
	newPod(t, nodes[2], "c")
	converge(t, nodes...)
	n2blocks := blocksOf(t, nodes[1])

	if err := l.CutNode(nodes[1], true); err != nil {
		t.Fatal(err)
	}
	waitCutOff(t, nodes[1], nodes[0], nodes[2])
	// node1 fills its block and needs more: it may take the spare block,
	// never node2's; then the pool is exhausted.
	var extra []*lab.Pod
	for i := 0; ; i++ {
		p, err := nodes[0].NewPodNetns("default", fmt.Sprintf("fill-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(); err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code != 100 {
				t.Fatalf("ADD %d on node1 during the partition: %v, want success or pool exhausted (100)", i, err)
			}
			break
		}
		extra = append(extra, p)
		if i > 20 {
			t.Fatal("node1 kept getting addresses: it must have taken node2's block")
		}
	}
	for _, p := range extra {
		for _, blk := range n2blocks {
			if netip.MustParsePrefix(blk).Contains(p.IP) {
				t.Errorf("node1 gave %s from node2's block %s during the partition", p.IP, blk)
			}
		}
	}
	// node2, alone, cannot claim: its ADDs beyond its block fail cleanly.
	st, err := nodes[1].Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.GetQuorumUp()*2 > st.GetQuorumKnown() {
		t.Errorf("node2 cut off still thinks it has a majority: %d of %d", st.GetQuorumUp(), st.GetQuorumKnown())
	}

	if err := l.CutNode(nodes[1], false); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes...)
	if got := blocksOf(t, nodes[1]); strings.Join(got, " ") != strings.Join(n2blocks, " ") {
		t.Errorf("node2's blocks after the partition: %v, want %v", got, n2blocks)
	}
	for _, n := range []*lab.Node{nodes[0], nodes[2]} {
		for _, blk := range n2blocks {
			if o := ownersSeenBy(t, n)[blk]; o != nodes[1].Address.String() {
				t.Errorf("%s thinks node2's block %s belongs to %q", n.Name, blk, o)
			}
		}
	}
	eventually(t, 10*time.Second, func() string {
		if _, err := p1.Ping(p2.IP); err != nil {
			return "node1's pod cannot reach node2's pod after the partition: " + err.Error()
		}
		return ""
	})
}

// TestJoinHardCaseAndForget: a fourth node joins with only its own config;
// node 3 stops; a fifth node joins and fills the pool without taking node
// 3's block; node 3 returns and its pod still works; then node 3 leaves
// for good and `reef node forget` frees its block.
func TestJoinHardCaseAndForget(t *testing.T) {
	l := newLab(t)
	// 8 blocks of 8 addresses (no VXLAN: no tunnel address to count).
	const pool = "pools:\n  - cidr: 10.247.0.0/26\n    blockSize: 29\n    vxlanMode: Never\n"
	nodes := startMesh(t, l, 3, pool)
	pods := []*lab.Pod{newPod(t, nodes[0], "a"), newPod(t, nodes[1], "b"), newPod(t, nodes[2], "c")}

	// node4 lists the others; they accept it through peerPrefixes.
	n4, err := l.AddNode("node4", lab.NodeOptions{Peers: []netip.Addr{nodes[0].Address, nodes[1].Address, nodes[2].Address},
		PeerPrefixes: []netip.Prefix{lab.Underlay}, Extra: pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := n4.Start(); err != nil {
		t.Fatal(err)
	}
	pods = append(pods, newPod(t, n4, "d"))
	all := append(append([]*lab.Node{}, nodes...), n4)
	converge(t, all...)
	for _, n := range nodes {
		st, _ := n.Status()
		found := false
		for _, p := range st.GetPeers() {
			found = found || (p.GetAddress() == n4.Address.String() && p.GetState() == "established" && p.GetDynamic())
		}
		if !found {
			t.Errorf("%s has no established session with node4 through peerPrefixes: %v", n.Name, st.GetPeers())
		}
	}
	if _, err := pods[0].Ping(pods[3].IP); err != nil {
		t.Errorf("node1's pod -> node4's pod: %v", err)
	}

	// The hard case.
	n3 := nodes[2]
	n3blocks := blocksOf(t, n3)
	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}
	n5, err := l.AddNode("node5", lab.NodeOptions{Peers: []netip.Addr{nodes[0].Address, nodes[1].Address, n3.Address, n4.Address},
		PeerPrefixes: []netip.Prefix{lab.Underlay}, Extra: pool})
	if err != nil {
		t.Fatal(err)
	}
	if err := n5.Start(); err != nil {
		t.Fatal(err)
	}
	var got []*lab.Pod
	for i := 0; ; i++ {
		p, err := n5.NewPodNetns("default", fmt.Sprintf("fill-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Add(); err != nil {
			var e *types.Error
			if !errors.As(err, &e) || e.Code != 100 {
				t.Fatalf("ADD %d on node5: %v, want success or pool exhausted (100)", i, err)
			}
			break
		}
		got = append(got, p)
		if i > 40 {
			t.Fatal("node5 got more than the 4 free blocks hold")
		}
	}
	if len(got) != 4*8 {
		t.Errorf("node5 got %d addresses, want the 32 of the 4 free blocks", len(got))
	}
	for _, p := range got {
		for _, blk := range n3blocks {
			if netip.MustParsePrefix(blk).Contains(p.IP) {
				t.Fatalf("node5 gave %s from stopped node3's block %s", p.IP, blk)
			}
		}
	}
	if err := n3.Start(); err != nil {
		t.Fatal(err)
	}
	all = append(all, n5)
	converge(t, all...)
	if _, err := pods[0].Ping(pods[2].IP); err != nil {
		t.Errorf("node3's pod after its return: %v", err)
	}

	// node3 leaves for good; forget it by name on node1.
	for _, p := range got[len(got)-8:] {
		if err := p.Del(); err != nil {
			t.Fatal(err)
		}
	}
	if err := pods[2].Del(); err != nil {
		t.Fatal(err)
	}
	if err := n3.Stop(); err != nil {
		t.Fatal(err)
	}
	out, err := nodes[0].Reef("node", "forget", "node3")
	if err != nil || !strings.Contains(out, n3blocks[0]) {
		t.Fatalf("reef node forget node3: %v\n%s", err, out)
	}
	// node2 learns it over BGP and can claim the freed block.
	eventually(t, 10*time.Second, func() string {
		if _, known := ownersSeenBy(t, nodes[1])[n3blocks[0]]; known {
			return "node2 still remembers node3's block"
		}
		return ""
	})
	var took bool
	for i := 0; i < 24 && !took; i++ {
		p, err := nodes[1].NewPod("default", fmt.Sprintf("after-forget-%d", i))
		if err != nil {
			t.Fatalf("ADD on node2 after the forget: %v", err)
		}
		took = netip.MustParsePrefix(n3blocks[0]).Contains(p.IP)
	}
	if !took {
		t.Errorf("node2 never got an address from forgotten node3's block %s", n3blocks[0])
	}
}

// TestImportFilter: a peer that announces a default route, a node address,
// a prefix outside the pools, a /32 inside another node's block, or a
// block whose next hop is not its owner gets none of it installed.
func TestImportFilter(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 2, "")
	newPod(t, nodes[0], "a")
	converge(t, nodes...)
	victim := blocksOf(t, nodes[0])[0]
	inside := netip.MustParsePrefix(victim).Addr().Next().Next()
	rogue := netip.MustParseAddr("192.168.77.99")
	ns, err := l.AddHost("rogue", rogue)
	if err != nil {
		t.Fatal(err)
	}
	lc := func(owner netip.Addr) string {
		b := owner.As4()
		o := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		return fmt.Sprintf("64512:100:0 64512:101:%d 64512:102:0 64512:103:%d 64512:104:1", time.Now().Add(-time.Hour).Unix(), o)
	}
	bad := []string{
		"0.0.0.0/0 " + rogue.String(),
		nodes[1].Address.String() + "/32 " + rogue.String(),
		"10.99.0.0/26 " + rogue.String() + " " + lc(rogue),
		inside.String() + "/32 " + rogue.String() + " " + lc(rogue),
		"10.244.200.0/26 " + nodes[1].Address.String() + " " + lc(rogue), // next hop is not the owner
	}
	args := []string{filepath.Join(binDir, "reef-lab"), "speaker", "--router-id", rogue.String(), "--peers", nodes[0].Address.String()}
	for _, b := range bad {
		args = append(args, "--announce", b)
	}
	if _, err := l.Spawn(ns, "rogue.log", args...); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		st, err := nodes[0].Status()
		if err != nil {
			return err.Error()
		}
		if st.GetBgpDropped() < uint64(len(bad)) {
			return fmt.Sprintf("node1 dropped %d paths so far, want %d", st.GetBgpDropped(), len(bad))
		}
		return ""
	})
	routes := strings.Join(reefRoutes(t, nodes[0]), "\n")
	all := run(t, l, nodes[0].Netns, "ip", "-4", "route")
	for _, want := range []string{"default", "10.99.0.0", inside.String() + " ", "10.244.200.0", rogue.String()} {
		if strings.Contains(routes, want) || strings.Contains(all, want+" via") {
			t.Errorf("a rogue path got installed (%q):\n%s", want, all)
		}
	}
	if !strings.Contains(nodes[0].Log(), "dropped a path that is not a reef block") {
		t.Error("the daemon log does not say what it dropped")
	}
	if o := ownersSeenBy(t, nodes[0])[victim]; o != nodes[0].Address.String() {
		t.Errorf("node1's own block %s now shows owner %q", victim, o)
	}
}

// TestCompetingClaims makes claims collide on purpose: three nodes whose
// names give the same search offset start together and each ADDs a pod as
// soon as it can, so the first nodes to reach a majority claim the same
// block at the same moment. The conflict rule leaves every block with one
// owner and every pod with its own address.
func TestCompetingClaims(t *testing.T) {
	pool := store.Pool{CIDR: netip.MustParsePrefix("10.248.0.0/26"), BlockSize: 28}
	var names []string
	for i := 0; len(names) < 3 && i < 1000; i++ {
		name := fmt.Sprintf("n%d", i)
		n := blockproto.Pool{CIDR: pool.CIDR, BlockSize: pool.BlockSize}.NumBlocks()
		if len(names) == 0 || blockproto.Offset(name, n) == blockproto.Offset(names[0], n) {
			names = append(names, name)
		}
	}
	extra := "pools:\n  - cidr: 10.248.0.0/26\n    blockSize: 28\n"
	for attempt := 1; attempt <= 3; attempt++ {
		l := newLab(t)
		var nodes []*lab.Node
		for i, name := range names {
			var peers []netip.Addr
			for j := range names {
				if j != i {
					peers = append(peers, lab.NodeAddress(j))
				}
			}
			n, err := l.AddNode(name, lab.NodeOptions{Peers: peers, PeerPrefixes: []netip.Prefix{lab.Underlay}, Extra: extra})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n)
		}
		if err := lab.StartAll(nodes); err != nil {
			t.Fatal(err)
		}
		pods := make([]*lab.Pod, len(nodes))
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := n.NewPod("default", "first")
				if err != nil {
					t.Error(err)
					return
				}
				pods[i] = p
			}()
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		converge(t, nodes...)
		owner := map[string]string{}
		lost := 0
		for i, n := range nodes {
			for _, blk := range blocksOf(t, n) {
				if o, dup := owner[blk]; dup {
					t.Fatalf("block %s confirmed by both %s and %s", blk, o, n.Name)
				}
				owner[blk] = n.Name
				if !netip.MustParsePrefix(blk).Contains(pods[i].IP) && len(blocksOf(t, n)) == 1 {
					t.Errorf("%s's pod %s is outside its block %s", n.Name, pods[i].IP, blk)
				}
			}
			lost += strings.Count(n.Log(), "gave up a pending claim")
			if strings.Contains(n.Log(), "block conflict") {
				t.Errorf("%s logged a conflict after confirmation", n.Name)
			}
		}
		for _, a := range pods {
			for _, b := range pods {
				if a != b {
					if _, err := a.Ping(b.IP); err != nil {
						t.Errorf("%s -> %s: %v", a.Node.Name, b.Node.Name, err)
					}
				}
			}
		}
		if lost > 0 {
			t.Logf("attempt %d: %d claim(s) lost to a competing claim of the same block, as the rule says", attempt, lost)
			return
		}
		t.Logf("attempt %d: the claims did not meet; again", attempt)
	}
	t.Error("three attempts and the claims never collided: the conflict rule was not exercised")
}
