package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// conformancePolicy brings the lab's Kubernetes cluster up, installs the
// network-policy-api ClusterNetworkPolicy CRD, runs the module's
// conformance suite against reef for the features reef claims, writes the
// summary as the policySection section of --out (the Kubernetes suite's
// summary and the dual-stack section stay) and the run's events beside
// it, and tears the cluster down (`make conformance-policy`, and `make
// conformance` after the Kubernetes suite).
func conformancePolicy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab conformance-policy", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "docs/conformance.md", "the file whose \""+policySection+"\" section the summary is")
	events := fs.String("events", "", "where to write the run's go test events (test2json), gzipped (default: beside --out, conformance-policy-events.json.gz)")
	images := fs.String("images", filepath.Join(os.TempDir(), "reef-k8s-images"), "where the images are built (cached)")
	cache := fs.String("cache", defaultCache("reef-npconf"), "where the suite's test binary is built (cached)")
	features := fs.String("supported-features", lab.PolicyConformanceFeatures, "the suite's --supported-features")
	timeout := fs.Duration("timeout", time.Hour, "go test's -timeout for the suite")
	if err := fs.Parse(args); err != nil {
		return err
	}
	skip := lab.SkipExpr(lab.PolicyConformanceSkips)
	if v, ok := os.LookupEnv("NPAPI_SKIP"); ok {
		skip = v
	}
	if *events == "" {
		*events = filepath.Join(filepath.Dir(*out), "conformance-policy-events.json.gz")
	}
	fmt.Println("building the network-policy-api conformance suite (cached after the first run)")
	wd, _ := os.Getwd()
	suite, err := lab.BuildPolicyConformance(ctx, os.Getenv("GO"), wd, *cache)
	if err != nil {
		return err
	}
	tests, err := lab.PolicyConformanceTests(suite.Src)
	if err != nil {
		return err
	}
	l, c, up, err := startConformanceCluster(ctx, *bin, *images, false)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Printf("cluster of %d nodes up in %s; running the network-policy-api %s conformance suite\n", len(c.Nodes), up.Round(time.Second), suite.Version)
	report := filepath.Join(l.Dir, "npapi-report")
	ran := time.Now()
	results, cmdline, err := c.RunPolicyConformance(ctx, lab.PolicyConformanceOptions{Suite: suite, Features: *features, Skip: skip,
		ReportDir: report, Timeout: *timeout, Out: os.Stdout, Go: os.Getenv("GO")})
	if err != nil {
		return err
	}
	took := time.Since(ran)
	explainParents(results)
	if b, err := os.ReadFile(filepath.Join(report, "events.json")); err == nil {
		if err := writeGzip(*events, b); err != nil {
			return err
		}
	}
	run := policyConformanceRun{results: results, tests: tests, version: suite.Version, features: *features, skip: skip,
		cmdline: cmdline, events: filepath.Base(*events), up: up, took: took, nodes: len(c.Nodes)}
	var b strings.Builder
	writePolicyConformance(&b, run)
	if err := lab.WriteSection(*out, b.String()); err != nil {
		return err
	}
	n := policyCounts(results)
	fmt.Printf("%d passed, %d failed, %d skipped; wrote %s and %s\n", n["passed"], n["failed"], n["skipped"], *out, *events)
	if bad := n["failed"] - n["sctp"]; bad > 0 {
		return fmt.Errorf("%d tests failed, %d of them not only on SCTP probes", n["failed"], bad)
	}
	return nil
}

