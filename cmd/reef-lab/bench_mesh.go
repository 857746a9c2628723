package main

// bench-mesh: the multi-node benchmarks (BENCHMARKS.md, "## Multi-node").
// Six parts, each in labs of its own that are removed at the end:
//
//   - idle: one fresh node, no pods, no peers; its daemon's memory after 5 s.
//   - routes: one node and a test speaker (reef-lab speaker) on the
//     underlay announcing what a reef node with 2,000 confirmed blocks
//     would (its record and 2,000 confirmed claims in IPv4 VPN, the 2,000
//     blocks in IPv4 unicast); the time until the node's kernel has all
//     2,000 routes, and the daemon's memory.
//   - convergence: meshes of 3 and 10 nodes with the default config; on
//     each node in turn, the time from the start of its first ADD until
//     every other node has a kernel route to the block that ADD claimed.
//   - tor: 3 meshed nodes and a BIRD 2 ToR, their external peer
//     (bench_mesh_tor.go): a node's new block to the ToR's kernel.
//   - mesh: 50 nodes started at once from empty stores; the time until
//     every pair has a BGP session, then from one ADD per node (all at
//     once) until every node routes to every other node's block; memory and
//     the paths in every node's BGP tables.
//   - rr: 100 nodes that peer only with 2 reef route reflectors
//     (bench_mesh_rr.go): cold to every route, memory, paths per node; "not
//     run" with a reef binary that has no bgp.routeReflectors.
//
// Every daemon runs with the production defaults for reconcileInterval
// (30s) and logLevel (info); the BGP timers are the lab's (keepalive 1s,
// hold 3s). Routes are watched through netlink handles bound to each
// node's namespace (subscriptions for convergence, dumps for the rest), so
// the watching costs next to nothing next to the daemons.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

// meshParts are the parts of bench-mesh in the order they run.
var meshParts = []string{"idle", "routes", "convergence", "tor", "mesh", "rr"}

type meshBench struct {
	ctx      context.Context
	bin      string
	keepLogs string
	logLevel string
	rrNice   int // nice value of the reflectors' daemons in the rr part
}

func meshProgress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-mesh: "+format+"\n", args...)
}

func benchMesh(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab bench-mesh", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef, reef-cni and reef-lab")
	out := fs.String("out", "", `write the report into this file as its "## Multi-node" section (replacing only that section)`)
	only := fs.String("only", strings.Join(meshParts, ","), "comma-separated parts to run: "+strings.Join(meshParts, ", "))
	meshNodes := fs.Int("mesh-nodes", 50, "mesh: number of nodes")
	meshWait := fs.Duration("mesh-timeout", 90*time.Second, "mesh: give up waiting for the full mesh of sessions after this")
	meshVoters := fs.Int("mesh-voters", 0, "mesh: bgp.voters = the first this many nodes (0: the first 5)")
	convClusters3 := fs.Int("clusters3", 3, "convergence: clusters of 3 nodes (3 samples each)")
	convClusters10 := fs.Int("clusters10", 1, "convergence: clusters of 10 nodes (10 samples each)")
	torClusters := fs.Int("tor-clusters", 3, "tor: clusters of 3 nodes and a ToR (3 samples each)")
	rrClients := fs.Int("rr-clients", 100, "rr: number of route-reflector clients (plus 2 reflectors)")
	rrNice := fs.Int("rr-nice", -10, "rr: nice value of the 2 reflectors' daemons (0: the clients' share of the CPU)")
	rrWait := fs.Duration("rr-timeout", 120*time.Second, "rr: give up waiting for the sessions after this")
	keepLogs := fs.String("keep-logs", "", "copy every daemon's log into this directory before its lab is removed")
	debug := fs.Bool("debug", false, "daemons log at debug level (default info, as in production)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench-mesh: unexpected arguments %q", fs.Args())
	}
	want, err := meshWanted(*only, *bin)
	if err != nil {
		return err
	}
	if *keepLogs != "" {
		if err := os.MkdirAll(*keepLogs, 0o755); err != nil {
			return err
		}
	}
	b := &meshBench{ctx: ctx, bin: *bin, keepLogs: *keepLogs, logLevel: "info", rrNice: *rrNice}
	if *debug {
		b.logLevel = "debug"
	}
	rep := &meshReport{began: time.Now(), loadStart: meshLoad(), command: meshCommand(args), parts: want, logLevel: b.logLevel, bin: *bin}
	rep.reef = meshRun(filepath.Join(*bin, "reef"), "version")
	rep.othersStart = meshOthers()

	b.runParts(rep, meshSizes{conv3: *convClusters3, conv10: *convClusters10, tor: *torClusters,
		meshNodes: *meshNodes, meshVoters: *meshVoters, meshWait: *meshWait, rrClients: *rrClients, rrWait: *rrWait})
	rep.took = time.Since(rep.began)
	rep.loadEnd = meshLoad()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench-mesh: interrupted: %w", err)
	}
	if err := printSection(rep.markdown(), *out); err != nil || *out == "" {
		return err
	}
	meshProgress("section written to %s (%s)", *out, rep.took.Round(time.Second))
	return nil
}

