package main

// bench-mesh --only rr: 100 nodes through 2 reef route reflectors
// (issue 10, "Measured in make bench"): cold to every route, RssAnon and RSS per
// client, paths per node.
//
// ROUTE REFLECTORS: this part needs reef's bgp.routeReflectors and
// bgp.routeReflector config keys. Until the reef binary under --bin takes
// them (rrSupported asks it), the part reports "not run: route
// reflectors not built yet" and only checks that the lab holds the 102
// daemons on this machine. Once the keys exist the same code runs the
// real measurement, unchanged.

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

// rrNotBuilt is the part's answer while reef has no route reflectors.
const rrNotBuilt = "not run: route reflectors not built yet"

type meshRRResult struct {
	clients  int
	nice     int    // the reflectors' nice value
	notRun   string // why the part did not run (rrNotBuilt and the daemon's words)
	rrs      []netip.Addr
	voters   []netip.Addr
	ready    time.Duration // every daemon serves ADD
	sessions time.Duration // every client has both reflectors' sessions, and each reflector the other's
	meshAdds
	// CPU seconds (user + system) of the clients and of the reflectors:
	// from the start to every session, and from the ADDs' start to the
	// last route. Steadier than the times on a loaded machine.
	cpuStartClients, cpuStartRRs, cpuAddsClients, cpuAddsRRs float64
	memClients, memRRs                                       []lab.Memory // after the routes settled
	pathsClient, pathsRRs                                    []uint64     // paths received, both families
	blocks                                                   int          // confirmed blocks in the cluster at the end (one per client whose ADD succeeded)
	restarts                                                 []string
	warnings                                                 []string // most frequent WARN/ERROR messages of the daemons
	conflict                                                 int      // "block conflict" lines
	err                                                      string
	capacity                                                 string // when not run: what starting 102 daemons (no peers) on this machine gave
}

// rrSupported asks the reef binary whether it knows bgp.routeReflectors
// and bgp.routeReflector: `reef daemon` on a config that sets them and an
// invalid logLevel stops at the config and names the keys it does not know
// (or only the config's other faults). It never gets to start.
func rrSupported(bin, dir string) (bool, string) {
	for _, key := range []string{"routeReflector: true", "routeReflectors: [192.0.2.1, 192.0.2.2]"} {
		probe := filepath.Join(dir, "rr-probe.yaml")
		cfg := "logLevel: not-a-level\nbgp:\n  " + key + "\n  voters: [192.0.2.3]\n"
		if err := os.WriteFile(probe, []byte(cfg), 0o644); err != nil {
			return false, err.Error()
		}
		cmd := exec.Command(filepath.Join(bin, "reef"), "daemon", "--config", probe)
		out, err := cmd.CombinedOutput()
		msg := strings.TrimSpace(string(out))
		switch {
		case err == nil:
			return false, "the config probe did not fail: " + meshFirstLine(msg)
		case strings.Contains(msg, `unknown key "routeReflector`):
			return false, meshFirstLine(msg)
		case !strings.Contains(msg, "config "):
			return false, "the config probe gave: " + meshFirstLine(msg)
		}
	}
	return true, ""
}

func (b *meshBench) routeReflectors(clients int, timeout time.Duration) (r meshRRResult) {
	r.clients = clients
	dir, err := os.MkdirTemp("", "reef-rr-probe")
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer os.RemoveAll(dir)
	if ok, why := rrSupported(b.bin, dir); !ok {
		r.notRun = rrNotBuilt + " (" + why + ")"
		meshProgress("rr: %s; checking that the lab holds %d daemons", r.notRun, clients+2)
		r.capacity = b.rrCapacity(clients + 2)
		return r
	}
	return b.rrRun(clients, timeout)
}

// rrCapacity starts n daemons with no peers (the idle node's config) and
// reports how that went: whether this machine's lab holds them.
func (b *meshBench) rrCapacity(n int) string {
	l, done, err := b.newLab("rrcap")
	if err != nil {
		return "lab: " + err.Error()
	}
	defer done()
	nodes, err := b.addNodes(l, n, meshNodeCfg{})
	if err != nil {
		return fmt.Sprintf("%d nodes not built: %v", n, err)
	}
	start := time.Now()
	sup, err := b.startSupervised(nodes)
	if err != nil {
		return err.Error()
	}
	restarts := func() []string { return sup.Stop() }
	if err := b.waitAllReady(nodes, 120*time.Second); err != nil {
		return fmt.Sprintf("not every daemon became ready: %s (%d exits)", meshFirstLine(err.Error()), len(restarts()))
	}
	ready := time.Since(start)
	var mem []lab.Memory
	for _, node := range nodes {
		if m, err := node.Memory(); err == nil {
			mem = append(mem, m)
		}
	}
	sp := spreadOf(mem)
	ex := restarts()
	return fmt.Sprintf("%d daemons (no BGP peers, no pods) all served ADD %s after they were started together, with %d exits; RSS total %s, max %s; RssAnon total %s, max %s",
		n, meshSec(ready), len(ex), meshMiB(sp.sum.RSS), meshMiB(sp.max.RSS), meshMiB(sp.sum.Anon), meshMiB(sp.max.Anon))
}

