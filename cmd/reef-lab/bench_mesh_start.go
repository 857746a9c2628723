package main

import (
	"bytes"
	"errors"
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

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

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
	best, bestAt := -1, start
	var (
		pt     meshSessionsPoint
		errs   []error
		states []map[string]string // per node: peer address -> state
		why    string
	)
	// Asked every 100ms: the series and the time of the full mesh are
	// measured by the call that sees them.
	err := poll.Every(100*time.Millisecond, timeout, func() error {
		var counts []int
		counts, errs, states = meshStatuses(nodes)
		now := time.Now()
		pt = meshSessionsPoint{at: now.Sub(start)}
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
			return nil
		}
		if pt.established > best {
			best, bestAt = pt.established, now
		}
		missing := errors.New("full mesh not reached")
		if now.Sub(bestAt) >= meshStall {
			why = fmt.Sprintf("no new session for %s (gave up %s after the start of the wait)", meshStall, now.Sub(start).Round(time.Second))
			return poll.Stop(missing)
		}
		return b.unlessInterrupted(missing)
	})
	now := time.Now()
	if err == nil {
		return meshSessions{at: now}
	}
	if why == "" {
		why = fmt.Sprintf("after %s", timeout)
	}
	return meshNotReached(nodes, errs, states, pt.established, why, now)
}

// meshStatuses asks every node's status, 8 at a time: per node, its
// established sessions, the error of its status and its peers' states
// (peer address -> state).
func meshStatuses(nodes []*lab.Node) (counts []int, errs []error, states []map[string]string) {
	counts = make([]int, len(nodes))
	errs = make([]error, len(nodes))
	states = make([]map[string]string, len(nodes))
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
	return counts, errs, states
}

// meshNotReached says why the full mesh was not reached: the session ends
// not established by state, a few pairs with both ends' states, and the
// nodes whose status failed; established counts session ends.
func meshNotReached(nodes []*lab.Node, errs []error, states []map[string]string, established int, why string, now time.Time) meshSessions {
	want := len(nodes) - 1
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
	r.err = fmt.Errorf("full mesh not reached: %d of %d sessions established, %s%s", established/2, len(nodes)*want/2, why,
		strings.Join(append([]string{""}, errText...), "; "))
	return r
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
	mem            []lab.Memory // per daemon, after convergence
	restarts       []string     // daemons that exited and were restarted
	addLat         []time.Duration
	cpuReady       float64 // CPU seconds of all daemons: start to ready
	cpuSessions    float64 // during the wait for sessions
	cpuAdds        float64 // from the ADDs' start to the last route
	waitSessions   time.Duration
	idleCPU        float64      // CPU-seconds per second of all daemons in 5 quiet seconds before the ADDs
	paths          uint64       // paths in the daemons' Adj-RIB-In at the end, summed
	pathsPer       []uint64     // per daemon
	failed         []bool       // per node: its ADD failed
	voters         []netip.Addr // bgp.voters; none: unset (the default: every node)
	warnings       []string     // most frequent WARN/ERROR messages of the daemons
	lost, conflict int          // "lost a block claim" / "block conflict" lines
	downAfter      int          // sessions that came up again after the mesh was complete (flaps)
	err            string
}

func (b *meshBench) meshStart(n, voters int, timeout time.Duration) (r meshStartResult) {
	r.nodes = n
	if voters == 0 {
		voters = 5
	}
	for i := range min(voters, n) {
		r.voters = append(r.voters, lab.NodeAddress(i))
	}
	fail := func(err error) meshStartResult { r.err = err.Error(); return r }
	l, done, err := b.newLab("mesh")
	if err != nil {
		return fail(err)
	}
	defer done()
	nodes, err := b.addNodes(l, n, meshNodeCfg{peered: true, voters: r.voters, production: true})
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
	b.waitMesh(nodes, start, timeout, &r)
	if b.ctx.Err() != nil {
		return fail(b.ctx.Err())
	}
	// The cost of keeping the mesh up: 5 quiet seconds, the measurement,
	// not a wait.
	c0, q0 := meshCPU(nodes), time.Now()
	if err := b.sleep(5 * time.Second); err != nil {
		return fail(err)
	}
	cpu := meshCPU(nodes)
	r.idleCPU = (cpu - c0) / time.Since(q0).Seconds()
	if err := b.meshAdds(nodes, pods, handles, cpu, &r); err != nil {
		return fail(err)
	}
	if err := meshSteady(nodes, start, &r); err != nil {
		return fail(err)
	}
	return r
}

// waitMesh waits for the full mesh of sessions, within timeout of
// start, and records when it came or what it never reached.
func (b *meshBench) waitMesh(nodes []*lab.Node, start time.Time, timeout time.Duration, r *meshStartResult) {
	n := len(nodes)
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
}