// meshWanted parses --only into the parts to run, and checks that bin
// holds the binaries.
func meshWanted(only, bin string) (map[string]bool, error) {
	want := map[string]bool{}
	for _, p := range strings.Split(only, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		known := false
		for _, k := range meshParts {
			known = known || k == p
		}
		if !known {
			return nil, fmt.Errorf("bench-mesh: unknown part %q (parts: %s)", p, strings.Join(meshParts, ", "))
		}
		want[p] = true
	}
	for _, b := range []string{"reef", "reef-cni", "reef-lab"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("bench-mesh: %s not built in %s (run make build)", b, bin)
		}
	}
	return want, nil
}

// meshSizes are the parts' sizes and timeouts from the command line.
type meshSizes struct {
	conv3, conv10, tor, meshNodes, meshVoters, rrClients int
	meshWait, rrWait                                     time.Duration
}

// runParts runs the wanted parts (rep.parts) in order, each unless the
// run was interrupted, into rep.
func (b *meshBench) runParts(rep *meshReport, sz meshSizes) {
	ctx, want := b.ctx, rep.parts
	if want["idle"] {
		meshProgress("idle: one node, no pods")
		rep.idle = b.idle()
	}
	if want["routes"] && ctx.Err() == nil {
		meshProgress("routes: a speaker announces 2,000 blocks to one node")
		rep.routes = b.routes(2000)
	}
	if want["convergence"] {
		for _, c := range []struct{ n, clusters int }{{3, sz.conv3}, {10, sz.conv10}} {
			if ctx.Err() != nil || c.clusters <= 0 {
				continue
			}
			meshProgress("convergence: %d clusters of %d nodes, default config", c.clusters, c.n)
			rep.conv = append(rep.conv, b.convergence(c.n, c.clusters))
		}
	}
	if want["tor"] && ctx.Err() == nil {
		meshProgress("tor: %d clusters of 3 nodes and a BIRD 2 ToR", sz.tor)
		rep.tor = b.tor(sz.tor)
	}
	if want["mesh"] && ctx.Err() == nil {
		rep.quietMesh = meshQuiet(ctx)
		rep.loadMesh, rep.othersMesh = meshLoad(), meshOthers()
		meshProgress("mesh: %d nodes from cold", sz.meshNodes)
		rep.mesh = b.meshStart(sz.meshNodes, sz.meshVoters, sz.meshWait)
	}
	if want["rr"] && ctx.Err() == nil {
		rep.quietRR = meshQuiet(ctx)
		rep.loadRR, rep.othersRR = meshLoad(), meshOthers()
		meshProgress("rr: %d clients through 2 reef route reflectors", sz.rrClients)
		rep.rr = b.routeReflectors(sz.rrClients, sz.rrWait)
	}
}

