package main

// bench-mesh: the multi-node benchmarks (BENCHMARKS.md, "## Multi-node").
// Four parts, each in labs of its own that are removed at the end:
//
//   - idle: one fresh node, no pods, no peers; its daemon's RSS after 5 s.
//   - routes: one node and a test speaker (reef-lab speaker) on the
//     underlay announcing 2,000 valid block claims; the time until the
//     node's kernel has all 2,000 routes, and the daemon's RSS.
//   - convergence: meshes of 3 and 10 nodes; on each node in turn, the time
//     from the start of its first ADD until every other node has a kernel
//     route to the block that ADD claimed, with claimWait 500ms (the
//     default) and 100ms.
//   - mesh: 50 nodes started at once from empty stores; the time until
//     every pair has a BGP session, then from one ADD per node (all at
//     once) until every node routes to every other node's block.
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
)

// meshParts are the parts of bench-mesh in the order they run.
var meshParts = []string{"idle", "routes", "convergence", "mesh"}

type meshBench struct {
	ctx      context.Context
	bin      string
	keepLogs string
	logLevel string
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
	convClusters3 := fs.Int("clusters3", 3, "convergence: clusters of 3 nodes per claimWait (3 samples each)")
	convClusters10 := fs.Int("clusters10", 1, "convergence: clusters of 10 nodes per claimWait (10 samples each)")
	keepLogs := fs.String("keep-logs", "", "copy every daemon's log into this directory before its lab is removed")
	debug := fs.Bool("debug", false, "daemons log at debug level (default info, as in production)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench-mesh: unexpected arguments %q", fs.Args())
	}
	want := map[string]bool{}
	for _, p := range strings.Split(*only, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		known := false
		for _, k := range meshParts {
			known = known || k == p
		}
		if !known {
			return fmt.Errorf("bench-mesh: unknown part %q (parts: %s)", p, strings.Join(meshParts, ", "))
		}
		want[p] = true
	}
	for _, b := range []string{"reef", "reef-cni", "reef-lab"} {
		if _, err := os.Stat(filepath.Join(*bin, b)); err != nil {
			return fmt.Errorf("bench-mesh: %s not built in %s (run make build)", b, *bin)
		}
	}
	if *keepLogs != "" {
		if err := os.MkdirAll(*keepLogs, 0o755); err != nil {
			return err
		}
	}
	b := &meshBench{ctx: ctx, bin: *bin, keepLogs: *keepLogs, logLevel: "info"}
	if *debug {
		b.logLevel = "debug"
	}
	rep := &meshReport{began: time.Now(), loadStart: meshLoad(), command: meshCommand(args), parts: want, logLevel: b.logLevel, bin: *bin}
	rep.reef = meshRun(filepath.Join(*bin, "reef"), "version")
	rep.othersStart = meshOthers()

	if want["idle"] {
		meshProgress("idle: one node, no pods")
		rep.idle = b.idle()
	}
	if want["routes"] && ctx.Err() == nil {
		meshProgress("routes: a speaker announces 2,000 blocks to one node")
		rep.routes = b.routes(2000)
	}
	if want["convergence"] {
		for _, cw := range []time.Duration{0, 100 * time.Millisecond} {
			for _, c := range []struct{ n, clusters int }{{3, *convClusters3}, {10, *convClusters10}} {
				if ctx.Err() != nil || c.clusters <= 0 {
					continue
				}
				meshProgress("convergence: %d clusters of %d nodes, claimWait %s", c.clusters, c.n, meshClaimWaitName(cw))
				rep.conv = append(rep.conv, b.convergence(c.n, c.clusters, cw))
			}
		}
	}
	if want["mesh"] && ctx.Err() == nil {
		rep.loadMesh, rep.othersMesh = meshLoad(), meshOthers()
		meshProgress("mesh: %d nodes from cold", *meshNodes)
		rep.mesh = b.meshStart(*meshNodes, *meshWait)
	}
	rep.took = time.Since(rep.began)
	rep.loadEnd = meshLoad()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("bench-mesh: interrupted: %w", err)
	}
	md := rep.markdown()
	fmt.Print(md)
	if *out != "" {
		if err := writeSection(*out, md); err != nil {
			return err
		}
		meshProgress("section written to %s (%s)", *out, rep.took.Round(time.Second))
	}
	return nil
}

// meshNodeCfg shapes the nodes of a bench lab.
type meshNodeCfg struct {
	peered       bool          // a full mesh: every node peers with every other
	peerPrefixes bool          // accept sessions from the whole underlay (peered implies it)
	claimWait    time.Duration // 0: the default (500ms), not written
	extra        string        // YAML appended (pools)
}

// bgpSection is the whole bgp: section for a node with these peers.
func (c meshNodeCfg) bgpSection(peers []netip.Addr) string {
	if !c.peered && !c.peerPrefixes && c.claimWait == 0 {
		return ""
	}
	var s strings.Builder
	s.WriteString("  keepaliveTime: 1s\n  holdTime: 3s\n")
	if c.claimWait > 0 {
		fmt.Fprintf(&s, "  claimWait: %s\n", c.claimWait)
	}
	s.WriteString("  peers: [")
	for i, p := range peers {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString(p.String())
	}
	s.WriteString("]\n")
	if c.peered || c.peerPrefixes {
		fmt.Fprintf(&s, "  peerPrefixes: [%s]\n", lab.Underlay)
	}
	return s.String()
}

// addNodes adds n nodes ("node1".."nodeN" after the lab's existing ones)
// with production reconcile interval and the bench's log level.
func (b *meshBench) addNodes(l *lab.Lab, n int, c meshNodeCfg) ([]*lab.Node, error) {
	first := len(l.Nodes())
	var addrs []netip.Addr
	for i := 0; i < n; i++ {
		addrs = append(addrs, lab.NodeAddress(first+i))
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
		node, err := l.AddNode(fmt.Sprintf("node%d", first+i+1), lab.NodeOptions{
			ReconcileInterval: 30 * time.Second, BGP: c.bgpSection(peers), Extra: c.extra,
		})
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

// meshMem is a daemon's memory from /proc/<pid>/status, in kB: VmRSS,
// VmHWM (peak RSS), and RSS split into anonymous (heap, stacks) and
// file-backed (the binary's pages) memory.
type meshMem struct{ rss, hwm, anon, file int64 }

func meshMemOf(n *lab.Node) (meshMem, error) {
	var m meshMem
	pid := n.Pid()
	if pid == 0 {
		return m, fmt.Errorf("daemon of %s not running", n.Name)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		for key, dst := range map[string]*int64{"VmRSS:": &m.rss, "VmHWM:": &m.hwm, "RssAnon:": &m.anon, "RssFile:": &m.file} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				fmt.Sscanf(strings.TrimSpace(rest), "%d", dst)
			}
		}
	}
	if m.rss == 0 {
		return m, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return m, nil
}

// meshRSS reads VmRSS and VmHWM (kB) of a node's daemon.
func meshRSS(n *lab.Node) (rss, hwm int64, err error) {
	m, err := meshMemOf(n)
	return m.rss, m.hwm, err
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
	deadline := time.Now().Add(timeout)
	pending := append([]*lab.Node(nil), nodes...)
	for len(pending) > 0 {
		var still []*lab.Node
		for _, n := range pending {
			if st, err := n.Status(); err != nil || !st.GetReady() {
				still = append(still, n)
			}
		}
		pending = still
		if len(pending) == 0 {
			break
		}
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			return fmt.Errorf("%d daemons not ready after %s, e.g. %s:\n%s", len(pending), timeout, pending[0].Name, pending[0].LogTail(5))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}
