package main

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

// The tor part: 3 meshed nodes and a ToR (BIRD 2 from Debian, the
// configuration of docs/bgp.md, lab.StartToRIn) on their subnet, every
// node with the ToR as its external peer (bgp.externalPeers). On each node
// in turn, one pod's ADD claims the node's first block; the clock runs
// from the start of that ADD until the ToR's kernel routes the block via
// the node (BIRD's kernel protocol, proto bird), and, the reference in the
// same run, until the last other node's kernel routes it.

// torAddr is the ToR's address on the lab's underlay.
var torAddr = netip.MustParseAddr("192.168.77.250")

type meshToRResult struct {
	clusters      int
	router, nodes []time.Duration // ADD start -> route in the ToR's kernel; -> route on the last other node
	err           string
}

func (b *meshBench) tor(clusters int) (r meshToRResult) {
	r.clusters = clusters
	for i := 0; i < clusters && b.ctx.Err() == nil; i++ {
		if err := b.torCluster(&r); err != nil {
			r.err = fmt.Sprintf("cluster %d: %v", i+1, err)
			meshProgress("tor: %s", r.err)
			return r
		}
	}
	return r
}

func (b *meshBench) torCluster(r *meshToRResult) error {
	l, done, err := b.newLab("tor")
	if err != nil {
		return err
	}
	defer done()
	nodes, ns, err := b.torStart(l)
	if err != nil {
		return err
	}
	router, err := meshWatchIn(ns, "the ToR", unix.RTPROT_BIRD)
	if err != nil {
		return err
	}
	defer close(router.stop)
	ws := []*meshWatcher{router}
	for _, node := range nodes {
		w, err := meshWatch(node)
		if err != nil {
			return err
		}
		defer close(w.stop)
		ws = append(ws, w)
	}
	// A second of quiet before the first ADD (the watchers listen from
	// their return): the scenario, not a wait.
	if err := b.sleep(time.Second); err != nil {
		return err
	}
	for i, node := range nodes {
		p, err := node.NewPodNetns("bench", fmt.Sprintf("tor-%d", i+1))
		if err != nil {
			return err
		}
		last, err := torSample(node, p, ws, i, r)
		if err != nil {
			return err
		}
		meshProgress("  %s: new block in the ToR's kernel after %s, on every other node after %s", node.Name,
			r.router[len(r.router)-1].Round(time.Millisecond), last.Round(time.Millisecond))
		// ADDs 200ms apart: the scenario's pace, not a wait.
		if err := b.sleep(200 * time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// torStart starts 3 meshed nodes, each with the BIRD 2 ToR as an external
// peer, and the ToR in a namespace of its own (ns), and waits until the
// nodes have converged and every external session is up.
func (b *meshBench) torStart(l *lab.Lab) (nodes []*lab.Node, ns string, err error) {
	const n = 3
	var addrs []netip.Addr
	for i := range n {
		addrs = append(addrs, lab.NodeAddress(i))
	}
	cfg := meshNodeCfg{peered: true, voters: addrs} // perNode writes the bgp: section itself
	cfg.perNode = func(i int) string {
		var peers []netip.Addr
		for j, a := range addrs {
			if j != i {
				peers = append(peers, a)
			}
		}
		return cfg.bgpSection(peers) + fmt.Sprintf("  externalPeers:\n    - address: %s\n      asn: %d\n", torAddr, lab.RouterASN)
	}
	nodes, err = b.addNodes(l, n, cfg)
	if err != nil {
		return nil, "", err
	}
	ns, err = l.AddHost("tor", torAddr)
	if err != nil {
		return nil, "", err
	}
	if _, err := l.StartToRIn("bird", ns, torAddr, addrs, lab.DefaultToRPools, ""); err != nil {
		return nil, "", err
	}
	if err := lab.StartAll(nodes); err != nil {
		return nil, "", err
	}
	if err := lab.WaitConverged(nodes, 60*time.Second); err != nil {
		return nil, "", err
	}
	if err := b.waitExternalUp(nodes, 30*time.Second); err != nil {
		return nil, "", err
	}
	return nodes, ns, nil
}

// torSample ADDs p on node, the i-th of the cluster, and records when the
// ToR's kernel (ws[0]) had the route to its block; it returns when the last
// other node (ws[1:], but ws[i+1]) had it, from the ADD's start.
func torSample(node *lab.Node, p *lab.Pod, ws []*meshWatcher, i int, r *meshToRResult) (time.Duration, error) {
	t0 := time.Now()
	if err := p.Add(); err != nil {
		return 0, err
	}
	var last time.Time
	for j, w := range ws {
		if j == i+1 {
			continue // the node itself
		}
		seen, err := waitSeen(w, node.Address, p.IP, t0.Add(20*time.Second))
		if err != nil {
			return 0, fmt.Errorf("%w\n%s", err, node.LogTail(8))
		}
		if j == 0 {
			r.router = append(r.router, seen.at.Sub(t0))
		} else if seen.at.After(last) {
			last = seen.at
		}
	}
	r.nodes = append(r.nodes, last.Sub(t0))
	return last.Sub(t0), nil
}

// waitSeen waits until w has a route via gw to a prefix holding ip, and
// returns it with when it appeared.
func waitSeen(w *meshWatcher, gw, ip netip.Addr, deadline time.Time) (meshSeen, error) {
	// The watcher stamps the route when it appears: how soon it is asked
	// does not change the figure.
	var seen meshSeen
	err := poll.Until(time.Until(deadline), func() error {
		var ok bool
		var err error
		if seen, ok, err = w.get(gw); err != nil {
			return poll.Stop(fmt.Errorf("route watch on %s: %w", w.name, err))
		}
		if !ok {
			return fmt.Errorf("%s has no route via %s to the new block of pod %s", w.name, gw, ip)
		}
		if !seen.dst.Contains(ip) {
			return poll.Stop(fmt.Errorf("%s: first route via %s is to %s, which does not hold the pod's %s", w.name, gw, seen.dst, ip))
		}
		return nil
	})
	return seen, err
}

// waitExternalUp waits until every node's external peers are established.
func (b *meshBench) waitExternalUp(nodes []*lab.Node, timeout time.Duration) error {
	return poll.Until(timeout, func() error {
		var down []string
		for _, n := range nodes {
			st, err := n.Status()
			if err != nil {
				return poll.Stop(err)
			}
			for _, e := range st.GetExternalPeers() {
				if e.GetState() != "established" {
					down = append(down, n.Name+" to "+e.GetAddress()+": "+e.GetState())
				}
			}
		}
		if len(down) == 0 {
			return nil
		}
		return b.unlessInterrupted(fmt.Errorf("external peers not established: %s", strings.Join(down, "; ")))
	})
}

func (r *meshReport) torAim(w func(string, ...any)) {
	t := r.tor
	p50, ok := meshQuantile(t.router, 0.5)
	hi, _ := meshQuantile(t.router, 1)
	ref, _ := meshQuantile(t.nodes, 0.5)
	w("- A node's new block in the router's kernel within 250 ms p50 (BIRD 2 as ToR): p50 %s ms (max %s, %d samples; the other\n", meshMs(p50, ok), meshMs(hi, ok), len(t.router))
	w("  nodes of the mesh, in the same run: p50 %s ms): %s.\n", meshMs(ref, len(t.nodes) > 0), meshMet(ok && t.err == "" && p50 <= 250*time.Millisecond))
}

func (r *meshReport) torSection(w func(string, ...any)) {
	t := r.tor
	w("### A new block at the router\n\n")
	w("3 meshed nodes (default pool, lab timers) and a ToR on their subnet: Debian's BIRD 2 with the configuration of\n")
	w("docs/bgp.md (\"BIRD 2 as ToR\"), eBGP to every node, which lists it in `bgp.externalPeers`. On each node in turn, one\n")
	w("pod is ADDed through libcni (the node's first block), and the clock runs from the start of the ADD until the ToR's\n")
	w("kernel routes the block via the node (BIRD's kernel protocol, watched by an rtnetlink subscription in the ToR's\n")
	w("namespace) and, for reference, until the last other node's kernel routes it. %d cluster(s) of 3.\n\n", t.clusters)
	q := func(v []time.Duration, p float64) string { d, ok := meshQuantile(v, p); return meshMs(d, ok) }
	w("| to | samples | p50 ms | max ms |\n|---|---:|---:|---:|\n")
	w("| the ToR's kernel | %d | %s | %s |\n", len(t.router), q(t.router, 0.5), q(t.router, 1))
	w("| every other node's kernel | %d | %s | %s |\n\n", len(t.nodes), q(t.nodes, 0.5), q(t.nodes, 1))
	if t.err != "" {
		w("Stopped early: %s\n\n", meshFirstLine(t.err))
	}
}
