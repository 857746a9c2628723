package main

// `reef-lab bench` (`sudo make bench`): reef's CNI ADD and DEL through
// libcni next to Debian's ptp + host-local reference plugins, measured in
// the same run on the same machine, plus the cost of exec'ing the shim and
// the daemon's memory. Everything runs in lab namespaces; the host's own
// network is never touched (see bench_child.go for why libcni runs in a
// re-exec'd child inside a node namespace).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/reefcni/reef/internal/lab"
)

const (
	refPluginDir = "/usr/lib/cni"
	warmPods     = 5   // per plugin, ADD then DEL, not recorded
	seqRounds    = 4   // sequential rounds, plugins alternating
	seqPerRound  = 50  // pods per plugin per round
	parRounds    = 2   // parallel rounds, plugins alternating
	parPods      = 200 // pods per plugin per parallel round (and the memory figure)
	parWorkers   = 4
	grpcPerRound = 25  // per sequential round: reef's daemon alone over its socket, and the loopback floor
	shimExecs    = 200 // per binary, VERSION
)

// target is one plugin under test: where its runtime side runs and the
// libcni setup it uses.
type target struct {
	key, label string
	node       *lab.Node // its namespace hosts the runtime side
	tmpl       childJob  // Mode, PluginDirs, CacheDir, Conflist, Socket
	netns      []string  // pre-created pod namespaces
}

// series collects the samples of one (plugin, mode, op).
type series struct {
	lat  []time.Duration
	wall time.Duration
}

func (s *series) add(r childResult) {
	for _, ns := range r.Lat {
		s.lat = append(s.lat, time.Duration(ns))
	}
	s.wall += time.Duration(r.Wall)
}

type benchRun struct {
	exe string // this binary, re-exec'd as the child
}

func bench(ctx context.Context, bin, out string) error {
	began, loadStart := time.Now(), loadAvg()
	refVersion, exe, err := benchPrecheck(ctx)
	if err != nil {
		return err
	}

	progress("building the lab")
	l, err := lab.New(bin)
	if err != nil {
		return err
	}
	defer func() {
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "bench cleanup:", err)
		}
	}()
	b := &benchRun{exe: exe}
	ts, err := benchTargets(l, bin, refVersion)
	if err != nil {
		return err
	}
	node := ts.reef.node

	rep := &benchReport{began: began, refVersion: refVersion, results: map[string]*series{}}
	if cfg, err := os.ReadFile(node.Config); err == nil {
		rep.daemonConfig = configSummary(cfg)
	}
	// The idle figure is the memory a second after the start (Start
	// waited until the daemon serves ADD): the measurement, not a wait.
	time.Sleep(time.Second)
	if rep.memIdle, err = node.Memory(); err != nil {
		return err
	}
	if err := b.rounds(ctx, ts, rep); err != nil {
		return err
	}
	// memAfter is the memory a second after the last DEL returned: the
	// measurement, not a wait.
	time.Sleep(time.Second)
	if rep.memAfter, err = node.Memory(); err != nil {
		return err
	}

	progress("shim cost: %d execs of each binary with CNI_COMMAND=VERSION", shimExecs)
	if rep.shim, err = shimCost(ctx, filepath.Join(bin, "reef-cni"), filepath.Join(refPluginDir, "ptp"), refVersion); err != nil {
		return err
	}
	rep.daemonLog = node.Log()
	rep.machine = machineInfo(bin)
	rep.machine.loadStart, rep.machine.loadEnd = loadStart, loadAvg()
	rep.took = time.Since(began)

	md := rep.markdown()
	fmt.Print(md)
	if out != "" {
		if err := lab.WriteHead(out, md); err != nil {
			return err
		}
		progress("report written to %s", out)
	}
	return nil
}

// benchPrecheck checks that the reference plugins are installed and
// returns their CNI version and this binary's path (re-exec'd as the
// child).
func benchPrecheck(ctx context.Context) (refVersion, exe string, err error) {
	for _, p := range []string{"ptp", "host-local"} {
		if _, err := os.Stat(filepath.Join(refPluginDir, p)); err != nil {
			return "", "", fmt.Errorf("bench: reference plugin %s/%s missing: install containernetworking-plugins (apt-get install containernetworking-plugins; `sudo make bench` does it)", refPluginDir, p)
		}
	}
	if refVersion, err = refCNIVersion(ctx); err != nil {
		return "", "", err
	}
	if exe, err = os.Executable(); err != nil {
		return "", "", err
	}
	exe, _ = filepath.EvalSymlinks(exe)
	return refVersion, exe, nil
}

