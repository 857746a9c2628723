package lab

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// The network-policy-api conformance suite (sigs.k8s.io/network-policy-api
// conformance, the module reef's go.mod pins) against reef in the lab's
// cluster: its test binary, built here from the module proxy's copy of the
// module, run in the API's namespace with the admin kubeconfig, as
// upstream's `make conformance` runs `go test ./conformance -run
// '^TestConformance$' -args --supported-features=...`.

// NetpolAPIModule is the module of the suite and the CRD.
const NetpolAPIModule = "sigs.k8s.io/network-policy-api"

// PolicyConformanceFeatures are the suite's features reef claims: the
// standard ClusterNetworkPolicy tests (Admin and Baseline tiers) and the
// experimental channel's named ports and node peers.
const PolicyConformanceFeatures = "ClusterNetworkPolicy,ClusterNetworkPolicyNamedPorts,ClusterNetworkPolicyEgressNodePeers"

// PolicyConformanceUnclaimed are the suite's optional features reef does
// not claim, and why; their tests skip themselves ("suite does not
// support ..."). None: v0.3.0's suite has no feature reef leaves out.
var PolicyConformanceUnclaimed []E2ESkip

// PolicyConformanceSkips are the suite's tests this lab leaves out
// (go test -skip, one pattern per entry, matched against the test's
// name), and why.
var PolicyConformanceSkips = []E2ESkip{
	{"SCTP", "the kernel of this machine has no SCTP (socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP): protocol not supported), so agnhost's SCTP servers cannot listen; the base manifests' two SCTP server containers of each pod are left out for the same reason (PatchPolicyManifests)"},
}

// PolicyConformanceSuite is the suite's test binary and where it came from.
type PolicyConformanceSuite struct {
	Bin     string // the test binary
	Src     string // the module's copy it was built from (manifests patched)
	Version string // of the module
	CRD     string // the experimental channel's ClusterNetworkPolicy CRD (node peers and named ports)
}

// BuildPolicyConformance builds the suite's test binary under cache from
// the module at the version of the go.mod in dir (reef's), downloaded
// through the module proxy with the versions of the module's own go.mod,
// its base manifests patched (PatchPolicyManifests). A binary built from
// the same inputs is reused.
func BuildPolicyConformance(ctx context.Context, goCmd, dir, cache string) (*PolicyConformanceSuite, error) {
	if goCmd == "" {
		goCmd = "go"
	}
	cmd := exec.CommandContext(ctx, goCmd, "list", "-m", "-f", "{{.Version}}", NetpolAPIModule)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m %s in %s: %w", NetpolAPIModule, dir, err)
	}
	version := strings.TrimSpace(string(out))
	out, err = exec.CommandContext(ctx, goCmd, "mod", "download", "-json", NetpolAPIModule+"@"+version).Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s@%s: %w", NetpolAPIModule, version, err)
	}
	var dl struct{ Dir, Error string }
	if err := json.Unmarshal(out, &dl); err != nil || dl.Dir == "" {
		return nil, fmt.Errorf("go mod download %s@%s: %v %s", NetpolAPIModule, version, err, dl.Error)
	}
	manifests := filepath.Join("conformance", "base", "manifests.yaml")
	orig, err := os.ReadFile(filepath.Join(dl.Dir, manifests))
	if err != nil {
		return nil, err
	}
	patched := PatchPolicyManifests(orig)
	helper := filepath.Join("conformance", "utils", "kubernetes", "helper.go")
	origHelper, err := os.ReadFile(filepath.Join(dl.Dir, helper))
	if err != nil {
		return nil, err
	}
	patchedHelper, err := PatchPolicyProbes(origHelper)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dl.Dir, helper), err)
	}
	goVersion, _ := exec.CommandContext(ctx, goCmd, "env", "GOVERSION").Output()
	h := sha256.New()
	fmt.Fprintf(h, "%s %s %s %s\n", version, bytes.TrimSpace(goVersion), patched, patchedHelper)
	id := hex.EncodeToString(h.Sum(nil))[:16]
	s := &PolicyConformanceSuite{
		Bin:     filepath.Join(cache, "netpol-conformance-"+version+"-"+id+".test"),
		Src:     filepath.Join(cache, "network-policy-api@"+version),
		Version: version,
		CRD:     filepath.Join(dl.Dir, "config", "crd", "experimental", "policy.networking.k8s.io_clusternetworkpolicies.yaml"),
	}
	if _, err := os.Stat(s.Bin); err == nil {
		if _, err := os.Stat(s.Src); err == nil {
			return s, nil
		}
	}
	if err := os.RemoveAll(s.Src); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	// The module cache is read-only: a writable copy to patch and build.
	if b, err := exec.CommandContext(ctx, "cp", "-r", dl.Dir, s.Src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("cp -r %s %s: %w: %s", dl.Dir, s.Src, err, b)
	}
	if b, err := exec.CommandContext(ctx, "chmod", "-R", "u+w", s.Src).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("chmod -R u+w %s: %w: %s", s.Src, err, b)
	}
	if err := os.WriteFile(filepath.Join(s.Src, manifests), patched, 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.Src, helper), patchedHelper, 0o644); err != nil {
		return nil, err
	}
	build := exec.CommandContext(ctx, goCmd, "test", "-c", "-o", s.Bin+".tmp", "./conformance")
	build.Dir = s.Src
	// The module's own go.mod and go.sum pick the versions; GOWORK=off
	// keeps any workspace out.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	if b, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go test -c ./conformance in %s: %w\n%s", s.Src, err, b)
	}
	return s, os.Rename(s.Bin+".tmp", s.Bin)
}

