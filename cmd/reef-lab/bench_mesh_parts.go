package main

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
	"github.com/reefcni/reef/routes"
)

// ---- idle ----

type meshIdleResult struct {
	lab.Memory
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
		// The figure is the memory 5s after the start (Start waited
		// until the daemon serves ADD): the measurement, not a wait.
		err = b.sleep(5 * time.Second)
	}
	if err == nil {
		r.Memory, err = nodes[0].Memory()
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
	idle, with, steady    lab.Memory    // before the speaker; right when all are in; 5 s later
	storeBytes            int64         // the node's store file after
	voters                string        // the speaker's voter list
	paths                 uint64        // paths the node received from the speaker, both families
	disagree              []string      // nodes announcing another voter list, as the node's status shows them
	peerUp, firstAdding   time.Duration // from the speaker's start, from the node's log; -1 unknown
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
	// What a reef node owning 2,000 confirmed /27 blocks of the pool
	// announces: its record and the claims in IPv4 VPN, the blocks in IPv4
	// unicast, next hop the speaker. Its voter list is the node's (bgp.voters
	// unset and no bgp.peers: the node alone), so that the node sees no
	// disagreement; confirmed claims are remembered whatever the list.
	r.voters = node.Address.String()
	h, err := meshHandle(node)
	if err != nil {
		return fail(err)
	}
	defer h.Close()
	// The idle figure is the memory 5s after the start (Start waited
	// until the daemon serves ADD): the measurement, not a wait.
	if err := b.sleep(5 * time.Second); err != nil {
		return fail(err)
	}
	if r.idle, err = node.Memory(); err != nil {
		return fail(err)
	}
	start := time.Now()
	if _, err := l.Spawn(spk, "speaker.log", filepath.Join(b.bin, "reef-lab"), "speaker",
		"--router-id", meshSpeakerAddr.String(), "--peers", node.Address.String(),
		"--reef-blocks", fmt.Sprint(count), "--pool", meshRoutesPool, "--block-size", "27", "--voters", r.voters); err != nil {
		return fail(err)
	}
	if err := b.waitRoutesVia(h, count, start, &r); err != nil {
		return fail(fmt.Errorf("%w\n%s", err, node.LogTail(5)))
	}
	if r.with, err = node.Memory(); err != nil {
		return fail(err)
	}
	// steady is the memory 5s after the last route: the measurement,
	// not a wait.
	if err := b.sleep(5 * time.Second); err != nil {
		return fail(err)
	}
	if r.steady, err = node.Memory(); err != nil {
		return fail(err)
	}
	meshRoutesAfter(node, h, start, &r)
	return r
}

// waitRoutesVia waits until h's namespace has count routes via the
// speaker, and records when the first and the last came.
func (b *meshBench) waitRoutesVia(h *netlink.Handle, count int, start time.Time, r *meshRoutesResult) error {
	// Asked every 10ms: firstRoute and allRoutes are measured by the
	// call that sees them.
	return poll.Every(10*time.Millisecond, 60*time.Second, func() error {
		n, err := meshCountVia(h, meshSpeakerAddr)
		if err != nil {
			return poll.Stop(err)
		}
		now := time.Now()
		r.installed = n
		if n > 0 && r.firstRoute == 0 {
			r.firstRoute = now.Sub(start)
		}
		if n >= count {
			r.allRoutes = now.Sub(start)
			return nil
		}
		return b.unlessInterrupted(fmt.Errorf("%d of %d routes", n, count))
	})
}

