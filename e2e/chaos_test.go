package e2e

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// podAddresses maps every address of either family routed to a pod veth
// on the running nodes (the kernel's view, not the store's) to the nodes
// that route it.
func podAddresses(t *testing.T, nodes []*lab.Node) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, n := range nodes {
		routes := reefRoutes(t, n)
		routes = append(routes, nonEmptyLines(run(t, n.Lab, n.Netns, "ip", "-6", "route", "show", "proto", "238"))...)
		for _, l := range routes {
			f := strings.Fields(l)
			if len(f) >= 3 && f[1] == "dev" && strings.HasPrefix(f[2], "reef") {
				out[f[0]] = append(out[f[0]], n.Name)
			}
		}
	}
	return out
}

// The chaos pools: 16 blocks of 8 addresses per family, routed directly
// (no tunnel address takes a pod's place). Each node starts wanting up to
// chaosFirstPods pods, one block's worth; the chaos raises what nodes want
// a block at a time (chaosMorePods, up to chaosMaxPods), so that nodes
// claim blocks while daemons are killed and nodes are cut off, and contend
// for the last free ones (5 nodes wanting 4 blocks each is more than 16).
// With a fixed 6 pods on 8-address blocks, every node claimed its one
// block in the first ADDs of round 1 and never again: no claim and no vote
// ever met a fault.
const (
	chaosPool4 = "  - cidr: 10.251.0.0/25\n    blockSize: 29\n    vxlanMode: Never\n"
	chaosPool6 = "  - cidr: fd00:10:251::/121\n    blockSize: 125\n    vxlanMode: Never\n"

	chaosFirstPods = 6
	chaosMorePods  = 8
	chaosMaxPods   = chaosFirstPods + 3*chaosMorePods
)

// TestBlocksChaos is the chaos below with dual-stack pods: an IPv4 and an
// IPv6 pool of sixteen blocks each, so that the nodes contend for the blocks
// of both families at once. make test runs it; the single-family variants
// are under make test-e2e-slow.
func TestBlocksChaos(t *testing.T) { blocksChaos(t, "pools:\n"+chaosPool4+chaosPool6) }

// TestBlocksChaosIPv4 is the chaos with an IPv4 pool alone.
func TestBlocksChaosIPv4(t *testing.T) {
	slowSuite(t)
	blocksChaos(t, "pools:\n"+chaosPool4)
}

// TestBlocksChaosIPv6 is the chaos with an IPv6 pool alone (issue 29).
func TestBlocksChaosIPv6(t *testing.T) {
	slowSuite(t)
	blocksChaos(t, "pools:\n"+chaosPool6)
}

// TestBlocksChaosIPv6Only is the chaos with IPv6-only nodes (docs/design.md,
// "IPv6-only nodes"): no IPv4 address on the underlay, each node known by
// its bgp.routerID, meshed and voting by IPv6 address, with the IPv6 pool
// alone. A node killed comes back with its identity from its store.
func TestBlocksChaosIPv6Only(t *testing.T) {
	slowSuite(t)
	blocksChaosWith(t, lab.NodeOptions{IPv6Only: true, Extra: "pools:\n" + chaosPool6})
}

// blocksChaos: five nodes on small pools, ADD and DEL on every node all
// the time, while daemons are killed (kill -9) and restarted and nodes are
// cut off at the switch (frames of both families dropped, sessions up
// until the hold time) and come back. With each fault one or two nodes
// want a block more (wantMore): a node cut off wants one while it cannot
// reach the voters, another node wants one at the same time, and a node
// killed wants one from its restart on. After each round, once every node
// runs and is reachable: no address of either family is routed to pods on
// two nodes, no block is confirmed by two nodes, no address is on two
// live pods, and each node's allocations are exactly its live pods'
// addresses. At the end, after DEL of every pod, nothing is left
// allocated. The nodes have IPv6 addresses on the underlay, as an IPv6
// pool wants.
func blocksChaos(t *testing.T, pools string) { blocksChaosWith(t, lab.NodeOptions{Extra: pools}) }