// PatchPolicyManifests drops, from the suite's base manifests, the
// containers that serve SCTP (agnhost porter with a SERVE_SCTP_PORT_
// variable): on a kernel without SCTP they exit at once, their pods never
// become ready and the suite's setup fails every test. Everything else
// stays as upstream wrote it.
func PatchPolicyManifests(doc []byte) []byte {
	lines := strings.SplitAfter(string(doc), "\n")
	var out []string
	col := -1 // the column of a containers list's entries, while in one
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		t := strings.TrimLeft(l, " ")
		ind := len(l) - len(t)
		switch {
		case strings.TrimSpace(l) == "containers:":
			col = -2 // the list's first entry sets its column
		case col == -2 && strings.HasPrefix(t, "- "):
			col = ind
		case col >= 0 && strings.TrimSpace(l) != "" && (ind < col || ind == col && !strings.HasPrefix(t, "- ")):
			col = -1
		}
		if col < 0 || ind != col || !strings.HasPrefix(t, "- ") {
			out = append(out, l)
			continue
		}
		// A container: its entry line and every line indented deeper.
		j := i + 1
		for j < len(lines) && (strings.TrimSpace(lines[j]) == "" || len(lines[j])-len(strings.TrimLeft(lines[j], " ")) > col) {
			j++
		}
		if !strings.Contains(strings.Join(lines[i:j], ""), "SERVE_SCTP_PORT_") {
			out = append(out, lines[i:j]...)
		}
		i = j - 1
	}
	return []byte(strings.Join(out, ""))
}

// SCTPNotProbed is what the patched suite logs for each SCTP probe it
// does not run (PatchPolicyProbes).
const SCTPNotProbed = "reef-lab: SCTP probe not run"

// pokeServerHead is the first line of the suite's probe helper.
const pokeServerHead = "func PokeServer(t *testing.T, client k8sclient.Interface, kubeConfig *rest.Config, clientNamespace, clientPod, protocol, targetHost string, targetPort int32, timeoutConfig config.TimeoutConfig, shouldConnect bool) {\n"

