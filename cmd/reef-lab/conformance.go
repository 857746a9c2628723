package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
)

// conformance brings the lab's Kubernetes cluster up, runs the upstream
// e2e.test against reef with a focus and a skip (E2E_FOCUS and E2E_SKIP
// override the defaults), copies the JUnit report to --junit, writes the
// summary to --out and tears the cluster down (`make conformance`).
func conformance(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab conformance", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "docs/conformance.md", "the summary to write")
	junit := fs.String("junit", "", "where to write e2e.test's JUnit report, gzipped (default: beside --out, conformance-junit.xml.gz)")
	images := fs.String("images", filepath.Join(os.TempDir(), "reef-k8s-images"), "where the images are built (cached)")
	timeout := fs.Duration("timeout", 4*time.Hour, "ginkgo's timeout for the whole run")
	procs := fs.Int("procs", 4, "processes the tests run in (ginkgo --procs); [Serial] tests run alone")
	if err := fs.Parse(args); err != nil {
		return err
	}
	focus, skip := lab.ConformanceFocus, lab.ConformanceSkip
	if v := os.Getenv("E2E_FOCUS"); v != "" {
		focus = v
	}
	if v, ok := os.LookupEnv("E2E_SKIP"); ok {
		skip = v
	}
	if *junit == "" {
		*junit = filepath.Join(filepath.Dir(*out), "conformance-junit.xml.gz")
	}
	fmt.Println("building the images (cached after the first run)")
	if _, err := k8simages.Build(ctx, k8simages.Options{Out: *images}); err != nil {
		return err
	}
	l, err := lab.New(*bin)
	if err != nil {
		return err
	}
	defer l.Close()
	began := time.Now()
	c, err := l.StartCluster(lab.ClusterOptions{Images: []string{filepath.Join(*images, k8simages.AllArchive)},
		SandboxImage: k8simages.Pause, CoreDNSImage: k8simages.CoreDNS})
	if err != nil {
		if c != nil {
			fmt.Fprintln(os.Stderr, c.LogTail(30))
		}
		return err
	}
	up := time.Since(began)
	fmt.Printf("cluster of %d nodes up in %s; running e2e.test\n  focus %s\n  skip  %s\n", len(c.Nodes), up.Round(time.Second), focus, skip)
	report := filepath.Join(l.Dir, "e2e-report")
	ran := time.Now()
	results, err := c.RunE2E(ctx, lab.E2EOptions{Focus: focus, Skip: skip, ReportDir: report, Timeout: *timeout, Out: os.Stdout, Procs: *procs})
	if err != nil {
		return err
	}
	took := time.Since(ran)
	if b, err := os.ReadFile(filepath.Join(report, "junit_01.xml")); err == nil {
		if err := writeGzip(*junit, b); err != nil {
			return err
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	writeConformance(f, results, focus, skip, up, took)
	counts := lab.E2ECounts(results)
	fmt.Printf("%d passed, %d failed, %d skipped; wrote %s and %s\n", counts["passed"], counts["failed"], counts["skipped"], *out, *junit)
	if counts["failed"] > 0 {
		return fmt.Errorf("%d tests failed", counts["failed"])
	}
	return nil
}

// writeConformance writes the summary: the run, the counts, and each test
// with its result and, for a failure or a skip, why.
func writeConformance(w io.Writer, rs []lab.E2EResult, focus, skip string, up, took time.Duration) {
	counts := lab.E2ECounts(rs)
	fmt.Fprintf(w, "# Upstream conformance\n\n")
	fmt.Fprintf(w, "`sudo make conformance` rewrites this file: it brings the lab's Kubernetes cluster up (three\n"+
		"nodes with kubelet, kube-proxy in nftables mode, containerd 2 and reef; docs/kubernetes-lab.md),\n"+
		"runs the upstream `e2e.test` %s against it and tears it down. The JUnit report is\n"+
		"`docs/conformance-junit.xml.gz`. `E2E_FOCUS` and `E2E_SKIP` override the selection.\n\n", k8simages.KubeVersion)
	fmt.Fprintf(w, "Run of %s UTC: cluster up in %s, tests ran for %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04"),
		up.Round(time.Second), took.Round(time.Second))
	fmt.Fprintf(w, "- focus: `%s`\n- skip: `%s`\n\n", focus, skip)
	if skip == lab.ConformanceSkip {
		fmt.Fprintf(w, "What the skip leaves out, and why:\n\n| pattern | why |\n|---|---|\n")
		for _, s := range lab.ConformanceSkips {
			fmt.Fprintf(w, "| `%s` | %s |\n", strings.ReplaceAll(s.Pattern, "|", "\\|"), s.Why)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "**%d passed, %d failed, %d skipped** of %d tests selected.\n\n", counts["passed"], counts["failed"], counts["skipped"], len(rs))
	fmt.Fprintf(w, "| result | test | time | why |\n|---|---|---|---|\n")
	for _, r := range rs {
		why := strings.ReplaceAll(strings.ReplaceAll(firstLine(r.Message), "|", "\\|"), "\n", " ")
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.State, strings.ReplaceAll(r.Name, "|", "\\|"), r.Duration.Round(time.Second), why)
	}
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
