package main

// reef-lab bench-metrics measures issue 14's figures: a scrape of /metrics
// on a node with 200 pods and 50 BGP peers, and the daemon's memory with the
// metrics listener on and off.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

type metricsReport struct {
	command, loadStart, loadEnd string
	began                       time.Time
	took                        time.Duration
	pods, peers                 int
	scrapes                     []time.Duration
	bytes, series               int
	memOff, memOn               lab.Memory
}

func benchMetrics(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab bench-metrics", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "", `write the report into this file as its "## Metrics" section`)
	pods := fs.Int("pods", 200, "pods on the node")
	peers := fs.Int("peers", 50, "BGP peers of the node (addresses nobody answers on: sessions that are not up, every series there)")
	scrapes := fs.Int("scrapes", 100, "scrapes timed")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r := &metricsReport{began: time.Now(), loadStart: tputLoad(), command: benchCommand("reef-lab bench-metrics", args), pods: *pods, peers: *peers}
	say := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench-metrics: "+format+"\n", a...) }
	l, err := lab.New(*bin)
	if err != nil {
		return err
	}
	defer l.Close()
	var ps []netip.Addr
	for i := range *peers {
		ps = append(ps, netip.AddrFrom4([4]byte{192, 168, 77, byte(100 + i)}))
	}
	// The node is its own only voter: its peers never answer.
	opts := lab.NodeOptions{Peers: ps, ReconcileInterval: 30 * time.Second, Extra: "metrics: \"\"\n",
		BGPExtra: fmt.Sprintf("  voters: [%s]\n", lab.NodeAddress(0))}
	n, err := l.AddNode("node1", opts)
	if err != nil {
		return err
	}
	if err := n.Start(); err != nil {
		return err
	}
	say("%d pods", *pods)
	for i := range *pods {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if _, err := n.NewPod("bench", fmt.Sprintf("p%d", i)); err != nil {
			return err
		}
	}
	// Both figures are the memory 10s after a restart (Restart waited
	// until the daemon serves ADD): the measurement, not a wait.
	settle := func() (lab.Memory, error) {
		time.Sleep(10 * time.Second)
		return n.Memory()
	}
	// Both measured on a daemon restarted with its pods in the store, so
	// that neither carries the ADDs' heap.
	say("memory with metrics off")
	if err := n.Restart(); err != nil {
		return err
	}
	if r.memOff, err = settle(); err != nil {
		return err
	}
	opts.Extra = ""
	if err := n.SetOptions(opts); err != nil {
		return err
	}
	if err := n.Restart(); err != nil {
		return err
	}
	say("%d scrapes", *scrapes)
	if err := r.scrape(n, *scrapes); err != nil {
		return err
	}
	say("memory with metrics on")
	if r.memOn, err = settle(); err != nil {
		return err
	}
	r.took, r.loadEnd = time.Since(r.began), tputLoad()
	return printSection(r.markdown(), *out)
}

// scrape times count scrapes of n's metrics listener, 50ms apart, after 5
// not counted, and records the size and series of the last.
func (r *metricsReport) scrape(n *lab.Node, count int) error {
	client := lab.HTTPClientIn(n.Netns)
	scrape := func() (time.Duration, string, error) {
		t0 := time.Now()
		resp, err := client.Get("http://127.0.0.1:9099/metrics")
		if err != nil {
			return 0, "", err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		return time.Since(t0), string(body), err
	}
	for i := range count + 5 {
		d, body, err := scrape()
		if err != nil {
			return err
		}
		if i < 5 {
			continue // warm-up
		}
		r.scrapes = append(r.scrapes, d)
		r.bytes = len(body)
		r.series = 0
		for _, line := range strings.Split(body, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				r.series++
			}
		}
		time.Sleep(50 * time.Millisecond) // scrapes 50ms apart: the scenario, not a wait
	}
	return nil
}

func (r *metricsReport) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("## Metrics\n\n")
	w("From `sudo make bench`, which runs `%s`, on %s (%s). One node with %d pods and %d BGP peers\n", r.command, r.began.UTC().Format("2006-01-02 15:04 UTC"), meshSec(r.took), r.pods, r.peers)
	w("(configured, at addresses nobody answers on: every per-peer series is there), production reconcile interval (30 s).\n")
	w("1-minute load average %s at the start, %s at the end (2 cores; other work shows).\n\n", r.loadStart, r.loadEnd)
	w("### Aims\n\nFrom issue 14, \"Measured in `make bench`\".\n\n")
	p50, ok := meshQuantile(r.scrapes, 0.5)
	w("- A scrape of /metrics with %d pods and %d peers at most 5 ms p50: %s (p90 %s, %d scrapes, %d series, %d bytes): %s\n",
		r.pods, r.peers, benchMS(p50, ok), benchMS(meshQuantile(r.scrapes, 0.9)), len(r.scrapes), r.series, r.bytes, meshMet(ok && p50 <= 5*time.Millisecond))
	on, off := r.memOn, r.memOff
	w("- The daemon's RssAnon with metrics on at most 3 MiB over metrics off: %s on, %s off, %s over (RSS %s on, %s off,\n",
		meshMiB(on.Anon), meshMiB(off.Anon), meshMiB(on.Anon-off.Anon), meshMiB(on.RSS), meshMiB(off.RSS))
	w("  %s over): %s\n\n", meshMiB(on.RSS-off.RSS), meshMet(on.Anon > 0 && off.Anon > 0 && on.Anon-off.Anon <= 3*1024))
	w("Memory is RssAnon and VmRSS of the daemon restarted with the pods in its store, 10 s after the start (metrics off)\n")
	w("and 10 s after the last of the scrapes, 50 ms apart (metrics on).\n")
	return b.String()
}
