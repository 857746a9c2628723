package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
)

// conformance brings the lab's Kubernetes cluster up, runs the upstream
// e2e.test against reef with a focus and a skip (E2E_FOCUS and E2E_SKIP
// override the defaults), copies the JUnit report to --junit, writes the
// summary to --out (its top part) and tears the cluster down (`make
// conformance`, which then runs conformance-policy). With
// --dual-stack the cluster is dual-stack, the default focus the upstream
// dual-stack tests, and the summary the "## Dual-stack" section of --out
// (`make conformance-dualstack`); each run keeps the other parts of the
// file (the network-policy-api section too).
func conformance(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab conformance", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "docs/conformance.md", "the summary to write")
	junit := fs.String("junit", "", "where to write e2e.test's JUnit report, gzipped (default: beside --out, conformance-junit.xml.gz)")
	images := fs.String("images", filepath.Join(os.TempDir(), "reef-k8s-images"), "where the images are built (cached)")
	timeout := fs.Duration("timeout", 4*time.Hour, "ginkgo's timeout for the whole run")
	procs := fs.Int("procs", 4, "processes the tests run in (ginkgo --procs); [Serial] tests run alone")
	dual := fs.Bool("dual-stack", false, "a dual-stack cluster and the upstream dual-stack tests; the summary is --out's dual-stack section")
	if err := fs.Parse(args); err != nil {
		return err
	}
	focus, skip := lab.ConformanceFocus, lab.ConformanceSkip
	if *dual {
		focus, skip = lab.DualStackFocus, lab.DualStackSkip
	}
	if v := os.Getenv("E2E_FOCUS"); v != "" {
		focus = v
	}
	if v, ok := os.LookupEnv("E2E_SKIP"); ok {
		skip = v
	}
	if *junit == "" {
		name := "conformance-junit.xml.gz"
		if *dual {
			name = "conformance-dualstack-junit.xml.gz"
		}
		*junit = filepath.Join(filepath.Dir(*out), name)
	}
	l, c, up, err := startConformanceCluster(ctx, *bin, *images, *dual)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Printf("cluster of %d nodes up in %s; running e2e.test\n  focus %s\n  skip  %s\n", len(c.Nodes), up.Round(time.Second), focus, skip)
	report := filepath.Join(l.Dir, "e2e-report")
	ran := time.Now()
	results, err := c.RunE2E(ctx, lab.E2EOptions{Focus: focus, Skip: skip, ReportDir: report, Timeout: *timeout, Out: os.Stdout, Procs: *procs})
	if err != nil {
		return err
	}
	took := time.Since(ran)
	leftOut, err := lab.LeftOut(filepath.Join(report, "junit_01.xml"), focus, skip)
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(filepath.Join(report, "junit_01.xml")); err == nil {
		if err := writeGzip(*junit, b); err != nil {
			return err
		}
	}
	run := conformanceRun{results: results, leftOut: leftOut, focus: focus, skip: skip, junit: filepath.Base(*junit), up: up, took: took, reef: reefVersion(*bin)}
	var b strings.Builder
	if *dual {
		writeDualStackConformance(&b, run)
		err = lab.WriteSection(*out, b.String())
	} else {
		writeConformance(&b, run)
		err = writeConformanceHead(*out, b.String())
	}
	if err != nil {
		return err
	}
	counts := lab.E2ECounts(results)
	fmt.Printf("%d passed, %d failed, %d skipped; wrote %s and %s\n", counts["passed"], counts["failed"], counts["skipped"], *out, *junit)
	if counts["failed"] > 0 {
		return fmt.Errorf("%d tests failed", counts["failed"])
	}
	return nil
}

// startConformanceCluster builds the images (cached in images), then
// brings the lab's Kubernetes cluster up with the binaries in bin, and
// says how long the cluster took to come up. The caller closes the lab;
// on an error there is none to close.
func startConformanceCluster(ctx context.Context, bin, images string, dual bool) (*lab.Lab, *lab.Cluster, time.Duration, error) {
	fmt.Println("building the images (cached after the first run)")
	if _, err := k8simages.Build(ctx, k8simages.Options{Out: images}); err != nil {
		return nil, nil, 0, err
	}
	l, err := lab.New(bin)
	if err != nil {
		return nil, nil, 0, err
	}
	began := time.Now()
	c, err := l.StartCluster(lab.ClusterOptions{Images: []string{filepath.Join(images, k8simages.AllArchive)},
		SandboxImage: k8simages.Pause, CoreDNSImage: k8simages.CoreDNS, DualStack: dual})
	if err != nil {
		if c != nil {
			fmt.Fprintln(os.Stderr, c.LogTail(30))
		}
		l.Close()
		return nil, nil, 0, err
	}
	return l, c, time.Since(began), nil
}

// conformanceRun is what a summary tells of a run.
type conformanceRun struct {
	results     []lab.E2EResult
	leftOut     []string // selected by the focus, left out by the skip
	focus, skip string
	junit       string // the JUnit report's file name, beside the summary
	up, took    time.Duration
	reef        string // `reef version` of the binaries under test: which commit ran
}