// meshNodeCfg shapes the nodes of a bench lab.
type meshNodeCfg struct {
	peered       bool         // a full mesh: every node peers with every other
	peerPrefixes bool         // accept sessions from the whole underlay (peered implies it)
	extra        string       // YAML appended (pools)
	voters       []netip.Addr // bgp.voters; none: the first nodes added, at most 5
	production   bool         // the production BGP timers, not the lab's (meshTimers)
	// perNode, if set, gives the whole bgp: section of node i (0-based,
	// among the nodes added) instead.
	perNode func(i int) string
	// nice, if set, gives node i's nice value (lab.NodeOptions.Nice).
	nice func(i int) int
}

// bgpSection is the whole bgp: section for a node with these peers.
func (c meshNodeCfg) bgpSection(peers []netip.Addr) string {
	if !c.peered && !c.peerPrefixes {
		return ""
	}
	var s strings.Builder
	if !c.production {
		s.WriteString(meshTimers)
	}
	s.WriteString("  peers: [" + meshAddrList(peers) + "]\n")
	fmt.Fprintf(&s, "  peerPrefixes: [%s]\n", lab.Underlay)
	if len(c.voters) > 0 {
		s.WriteString("  voters: [" + meshAddrList(c.voters) + "]\n")
	}
	return s.String()
}

// meshTimers are the lab's BGP timers, as the bgp: section's first lines.
const meshTimers = "  keepaliveTime: 1s\n  holdTime: 3s\n"

func meshAddrList(as []netip.Addr) string {
	var parts []string
	for _, a := range as {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, ", ")
}

// addNodes adds n nodes ("node1".."nodeN" after the lab's existing ones)
// with production reconcile interval and the bench's log level.
func (b *meshBench) addNodes(l *lab.Lab, n int, c meshNodeCfg) ([]*lab.Node, error) {
	first := len(l.Nodes())
	var addrs []netip.Addr
	for i := 0; i < n; i++ {
		addrs = append(addrs, lab.NodeAddress(first+i))
	}
	if len(c.voters) == 0 {
		// bgp.voters is required with peers: the first nodes, at most 5,
		// the same list on every node.
		c.voters = addrs[:min(n, 5)]
	}
	var nodes []*lab.Node
	for i := 0; i < n; i++ {
		var peers []netip.Addr
		if c.peered {
			for j, a := range addrs {
				if j != i {
					peers = append(peers, a)
				}
			}
		}
		bgpSec := c.bgpSection(peers)
		if c.perNode != nil {
			bgpSec = c.perNode(i)
		}
		opts := lab.NodeOptions{ReconcileInterval: 30 * time.Second, BGP: bgpSec, Extra: c.extra}
		if c.nice != nil {
			opts.Nice = c.nice(i)
		}
		node, err := l.AddNode(fmt.Sprintf("node%d", first+i+1), opts)
		if err != nil {
			return nil, err
		}
		cfg, err := os.ReadFile(node.Config)
		if err != nil {
			return nil, err
		}
		cfg = bytes.Replace(cfg, []byte("logLevel: debug"), []byte("logLevel: "+b.logLevel), 1)
		if err := os.WriteFile(node.Config, cfg, 0o644); err != nil {
			return nil, err
		}
		nodes = append(nodes, node)
	}
	return nodes, nil
}

// newLab makes a lab; done copies the logs (with --keep-logs) and removes it.
func (b *meshBench) newLab(tag string) (*lab.Lab, func(), error) {
	l, err := lab.New(b.bin)
	if err != nil {
		return nil, nil, err
	}
	return l, func() {
		if b.keepLogs != "" {
			for _, n := range l.Nodes() {
				if data, err := os.ReadFile(n.LogPath); err == nil {
					os.WriteFile(filepath.Join(b.keepLogs, fmt.Sprintf("%s-%s-%s.log", tag, l.Prefix, n.Name)), data, 0o644)
				}
			}
			for _, f := range []string{"speaker.log"} {
				if data, err := os.ReadFile(filepath.Join(l.Dir, f)); err == nil {
					os.WriteFile(filepath.Join(b.keepLogs, fmt.Sprintf("%s-%s-%s", tag, l.Prefix, f)), data, 0o644)
				}
			}
		}
		if err := l.Close(); err != nil {
			meshProgress("cleanup: %v", err)
		}
	}, nil
}