// blocksChaosWith is blocksChaos with the nodes' options (the pools in
// Extra); IPv6-only nodes have their IPv6 addresses already.
func blocksChaosWith(t *testing.T, o lab.NodeOptions) {
	l := newLab(t)
	nodes, err := l.AddMeshWith(5, o)
	if err != nil {
		t.Fatal(err)
	}
	if !o.IPv6Only {
		addNodeAddrs6(t, nodes...)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	converge(t, nodes...)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("chaos seed %d", seed)

	var mu sync.Mutex
	live := map[*lab.Node][]*lab.Pod{}
	want := map[*lab.Node]int{}
	for _, n := range nodes {
		want[n] = chaosFirstPods
	}
	// wantMore makes n want a block more, up to chaosMaxPods pods.
	wantMore := func(n *lab.Node) {
		mu.Lock()
		want[n] = min(want[n]+chaosMorePods, chaosMaxPods)
		mu.Unlock()
	}
	var adds, addFails, dels int
	seq := 0
	churn := func(n *lab.Node, stop <-chan struct{}, r *rand.Rand) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			pods := live[n]
			limit := want[n]
			seq++
			name := fmt.Sprintf("c%d", seq)
			mu.Unlock()
			if len(pods) < limit && (len(pods) == 0 || r.IntN(3) > 0) {
				p, err := n.NewPodNetns("default", name)
				if err != nil {
					t.Error(err)
					return
				}
				if err := p.Add(); err != nil {
					// What a runtime does after a failed ADD.
					_ = p.Del()
					_ = p.Remove()
					mu.Lock()
					addFails++
					mu.Unlock()
					continue
				}
				mu.Lock()
				live[n] = append(live[n], p)
				adds++
				mu.Unlock()
				continue
			}
			i := r.IntN(len(pods))
			p := pods[i]
			if err := p.Del(); err != nil {
				continue // the daemon is down and the queue was full, say: try again later
			}
			_ = p.Remove()
			mu.Lock()
			live[n] = append(live[n][:i:i], live[n][i+1:]...)
			dels++
			mu.Unlock()
		}
	}

	const rounds = 4
	for round := 1; round <= rounds; round++ {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				churn(n, stop, rand.New(rand.NewPCG(uint64(round), uint64(i))))
			}()
		}
		var events []string
		for step := 0; step < 6; step++ {
			ni := rng.IntN(len(nodes))
			n := nodes[ni]
			switch rng.IntN(3) {
			case 0:
				events = append(events, "kill "+n.Name)
				wantMore(n)
				if err := n.Kill(); err != nil {
					t.Error(err)
				}
				// The chaos is timed: a node down 0.5-2 s, cut 1-5 s, or a
				// second of churn alone. These are the faults' lengths, not
				// waits for a daemon.
				time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
				if err := n.Start(); err != nil {
					t.Fatalf("round %d: restart %s: %v", round, n.Name, err)
				}
			case 1:
				other := nodes[(ni+1+rng.IntN(len(nodes)-1))%len(nodes)]
				events = append(events, fmt.Sprintf("cut %s (%s wants more too)", n.Name, other.Name))
				if err := l.DropNode(n, true); err != nil {
					t.Fatal(err)
				}
				wantMore(n)
				wantMore(other)
				time.Sleep(time.Duration(1000+rng.IntN(4000)) * time.Millisecond) // below and beyond the 3s hold time
				if err := l.DropNode(n, false); err != nil {
					t.Fatal(err)
				}
			default:
				time.Sleep(time.Second)
			}
		}
		close(stop)
		wg.Wait()
		converge(t, nodes...)
		t.Logf("round %d: %s; %d ADDs, %d failed, %d DELs so far", round, strings.Join(events, ", "), adds, addFails, dels)

		for addr, on := range podAddresses(t, nodes) {
			if len(on) > 1 {
				t.Errorf("round %d: %s routed to pods on %v", round, addr, on)
			}
		}
		owned := uniqueOwners(t, nodes...)
		t.Logf("round %d: %d blocks confirmed", round, len(owned))
		var all []*lab.Pod
		for _, n := range nodes {
			all = append(all, live[n]...)
		}
		uniqueAddresses(t, all)
		// The reconcile loop frees what failed ADDs left behind within two
		// passes; then each node holds exactly its live pods' addresses.
		for _, n := range nodes {
			eventually(t, 15*time.Second, func() string {
				want := map[string]bool{}
				for _, p := range live[n] {
					for _, ip := range p.IPs {
						want[ip.String()] = true
					}
				}
				got := allocations(t, n)
				for ip := range got {
					if !want[ip] {
						return fmt.Sprintf("round %d: %s holds %s for no live pod", round, n.Name, ip)
					}
				}
				for ip := range want {
					if _, ok := got[ip]; !ok {
						return fmt.Sprintf("round %d: %s's live pod %s has no allocation", round, n.Name, ip)
					}
				}
				return ""
			})
		}
		if t.Failed() {
			return
		}
	}
	// Every pod away: nothing stays allocated.
	for _, n := range nodes {
		for _, p := range live[n] {
			if err := p.Del(); err != nil {
				t.Errorf("final DEL: %v", err)
			}
		}
	}
	for _, n := range nodes {
		eventually(t, 10*time.Second, func() string {
			if got := allocations(t, n); len(got) > 0 {
				return fmt.Sprintf("%s still holds %v after every DEL", n.Name, got)
			}
			return ""
		})
	}
	for _, n := range nodes {
		if strings.Contains(n.Log(), "block conflict") {
			t.Errorf("%s logged a block conflict", n.Name)
		}
	}
	if adds == 0 {
		t.Fatal("no ADD succeeded: the chaos test tested nothing")
	}
	// Each node claimed one block of each pool at its first ADD; more
	// blocks came from claims made during the chaos.
	if owned, first := len(uniqueOwners(t, nodes...)), len(nodes)*strings.Count(o.Extra, "cidr:"); owned <= first {
		t.Errorf("%d blocks confirmed, one per node and pool: no block was claimed during the chaos", owned)
	}
}
