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
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/routes"
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
		if err := meshWriteSection(*out, md); err != nil {
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

// ---- idle ----

type meshIdleResult struct {
	meshMem
	err string
}

func (b *meshBench) idle() (r meshIdleResult) {
	l, done, err := b.newLab("idle")
	if err != nil {
		r.err = err.Error()
		return r
	}
	defer done()
	nodes, err := b.addNodes(l, 1, meshNodeCfg{})
	if err == nil {
		err = nodes[0].Start()
	}
	if err == nil {
		err = b.sleep(5 * time.Second)
	}
	if err == nil {
		r.meshMem, err = meshMemOf(nodes[0])
	}
	if err != nil {
		r.err = err.Error()
	}
	return r
}

// ---- routes ----

type meshRoutesResult struct {
	blocks                int
	installed             int
	firstRoute, allRoutes time.Duration // from the speaker's start
	idleRSS, withRSS      int64         // kB: before the speaker; right when all are in
	steadyRSS, hwm        int64         // kB: 5 s later; peak
	storeBytes            int64         // the node's store file after
	peerUp, firstAdding   time.Duration // from the speaker's start, from the node's log; -1 unknown
	steady                meshMem
	err                   string
}

// meshSpeakerAddr is the test speaker's address on the underlay.
var meshSpeakerAddr = netip.MustParseAddr("192.168.77.200")

const meshRoutesPool = "10.100.0.0/16"

func (b *meshBench) routes(count int) (r meshRoutesResult) {
	r.blocks = count
	fail := func(err error) meshRoutesResult { r.err = err.Error(); return r }
	l, done, err := b.newLab("routes")
	if err != nil {
		return fail(err)
	}
	defer done()
	nodes, err := b.addNodes(l, 1, meshNodeCfg{peerPrefixes: true,
		extra: "pools:\n  - cidr: " + meshRoutesPool + "\n    blockSize: 27\n"})
	if err != nil {
		return fail(err)
	}
	node := nodes[0]
	if err := node.Start(); err != nil {
		return fail(err)
	}
	spk, err := l.AddHost("spk", meshSpeakerAddr)
	if err != nil {
		return fail(err)
	}
	// 2,000 confirmed claims of /27 blocks, owner = next hop = the speaker,
	// claimed an hour ago.
	pool := netip.MustParsePrefix(meshRoutesPool)
	claimed := time.Now().Add(-time.Hour).Unix()
	owner := meshSpeakerAddr.As4()
	ownerU := uint32(owner[0])<<24 | uint32(owner[1])<<16 | uint32(owner[2])<<8 | uint32(owner[3])
	var file strings.Builder
	base := pool.Addr().As4()
	baseU := uint32(base[0])<<24 | uint32(base[1])<<16
	for i := 0; i < count; i++ {
		u := baseU + uint32(i)*32
		blk := netip.PrefixFrom(netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)}), 27)
		fmt.Fprintf(&file, "%s %s 64512:100:0 64512:101:%d 64512:102:0 64512:103:%d 64512:104:1\n", blk, meshSpeakerAddr, claimed, ownerU)
	}
	annFile := filepath.Join(l.Dir, "announce.txt")
	if err := os.WriteFile(annFile, []byte(file.String()), 0o644); err != nil {
		return fail(err)
	}
	h, err := meshHandle(node)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	if err := b.sleep(5 * time.Second); err != nil {
		return fail(err)
	}
	if r.idleRSS, _, err = meshRSS(node); err != nil {
		return fail(err)
	}
	start := time.Now()
	if _, err := l.Spawn(spk, "speaker.log", filepath.Join(b.bin, "reef-lab"), "speaker",
		"--router-id", meshSpeakerAddr.String(), "--peers", node.Address.String(), "--announce-file", annFile); err != nil {
		return fail(err)
	}
	deadline := start.Add(60 * time.Second)
	for {
		n, err := meshCountVia(h, meshSpeakerAddr)
		if err != nil {
			return fail(err)
		}
		now := time.Now()
		r.installed = n
		if n > 0 && r.firstRoute == 0 {
			r.firstRoute = now.Sub(start)
		}
		if n >= count {
			r.allRoutes = now.Sub(start)
			break
		}
		if now.After(deadline) || b.ctx.Err() != nil {
			return fail(fmt.Errorf("%d of %d routes after %s\n%s", n, count, now.Sub(start).Round(time.Millisecond), node.LogTail(5)))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r.withRSS, _, err = meshRSS(node); err != nil {
		return fail(err)
	}
	if err := b.sleep(5 * time.Second); err != nil {
		return fail(err)
	}
	if r.steady, err = meshMemOf(node); err != nil {
		return fail(err)
	}
	r.steadyRSS, r.hwm = r.steady.rss, r.steady.hwm
	r.peerUp, r.firstAdding = -1, -1
	if at, ok := meshLogLine(node.Log(), `msg="Peer Up"`); ok {
		r.peerUp = at.Sub(start)
	}
	if at, ok := meshLogLine(node.Log(), `msg="adding route"`); ok {
		r.firstAdding = at.Sub(start)
	}
	if n, err := meshCountVia(h, meshSpeakerAddr); err == nil {
		r.installed = n
	}
	if fi, err := os.Stat(filepath.Join(node.StateDir, "reef.db")); err == nil {
		r.storeBytes = fi.Size()
	}
	return r
}

// meshHandle is a netlink handle bound to the node's namespace.
func meshHandle(n *lab.Node) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(lab.NetnsPath(n.Netns))
	if err != nil {
		return nil, fmt.Errorf("netns of %s: %w", n.Name, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", n.Name, err)
	}
	return h, nil
}

// meshReefRoutes lists reef's routes (proto 238, main table) as gw -> dsts.
func meshReefRoutes(h *netlink.Handle) (map[netip.Addr][]netip.Prefix, error) {
	rs, err := h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Protocol: routes.Protocol, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_PROTOCOL|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	out := map[netip.Addr][]netip.Prefix{}
	for _, rt := range rs {
		gw, dst, ok := meshRouteVia(rt)
		if ok {
			out[gw] = append(out[gw], dst)
		}
	}
	return out, nil
}

func meshCountVia(h *netlink.Handle, gw netip.Addr) (int, error) {
	all, err := meshReefRoutes(h)
	return len(all[gw]), err
}

// meshRouteVia returns the gateway and destination of a route via a node.
func meshRouteVia(rt netlink.Route) (netip.Addr, netip.Prefix, bool) {
	if rt.Gw == nil || rt.Dst == nil {
		return netip.Addr{}, netip.Prefix{}, false
	}
	gw, ok1 := netip.AddrFromSlice(rt.Gw.To4())
	ip, ok2 := netip.AddrFromSlice(rt.Dst.IP.To4())
	ones, _ := rt.Dst.Mask.Size()
	if !ok1 || !ok2 {
		return netip.Addr{}, netip.Prefix{}, false
	}
	return gw, netip.PrefixFrom(ip, ones), true
}

// ---- convergence ----

// meshWatcher records, for one node, when a reef route via each gateway
// first appeared in its kernel (an rtnetlink subscription in its netns).
type meshWatcher struct {
	node *lab.Node
	stop chan struct{}

	mu   sync.Mutex
	seen map[netip.Addr]meshSeen
	err  error
}

type meshSeen struct {
	dst netip.Prefix
	at  time.Time
}

func meshWatch(n *lab.Node) (*meshWatcher, error) {
	ns, err := netns.GetFromPath(lab.NetnsPath(n.Netns))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	w := &meshWatcher{node: n, stop: make(chan struct{}), seen: map[netip.Addr]meshSeen{}}
	ch := make(chan netlink.RouteUpdate, 1024)
	if err := netlink.RouteSubscribeWithOptions(ch, w.stop, netlink.RouteSubscribeOptions{
		Namespace: &ns, ReceiveBufferSize: 1 << 20,
		ErrorCallback: func(err error) { w.mu.Lock(); w.err = err; w.mu.Unlock() },
	}); err != nil {
		return nil, fmt.Errorf("watch routes of %s: %w", n.Name, err)
	}
	go func() {
		for u := range ch {
			at := time.Now()
			if u.Type != unix.RTM_NEWROUTE || int(u.Protocol) != routes.Protocol {
				continue
			}
			gw, dst, ok := meshRouteVia(u.Route)
			if !ok {
				continue
			}
			w.mu.Lock()
			if _, dup := w.seen[gw]; !dup {
				w.seen[gw] = meshSeen{dst: dst, at: at}
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *meshWatcher) get(gw netip.Addr) (meshSeen, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.seen[gw]
	return s, ok, w.err
}

type meshConvSample struct {
	node          string
	total         time.Duration // ADD start -> route on the last other node
	add           time.Duration // the ADD's own duration
	claimed       time.Duration // ADD start -> "claimed a block" in the owner's log; -1 unknown
	confirmed     time.Duration // ADD start -> "block claim confirmed"; -1 unknown
	firstRoute    time.Duration // ADD start -> route on the first other node
	lossesInPhase int
}

type meshConvResult struct {
	n, clusters int
	claimWait   time.Duration // 0: default
	samples     []meshConvSample
	sessionsUp  []time.Duration // per cluster: start -> full mesh
	rss         []int64         // kB, every daemon after its cluster's samples
	stalled     []string        // clusters whose sessions never all came up, replaced
	restarts    []string        // daemons that exited and were restarted
	err         string
}

func meshClaimWaitName(cw time.Duration) string {
	if cw == 0 {
		return "500ms (default)"
	}
	return cw.String()
}

func (b *meshBench) convergence(n, clusters int, cw time.Duration) (r meshConvResult) {
	r.n, r.clusters, r.claimWait = n, clusters, cw
	// A cluster whose sessions never all come up is recorded and replaced,
	// up to two times.
	for done, attempts := 0, 0; done < clusters && attempts < clusters+2 && b.ctx.Err() == nil; attempts++ {
		stall, err := b.convCluster(&r, n, cw)
		if err != nil {
			r.err = fmt.Sprintf("cluster %d: %v", attempts+1, err)
			meshProgress("convergence: %s", r.err)
			return r
		}
		if stall != "" {
			r.stalled = append(r.stalled, stall)
			meshProgress("convergence: cluster %d of %d nodes never reached the full mesh: %s", attempts+1, n, stall)
			continue
		}
		done++
	}
	return r
}

// convCluster measures one cluster. stall is set (and err nil) when its
// sessions never all came up.
func (b *meshBench) convCluster(r *meshConvResult, n int, cw time.Duration) (stall string, err error) {
	l, done, err := b.newLab(fmt.Sprintf("conv%d", n))
	if err != nil {
		return "", err
	}
	defer done()
	nodes, err := b.addNodes(l, n, meshNodeCfg{peered: true, claimWait: cw})
	if err != nil {
		return "", err
	}
	start := time.Now()
	sup, err := b.startSupervised(nodes)
	if err != nil {
		return "", err
	}
	defer func() { r.restarts = append(r.restarts, sup.Stop()...) }()
	if err := b.waitAllReady(nodes, 60*time.Second); err != nil {
		return "", err
	}
	if ms := b.waitSessions(nodes, 60*time.Second, nil); ms.err != nil {
		return fmt.Sprintf("%v; session ends not established, by state: %s; e.g. %s", ms.err, meshStatesText(ms.states), strings.Join(ms.pairs, "; ")), nil
	}
	r.sessionsUp = append(r.sessionsUp, time.Since(start))
	if err := lab.WaitConverged(nodes, 10*time.Second); err != nil { // no blocks yet: a sanity check
		return "", err
	}
	var ws []*meshWatcher
	defer func() {
		for _, w := range ws {
			close(w.stop)
		}
	}()
	for _, node := range nodes {
		w, err := meshWatch(node)
		if err != nil {
			return "", err
		}
		ws = append(ws, w)
	}
	if err := b.sleep(time.Second); err != nil {
		return "", err
	}
	for i, node := range nodes {
		p, err := node.NewPodNetns("bench", fmt.Sprintf("conv-%d", i+1))
		if err != nil {
			return "", err
		}
		t0 := time.Now()
		if err := p.Add(); err != nil {
			return "", err
		}
		s := meshConvSample{node: node.Name, add: time.Since(t0), claimed: -1, confirmed: -1}
		var last, first time.Time
		var block netip.Prefix
		deadline := t0.Add(20 * time.Second)
		for j, w := range ws {
			if j == i {
				continue
			}
			for {
				seen, ok, werr := w.get(node.Address)
				if werr != nil {
					return "", fmt.Errorf("route watch on %s: %w", w.node.Name, werr)
				}
				if ok {
					if !seen.dst.Contains(p.IP) {
						return "", fmt.Errorf("%s: first route via %s is to %s, which does not hold the pod's %s", w.node.Name, node.Name, seen.dst, p.IP)
					}
					block = seen.dst
					if seen.at.After(last) {
						last = seen.at
					}
					if first.IsZero() || seen.at.Before(first) {
						first = seen.at
					}
					break
				}
				if time.Now().After(deadline) {
					return "", fmt.Errorf("%s has no route to %s's new block (pod %s) %s after the ADD\n%s", w.node.Name, node.Name, p.IP,
						time.Since(t0).Round(time.Millisecond), node.LogTail(8))
				}
				time.Sleep(time.Millisecond)
			}
		}
		s.total, s.firstRoute = last.Sub(t0), first.Sub(t0)
		log := node.Log()
		if at, ok := meshLogTime(log, "claimed a block; announcing it before use", block); ok {
			s.claimed = at.Sub(t0)
		}
		if at, ok := meshLogTime(log, "block claim confirmed", block); ok {
			s.confirmed = at.Sub(t0)
		}
		r.samples = append(r.samples, s)
		meshProgress("  %s (N=%d, claimWait %s): ADD %s, routed everywhere after %s", node.Name, n, meshClaimWaitName(cw),
			s.add.Round(time.Millisecond), s.total.Round(time.Millisecond))
		if err := b.sleep(200 * time.Millisecond); err != nil {
			return "", err
		}
	}
	for _, node := range nodes {
		if rss, _, err := meshRSS(node); err == nil {
			r.rss = append(r.rss, rss)
		}
	}
	return "", nil
}

var meshLogTimeRE = regexp.MustCompile(`^time=(\S+) `)

// meshLogLine returns the time of the first log line containing s.
func meshLogLine(log, s string) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, s) {
			continue
		}
		if m := meshLogTimeRE.FindStringSubmatch(line); m != nil {
			if t, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// meshLogTime finds the first log line with msg about block and returns
// its time (slog's text format, millisecond precision).
func meshLogTime(log, msg string, block netip.Prefix) (time.Time, bool) {
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	blk := "block=" + block.String()
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `msg="`+msg+`"`) {
			continue
		}
		if !strings.Contains(line+" ", blk+" ") {
			continue
		}
		m := meshLogTimeRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, m[1])
		if err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// meshSessionsPoint is how many sessions were established at a moment.
type meshSessionsPoint struct {
	at          time.Duration
	established int // sessions seen established, counted from both ends
	full        int // nodes with all their sessions up
}

// meshSessions is the outcome of waitSessions.
type meshSessions struct {
	at     time.Time      // when the full mesh was first seen
	states map[string]int // at the end: peer state -> session ends (established excluded)
	pairs  []string       // some pairs not established, with both ends' states
	err    error
}

// meshStall is how long the count of established sessions may stay the
// same before waitSessions gives up: the lab's connect retry is 3 s, so a
// mesh that gains nothing for this long is stuck.
const meshStall = 15 * time.Second

// waitSessions polls every node's status until each has an established
// session with every other node, or until timeout, or until nothing
// changed for meshStall.
func (b *meshBench) waitSessions(nodes []*lab.Node, timeout time.Duration, series *[]meshSessionsPoint) meshSessions {
	want := len(nodes) - 1
	start := time.Now()
	deadline := start.Add(timeout)
	best, bestAt := -1, start
	byAddr := map[string]string{}
	for _, n := range nodes {
		byAddr[n.Address.String()] = n.Name
	}
	for {
		counts := make([]int, len(nodes))
		errs := make([]error, len(nodes))
		states := make([]map[string]string, len(nodes)) // peer address -> state
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				st, err := n.Status()
				if err != nil {
					errs[i] = err
					return
				}
				states[i] = map[string]string{}
				for _, p := range st.GetPeers() {
					states[i][p.GetAddress()] = p.GetState()
					if p.GetState() == "established" {
						counts[i]++
					}
				}
			}()
		}
		wg.Wait()
		now := time.Now()
		pt := meshSessionsPoint{at: now.Sub(start)}
		for i := range nodes {
			pt.established += counts[i]
			if counts[i] >= want && errs[i] == nil {
				pt.full++
			}
		}
		if series != nil {
			*series = append(*series, pt)
		}
		if pt.full == len(nodes) {
			return meshSessions{at: now}
		}
		if pt.established > best {
			best, bestAt = pt.established, now
		}
		stalled := now.Sub(bestAt) >= meshStall
		if stalled || now.After(deadline) || b.ctx.Err() != nil {
			r := meshSessions{at: now, states: map[string]int{}}
			var errText []string
			for i, n := range nodes {
				if errs[i] != nil {
					errText = append(errText, fmt.Sprintf("status of %s: %v", n.Name, errs[i]))
				}
				for _, other := range nodes {
					if other == n {
						continue
					}
					st, ok := states[i][other.Address.String()]
					if !ok {
						st = "not listed"
					}
					if st == "established" {
						continue
					}
					r.states[st]++
					if n.Name < other.Name && len(r.pairs) < 4 {
						back := "?"
						for k, m := range nodes {
							if m == other && states[k] != nil {
								back = states[k][n.Address.String()]
							}
						}
						r.pairs = append(r.pairs, fmt.Sprintf("%s→%s %s, %s→%s %s", n.Name, other.Name, st, other.Name, n.Name, back))
					}
				}
			}
			why := fmt.Sprintf("after %s", timeout)
			if stalled {
				why = fmt.Sprintf("no new session for %s (gave up %s after the start of the wait)", meshStall, now.Sub(start).Round(time.Second))
			}
			r.err = fmt.Errorf("full mesh not reached: %d of %d sessions established, %s%s", pt.established/2, len(nodes)*want/2, why,
				strings.Join(append([]string{""}, errText...), "; "))
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// meshStatesText renders a peer-state histogram.
func meshStatesText(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// ---- mesh start ----

type meshStartResult struct {
	nodes          int
	started        time.Duration // all daemons exec'd
	ready          time.Duration // all serve ADD
	sessions       time.Duration // every pair established
	sessionsErr    string
	states         map[string]int // session ends not established when the wait ended, by state
	pairs          []string
	series         []meshSessionsPoint
	adds           time.Duration // all ADDs returned (from their start)
	addsOK         time.Duration // the successful ADDs returned
	addErrs        int
	addErr         string
	routes         time.Duration // from the ADDs' start: every node routes to every successful ADD's block
	routesHave     int           // routes to those blocks at the end
	routesWant     int
	rss, hwm       []int64  // kB per daemon, after convergence
	restarts       []string // daemons that exited and were restarted
	addLat         []time.Duration
	cpuReady       float64 // CPU seconds of all daemons: start to ready
	cpuSessions    float64 // during the wait for sessions
	cpuAdds        float64 // from the ADDs' start to the last route
	waitSessions   time.Duration
	idleCPU        float64  // CPU-seconds per second of all daemons in 5 quiet seconds before the ADDs
	anon, file     int64    // kB, summed over the daemons
	paths          uint64   // paths in the daemons' Adj-RIB-In at the end, summed
	warnings       []string // most frequent WARN/ERROR messages of the daemons
	lost, conflict int      // "lost a block claim" / "block conflict" lines
	downAfter      int      // sessions that came up again after the mesh was complete (flaps)
	err            string
}

func (b *meshBench) meshStart(n int, timeout time.Duration) (r meshStartResult) {
	r.nodes = n
	fail := func(err error) meshStartResult { r.err = err.Error(); return r }
	l, done, err := b.newLab("mesh")
	if err != nil {
		return fail(err)
	}
	defer done()
	nodes, err := b.addNodes(l, n, meshNodeCfg{peered: true})
	if err != nil {
		return fail(err)
	}
	defer func() { r.warnings, r.lost, r.conflict = meshLogSummary(nodes) }()
	handles := make([]*netlink.Handle, n)
	for i, node := range nodes {
		if handles[i], err = meshHandle(node); err != nil {
			return fail(err)
		}
		defer handles[i].Close()
	}
	pods := make([]*lab.Pod, n)
	for i, node := range nodes {
		if pods[i], err = node.NewPodNetns("bench", "mesh"); err != nil {
			return fail(err)
		}
	}
	meshProgress("mesh: %d nodes built, starting every daemon", n)
	start := time.Now()
	sup, err := b.startSupervised(nodes)
	if err != nil {
		return fail(err)
	}
	defer func() { r.restarts = sup.Stop() }()
	r.started = time.Since(start)
	if err := b.waitAllReady(nodes, 90*time.Second); err != nil {
		return fail(err)
	}
	r.ready = time.Since(start)
	r.cpuReady = meshCPU(nodes)
	meshProgress("mesh: all ready after %s; waiting for %d sessions", r.ready.Round(time.Millisecond), n*(n-1)/2)
	ws := time.Now()
	ms := b.waitSessions(nodes, timeout-time.Since(start), &r.series)
	r.waitSessions = time.Since(ws)
	cpu := meshCPU(nodes)
	r.cpuSessions = cpu - r.cpuReady
	if ms.err != nil {
		r.sessionsErr, r.states, r.pairs = ms.err.Error(), ms.states, ms.pairs
		meshProgress("mesh: %v; not established: %s", ms.err, meshStatesText(ms.states))
	} else {
		r.sessions = ms.at.Sub(start)
		meshProgress("mesh: full mesh after %s", r.sessions.Round(time.Millisecond))
	}
	if b.ctx.Err() != nil {
		return fail(b.ctx.Err())
	}
	// The cost of keeping the mesh up: 5 quiet seconds.
	c0, q0 := meshCPU(nodes), time.Now()
	if err := b.sleep(5 * time.Second); err != nil {
		return fail(err)
	}
	cpu = meshCPU(nodes)
	r.idleCPU = (cpu - c0) / time.Since(q0).Seconds()

	// One ADD per node, all at once. Routes are polled from the start:
	// each node has at most one block, so the first route via an owner's
	// address is the route to its block (checked against the pod's
	// address once its ADD returned).
	meshProgress("mesh: one ADD per node, all at once")
	t0 := time.Now()
	var wg sync.WaitGroup
	addErr := make([]error, n)
	addAt := make([]time.Duration, n)
	for i := range pods {
		wg.Add(1)
		go func() { defer wg.Done(); addErr[i] = pods[i].Add(); addAt[i] = time.Since(t0) }()
	}
	addsDone := make(chan struct{})
	go func() { wg.Wait(); close(addsDone) }()
	first := make([][]time.Duration, n) // [observer][owner] -> first route seen
	dst := make([][]netip.Prefix, n)
	for j := range first {
		first[j], dst[j] = make([]time.Duration, n), make([]netip.Prefix, n)
	}
	addrIdx := map[netip.Addr]int{}
	for i, node := range nodes {
		addrIdx[node.Address] = i
	}
	deadline := t0.Add(90 * time.Second)
	finished := false
	for {
		select {
		case <-addsDone:
			finished = true
		default:
		}
		now := time.Since(t0)
		for j, h := range handles {
			rs, err := meshReefRoutes(h)
			if err != nil {
				return fail(err)
			}
			for gw, ds := range rs {
				if i, ok := addrIdx[gw]; ok && first[j][i] == 0 && len(ds) > 0 {
					first[j][i], dst[j][i] = now, ds[0]
				}
			}
		}
		if finished {
			have, want := 0, 0
			var last time.Duration
			for i := range pods {
				if addErr[i] != nil {
					continue
				}
				for j := range nodes {
					if j == i {
						continue
					}
					want++
					if first[j][i] > 0 && dst[j][i].Contains(pods[i].IP) {
						have++
						last = max(last, first[j][i])
					}
				}
			}
			r.routesHave, r.routesWant = have, want
			if have == want {
				r.routes = last
				break
			}
		}
		if time.Now().After(deadline) || b.ctx.Err() != nil {
			return fail(fmt.Errorf("%d of %d routes after %s", r.routesHave, r.routesWant, time.Since(t0).Round(time.Millisecond)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.cpuAdds = meshCPU(nodes) - cpu
	for i, e := range addErr {
		r.adds = max(r.adds, addAt[i])
		r.addLat = append(r.addLat, addAt[i])
		if e != nil {
			r.addErrs++
			if r.addErr == "" {
				r.addErr = e.Error()
			}
		} else {
			r.addsOK = max(r.addsOK, addAt[i])
		}
	}
	meshProgress("mesh: ADDs: %d failed; every route to the blocks of the others in after %s from the ADDs' start",
		r.addErrs, r.routes.Round(time.Millisecond))
	for _, node := range nodes {
		m, err := meshMemOf(node)
		if err != nil {
			return fail(err)
		}
		r.rss, r.hwm = append(r.rss, m.rss), append(r.hwm, m.hwm)
		r.anon += m.anon
		r.file += m.file
		if st, err := node.Status(); err == nil {
			for _, p := range st.GetPeers() {
				r.paths += p.GetReceived()
			}
		}
	}
	// Sessions down, or up since after the mesh was complete: flaps.
	if r.sessionsErr == "" {
		for _, node := range nodes {
			st, err := node.Status()
			if err != nil {
				continue
			}
			for _, p := range st.GetPeers() {
				if p.GetState() != "established" || time.Unix(p.GetSinceUnix(), 0).After(start.Add(r.sessions)) {
					r.downAfter++
				}
			}
		}
	}
	return r
}

// meshOthers counts the reef daemons running on this machine that belong
// to no lab of this process: other work that competes for the CPUs.
func meshOthers() int {
	own := fmt.Sprintf("%s/rl%dx", lab.BaseDir, os.Getpid())
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	n := 0
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		if strings.Contains(cmd, "reef daemon") && !strings.Contains(cmd, own) {
			n++
		}
	}
	return n
}

// meshCPU is the CPU time (user + system) the daemons used so far, in
// seconds (a daemon restarted meanwhile counts from its restart).
func meshCPU(nodes []*lab.Node) float64 {
	var ticks int64
	for _, n := range nodes {
		pid := n.Pid()
		if pid == 0 {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 {
			continue
		}
		var u, s int64
		fmt.Sscanf(f[11], "%d", &u) // utime: field 14 of stat
		fmt.Sscanf(f[12], "%d", &s) // stime: field 15
		ticks += u + s
	}
	return float64(ticks) / 100 // USER_HZ
}

// meshLogSummary counts the daemons' WARN and ERROR lines by message.
func meshLogSummary(nodes []*lab.Node) (top []string, lost, conflict int) {
	msgRE := regexp.MustCompile(`level=(WARN|ERROR) msg="((?:[^"\\]|\\.)*)"`)
	counts := map[string]int{}
	nodesWith := map[string]map[string]bool{}
	for _, n := range nodes {
		for _, line := range strings.Split(n.Log(), "\n") {
			m := msgRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			key := m[1] + " " + m[2]
			counts[key]++
			if nodesWith[key] == nil {
				nodesWith[key] = map[string]bool{}
			}
			nodesWith[key][n.Name] = true
			if strings.HasPrefix(m[2], "lost a block claim") {
				lost++
			}
			if m[2] == "block conflict" {
				conflict++
			}
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for i, k := range keys {
		if i == 6 {
			break
		}
		top = append(top, fmt.Sprintf("%d× on %d nodes: %s", counts[k], len(nodesWith[k]), k))
	}
	return top, lost, conflict
}

// meshWriteSection puts section (which starts with "## Multi-node") into
// the file: in place of an earlier one, else at the end.
func meshWriteSection(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := string(old)
	const head = "## Multi-node\n"
	var out string
	i := -1
	if strings.HasPrefix(doc, head) {
		i = 0
	} else if k := strings.Index(doc, "\n"+head); k >= 0 {
		i = k + 1
	}
	if i >= 0 {
		rest := doc[i+len(head):]
		end := len(doc)
		if k := strings.Index(rest, "\n## "); k >= 0 {
			end = i + len(head) + k + 1
		}
		out = doc[:i] + strings.TrimRight(section, "\n") + "\n" + meshSepAfter(doc[end:]) + doc[end:]
	} else {
		sep := ""
		if doc != "" {
			sep = "\n"
			if !strings.HasSuffix(doc, "\n") {
				sep = "\n\n"
			}
		}
		out = doc + sep + section
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

func meshSepAfter(rest string) string {
	if rest == "" {
		return ""
	}
	return "\n"
}
