// Package e2e tests reef through its real binaries against the real kernel:
// labs of network namespaces (internal/lab), daemons started as systemd
// would, pods wired through libcni. They need root and skip without it.
package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

var binDir string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Println("e2e: skipped: these tests need root (network namespaces, the real daemon)")
		os.Exit(0)
	}
	for _, tool := range []string{"ping", "nsenter", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			fmt.Printf("e2e: %s not installed (make test installs it): %v\n", tool, err)
			os.Exit(1)
		}
	}
	binDir = os.Getenv("REEF_BIN_DIR")
	cleanup := func() {}
	if binDir == "" {
		dir, err := os.MkdirTemp("", "reef-e2e-bin-")
		if err != nil {
			panic(err)
		}
		cleanup = func() { os.RemoveAll(dir) }
		for out, pkg := range map[string]string{"reef": "..", "reef-cni": "../cniserver/shim"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				fmt.Printf("e2e: build %s: %v\n%s", pkg, err, b)
				os.Exit(1)
			}
		}
		binDir = dir
	}
	code := m.Run()
	cleanup()
	if packages.dir != "" {
		os.RemoveAll(packages.dir)
	}
	os.Exit(code)
}

// timerBound marks a test that spends its time waiting on timers (a hold
// time, an idle limit, a retry) rather than on the CPU: such tests run in
// parallel with each other, once the other tests are done (go test resumes
// parallel tests after the sequential ones; make test-e2e runs up to 4 at
// once). Each has its own lab, as every test has.
func timerBound(t *testing.T) { t.Parallel() }

// newLab returns a lab that is torn down when the test ends, whatever the
// outcome; on failure the last lines of the daemons' logs are printed
// first, and with REEF_E2E_LOG_DIR set the whole logs are copied there
// (keepLogs).
func newLab(t *testing.T) *lab.Lab {
	t.Helper()
	l, err := lab.New(binDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range l.Nodes() {
				t.Logf("daemon log of %s:\n%s", n.Name, n.LogTail(40))
			}
			keepLogs(t, l)
		}
		if err := l.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	return l
}

// startNode adds a node with opts and starts its daemon.
func startNode(t *testing.T, l *lab.Lab, name string, opts lab.NodeOptions) *lab.Node {
	t.Helper()
	n, err := l.AddNode(name, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	return n
}

func newPod(t *testing.T, n *lab.Node, name string) *lab.Pod {
	t.Helper()
	p, err := n.NewPod("default", name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs a command in a lab netns and fails the test on error.
func run(t *testing.T, l *lab.Lab, netns string, args ...string) string {
	t.Helper()
	out, err := l.Run(netns, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually polls cond, which describes what it still misses ("" when
// nothing), with poll.For until it returns "", and fails the test with
// what it last missed when the timeout passes.
func eventually(t *testing.T, timeout time.Duration, cond func() string) {
	t.Helper()
	poll.For(t, timeout, func() error {
		if missing := cond(); missing != "" {
			return errors.New(missing)
		}
		return nil
	})
}

// waitPass waits until each node has run a whole reconcile pass that
// began after the call (lab.Node.WaitPass): the event a test needs after
// it changed what a daemon reconciles, or before it checks that a pass
// left something alone. The lab's reconcile interval is 1s.
func waitPass(t *testing.T, nodes ...*lab.Node) {
	t.Helper()
	for _, n := range nodes {
		if err := n.WaitPass(20 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
}

// waitCutOff waits until no BGP session between cut and others is
// established, on either side (what a cut longer than the hold time
// brings: the lab's is 3s), and then for a pass of each node, whose block
// protocol step sees the sessions gone.
func waitCutOff(t *testing.T, cut *lab.Node, others ...*lab.Node) {
	t.Helper()
	eventually(t, 20*time.Second, func() string {
		for _, o := range others {
			for _, pair := range [][2]*lab.Node{{cut, o}, {o, cut}} {
				if s := sessionState(t, pair[0], pair[1]); s == "established" {
					return fmt.Sprintf("%s's session to %s is still established", pair[0].Name, pair[1].Name)
				}
			}
		}
		return ""
	})
	waitPass(t, append([]*lab.Node{cut}, others...)...)
}

// reefRoutes lists the node's routes with reef's protocol.
func reefRoutes(t *testing.T, n *lab.Node) []string {
	t.Helper()
	out := run(t, n.Lab, n.Netns, "ip", "-4", "route", "show", "proto", "238")
	return nonEmptyLines(out)
}

// reefVeths lists the node's reef* veths.
func reefVeths(t *testing.T, n *lab.Node) []string {
	t.Helper()
	var names []string
	for _, l := range nonEmptyLines(run(t, n.Lab, n.Netns, "ip", "-br", "link", "show", "type", "veth")) {
		name, _, _ := strings.Cut(strings.Fields(l)[0], "@")
		if strings.HasPrefix(name, "reef") {
			names = append(names, name)
		}
	}
	return names
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// allocations returns the addresses pods hold on the node, by IP.
func allocations(t *testing.T, n *lab.Node) map[string]string {
	t.Helper()
	rep, err := n.IPAM()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, a := range rep.GetAllocations() {
		if a.GetState() == "reserved" {
			continue // the node's tunnel address: no pod's
		}
		m[a.GetIp()] = a.GetState()
	}
	return m
}

// inParallel runs f on every pod with the given number of workers and
// returns the errors.
func inParallel(pods []*lab.Pod, workers int, f func(*lab.Pod) error) []error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	next := make(chan *lab.Pod)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				if err := f(p); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, p := range pods {
		next <- p
	}
	close(next)
	wg.Wait()
	return errs
}

// slowSuite skips t under make test: t is one of the slower variants of a
// test that make test runs one of (a representative slice, to keep make
// test under 30 minutes); make test-e2e-slow runs them all
// (REEF_E2E_SLOW=1).
func slowSuite(t *testing.T) {
	t.Helper()
	if os.Getenv("REEF_E2E_SLOW") == "" {
		t.Skip("a slower variant: make test-e2e-slow runs it (REEF_E2E_SLOW=1)")
	}
}

// keepLogs copies the whole daemon log of every node of a failed test to
// $REEF_E2E_LOG_DIR/<test>/<node>.log, when that is set: the failure dump
// keeps 40 lines, and a fault that came minutes before the failure needs
// more (make test leaves it unset).
func keepLogs(t *testing.T, l *lab.Lab) {
	dir := os.Getenv("REEF_E2E_LOG_DIR")
	if dir == "" {
		return
	}
	dir = filepath.Join(dir, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("keep logs: %v", err)
		return
	}
	for _, n := range l.Nodes() {
		if err := os.WriteFile(filepath.Join(dir, n.Name+".log"), []byte(n.Log()), 0o644); err != nil {
			t.Logf("keep logs: %v", err)
		}
	}
	t.Logf("whole daemon logs in %s", dir)
}