// PatchPolicyProbes makes the suite's probe helper (PokeServer in
// conformance/utils/kubernetes/helper.go) log SCTPNotProbed and return for
// an SCTP probe: on a kernel without SCTP, agnhost connect cannot open
// the socket ("OTHER: protocol not supported"), and the helper's
// require.Eventually stops the subtest there, so the TCP and UDP probes
// after it would never run. The tests whose names say SCTP probe nothing
// else and stay left out (PolicyConformanceSkips); the summary counts
// the probes not run, test by test.
func PatchPolicyProbes(src []byte) ([]byte, error) {
	if bytes.Count(src, []byte(pokeServerHead)) != 1 {
		return nil, fmt.Errorf("PokeServer's signature is not the one patched (network-policy-api v0.3.0's)")
	}
	guard := "\tif protocol == \"sctp\" {\n\t\tt.Logf(\"" + SCTPNotProbed + " (this kernel has no SCTP): %s/%s to %s:%d, want connect=%t\", clientNamespace, clientPod, targetHost, targetPort, shouldConnect)\n\t\treturn\n\t}\n"
	return bytes.Replace(src, []byte(pokeServerHead), []byte(pokeServerHead+guard), 1), nil
}

// PolicyConformanceTest is a test of the suite as its source declares it.
type PolicyConformanceTest struct {
	Name     string   // ShortName
	Features []string // suite.Support... without the prefix
}

var (
	shortNameRE = regexp.MustCompile(`ShortName:\s*"([^"]+)"`)
	featuresRE  = regexp.MustCompile(`(?s)^.*?Features:\s*\[\]suite\.SupportedFeature\{([^}]*)\}`)
	featureRE   = regexp.MustCompile(`suite\.Support(\w+)`)
)

// PolicyConformanceTests reads the suite's tests from its source
// (conformance/tests/*.go of src): the tests a -skip leaves out appear
// in no output of the run.
func PolicyConformanceTests(src string) ([]PolicyConformanceTest, error) {
	files, err := filepath.Glob(filepath.Join(src, "conformance", "tests", "*.go"))
	if err != nil {
		return nil, err
	}
	var ts []PolicyConformanceTest
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range shortNameRE.FindAllSubmatchIndex(b, -1) {
			t := PolicyConformanceTest{Name: string(b[m[2]:m[3]])}
			if fm := featuresRE.FindSubmatch(b[m[1]:]); fm != nil {
				for _, f := range featureRE.FindAllSubmatch(fm[1], -1) {
					t.Features = append(t.Features, string(f[1]))
				}
			}
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	return ts, nil
}

// PolicyConformanceOptions shape a run of the suite.
type PolicyConformanceOptions struct {
	Suite *PolicyConformanceSuite
	// Features is --supported-features; Skip is go test's -skip.
	Features, Skip string
	// ReportDir receives the run's test2json events (events.json).
	ReportDir string
	// Timeout is go test's -timeout; 0 means 1h.
	Timeout time.Duration
	// Out, if set, receives the tests' output as it runs.
	Out io.Writer
	// Go is the go command (for go tool test2json); default "go".
	Go string
	// Args are the command line, for the record.
	Args []string
}

// RunPolicyConformance installs the suite's CRD (the experimental
// channel's ClusterNetworkPolicy, whose node peers and named ports the
// standard channel's prunes) and runs the suite against the cluster; it returns
// each test and subtest under TestConformance with its result, and
// TestConformance itself last. The error is the run's when it reports no
// result.
func (c *Cluster) RunPolicyConformance(ctx context.Context, opts PolicyConformanceOptions) ([]E2EResult, []string, error) {
	crd, err := os.ReadFile(opts.Suite.CRD)
	if err != nil {
		return nil, nil, err
	}
	if err := c.API.ApplyCRDs(opts.Suite.CRD, crd); err != nil {
		return nil, nil, err
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Hour
	}
	if opts.Go == "" {
		opts.Go = "go"
	}
	if err := os.MkdirAll(opts.ReportDir, 0o755); err != nil {
		return nil, nil, err
	}
	args := []string{opts.Suite.Bin, "-test.v=test2json", "-test.run", "^TestConformance$", "-test.timeout", opts.Timeout.String()}
	if opts.Skip != "" {
		args = append(args, "-test.skip", "/"+opts.Skip)
	}
	args = append(args, "--supported-features="+opts.Features)
	cmdline := append([]string{"KUBECONFIG=" + c.Kubeconfig}, args...)
	full := append([]string{"--net=" + NetnsPath(c.API.Netns), "--", opts.Go, "tool", "test2json", "-t", "-p", "conformance"}, args...)
	events, err := os.Create(filepath.Join(opts.ReportDir, "events.json"))
	if err != nil {
		return nil, nil, err
	}
	defer events.Close()
	cmd := exec.CommandContext(ctx, "nsenter", full...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "HOME="+opts.ReportDir)
	cmd.Dir = opts.ReportDir
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(events, pw), os.Stderr
	done := make(chan []E2EResult)
	go func() {
		rs, _ := ReadTest2JSON(pr, opts.Out)
		io.Copy(io.Discard, pr)
		done <- rs
	}()
	runErr := cmd.Run()
	pw.Close()
	results := <-done
	if len(results) == 0 {
		return nil, cmdline, fmt.Errorf("the conformance suite reported no test: %v", runErr)
	}
	return results, cmdline, nil
}

// test2jsonEvent is a line of go tool test2json.
type test2jsonEvent struct {
	Action  string
	Test    string
	Output  string
	Elapsed float64
}

// ReadTest2JSON reads go tool test2json's events and returns each test
// that ended (passed, failed, skipped) in the order they ended, with why
// for a failure or a skip: the first line of its own output that says
// so. out, if set, receives the output lines.
func ReadTest2JSON(r io.Reader, out io.Writer) ([]E2EResult, error) {
	logs := map[string][]string{}
	var rs []E2EResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e test2jsonEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		switch e.Action {
		case "output":
			if out != nil {
				io.WriteString(out, e.Output)
			}
			if e.Test != "" {
				logs[e.Test] = append(logs[e.Test], strings.TrimRight(e.Output, "\n"))
			}
		case "pass", "fail", "skip":
			if e.Test == "" {
				continue
			}
			state := map[string]string{"pass": "passed", "fail": "failed", "skip": "skipped"}[e.Action]
			rs = append(rs, E2EResult{Name: e.Test, State: state, Message: why(state, logs[e.Test]),
				Duration: time.Duration(e.Elapsed * float64(time.Second))})
		}
	}
	return rs, sc.Err()
}