// writeConformanceHead puts the summary of `make conformance`, which has
// no "## " heading, at the top of the file at path, in place of the old
// one; what follows it from the first "## " line on (the dual-stack
// section) stays.
func writeConformanceHead(path, head string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := strings.TrimRight(head, "\n") + "\n"
	if i := strings.Index(string(old), "\n## "); i >= 0 {
		doc += string(old[i:])
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

// writeConformance writes the summary: the run, the counts, and each test
// with its result and, for a failure or a skip, why.
func writeConformance(w io.Writer, r conformanceRun) {
	fmt.Fprintf(w, "# Upstream conformance\n\n")
	fmt.Fprintf(w, "`sudo make conformance` rewrites this file: it brings the lab's Kubernetes cluster up (three\n"+
		"nodes with kubelet, kube-proxy in nftables mode, containerd 2 and reef; docs/kubernetes-lab.md),\n"+
		"runs the upstream `e2e.test` %s against it and tears it down. The JUnit report is\n"+
		"`docs/%s`. `E2E_FOCUS` and `E2E_SKIP` override the selection. The dual-stack run,\n"+
		"`sudo make conformance-dualstack`, writes its own section below. Then `make conformance` runs the\n"+
		"network-policy-api suite (ClusterNetworkPolicy), which rewrites its own section below, as\n"+
		"`sudo make conformance-policy` does alone.\n\n", k8simages.KubeVersion, r.junit)
	writeConformanceRun(w, r, lab.ConformanceSkip, lab.ConformanceSkips)
}

// writeDualStackConformance writes the "## Dual-stack" section of the
// summary.
func writeDualStackConformance(w io.Writer, r conformanceRun) {
	fmt.Fprintf(w, "## Dual-stack\n\n")
	fmt.Fprintf(w, "`sudo make conformance-dualstack` rewrites this section: it brings the lab's cluster up\n"+
		"dual-stack (reef pools of both families, each node an IPv6 address on its uplink, both\n"+
		"families in the service range, kubelet's `--node-ip` and kube-proxy's `clusterCIDR`;\n"+
		"docs/kubernetes-lab.md), runs the upstream `e2e.test` %s's dual-stack tests against it and\n"+
		"tears it down. The JUnit report is `docs/%s`.\n\n", k8simages.KubeVersion, r.junit)
	writeConformanceRun(w, r, lab.DualStackSkip, lab.DualStackSkips)
}

// reefVersion is `reef version` of bin's reef, which names its commit;
// "unknown" when it does not run.
func reefVersion(bin string) string {
	out, err := exec.Command(filepath.Join(bin, "reef"), "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// writeConformanceRun writes the run, the counts, and each test with its
// result and, for a failure or a skip, why; and the skips' reasons when
// the skip is the default one.
func writeConformanceRun(w io.Writer, r conformanceRun, defaultSkip string, skips []lab.E2ESkip) {
	rs := r.results
	counts := lab.E2ECounts(rs)
	fmt.Fprintf(w, "Run of %s UTC: cluster up in %s, tests ran for %s.", time.Now().UTC().Format("2006-01-02 15:04"),
		r.up.Round(time.Second), r.took.Round(time.Second))
	if r.reef != "" {
		fmt.Fprintf(w, " `reef version`: %s.", r.reef)
	}
	fmt.Fprint(w, "\n\n")
	fmt.Fprintf(w, "- focus: `%s`\n- skip: `%s`\n\n", r.focus, r.skip)
	if r.skip == defaultSkip {
		fmt.Fprintf(w, "What the skip leaves out, and why:\n\n| pattern | why |\n|---|---|\n")
		for _, s := range skips {
			fmt.Fprintf(w, "| `%s` | %s |\n", strings.ReplaceAll(s.Pattern, "|", "\\|"), s.Why)
		}
		fmt.Fprintln(w)
	}
	if len(r.leftOut) > 0 {
		fmt.Fprintf(w, "Selected by the focus and left out by the skip (%d):\n\n", len(r.leftOut))
		for _, name := range r.leftOut {
			fmt.Fprintf(w, "- %s\n", name)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "**%d passed, %d failed, %d skipped** of %d tests selected.\n\n", counts["passed"], counts["failed"], counts["skipped"], len(rs))
	fmt.Fprintf(w, "| result | test | time | why |\n|---|---|---|---|\n")
	for _, t := range rs {
		writeResultRow(w, t, t.Name)
	}
}

// writeResultRow writes a row of a results table: t's result, the test
// as name, its time and the first line of its message.
func writeResultRow(w io.Writer, t lab.E2EResult, name string) {
	why := strings.ReplaceAll(strings.ReplaceAll(firstLine(t.Message), "|", "\\|"), "\n", " ")
	fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.State, strings.ReplaceAll(name, "|", "\\|"), t.Duration.Round(time.Second), why)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// writeGzip writes b gzipped to path: the JUnit report of a full run is
// megabytes of XML, a tenth of it gzipped.
func writeGzip(path string, b []byte) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
