package lab

import (
	"cmp"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// The upstream end-to-end suite against the lab's cluster: e2e.test of the
// cluster's release, run in the API's namespace (it reaches the API and
// every node's address from there), with the admin kubeconfig.

// ConformanceFocus is what `make conformance` runs (issue 27): every
// [sig-network] conformance test, the NetworkPolicy suite, HostPort, DNS,
// the Networking granular checks, Services and Conntrack.
const ConformanceFocus = `\[sig-network\] (.*\[Conformance\]|Netpol|HostPort|DNS|Networking|Services|Conntrack)`

// E2ESkip is a pattern of a run's skip expression and why it is there.
type E2ESkip struct{ Pattern, Why string }

// ConformanceSkips are what this lab cannot run, each with the reason
// docs/conformance.md gives.
var ConformanceSkips = []E2ESkip{
	{`SCTP`, "the kernel of this machine has no SCTP module"},
	{`IPv6|[Dd]ual[Ss]tack`, "needs a dual-stack cluster, which this run's is not: make conformance-dualstack runs them on one (the dual-stack section below)"},
	{`LoadBalancer`, "a Service of type LoadBalancer needs a cloud provider's load balancer (reef's own is issue 30)"},
	{`\[Feature:Ingress`, "needs an Ingress controller, which is not a pod network's"},
	{`should be able to reach outside|Forward PTR lookup|Forward external name lookup|Internet connection|\[Feature:Networking-DNS\]`, "needs the internet (8.8.8.8, google.com), which the lab does not reach"},
	{`IPerf2`, "its parser reads iperf 2.0's enhanced CSV (17 fields a line); Debian 12's iperf 2.1.8, the one this lab's agnhost could carry, prints 9 with the same flags (run of 2026-12-03: 8.6-9.7 Gbit/s between pods through the Service, then 'incorrect fields in the output ... (9 out of 17)')"},
	{`\[Disruptive\]|\[Flaky\]`, "the suite's own disruptive and flaky tests, which conformance runs leave out"},
}

// ConformanceSkip is ConformanceSkips as one expression.
var ConformanceSkip = SkipExpr(ConformanceSkips)

// DualStackFocus is what `make conformance-dualstack` runs on a
// dual-stack cluster (issue 29): the upstream dual-stack tests.
const DualStackFocus = `\[Feature:IPv6DualStack\]`

// DualStackSkips are the dual-stack tests that do not apply to reef in
// this lab, each with the reason docs/conformance.md gives.
var DualStackSkips = []E2ESkip{
	{`SCTP`, "the kernel of this machine has no SCTP module"},
	{`LoadBalancer`, "a Service of type LoadBalancer needs a cloud provider's load balancer (reef's own is issue 30)"},
	{`\[Disruptive\]|\[Flaky\]`, "the suite's own disruptive and flaky tests, which conformance runs leave out"},
}

// DualStackSkip is DualStackSkips as one expression.
var DualStackSkip = SkipExpr(DualStackSkips)

// SkipExpr joins the patterns of skips into one expression.
func SkipExpr(skips []E2ESkip) string {
	var ps []string
	for _, s := range skips {
		ps = append(ps, s.Pattern)
	}
	return strings.Join(ps, "|")
}

// CISliceFocus is the slice `make test` runs (e2e TestKubernetesCluster/ConformanceSlice):
// the pod-pod and node-pod granular checks and a handful of NetworkPolicy
// cases.
const CISliceFocus = `\[sig-network\] (Networking Granular Checks: Pods should function for (intra-pod|node-pod) communication: (http|udp)|` +
	`Netpol NetworkPolicy between server and client should (support a 'default-deny-ingress' policy|enforce policy based on Ports|allow ingress access on one named port|enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector) )`

// E2EOptions shape a run of e2e.test.
type E2EOptions struct {
	Focus, Skip string
	// ReportDir receives junit_01.xml and e2e.log.
	ReportDir string
	// Timeout is ginkgo's for the whole run; 0 means 2h.
	Timeout time.Duration
	// Out, if set, receives e2e.test's output as it runs.
	Out io.Writer
	// Procs > 1 runs the tests in that many processes through the ginkgo
	// runner, as hack/ginkgo-e2e.sh does; [Serial] tests run alone at
	// the end.
	Procs int
}

// E2EResult is one test of a run.
type E2EResult struct {
	Name     string
	State    string // passed, failed, skipped
	Message  string // the failure, or why it was skipped
	Duration time.Duration
}

// RunE2E runs e2e.test against the cluster and returns each test that was
// selected, with its result. The error is e2e.test's when it reports no
// results; failed tests are in the results.
func (c *Cluster) RunE2E(ctx context.Context, opts E2EOptions) ([]E2EResult, error) {
	bin, err := exec.LookPath(filepath.Join(KubeBinDir(), "e2e.test"))
	if err != nil {
		return nil, fmt.Errorf("lab: e2e.test not found in %s (run make deps-k8s): %w", KubeBinDir(), err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 2 * time.Hour
	}
	if err := os.MkdirAll(opts.ReportDir, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(opts.ReportDir, "e2e.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	e2eArgs := []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--provider=skeleton",
		"--kubectl-path=" + c.bins["kubectl"],
		"--dns-domain=cluster.local",
		"--report-dir=" + opts.ReportDir,
		// As hack/ginkgo-e2e.sh passes NUM_NODES: without it the
		// framework's node count stays -1 and every test that wants
		// two nodes or more (the Services granular checks, the
		// NodePort externalTrafficPolicy=Local test) skips itself.
		fmt.Sprintf("--num-nodes=%d", len(c.Nodes)),
	}
	ginkgoArgs := []string{"focus=" + opts.Focus, "no-color", "timeout=" + opts.Timeout.String()}
	if opts.Skip != "" {
		ginkgoArgs = append(ginkgoArgs, "skip="+opts.Skip)
	}
	args := []string{"--net=" + NetnsPath(c.API.Netns), "--"}
	if opts.Procs > 1 {
		runner, err := exec.LookPath(filepath.Join(KubeBinDir(), "ginkgo"))
		if err != nil {
			return nil, fmt.Errorf("lab: ginkgo not found in %s (run make deps-k8s): %w", KubeBinDir(), err)
		}
		args = append(args, runner, fmt.Sprintf("--procs=%d", opts.Procs))
		for _, a := range ginkgoArgs {
			args = append(args, "--"+a)
		}
		args = append(append(args, bin, "--"), e2eArgs...)
	} else {
		args = append(append(args, bin), e2eArgs...)
		for _, a := range ginkgoArgs {
			args = append(args, "--ginkgo."+a)
		}
	}
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	var out io.Writer = logf
	if opts.Out != nil {
		out = io.MultiWriter(logf, opts.Out)
	}
	cmd.Stdout, cmd.Stderr = out, out
	// e2e.test runs kubectl, which reads KUBECONFIG, and writes nothing
	// outside the report dir.
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "HOME="+opts.ReportDir)
	cmd.Dir = opts.ReportDir
	runErr := cmd.Run()
	results, err := ReadJUnit(filepath.Join(opts.ReportDir, "junit_01.xml"))
	if err != nil {
		return nil, fmt.Errorf("e2e.test: %v; its report: %w\n%s", runErr, err, logTail(logf.Name(), 30))
	}
	return results, nil
}

// junitDoc is the part of ginkgo's JUnit report that is read here.
type junitDoc struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// readJUnitDoc reads the JUnit report at path.
func readJUnitDoc(path string) (junitDoc, error) {
	var doc junitDoc
	b, err := os.ReadFile(path)
	if err != nil {
		return doc, err
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return doc, fmt.Errorf("%s: %w", path, err)
	}
	return doc, nil
}

// ReadJUnit reads the JUnit report of e2e.test (ginkgo's): the tests that
// ran or were skipped for a reason, leaving out those the focus and skip
// expressions filtered.
func ReadJUnit(path string) ([]E2EResult, error) {
	doc, err := readJUnitDoc(path)
	if err != nil {
		return nil, err
	}
	var out []E2EResult
	for _, s := range doc.Suites {
		for _, tc := range s.Cases {
			r := E2EResult{Name: strings.TrimPrefix(tc.Name, "[It] "), State: tc.Status, Duration: time.Duration(tc.Time * float64(time.Second))}
			switch {
			case tc.Failure != nil:
				// ginkgo leaves the attribute empty and writes the
				// failure into the element.
				r.State, r.Message = "failed", strings.TrimSpace(cmp.Or(tc.Failure.Message, tc.Failure.Text))
			case tc.Error != nil:
				r.State, r.Message = "failed", strings.TrimSpace(tc.Error.Message)
			case tc.Skipped != nil:
				r.State, r.Message = "skipped", strings.TrimSpace(tc.Skipped.Message)
			}
			// Specs the focus and skip expressions left out are in the
			// report as skipped, with the bare message "skipped"; a test
			// that skips itself says why.
			if r.State == "skipped" && (r.Message == "skipped" || r.Message == "") {
				continue
			}
			// The suite's own setup and teardown are not tests.
			if strings.HasPrefix(r.Name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(r.Name, "[SynchronizedAfterSuite]") ||
				strings.HasPrefix(r.Name, "[ReportAfterSuite]") || strings.HasPrefix(r.Name, "[ReportBeforeSuite]") {
				if r.State != "failed" {
					continue
				}
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil, errors.New("no test ran")
	}
	return out, nil
}

// LeftOut are the tests of the JUnit report at path that focus selects
// and skip leaves out: what a summary names as not run by choice, each
// with the skip's reasons. The expressions are matched against the test's
// name, as ginkgo matches them against its full text.
func LeftOut(path, focus, skip string) ([]string, error) {
	if skip == "" {
		return nil, nil
	}
	fre, err := regexp.Compile(focus)
	if err != nil {
		return nil, err
	}
	sre, err := regexp.Compile(skip)
	if err != nil {
		return nil, err
	}
	doc, err := readJUnitDoc(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range doc.Suites {
		for _, tc := range s.Cases {
			name := strings.TrimPrefix(tc.Name, "[It] ")
			if fre.MatchString(name) && sre.MatchString(name) {
				out = append(out, name)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// E2ECounts counts results by state.
func E2ECounts(rs []E2EResult) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[r.State]++
	}
	return m
}