// memSpread is the memory of n daemons, summed and at its highest, field
// by field.
type memSpread struct {
	n        int
	sum, max lab.Memory
}

func spreadOf(ms []lab.Memory) memSpread {
	s := memSpread{n: len(ms)}
	for _, m := range ms {
		s.sum, s.max = s.sum.Plus(m), s.max.Max(m)
	}
	return s
}

// avg is the memory per daemon.
func (s memSpread) avg() lab.Memory {
	n := int64(max(1, s.n))
	return lab.Memory{RSS: s.sum.RSS / n, HWM: s.sum.HWM / n, Anon: s.sum.Anon / n, File: s.sum.File / n}
}

func (s memSpread) String() string {
	a := s.avg()
	return fmt.Sprintf("RSS avg %s, max %s; RssAnon avg %s, max %s", meshMiB(a.RSS), meshMiB(s.max.RSS), meshMiB(a.Anon), meshMiB(s.max.Anon))
}

// sleep waits d or until the bench is interrupted.
func (b *meshBench) sleep(d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-b.ctx.Done():
		return b.ctx.Err()
	}
}

// unlessInterrupted is what a condition of poll returns for err, what is
// still missing: err, or, once the bench is interrupted, an end of the wait.
func (b *meshBench) unlessInterrupted(err error) error {
	if b.ctx.Err() != nil {
		return poll.Stop(fmt.Errorf("%w: %v", b.ctx.Err(), err))
	}
	return err
}

// meshSupervisor restarts daemons that exit, as systemd does with reef's
// unit (Restart=always, RestartSec=2s), and records why they exited.
type meshSupervisor struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu       sync.Mutex
	restarts []string
}

const meshRestartSec = 2 * time.Second

// startSupervised starts every daemon at once and keeps them running.
// Stop must be called before the lab is closed.
func (b *meshBench) startSupervised(nodes []*lab.Node) (*meshSupervisor, error) {
	t0 := time.Now()
	for _, n := range nodes {
		if err := n.StartNoWait(); err != nil {
			return nil, err
		}
	}
	s := &meshSupervisor{stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		down := map[*lab.Node]time.Time{}
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			for _, n := range nodes {
				if at, ok := down[n]; ok {
					if time.Since(at) >= meshRestartSec {
						delete(down, n)
						if err := n.StartNoWait(); err != nil {
							s.note(fmt.Sprintf("%s: restart failed: %v", n.Name, err))
						}
					}
					continue
				}
				if n.Running() {
					continue
				}
				exit, _ := n.Wait(time.Second) // gone already: collects it
				down[n] = time.Now()
				s.note(fmt.Sprintf("%s exited (%v) %.1f s after the start; its last log line: %s", n.Name, exit,
					time.Since(t0).Seconds(), strings.TrimSpace(n.LogTail(1))))
			}
		}
	}()
	return s, nil
}

func (s *meshSupervisor) note(msg string) {
	s.mu.Lock()
	s.restarts = append(s.restarts, msg)
	s.mu.Unlock()
	meshProgress("  %s", msg)
}

// Stop ends the supervision and returns what it restarted.
func (s *meshSupervisor) Stop() []string {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.restarts...)
}

// waitAllReady waits until every daemon says it serves ADD (daemons that
// exit meanwhile are restarted by the supervisor).
func (b *meshBench) waitAllReady(nodes []*lab.Node, timeout time.Duration) error {
	pending := append([]*lab.Node(nil), nodes...)
	err := poll.Until(timeout, func() error {
		var still []*lab.Node
		for _, n := range pending {
			if st, err := n.Status(); err != nil || !st.GetReady() {
				still = append(still, n)
			}
		}
		pending = still
		if len(pending) == 0 {
			return nil
		}
		return b.unlessInterrupted(fmt.Errorf("%d daemons not ready, e.g. %s", len(pending), pending[0].Name))
	})
	if err != nil {
		return fmt.Errorf("%w:\n%s", err, pending[0].LogTail(5))
	}
	return nil
}