// meshRoutesAfter records, once the routes are in, when the session came
// up and the first route was added (from the node's log), the routes,
// the store's size, the paths received and whether the voters disagree.
func meshRoutesAfter(node *lab.Node, h *netlink.Handle, start time.Time, r *meshRoutesResult) {
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
	if st, err := node.Status(); err == nil {
		for _, p := range st.GetPeers() {
			r.paths += p.GetReceived()
		}
		r.disagree = st.GetVotersDisagree()
	}
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

// meshWatcher records, for one namespace, when a route of one protocol
// (reef's, or a router's BGP daemon's) via each gateway first appeared in
// its kernel (an rtnetlink subscription in the netns).
type meshWatcher struct {
	name string // the node's (or router's) name, for messages
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
	return meshWatchIn(n.Netns, n.Name, routes.Protocol)
}

// meshWatchIn watches the routes of protocol proto in netns.
func meshWatchIn(netnsName, name string, proto int) (*meshWatcher, error) {
	ns, err := netns.GetFromPath(lab.NetnsPath(netnsName))
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	w := &meshWatcher{name: name, stop: make(chan struct{}), seen: map[netip.Addr]meshSeen{}}
	ch := make(chan netlink.RouteUpdate, 1024)
	if err := netlink.RouteSubscribeWithOptions(ch, w.stop, netlink.RouteSubscribeOptions{
		Namespace: &ns, ReceiveBufferSize: 1 << 20,
		ErrorCallback: func(err error) { w.mu.Lock(); w.err = err; w.mu.Unlock() },
	}); err != nil {
		return nil, fmt.Errorf("watch routes of %s: %w", name, err)
	}
	go func() {
		for u := range ch {
			at := time.Now()
			if u.Type != unix.RTM_NEWROUTE || int(u.Protocol) != proto {
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
	samples     []meshConvSample
	sessionsUp  []time.Duration // per cluster: start -> full mesh
	mem         []lab.Memory    // every daemon after its cluster's samples
	stalled     []string        // clusters whose sessions never all came up, replaced
	restarts    []string        // daemons that exited and were restarted
	err         string
}

func (b *meshBench) convergence(n, clusters int) (r meshConvResult) {
	r.n, r.clusters = n, clusters
	// A cluster whose sessions never all come up is recorded and replaced,
	// up to two times.
	for done, attempts := 0, 0; done < clusters && attempts < clusters+2 && b.ctx.Err() == nil; attempts++ {
		stall, err := b.convCluster(&r, n)
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
func (b *meshBench) convCluster(r *meshConvResult, n int) (stall string, err error) {
	l, done, err := b.newLab(fmt.Sprintf("conv%d", n))
	if err != nil {
		return "", err
	}
	defer done()
	nodes, err := b.addNodes(l, n, meshNodeCfg{peered: true})
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
	// A second of quiet before the first ADD (the watchers listen from
	// their return): the scenario, not a wait.
	if err := b.sleep(time.Second); err != nil {
		return "", err
	}
	for i, node := range nodes {
		p, err := node.NewPodNetns("bench", fmt.Sprintf("conv-%d", i+1))
		if err != nil {
			return "", err
		}
		s, err := convSample(node, p, ws, i)
		if err != nil {
			return "", err
		}
		r.samples = append(r.samples, s)
		meshProgress("  %s (N=%d): ADD %s, routed everywhere after %s", node.Name, n,
			s.add.Round(time.Millisecond), s.total.Round(time.Millisecond))
		// ADDs 200ms apart: the scenario's pace, not a wait.
		if err := b.sleep(200 * time.Millisecond); err != nil {
			return "", err
		}
	}
	for _, node := range nodes {
		if m, err := node.Memory(); err == nil {
			r.mem = append(r.mem, m)
		}
	}
	return "", nil
}

// convSample ADDs p on node, the i-th of the cluster, and measures when
// every other node's watcher (all of ws but ws[i]) saw the route to its
// block, and when the node's log says it claimed and confirmed the block.
func convSample(node *lab.Node, p *lab.Pod, ws []*meshWatcher, i int) (meshConvSample, error) {
	t0 := time.Now()
	if err := p.Add(); err != nil {
		return meshConvSample{}, err
	}
	s := meshConvSample{node: node.Name, add: time.Since(t0), claimed: -1, confirmed: -1}
	var last, first time.Time
	var block netip.Prefix
	deadline := t0.Add(20 * time.Second)
	for j, w := range ws {
		if j == i {
			continue
		}
		seen, err := waitSeen(w, node.Address, p.IP, deadline)
		if err != nil {
			return meshConvSample{}, fmt.Errorf("%w, %s after the ADD\n%s", err, time.Since(t0).Round(time.Millisecond), node.LogTail(8))
		}
		block = seen.dst
		if seen.at.After(last) {
			last = seen.at
		}
		if first.IsZero() || seen.at.Before(first) {
			first = seen.at
		}
	}
	s.total, s.firstRoute = last.Sub(t0), first.Sub(t0)
	log := node.Log()
	if at, ok := meshLogTime(log, meshLogClaimed, block); ok {
		s.claimed = at.Sub(t0)
	}
	if at, ok := meshLogTime(log, meshLogConfirmed, block); ok {
		s.confirmed = at.Sub(t0)
	}
	return s, nil
}

var meshLogTimeRE = regexp.MustCompile(`^time=(\S+) `)

// The daemon's log messages (daemon/blocks.go, logChanges) that split a
// claim's time: claimed (announced pending), and confirmed by a majority
// of the voters.
const (
	meshLogClaimed   = "claimed a block; waiting for the voters"
	meshLogConfirmed = "block claim confirmed by a majority of the voters"
)

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