// meshAdds runs one ADD per node, all at once, and records them and the
// routes; cpu is the daemons' CPU before. When every route came, it waits
// meshSettle for the steady state (votes withdrawn once the claims they
// count for are confirmed).
func (b *meshBench) meshAdds(nodes []*lab.Node, pods []*lab.Pod, handles []*netlink.Handle, cpu float64, r *meshStartResult) error {
	meshProgress("mesh: one ADD per node, all at once")
	a, err := b.addAll(nodes, pods, handles)
	r.adds, r.addsOK, r.addErrs, r.addErr, r.addLat = a.adds, a.addsOK, a.addErrs, a.addErr, a.addLat
	r.routes, r.routesHave, r.routesWant, r.failed = a.routes, a.routesHave, a.routesWant, a.failed
	r.cpuAdds = meshCPU(nodes) - cpu
	if err != nil {
		// Not every route came: memory and paths as they are now.
		r.err = err.Error()
		meshProgress("mesh: %v", err)
		return nil
	}
	meshProgress("mesh: ADDs: %d failed; every route to the blocks of the others in after %s from the ADDs' start",
		r.addErrs, r.routes.Round(time.Millisecond))
	return b.sleep(meshSettle)
}

// meshSteady records each daemon's memory and paths received, and the
// sessions down, or up since after the mesh was complete (flaps).
func meshSteady(nodes []*lab.Node, start time.Time, r *meshStartResult) error {
	for _, node := range nodes {
		m, err := node.Memory()
		if err != nil {
			return err
		}
		r.mem = append(r.mem, m)
		var k uint64 // 0 if the status fails: one per node, in order
		if st, err := node.Status(); err == nil {
			for _, p := range st.GetPeers() {
				k += p.GetReceived()
			}
		}
		r.paths += k
		r.pathsPer = append(r.pathsPer, k)
	}
	if r.sessionsErr != "" {
		return nil
	}
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
	return nil
}

// meshSettle is how long after the last route memory and paths are read:
// the steady state, once the voters withdrew the votes of confirmed claims.
// The figures are defined as read then: the measurement, not a wait.
const meshSettle = 5 * time.Second

// meshAdds is what addAll measured.
type meshAdds struct {
	adds, addsOK           time.Duration // every ADD returned; every successful one (from their start)
	addErrs                int
	addErr                 string
	addLat                 []time.Duration
	routes                 time.Duration // from the ADDs' start: every node routes to every successful ADD's block
	routesHave, routesWant int
	failed                 []bool // per node: its ADD failed
}

// addAll ADDs pods[i] on nodes[i], all at once, and waits until every
// node routes to the block of every other node whose ADD succeeded.
// Routes are polled from the start: each node has at most one block, so
// the first route via an owner's address is the route to its block
// (checked against the pod's address once its ADD returned).
func (b *meshBench) addAll(nodes []*lab.Node, pods []*lab.Pod, handles []*netlink.Handle) (a meshAdds, err error) {
	n := len(nodes)
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
	defer func() {
		select {
		case <-addsDone:
		case <-time.After(30 * time.Second):
			return // ADDs still running after a failure: no figures of them
		}
		a.record(addErr, addAt)
	}()
	first := make([][]time.Duration, n) // [observer][owner] -> first route seen
	dst := make([][]netip.Prefix, n)
	for j := range first {
		first[j], dst[j] = make([]time.Duration, n), make([]netip.Prefix, n)
	}
	addrIdx := map[netip.Addr]int{}
	for i, node := range nodes {
		addrIdx[node.Address] = i
	}
	finished := false
	// Asked every 50ms: when each node first had each route is measured by
	// the call that sees it.
	errMissing := errors.New("routes missing")
	err = poll.Every(50*time.Millisecond, time.Until(t0.Add(90*time.Second)), func() error {
		select {
		case <-addsDone:
			finished = true
		default:
		}
		now := time.Since(t0)
		for j, h := range handles {
			rs, err := meshReefRoutes(h)
			if err != nil {
				return poll.Stop(err)
			}
			for gw, ds := range rs {
				if i, ok := addrIdx[gw]; ok && first[j][i] == 0 && len(ds) > 0 {
					first[j][i], dst[j][i] = now, ds[0]
				}
			}
		}
		if finished {
			have, want, last := meshRoutesIn(pods, addErr, first, dst)
			a.routesHave, a.routesWant = have, want
			if have == want {
				a.routes = last
				return nil
			}
		}
		return b.unlessInterrupted(errMissing)
	})
	if errors.Is(err, errMissing) {
		return a, fmt.Errorf("%d of %d routes after %s", a.routesHave, a.routesWant, time.Since(t0).Round(time.Millisecond))
	}
	return a, err
}

// record takes the ADDs' outcomes (addErr) and times from their start
// (addAt), per node.
func (a *meshAdds) record(addErr []error, addAt []time.Duration) {
	a.failed = make([]bool, len(addErr))
	for i, e := range addErr {
		a.failed[i] = e != nil
		a.adds = max(a.adds, addAt[i])
		a.addLat = append(a.addLat, addAt[i])
		if e != nil {
			a.addErrs++
			if a.addErr == "" {
				a.addErr = e.Error()
			}
		} else {
			a.addsOK = max(a.addsOK, addAt[i])
		}
	}
}

// meshRoutesIn counts the routes every node should have to the block of
// each other node whose ADD succeeded (want) and those it has (have: its
// first route via the owner covers the owner's pod), and when the last
// of them came; first and dst are [observer][owner].
func meshRoutesIn(pods []*lab.Pod, addErr []error, first [][]time.Duration, dst [][]netip.Prefix) (have, want int, last time.Duration) {
	for i := range pods {
		if addErr[i] != nil {
			continue
		}
		for j := range first {
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
	return have, want, last
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