// benchPlugins are the plugins bench measures: reef, reef with
// dual-stack pools, the reference (ptp) and the floor (loopback).
type benchPlugins struct{ reef, dual, ref, floor *target }

// benchTargets starts the nodes of the plugins and makes their pod
// namespaces.
func benchTargets(l *lab.Lab, bin, refVersion string) (benchPlugins, error) {
	reef, ref, err := reefAndReference(l, bin, refVersion)
	if err != nil {
		return benchPlugins{}, fmt.Errorf("bench: %w", err)
	}
	// reef with dual-stack pools, a plugin of its own in the sequential
	// rounds: its ADD p50 against reef's IPv4-only one (issue 29).
	dualNode, err := startBenchNode(l, "dual", benchPoolsDual)
	if err != nil {
		return benchPlugins{}, fmt.Errorf("bench: %w", err)
	}
	dual := reefTarget("dual", "reef dual-stack", bin, dualNode)
	// The floor: libcni and the exec of a plugin that does next to nothing
	// (loopback sets lo up), in the reference's namespaces.
	floor := &target{key: "lo", label: "loopback", node: ref.node, tmpl: childJob{Mode: "libcni",
		PluginDirs: []string{refPluginDir}, CacheDir: ref.tmpl.CacheDir,
		Conflist: json.RawMessage(fmt.Sprintf(`{"cniVersion":%q,"name":"bench-lo","plugins":[{"type":"loopback"}]}`, refVersion))}}

	progress("creating %d pod namespaces", 3*parPods)
	for _, t := range []*target{reef, dual, ref} {
		if t.netns, err = podNamespaces(t.node, parPods); err != nil {
			return benchPlugins{}, err
		}
	}
	floor.netns = ref.netns
	return benchPlugins{reef: reef, dual: dual, ref: ref, floor: floor}, nil
}

// rounds runs the warm-up, the sequential rounds and the parallel ones.
func (b *benchRun) rounds(ctx context.Context, ts benchPlugins, rep *benchReport) error {
	progress("warm-up: %d pods per plugin", warmPods)
	for _, t := range []*target{ts.reef, ts.dual, ts.ref} {
		for _, op := range []string{"ADD", "DEL"} {
			if _, err := b.batch(ctx, t, "libcni", op, 1, t.pods("warm", 0, warmPods)); err != nil {
				return err
			}
		}
	}
	// Sequential: rounds of ADDs then DELs, plugins alternating (and the
	// order turning) between rounds, so drift hits all alike; reef with
	// dual-stack pools is a plugin of its own here. Each round ends with a
	// batch sent straight to reef's daemon over gRPC, to split reef's time
	// between the daemon and the exec'd shim.
	for r := range seqRounds {
		if err := b.seqRound(ctx, ts, rep, r); err != nil {
			return err
		}
	}
	for r := range parRounds {
		if err := b.parRound(ctx, ts, rep, r); err != nil {
			return err
		}
	}
	return nil
}

func (b *benchRun) seqRound(ctx context.Context, ts benchPlugins, rep *benchReport, r int) error {
	reef, dual, ref, floor := ts.reef, ts.dual, ts.ref, ts.floor
	progress("sequential round %d/%d: %d pods per plugin, %d straight to the daemon, %d loopback", r+1, seqRounds, seqPerRound, grpcPerRound, grpcPerRound)
	// reef before dual-stack reef in half the rounds, the reference
	// first in half.
	order := [][]*target{{reef, dual, ref}, {ref, dual, reef}, {dual, reef, ref}, {ref, reef, dual}}[r%4]
	phase := fmt.Sprintf("seq%d", r)
	for _, op := range []string{"ADD", "DEL"} {
		for _, t := range order {
			res, err := b.batch(ctx, t, "libcni", op, 1, t.pods(phase, r*seqPerRound, (r+1)*seqPerRound))
			if err != nil {
				return err
			}
			rep.get(t.key, "seq", op).add(res)
		}
	}
	for _, op := range []string{"ADD", "DEL"} {
		res, err := b.batch(ctx, reef, "grpc", op, 1, reef.pods(fmt.Sprintf("grpc%d", r), r*seqPerRound, r*seqPerRound+grpcPerRound))
		if err != nil {
			return err
		}
		rep.get("reef", "grpc", op).add(res)
	}
	for _, op := range []string{"ADD", "DEL"} {
		res, err := b.batch(ctx, floor, "libcni", op, 1, floor.pods(phase, r*seqPerRound, r*seqPerRound+grpcPerRound))
		if err != nil {
			return err
		}
		rep.get("lo", "seq", op).add(res)
	}
	return nil
}