// explainParents gives a test with no message of its own (its output is
// its subtests') one: for a passed test, how many SCTP probes its
// subtests did not run; for a failed one, which subtests failed, and
// whether only on SCTP probes.
func explainParents(rs []lab.E2EResult) {
	for i, r := range rs {
		if r.State == "passed" && r.Message == "" && strings.Count(r.Name, "/") == 1 {
			total := 0
			for _, s := range rs {
				var n int
				if strings.HasPrefix(s.Name, r.Name+"/") {
					if _, err := fmt.Sscanf(s.Message, "%d SCTP probes not run", &n); err == nil {
						total += n
					}
				}
			}
			if total > 0 {
				rs[i].Message = fmt.Sprintf("%d SCTP probes not run", total)
			}
		}
		if r.State != "failed" || r.Message != "" || strings.Count(r.Name, "/") != 1 {
			continue
		}
		failed, sctp := 0, 0
		for _, s := range rs {
			if strings.HasPrefix(s.Name, r.Name+"/") && s.State == "failed" {
				failed++
				if lab.FailedOnlyOn(s, "sctp") {
					sctp++
				}
			}
		}
		switch {
		case failed > 0 && sctp == failed:
			rs[i].Message = fmt.Sprintf("probes failed: sctp; %d subtests failed, each only on its SCTP probes (this kernel has no SCTP)", failed)
		case failed > 0:
			rs[i].Message = fmt.Sprintf("%d subtests failed, %d of them only on SCTP probes", failed, sctp)
		}
	}
}

// defaultCache is ~/.cache/name, or one under the temp dir without a home.
func defaultCache(name string) string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, name)
	}
	return filepath.Join(os.TempDir(), name)
}

// policyConformanceRun is what the summary tells of a run.
type policyConformanceRun struct {
	results        []lab.E2EResult
	tests          []lab.PolicyConformanceTest
	version        string
	features, skip string
	cmdline        []string
	events         string
	up, took       time.Duration
	nodes          int
}

// policyCounts counts the suite's tests (TestConformance/<ShortName>),
// not their subtests nor TestConformance itself, by result; "sctp" counts
// the failed ones whose failures were all SCTP probes.
func policyCounts(rs []lab.E2EResult) map[string]int {
	n := map[string]int{}
	for _, r := range rs {
		if strings.Count(r.Name, "/") == 1 {
			n[r.State]++
			if lab.FailedOnlyOn(r, "sctp") {
				n["sctp"]++
			}
		}
	}
	return n
}

// policySection is the heading of the suite's section of
// docs/conformance.md.
const policySection = "## network-policy-api conformance (ClusterNetworkPolicy)"

