// Package lab builds throw-away reef clusters out of network namespaces on
// one machine: a switch namespace with a bridge for the underlay, one
// namespace per node running the real `reef daemon`, and pod namespaces
// wired through libcni and the real reef-cni, the way a runtime does it.
// The e2e tests, `make demo` and `make bench` are built on it.
//
// Every name a lab creates starts with its prefix "rl<pid>x<n>", so labs
// of concurrent test binaries never meet, and New removes what labs of
// dead processes left behind (netns, daemons, work dirs).
package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// BaseDir holds the work dirs of all labs on this machine.
const BaseDir = "/tmp/reef-lab"

// Underlay is the subnet of the lab's switch; node i gets .10+i.
var Underlay = netip.MustParsePrefix("192.168.77.0/24")

var labSeq atomic.Int32

// Lab is one throw-away cluster.
type Lab struct {
	Prefix string // "rl<pid>x<n>": starts every netns and dir name
	Dir    string
	BinDir string // holds reef and reef-cni
	Switch string // netns of the underlay bridge
	// Voters is the cluster's bgp.voters, written into the config of every
	// node whose bgp: section the lab generates and whose BGPExtra names
	// none. AddMesh sets it to the mesh's first nodes (at most 5) when it
	// is empty, so nodes added later join that cluster.
	Voters []netip.Addr

	mu      sync.Mutex
	nodes   []*Node
	pods    []*Pod
	netns   []string
	spawned []func()
	dropped map[string]bool // switch ports whose frames DropNode drops
	subnetB int             // nodes on SubnetB so far
	cross   bool            // AddCrossRouter ran
	laptop  bool            // AddLaptop ran
}

// New creates an empty lab: the switch namespace with its bridge. binDir
// must hold the built reef and reef-cni.
func New(binDir string) (*Lab, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the lab needs root (network namespaces)")
	}
	for _, b := range []string{"reef", "reef-cni"} {
		if _, err := os.Stat(filepath.Join(binDir, b)); err != nil {
			return nil, fmt.Errorf("lab: %s not built in %s (run make build): %w", b, binDir, err)
		}
	}
	CleanStale()
	prefix := fmt.Sprintf("rl%dx%d", os.Getpid(), labSeq.Add(1))
	l := &Lab{Prefix: prefix, Dir: filepath.Join(BaseDir, prefix), BinDir: binDir, Switch: prefix + "-sw"}
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := l.AddNetns(l.Switch); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.IP(l.Switch, "link", "add", "br0", "type", "bridge"); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.IP(l.Switch, "link", "set", "br0", "up"); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Close stops every daemon and deletes every namespace and file of the lab.
// It is safe to call more than once and after a failed New.
func (l *Lab) Close() error {
	l.mu.Lock()
	nodes, nss, spawned := l.nodes, l.netns, l.spawned
	l.nodes, l.netns, l.pods, l.spawned = nil, nil, nil, nil
	l.mu.Unlock()
	var errs []error
	for _, stop := range spawned {
		stop()
	}
	// With REEF_PROFILE_DIR set (a developer profiling the daemons) they
	// stop with SIGTERM, so that they write their profiles; all in
	// parallel, as a lab of 50 takes a while.
	profiling := os.Getenv("REEF_PROFILE_DIR") != ""
	var wg sync.WaitGroup
	for _, n := range nodes {
		if profiling {
			wg.Go(func() { n.Stop() })
			continue
		}
		n.Kill()
	}
	wg.Wait()
	// Pods first, then nodes, then the switch: deleting a namespace takes
	// its veth ends with it.
	for i := len(nss) - 1; i >= 0; i-- {
		if err := exec.Command("ip", "netns", "del", nss[i]).Run(); err != nil && netnsExists(nss[i]) {
			errs = append(errs, fmt.Errorf("delete netns %s: %w", nss[i], err))
		}
	}
	if err := os.RemoveAll(l.Dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// AddNetns creates a named network namespace owned by the lab, with lo up.
// It runs `ip netns add` as a child of this process, which keeps the
// namespace's bind mount in this mount namespace (`ip netns exec` would
// hide it from everyone else).
func (l *Lab) AddNetns(name string) error {
	exec.Command("ip", "netns", "del", name).Run() // a leftover of the same name
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %v: %s", name, err, out)
	}
	l.mu.Lock()
	l.netns = append(l.netns, name)
	l.mu.Unlock()
	return l.IP(name, "link", "set", "lo", "up")
}

// DelNetns deletes a lab namespace now (a pod whose sandbox vanished).
func (l *Lab) DelNetns(name string) error {
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns del %s: %v: %s", name, err, out)
	}
	return nil
}

// NetnsPath is where a named namespace is mounted.
func NetnsPath(name string) string { return "/var/run/netns/" + name }

func netnsExists(name string) bool {
	_, err := os.Stat(NetnsPath(name))
	return err == nil
}

// IP runs `ip -n netns args...`.
func (l *Lab) IP(netns string, args ...string) error {
	_, err := l.Run(netns, append([]string{"ip"}, args...)...)
	return err
}

// Run runs a command in a namespace (through nsenter, so only the network
// namespace changes) and returns its combined output.
func (l *Lab) Run(netns string, args ...string) (string, error) {
	return l.RunContext(context.Background(), netns, args...)
}

// RunContext is Run with a context that bounds the command.
func (l *Lab) RunContext(ctx context.Context, netns string, args ...string) (string, error) {
	full := append([]string{"--net=" + NetnsPath(netns), "--"}, args...)
	out, err := exec.CommandContext(ctx, "nsenter", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("in %s: %s: %v: %s", netns, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// Nodes returns the lab's nodes in creation order.
func (l *Lab) Nodes() []*Node {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*Node(nil), l.nodes...)
}

var stalePrefix = regexp.MustCompile(`^rl(\d+)x\d+`)

// CleanStale removes what labs of processes that no longer run left
// behind: daemons, namespaces and work dirs. Labs of live processes are
// left alone.
func CleanStale() {
	dead := func(name string) bool {
		m := stalePrefix.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, _ := strconv.Atoi(m[1])
		return pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH
	}
	// Daemons first: their command lines name their dir.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		cmd := string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		i := strings.Index(cmd, BaseDir+"/")
		if i < 0 {
			continue
		}
		rest := cmd[i+len(BaseDir)+1:]
		if dead(rest) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	entries, _ := os.ReadDir("/var/run/netns")
	var stale []string
	for _, e := range entries {
		if dead(e.Name()) {
			stale = append(stale, e.Name())
		}
	}
	// Pods ("-p") before nodes before switches, as in Close.
	for _, pass := range []func(string) bool{
		func(n string) bool { return strings.Contains(n, "-p") },
		func(n string) bool { return !strings.HasSuffix(n, "-sw") },
		func(string) bool { return true },
	} {
		for _, n := range stale {
			if pass(n) && netnsExists(n) {
				exec.Command("ip", "netns", "del", n).Run()
			}
		}
	}
	dirs, _ := os.ReadDir(BaseDir)
	for _, d := range dirs {
		if dead(d.Name()) {
			cleanStaleContainerd(filepath.Join(BaseDir, d.Name())) // mounts, sandbox netns (containerd.go)
			os.RemoveAll(filepath.Join(BaseDir, d.Name()))
		}
	}
}
