package main

// reef-lab bench-storm measures issue 15's pod storm: a node that comes back
// with 250 pods gets 250 ADDs at once (kubelet's restart storm) and later
// 250 DELs at once. reef runs next to Debian's ptp + host-local in the same
// run, through libcni in a re-exec'd child inside a node namespace as in
// `reef-lab bench` (bench_child.go); while reef's storms run, the daemon's
// memory (/proc/PID/status) and goroutines (go_goroutines on its metrics
// listener) are sampled.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// stormSampleEvery is how often the daemon is sampled during a storm: a
// scrape costs it a few ms of CPU (BENCHMARKS.md, Metrics).
const stormSampleEvery = 100 * time.Millisecond

type stormReport struct {
	command, refVersion   string
	loadStart, loadEnd    string
	began                 time.Time
	took                  time.Duration
	pods, rounds          int
	results               map[string]*series // "plugin/op"
	perRound              map[string][]float64
	idle, after, settled  daemonPeak
	settle                time.Duration
	peakAdd, peakDel      daemonPeak
	blocksBefore, blocksA int
}

// daemonPeak is the daemon's memory and goroutines: one reading, or the
// highest over a storm.
type daemonPeak struct {
	mem        lab.Memory
	heap       int64 // go_memstats_heap_inuse_bytes, in kB
	goroutines int
	samples    int
}

func benchStorm(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab bench-storm", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "", `write the report into this file as its "## Pod storm" section`)
	pods := fs.Int("pods", 250, "pods per storm (all ADDed, then all DELed, at once)")
	rounds := fs.Int("rounds", 2, "storms per plugin, the plugins alternating")
	settle := fs.Duration("settle", 150*time.Second, "how long after the last storm the daemon's settled memory is read (the Go runtime forces a GC every 2 minutes)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r := &stormReport{began: time.Now(), loadStart: tputLoad(), command: benchCommand("reef-lab bench-storm", args),
		pods: *pods, rounds: *rounds, results: map[string]*series{}, perRound: map[string][]float64{}}
	for _, p := range []string{"ptp", "host-local"} {
		if _, err := os.Stat(filepath.Join(refPluginDir, p)); err != nil {
			return fmt.Errorf("bench-storm: reference plugin %s/%s missing: install containernetworking-plugins", refPluginDir, p)
		}
	}
	var err error
	if r.refVersion, err = refCNIVersion(ctx); err != nil {
		return err
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return err
	}
	l, err := lab.New(*bin)
	if err != nil {
		return err
	}
	defer l.Close()
	b := &benchRun{exe: exe}
	reef, ref, err := reefAndReference(l, *bin, r.refVersion)
	if err != nil {
		return fmt.Errorf("bench-storm: %w", err)
	}
	if err := b.stormPrepare(ctx, r, reef, ref); err != nil {
		return err
	}
	for round := range *rounds {
		order := []*target{reef, ref}
		if round%2 == 1 {
			order = []*target{ref, reef}
		}
		for _, t := range order {
			for _, op := range []string{"ADD", "DEL"} {
				if err := b.storm(ctx, r, t, t == reef, op, round); err != nil {
					return err
				}
			}
		}
	}
	if err := stormSettle(ctx, r, reef.node, *settle); err != nil {
		return err
	}
	r.took, r.loadEnd = time.Since(r.began), tputLoad()
	return printSection(r.markdown(), *out)
}