// writePolicyConformance writes the summary, a section of
// docs/conformance.md with no other "## " heading in it: how it was run,
// what is claimed and what is not, the counts, each test and subtest with
// its result and why, and the tests the run left out.
func writePolicyConformance(w io.Writer, r policyConformanceRun) {
	fmt.Fprintf(w, "%s\n\n", policySection)
	fmt.Fprintf(w, "`sudo make conformance-policy` rewrites this section, and `sudo make conformance` after the\n"+
		"Kubernetes suite: it builds the conformance suite of `sigs.k8s.io/network-policy-api` %s (the version reef's go.mod\n"+
		"pins; its `conformance` package, as upstream's `make conformance` runs it) from the Go module proxy,\n"+
		"brings the lab's Kubernetes cluster up (%d nodes with kubelet, kube-proxy, containerd 2 and reef;\n"+
		"docs/kubernetes-lab.md), installs the module's experimental-channel ClusterNetworkPolicy CRD (the\n"+
		"standard channel's prunes node peers and named ports), runs the suite against it and tears it\n"+
		"down. The run's `go test` events are `docs/%s`.\n\n", r.version, r.nodes, r.events)
	fmt.Fprintf(w, "Run of %s UTC: cluster up in %s, suite ran for %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04"),
		r.up.Round(time.Second), r.took.Round(time.Second))
	fmt.Fprintf(w, "The command (in the API server's network namespace):\n\n```\n%s\n```\n\n", strings.Join(r.cmdline, " "))
	fmt.Fprintf(w, "Features claimed: `%s` (the suite's standard tests of the Admin and Baseline tiers, and the\n"+
		"experimental channel's named ports and node peers).\n\n", r.features)
	writePolicyClaims(w, r.skip)
	seen := map[string]bool{}
	for _, t := range r.results {
		seen[strings.TrimPrefix(t.Name, "TestConformance/")] = true
	}
	var leftOut []string
	for _, t := range r.tests {
		if !seen[t.Name] {
			leftOut = append(leftOut, t.Name)
		}
	}
	n := policyCounts(r.results)
	fmt.Fprintf(w, "**%d passed, %d failed, %d skipped** of the suite's %d tests; %d left out by the skip.\n\n",
		n["passed"], n["failed"], n["skipped"], len(r.tests), len(leftOut))
	notProbed := 0
	for _, t := range r.results {
		if strings.Count(t.Name, "/") == 1 && strings.HasSuffix(t.Message, "SCTP probes not run") {
			notProbed++
		}
	}
	fmt.Fprintf(w, "**SCTP.** This machine's kernel has no SCTP, so the suite runs with two patches to its copy\n"+
		"(internal/lab/npconformance.go): the base manifests' SCTP server containers (agnhost porter,\n"+
		"two a pod) are left out, or no pod would become ready; and the probe helper (`PokeServer`)\n"+
		"logs `%s` and returns for an SCTP probe instead of failing the subtest there (its\n"+
		"`require.Eventually` stops a subtest at the first probe that fails, so the TCP and UDP probes\n"+
		"after an SCTP one would never run). %d of the passed tests mix SCTP probes with TCP and UDP ones;\n"+
		"the table says how many SCTP probes each subtest did not run. reef's SCTP rules are checked by the\n"+
		"compiler's unit tests only (policy/), not here. The tests whose name says SCTP probe nothing\n"+
		"else and are left out.\n\n", lab.SCTPNotProbed, notProbed)
	if len(leftOut) > 0 {
		fmt.Fprintf(w, "Left out: %s.\n\n", strings.Join(leftOut, ", "))
	}
	writePolicyResults(w, r.results)
}

// writePolicyClaims writes the features not claimed and, when skip is the
// default one, what it leaves out; each with why.
func writePolicyClaims(w io.Writer, skip string) {
	if len(lab.PolicyConformanceUnclaimed) == 0 {
		fmt.Fprintf(w, "Not claimed: none (every feature of the suite).\n\n")
	} else {
		fmt.Fprintf(w, "Not claimed, and why (their tests skip themselves):\n\n| feature | why |\n|---|---|\n")
		for _, f := range lab.PolicyConformanceUnclaimed {
			fmt.Fprintf(w, "| `%s` | %s |\n", f.Pattern, f.Why)
		}
		fmt.Fprintln(w)
	}
	if skip == lab.SkipExpr(lab.PolicyConformanceSkips) {
		fmt.Fprintf(w, "Left out by `-test.skip /%s`, and why:\n\n| pattern | why |\n|---|---|\n", skip)
		for _, s := range lab.PolicyConformanceSkips {
			fmt.Fprintf(w, "| `%s` | %s |\n", s.Pattern, s.Why)
		}
		fmt.Fprintln(w)
	}
}

// writePolicyResults writes the table of results: a test, then its
// subtests (which end before it).
func writePolicyResults(w io.Writer, results []lab.E2EResult) {
	fmt.Fprintf(w, "| result | test | time | why |\n|---|---|---|---|\n")
	subs := map[string][]lab.E2EResult{}
	for _, t := range results {
		if parts := strings.SplitN(t.Name, "/", 3); len(parts) == 3 {
			subs[parts[1]] = append(subs[parts[1]], t)
		}
	}
	for _, t := range results {
		parts := strings.SplitN(t.Name, "/", 3)
		switch len(parts) {
		case 1:
			writeResultRow(w, t, t.Name+" (setup and the whole run)")
		case 2:
			writeResultRow(w, t, parts[1])
			for _, s := range subs[parts[1]] {
				writeResultRow(w, s, "&nbsp;&nbsp;↳ "+strings.SplitN(s.Name, "/", 3)[2])
			}
		}
	}
}