func (b *benchRun) parRound(ctx context.Context, ts benchPlugins, rep *benchReport, r int) error {
	reef, ref := ts.reef, ts.ref
	progress("parallel round %d/%d: %d pods per plugin, %d workers", r+1, parRounds, parPods, parWorkers)
	first, second := reef, ref
	if r%2 == 1 {
		first, second = ref, reef
	}
	phase := fmt.Sprintf("par%d", r)
	for _, step := range []struct {
		t  *target
		op string
	}{{first, "ADD"}, {second, "ADD"}, {second, "DEL"}, {first, "DEL"}} {
		if step.t == reef && step.op == "DEL" {
			// reef's pods are all up, and the daemon idle since the
			// reference's batch ran: the highest of these is reported.
			m, err := reef.node.Memory()
			if err != nil {
				return err
			}
			rep.mem200 = rep.mem200.Max(m)
		}
		res, err := b.batch(ctx, step.t, "libcni", step.op, parWorkers, step.t.pods(phase, 0, parPods))
		if err != nil {
			return err
		}
		rep.get(step.t.key, "par", step.op).add(res)
	}
	return nil
}

// configSummary picks the settings that bear on speed out of the daemon's
// config, as the report states them.
func configSummary(cfg []byte) string {
	var kept []string
	for _, line := range strings.Split(string(cfg), "\n") {
		for _, key := range []string{"logLevel:", "reconcileInterval:"} {
			if strings.HasPrefix(line, key) {
				kept = append(kept, "`"+strings.TrimSpace(line)+"`")
			}
		}
	}
	return strings.Join(kept, ", ")
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// refCNIVersion is the highest spec version that ptp, host-local and this
// build's libcni all support.
func refCNIVersion(ctx context.Context) (string, error) {
	common := map[string]int{}
	for _, v := range cniversion.All.SupportedVersions() {
		common[v]++
	}
	for _, p := range []string{"ptp", "host-local"} {
		cmd := exec.CommandContext(ctx, filepath.Join(refPluginDir, p))
		cmd.Env = []string{"CNI_COMMAND=VERSION"}
		cmd.Stdin = strings.NewReader(`{"cniVersion":"0.4.0"}`)
		outb, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("bench: %s VERSION: %w", p, err)
		}
		info, err := (&cniversion.PluginDecoder{}).Decode(outb)
		if err != nil {
			return "", fmt.Errorf("bench: %s VERSION: %w", p, err)
		}
		for _, v := range info.SupportedVersions() {
			common[v]++
		}
	}
	best := ""
	for v, n := range common {
		if n != 3 {
			continue
		}
		if best == "" {
			best = v
		} else if gt, err := cniversion.GreaterThan(v, best); err == nil && gt {
			best = v
		}
	}
	if best == "" {
		return "", errors.New("bench: no CNI version common to libcni, ptp and host-local")
	}
	return best, nil
}

// podNamespaces creates n pod namespaces on the node, 4 at a time.
func podNamespaces(node *lab.Node, n int) ([]string, error) {
	names := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			p, err := node.NewPodNetns("bench", fmt.Sprintf("ns-%d", i))
			if err != nil {
				errs[i] = err
				return
			}
			names[i] = p.Netns
		}()
	}
	wg.Wait()
	return names, errors.Join(errs...)
}

// pods names the attachments of one phase: pod namespaces [from, to) with
// container IDs and pod names of their own, so no phase reuses another's.
func (t *target) pods(phase string, from, to int) []childPod {
	var ps []childPod
	for i := from; i < to; i++ {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%s/%d", t.node.Lab.Prefix, t.key, phase, i)))
		ps = append(ps, childPod{ContainerID: hex.EncodeToString(sum[:]), Netns: lab.NetnsPath(t.netns[i]),
			Namespace: "bench", Name: fmt.Sprintf("%s-%s-%d", t.key, phase, i)})
	}
	return ps
}

// batch runs one batch of ADDs or DELs in a child inside the target's node
// namespace and returns its timings.
func (b *benchRun) batch(ctx context.Context, t *target, mode, op string, workers int, pods []childPod) (childResult, error) {
	job := t.tmpl
	job.Mode, job.Op, job.Workers, job.Pods = mode, op, workers, pods
	in, err := json.Marshal(job)
	if err != nil {
		return childResult{}, err
	}
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+lab.NetnsPath(t.node.Netns), "--", b.exe)
	cmd.Env = append(os.Environ(), benchChildEnv+"=1")
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return childResult{}, fmt.Errorf("bench: %s %s %s batch: %v: %s", t.label, mode, op, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var res childResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return childResult{}, fmt.Errorf("bench: %s %s %s batch: decode %q: %w", t.label, mode, op, stdout.Bytes(), err)
	}
	if len(res.Lat) != len(pods) {
		return childResult{}, fmt.Errorf("bench: %s %s batch: %d timings for %d pods", t.label, op, len(res.Lat), len(pods))
	}
	return res, nil
}