// why says, for a test that passed, how many SCTP probes it did not
// run, and why a test failed or was skipped: for a failure, the
// protocols of the probes that failed (go test prints "FAILED Command was
// [/agnhost connect --timeout=3s --protocol=sctp ...]" for each) and the
// first line that says what was expected; for a skip, the line that says
// so.
func why(state string, lines []string) string {
	switch state {
	case "passed":
		n := 0
		for _, l := range lines {
			if strings.Contains(l, SCTPNotProbed) {
				n++
			}
		}
		if n > 0 {
			return fmt.Sprintf("%d SCTP probes not run", n)
		}
	case "skipped":
		for _, l := range lines {
			if strings.Contains(strings.ToLower(l), "skip") {
				return strings.TrimSpace(l)
			}
		}
	case "failed":
		var protos []string
		var expected, other string
		for _, l := range lines {
			t := strings.TrimSpace(l)
			if m := probeRE.FindStringSubmatch(t); m != nil {
				if !slices.Contains(protos, m[1]) {
					protos = append(protos, m[1])
				}
				continue
			}
			lower := strings.ToLower(t)
			if expected == "" && strings.Contains(lower, "expected") {
				expected = t
			}
			if other == "" && (strings.Contains(lower, "fail") || strings.Contains(lower, "error")) && !strings.HasPrefix(t, "--- ") {
				other = t
			}
		}
		msg := cmp.Or(expected, other)
		if len(protos) > 0 {
			sort.Strings(protos)
			return "probes failed: " + strings.Join(protos, ", ") + "; " + msg
		}
		return msg
	}
	return ""
}

// probeRE is the suite's line for a probe that did not get the result
// wanted, and its protocol.
var probeRE = regexp.MustCompile(`FAILED Command was \[/agnhost connect .*--protocol=(\w+)`)

// FailedOnlyOn says whether a failed test's probes that failed were all
// of protocol proto (why's "probes failed: sctp;").
func FailedOnlyOn(r E2EResult, proto string) bool {
	return r.State == "failed" && strings.HasPrefix(r.Message, "probes failed: "+proto+";")
}