func stormSay(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench-storm: "+format+"\n", a...) }

// stormPrepare makes the pod namespaces, warms both plugins up and reads
// reef's blocks and its idle figures.
func (b *benchRun) stormPrepare(ctx context.Context, r *stormReport, reef, ref *target) error {
	var err error
	stormSay("creating %d pod namespaces", 2*r.pods)
	for _, t := range []*target{reef, ref} {
		if t.netns, err = podNamespaces(t.node, r.pods); err != nil {
			return err
		}
	}
	stormSay("warm-up: %d pods per plugin", warmPods)
	for _, t := range []*target{reef, ref} {
		for _, op := range []string{"ADD", "DEL"} {
			if _, err := b.batch(ctx, t, "libcni", op, 1, t.pods("warm", 0, warmPods)); err != nil {
				return err
			}
		}
	}
	if r.blocksBefore, err = ownBlocks(reef.node); err != nil {
		return err
	}
	// The idle figures are read a second after the warm-up's last DEL
	// returned: the measurement, not a wait.
	time.Sleep(time.Second)
	r.idle, err = readDaemon(reef.node)
	return err
}

// storm is one storm of round: all of t's pods ADDed (or DELed) at once,
// with reef's daemon sampled for its peak when t is reef.
func (b *benchRun) storm(ctx context.Context, r *stormReport, t *target, isReef bool, op string, round int) error {
	stormSay("round %d/%d: %s, %d %ss at once", round+1, r.rounds, t.label, r.pods, op)
	var stop func() daemonPeak
	var err error
	if isReef {
		if stop, err = sampleDaemon(t.node); err != nil {
			return err
		}
	}
	res, err := b.batch(ctx, t, "libcni", op, r.pods, t.pods(fmt.Sprintf("storm%d", round), 0, r.pods))
	if stop != nil {
		peak := stop()
		if op == "ADD" {
			r.peakAdd = maxPeak(r.peakAdd, peak)
		} else {
			r.peakDel = maxPeak(r.peakDel, peak)
		}
	}
	if err != nil {
		return err
	}
	k := t.key + "/" + op
	if r.results[k] == nil {
		r.results[k] = &series{}
	}
	r.results[k].add(res)
	r.perRound[k] = append(r.perRound[k], float64(len(res.Lat))/time.Duration(res.Wall).Seconds())
	if isReef && op == "ADD" && round == 0 {
		if r.blocksA, err = ownBlocks(t.node); err != nil {
			return err
		}
	}
	return nil
}

// stormSettle reads the daemon's figures 2s after the last storm
// returned, then settled at settle: the measurements, not waits.
func stormSettle(ctx context.Context, r *stormReport, node *lab.Node, settle time.Duration) error {
	var err error
	time.Sleep(2 * time.Second)
	if r.after, err = readDaemon(node); err != nil {
		return err
	}
	stormSay("waiting %s for the daemon's memory to settle", settle)
	r.settle = settle
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(settle - 2*time.Second):
	}
	r.settled, err = readDaemon(node)
	return err
}

// ownBlocks counts the node's own blocks.
func ownBlocks(node *lab.Node) (int, error) {
	rep, err := node.IPAM()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range rep.GetPools() {
		n += int(p.GetBlocksOwned())
	}
	return n, nil
}

// readDaemon reads the daemon's memory and goroutines once.
func readDaemon(node *lab.Node) (daemonPeak, error) {
	m, err := node.Memory()
	if err != nil {
		return daemonPeak{}, err
	}
	v, err := node.MetricValues("go_goroutines", "go_memstats_heap_inuse_bytes")
	if err != nil {
		return daemonPeak{}, err
	}
	return daemonPeak{mem: m, heap: int64(v["go_memstats_heap_inuse_bytes"]) / 1024,
		goroutines: int(v["go_goroutines"]), samples: 1}, nil
}