type shimResult struct {
	label, path string
	size        int64
	lat         []time.Duration
}

// shimCost execs each binary with CNI_COMMAND=VERSION, alternating, after a
// few unrecorded execs of each. VERSION touches no network, so this runs
// in the bench's own process.
func shimCost(ctx context.Context, reefCNI, ptp, refVersion string) ([]shimResult, error) {
	rs := []shimResult{
		{label: "bin/reef-cni", path: reefCNI},
		{label: ptp, path: ptp},
	}
	stdin := []string{`{"cniVersion":"1.1.0"}`, fmt.Sprintf(`{"cniVersion":%q}`, refVersion)}
	for i := range rs {
		if st, err := os.Stat(rs[i].path); err == nil {
			rs[i].size = st.Size()
		}
	}
	for n := -10; n < shimExecs; n++ {
		for i := range rs {
			cmd := exec.CommandContext(ctx, rs[i].path)
			cmd.Env = []string{"CNI_COMMAND=VERSION"}
			cmd.Stdin = strings.NewReader(stdin[i])
			var out bytes.Buffer
			cmd.Stdout = &out
			t0 := time.Now()
			err := cmd.Run()
			d := time.Since(t0)
			if err != nil {
				return nil, fmt.Errorf("bench: %s VERSION: %w", rs[i].label, err)
			}
			if !bytes.Contains(out.Bytes(), []byte("supportedVersions")) {
				return nil, fmt.Errorf("bench: %s VERSION printed %q", rs[i].label, out.Bytes())
			}
			if n >= 0 {
				rs[i].lat = append(rs[i].lat, d)
			}
		}
	}
	return rs, nil
}

// benchPoolsDual are the dual-stack reef node's pools: the IPv4 node's
// pool (the daemon's default) and an IPv6 one.
const benchPoolsDual = "pools: [{cidr: 10.244.0.0/16}, {cidr: fd00:10:244::/56}]\n"

// startBenchNode adds and starts a reef node as in production (30 s
// reconcile interval, log level info; the lab's own defaults are tuned for
// tests), with extra appended to its config.
func startBenchNode(l *lab.Lab, name, extra string) (*lab.Node, error) {
	node, err := l.AddNode(name, lab.NodeOptions{ReconcileInterval: 30 * time.Second, Extra: extra})
	if err != nil {
		return nil, err
	}
	if cfg, err := os.ReadFile(node.Config); err != nil {
		return nil, err
	} else if err := os.WriteFile(node.Config, bytes.Replace(cfg, []byte("logLevel: debug"), []byte("logLevel: info"), 1), 0o644); err != nil {
		return nil, err
	}
	return node, node.Start()
}

// reefTarget is reef on node n, through the shim in bin.
func reefTarget(key, label, bin string, n *lab.Node) *target {
	return &target{key: key, label: label, node: n, tmpl: childJob{Mode: "libcni",
		PluginDirs: []string{bin}, CacheDir: filepath.Join(n.Dir, "cni-cache"), Conflist: n.Conflist(), Socket: n.Socket}}
}

// reefAndReference adds the two nodes a bench compares: reef's with its
// default IPv4 pool, and the reference's, a node namespace of its own with
// no daemon, where ptp puts its host veths and /32 routes, with
// ptp+host-local's conflist at refVersion.
func reefAndReference(l *lab.Lab, bin, refVersion string) (reef, ref *target, err error) {
	node, err := startBenchNode(l, "node1", "")
	if err != nil {
		return nil, nil, err
	}
	refNode, err := l.AddNode("ref", lab.NodeOptions{})
	if err != nil {
		return nil, nil, err
	}
	refConflist := fmt.Sprintf(`{"cniVersion":%q,"name":"bench-ptp","plugins":[{"type":"ptp","ipMasq":false,"mtu":1450,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.246.0.0/16"}]],"dataDir":%q}}]}`,
		refVersion, filepath.Join(refNode.Dir, "host-local"))
	if _, err := libcni.ConfListFromBytes([]byte(refConflist)); err != nil {
		return nil, nil, fmt.Errorf("reference conflist: %w", err)
	}
	ref = &target{key: "ref", label: "ptp+host-local", node: refNode, tmpl: childJob{Mode: "libcni",
		PluginDirs: []string{refPluginDir}, CacheDir: filepath.Join(refNode.Dir, "cni-cache"), Conflist: json.RawMessage(refConflist)}}
	return reefTarget("reef", "reef", bin, node), ref, nil
}