// rrRun is the measurement: 2 reef route reflectors (bgp.routeReflector,
// peers: the other reflector, peerPrefixes: the underlay) and clients
// clients (bgp.routeReflectors: the two), every node with the same voter
// list, the first 3 clients. All start at once from empty stores; then one
// ADD per client, all at once, until every client routes to every other
// client's block.
func (b *meshBench) rrRun(clients int, timeout time.Duration) (r meshRRResult) {
	r.clients, r.nice = clients, b.rrNice
	fail := func(err error) meshRRResult { r.err = err.Error(); return r }
	l, done, err := b.newLab("rr")
	if err != nil {
		return fail(err)
	}
	defer done()
	r.rrs = []netip.Addr{lab.NodeAddress(0), lab.NodeAddress(1)}
	r.voters = []netip.Addr{lab.NodeAddress(2), lab.NodeAddress(3), lab.NodeAddress(4)}
	all, err := b.addNodes(l, 2+clients, rrNodeCfg(&r))
	if err != nil {
		return fail(err)
	}
	rrNodes, cls := all[:2], all[2:]
	defer func() { r.warnings, _, r.conflict = meshLogSummary(all) }()
	handles := make([]*netlink.Handle, len(cls))
	pods := make([]*lab.Pod, len(cls))
	for i, node := range cls {
		if handles[i], err = meshHandle(node); err != nil {
			return fail(err)
		}
		defer handles[i].Close()
		if pods[i], err = node.NewPodNetns("bench", "rr"); err != nil {
			return fail(err)
		}
	}
	meshProgress("rr: %d nodes built, starting every daemon", len(all))
	start := time.Now()
	sup, err := b.startSupervised(all)
	if err != nil {
		return fail(err)
	}
	defer func() { r.restarts = sup.Stop() }()
	if err := b.waitAllReady(all, 120*time.Second); err != nil {
		return fail(err)
	}
	r.ready = time.Since(start)
	meshProgress("rr: all ready after %s; waiting for the sessions to the reflectors", r.ready.Round(time.Millisecond))
	if err := b.rrWaitSessions(rrNodes, cls, start.Add(timeout)); err != nil {
		return fail(err)
	}
	r.sessions = time.Since(start)
	r.cpuStartClients, r.cpuStartRRs = meshCPU(cls), meshCPU(rrNodes)
	meshProgress("rr: every session up after %s; one ADD per client, all at once", r.sessions.Round(time.Millisecond))
	a, err := b.addAll(cls, pods, handles)
	r.meshAdds = a
	r.cpuAddsClients, r.cpuAddsRRs = meshCPU(cls)-r.cpuStartClients, meshCPU(rrNodes)-r.cpuStartRRs
	if err != nil {
		// Not every route came: memory and paths as they are now.
		r.err = err.Error()
		meshProgress("rr: %v", err)
	} else {
		meshProgress("rr: ADDs: %d failed; every route in after %s from the ADDs' start", a.addErrs, a.routes.Round(time.Millisecond))
		if err := b.sleep(meshSettle); err != nil {
			return fail(err)
		}
	}
	r.blocks = clients - a.addErrs
	if err := rrSteady(all, &r); err != nil {
		return fail(err)
	}
	return r
}

// rrNodeCfg is the config of the 2 reflectors (nodes 0 and 1, at r.nice)
// and of their clients.
func rrNodeCfg(r *meshRRResult) meshNodeCfg {
	// The production BGP timers (keepalive 10 s, hold 30 s), not the lab's
	// 1 s / 3 s: with 102 daemons on 2 cores the start alone starves them
	// past a 3 s hold time.
	voters := "  voters: [" + meshAddrList(r.voters) + "]\n"
	return meshNodeCfg{perNode: func(i int) string {
		if i < 2 {
			return "  routeReflector: true\n  peers: [" + r.rrs[1-i].String() + "]\n" +
				fmt.Sprintf("  peerPrefixes: [%s]\n", lab.Underlay) + voters
		}
		return "  routeReflectors: [" + meshAddrList(r.rrs) + "]\n" + voters
	}, nice: func(i int) int {
		if i < 2 {
			return r.nice
		}
		return 0
	}}
}

// rrSteady records each daemon's memory and paths received, the
// reflectors' (the first 2 of all) apart from the clients'.
func rrSteady(all []*lab.Node, r *meshRRResult) error {
	for i, node := range all {
		m, err := node.Memory()
		if err != nil {
			return err
		}
		var k uint64
		if st, err := node.Status(); err == nil {
			for _, p := range st.GetPeers() {
				k += p.GetReceived()
			}
		}
		if i < 2 {
			r.memRRs, r.pathsRRs = append(r.memRRs, m), append(r.pathsRRs, k)
		} else {
			r.memClients, r.pathsClient = append(r.memClients, m), append(r.pathsClient, k)
		}
	}
	return nil
}

// rrWaitSessions waits until every client has an established session with
// both reflectors and the reflectors one with each other, by `reef
// status` of the clients and the reflectors.
func (b *meshBench) rrWaitSessions(rrs, clients []*lab.Node, deadline time.Time) error {
	return poll.Until(time.Until(deadline), func() error {
		var missing []string
		var mu sync.Mutex
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, n := range clients {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				up := map[string]bool{}
				if st, err := n.Status(); err == nil {
					for _, p := range st.GetPeers() {
						up[p.GetAddress()] = p.GetState() == "established"
					}
				}
				for _, rr := range rrs {
					if !up[rr.Address.String()] {
						mu.Lock()
						missing = append(missing, n.Name+"→"+rr.Name)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		for i, rr := range rrs {
			other := rrs[1-i]
			ok := false
			if st, err := rr.Status(); err == nil {
				for _, p := range st.GetPeers() {
					ok = ok || p.GetAddress() == other.Address.String() && p.GetState() == "established"
				}
			}
			if !ok {
				missing = append(missing, rr.Name+"→"+other.Name)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		return b.unlessInterrupted(fmt.Errorf("%d sessions to the reflectors not established, e.g. %s", len(missing), strings.Join(missing[:min(4, len(missing))], ", ")))
	})
}