// sampleDaemon resets the daemon's peak RSS (VmHWM, through clear_refs)
// and samples its memory and goroutines until the returned function is
// called, which gives the highest of each (the peak RSS from VmHWM, which
// sees between the samples).
func sampleDaemon(node *lab.Node) (func() daemonPeak, error) {
	pid := node.Pid()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return nil, fmt.Errorf("reset the peak RSS of the daemon: %w", err)
	}
	var mu sync.Mutex
	var peak daemonPeak
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(stormSampleEvery)
		defer tick.Stop()
		for {
			if s, err := readDaemon(node); err == nil {
				mu.Lock()
				peak = maxPeak(peak, s)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() daemonPeak {
		close(done)
		wg.Wait()
		if m, err := node.Memory(); err == nil {
			peak.mem.HWM = max(peak.mem.HWM, m.HWM)
		}
		return peak
	}, nil
}

func maxPeak(a, b daemonPeak) daemonPeak {
	return daemonPeak{mem: a.mem.Max(b.mem), heap: max(a.heap, b.heap),
		goroutines: max(a.goroutines, b.goroutines), samples: a.samples + b.samples}
}

func (r *stormReport) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	get := func(k string) *series {
		if s := r.results[k]; s != nil {
			return s
		}
		return &series{}
	}
	w("## Pod storm\n\n")
	w("From `sudo make bench`, which runs `%s`, on %s (%s). 1-minute load average %s at the start,\n",
		r.command, r.began.UTC().Format("2006-01-02 15:04 UTC"), meshSec(r.took), r.loadStart)
	w("%s at the end (2 cores; other work shows).\n\n", r.loadEnd)
	w("### Aims\n\nFrom issue 15, \"Measured in `make bench`\": 250 parallel ADDs, pods/s and p99, reef next to ptp+host-local\n")
	w("in the same run; the daemon's peak memory and goroutines during the storm. The issue sets no figure to reach: these are\n")
	w("the figures. The e2e test TestPodStorm shows the storm's correctness (a kill -9 among the ADDs, queued DELs, nothing left).\n\n")
	w("### %d ADDs, then %d DELs, all at once through libcni\n\n", r.pods, r.pods)
	w("One node, reef with its production settings (`reconcileInterval: 30s`, `logLevel: info`); ptp+host-local (conflist\n")
	w("cniVersion %s, `ipMasq: false`) in a node namespace of its own. %d storms per plugin, the plugins alternating and\n", r.refVersion, r.rounds)
	w("swapping order between rounds, after %d pods per plugin one at a time to warm up. Each storm is one child\n", warmPods)
	w("process (as in `reef-lab bench`) that starts all %d libcni calls at once; pods/s = pods / wall time from the first\n", r.pods)
	w("call to the last return. reef's node owned %d block(s) of 64 before its first storm and %d after it: the first\n", r.blocksBefore, r.blocksA)
	w("storm also claims blocks, as a fresh node would; a restarting node owns its blocks already.\n\n")
	w("| op | plugin | pods | pods/s | p50 ms | p99 ms | max ms | pods/s per storm |\n|---|---|---:|---:|---:|---:|---:|---|\n")
	for _, op := range []string{"ADD", "DEL"} {
		for _, p := range []struct{ key, label string }{{"reef", "reef"}, {"ref", "ptp+host-local"}} {
			s := get(p.key + "/" + op)
			var per []string
			for _, v := range r.perRound[p.key+"/"+op] {
				per = append(per, fmt.Sprintf("%.0f", v))
			}
			w("| %s | %s | %d | %.0f | %s | %s | %s | %s |\n", op, p.label, len(s.lat), s.rate(), ms(pct(s.lat, 0.5)), ms(pct(s.lat, 0.99)),
				ms(pct(s.lat, 1)), strings.Join(per, ", "))
		}
	}
	w("\nreef / ptp+host-local (latency below 1 and pods/s above 1 favour reef):\n\n")
	w("| op | p50 | p99 | pods/s |\n|---|---:|---:|---:|\n")
	for _, op := range []string{"ADD", "DEL"} {
		a, c := get("reef/"+op), get("ref/"+op)
		w("| %s | %s | %s | %s |\n", op, ratio(float64(pct(a.lat, 0.5)), float64(pct(c.lat, 0.5))),
			ratio(float64(pct(a.lat, 0.99)), float64(pct(c.lat, 0.99))), ratio(a.rate(), c.rate()))
	}
	w("\n### The reef daemon during the storms\n\n")
	w("Peak RSS is VmHWM of /proc/PID/status, reset (clear_refs) as each storm starts; goroutines are `go_goroutines` of\n")
	w("its metrics listener, and memory and goroutines are sampled every %s while reef's storms run\n", stormSampleEvery)
	w("(%d samples over the ADD storms, %d over the DEL storms); RssAnon is the daemon's anonymous memory, heap\n", r.peakAdd.samples, r.peakDel.samples)
	w("`go_memstats_heap_inuse_bytes`.\n")
	w("Idle: with no pods, before the first storm; after: 2 s and %s after the last storm, with no pods (the Go\n", meshSec(r.settle))
	w("runtime forces a collection every 2 minutes and returns freed pages to the kernel in the background).\n\n")
	w("| | RSS | RssAnon | peak RSS | heap in use | goroutines |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(label string, p daemonPeak, peak bool) {
		hwm, hi := "", ""
		if peak {
			hwm, hi = meshMiB(p.mem.HWM), " (highest sample)"
		}
		w("| %s | %s%s | %s%s | %s | %s%s | %d%s |\n", label, meshMiB(p.mem.RSS), hi, meshMiB(p.mem.Anon), hi, hwm, meshMiB(p.heap), hi, p.goroutines, hi)
	}
	row("idle", r.idle, false)
	row(fmt.Sprintf("%d ADDs at once", r.pods), r.peakAdd, true)
	row(fmt.Sprintf("%d DELs at once", r.pods), r.peakDel, true)
	row("2 s after", r.after, false)
	row(meshSec(r.settle)+" after", r.settled, false)
	return b.String()
}
