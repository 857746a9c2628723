package lab

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"strconv"

	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/reefcni/reef/daemon"
	"github.com/reefcni/reef/internal/poll"
	reefv1 "github.com/reefcni/reef/proto"
)

// NodeOptions shape a node's configuration.
type NodeOptions struct {
	// Extra is appended to the generated config.yaml (YAML lines), e.g.
	// "pools:\n  - cidr: 10.245.0.0/24\n".
	Extra string
	// ReconcileInterval defaults to 1s in the lab so drift tests are quick.
	ReconcileInterval time.Duration
	// Env adds environment variables to the daemon.
	Env []string
	// Binary is the daemon's binary in the lab's BinDir: "reef", or
	// "reef-test", the daemon built with the reeftest tag, which reads
	// the test hooks (REEF_TEST_*) from Env; `make build` builds both.
	Binary string
	// Peers and PeerPrefixes become bgp.peers and bgp.peerPrefixes; with
	// either set, the BGP timers are the lab's fast ones (keepalive 1s,
	// hold 3s) unless BGP overrides the whole section.
	Peers        []netip.Addr
	PeerPrefixes []netip.Prefix
	// BGP, if set, is the whole bgp: section (YAML, indented two spaces).
	BGP string
	// HoldTime, if set, replaces the lab's 3s hold time (keepalive: a
	// third of it).
	HoldTime time.Duration
	// BGPExtra is appended to the generated bgp: section (YAML lines
	// indented two spaces, such as "  voters: [...]\n").
	BGPExtra string
	// IPv6Only makes an IPv6-only node (docs/design.md, "IPv6-only
	// nodes"): eth0 has its IPv6 address on Underlay6, or SubnetB6 with
	// SubnetB (NodeAddress6), and
	// no IPv4 address; the config has no nodeAddress, and the IPv4
	// address the node would have had (Address) is its bgp.routerID.
	// Peers and PeerPrefixes are then IPv6.
	IPv6Only bool
	// SubnetB puts the node on the second underlay subnet (SubnetB, bridge
	// br1), behind the router AddCrossRouter makes.
	SubnetB bool
	// RouterASN, with AddCrossNodes, makes the router every node's
	// external BGP peer in that AS (its leg on the node's subnet).
	RouterASN uint32
	// RouterPassword, if set, is the TCP MD5 key of those sessions.
	RouterPassword string
	// RouterExtra is appended to each node's external peer entry (YAML
	// lines indented six spaces, such as "      holdTime: 90s\n").
	RouterExtra string
	// Nice, if set, runs the daemon at this nice value (nice(1); negative
	// is more CPU): a benchmark's stand-in for a node on a machine of its
	// own, such as a route reflector among a hundred clients on 2 cores.
	Nice int
	// Command, if set, makes the daemon's process at each start in place
	// of the lab's (its binary with the node's config in the node's
	// namespace; Binary, Env and Nice are then unused): a daemon run
	// another way, such as the installed package's as reef.service runs
	// it (e2e/package_helpers_test.go). Every step of it must exec, so
	// that the process is the daemon's; the lab sets its output to
	// LogPath. Such a node's Config, StateDir and Socket are the ones
	// that daemon uses, and the lab does not initialise its store.
	Command func() (*exec.Cmd, error)
}

// NodeAddress is the underlay address node i (0-based, in creation order)
// gets, so that a test can write peers before the nodes exist.
func NodeAddress(i int) netip.Addr {
	a := Underlay.Addr()
	for j := 0; j < 10+i+1; j++ {
		a = a.Next()
	}
	return a
}

// Node is one lab node: a namespace with an underlay interface eth0 and a
// reef daemon running in it.
type Node struct {
	Lab        *Lab
	Name       string // node name, also in the netns name
	Netns      string
	Address    netip.Addr // on an IPv6-only node, its router ID (on no interface)
	Dir        string
	Config     string // path of config.yaml
	StateDir   string
	Socket     string
	PendingDir string
	LogPath    string
	opts       NodeOptions
	mac        string // of eth0
	bridge     string // the underlay bridge eth0 is on

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	exit error
	// started: StartNoWait ran once. Only the first start of a founding
	// voter runs `reef store init` (initFounder).
	started bool
}

// AddNode creates a node namespace on the underlay and writes its config;
// Start runs its daemon.
func (l *Lab) AddNode(name string, opts NodeOptions) (*Node, error) {
	l.mu.Lock()
	idx := len(l.nodes)
	l.mu.Unlock()
	bridge, addr := "br0", NodeAddress(idx)
	if opts.SubnetB {
		l.mu.Lock()
		bi := l.subnetB
		l.subnetB++
		l.mu.Unlock()
		bridge, addr = "br1", NodeAddressB(bi)
	}
	n := &Node{Lab: l, Name: name, Netns: l.Prefix + "-" + name, Address: addr, Dir: filepath.Join(l.Dir, name), opts: opts}
	n.Config = filepath.Join(n.Dir, "config.yaml")
	n.StateDir = filepath.Join(n.Dir, "state")
	n.Socket = filepath.Join(n.Dir, "reef.sock")
	n.PendingDir = filepath.Join(n.Dir, "pending-del")
	n.LogPath = filepath.Join(n.Dir, "daemon.log")
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := l.AddNetns(n.Netns); err != nil {
		return nil, err
	}
	if err := n.plugUplink(bridge); err != nil {
		return nil, err
	}
	if err := n.WriteConfig(); err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.nodes = append(l.nodes, n)
	l.mu.Unlock()
	return n, nil
}

// plugUplink gives the node its eth0, its peer on bridge of the switch,
// with the node's address, the routes to the lab's other subnets and the
// neighbour entries to and from the other nodes on bridge.
func (n *Node) plugUplink(bridge string) error {
	l := n.Lab
	peer := l.Prefix + n.Name
	if len(peer) > 15 {
		peer = peer[len(peer)-15:]
	}
	steps := [][]string{
		{"link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", NetnsPath(l.Switch)},
		{"addr", "add", netip.PrefixFrom(n.Address, 24).String(), "dev", "eth0"},
		{"link", "set", "eth0", "up"},
	}
	if n.opts.IPv6Only {
		steps[1] = []string{"-6", "addr", "add", netip.PrefixFrom(NodeAddress6(n), Underlay6.Bits()).String(), "dev", "eth0", "nodad"}
	}
	for _, s := range steps {
		if err := l.IP(n.Netns, s...); err != nil {
			return err
		}
	}
	if err := l.IP(l.Switch, "link", "set", peer, "master", bridge, "up"); err != nil {
		return err
	}
	across := l.routeAcross
	if n.opts.IPv6Only {
		across = l.routeAcross6
	}
	if err := across(n.Netns, n.opts.SubnetB); err != nil {
		return err
	}
	return l.pinNeighbors(n, bridge)
}

// RecreateUplink deletes the node's eth0 and creates it again as
// AddNode made it: the same name and address, a new index, as when a
// network manager rebuilds a bond or a VLAN. The kernel deletes
// vxlan.reef with it.
func (n *Node) RecreateUplink() error {
	if err := n.Lab.IP(n.Netns, "link", "del", "eth0"); err != nil {
		return err
	}
	return n.plugUplink(n.bridge)
}

// WriteConfig writes the node's config.yaml from its options.
func (n *Node) WriteConfig() error {
	interval := n.opts.ReconcileInterval
	if interval == 0 {
		interval = time.Second
	}
	// The runtime's CNI dirs, as reef status checks them: the node's own
	// conf dir with its conflist, and the lab's bin dir.
	if err := os.MkdirAll(n.CNIConfDir(), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.CNIConfDir(), "10-reef.conflist"), n.Conflist(), 0o644); err != nil {
		return err
	}
	nodeAddr := "nodeAddress: " + n.Address.String()
	if n.opts.IPv6Only {
		nodeAddr = "nodeAddressV6: " + NodeAddress6(n).String()
	}
	cfg := fmt.Sprintf(`# written by the reef lab
nodeName: %s
%s
interface: eth0
stateDir: %s
socket: %s
pendingDeleteDir: %s
cniConfDir: %s
cniBinDir: %s
reconcileInterval: %s
logLevel: debug
`, n.Name, nodeAddr, n.StateDir, n.Socket, n.PendingDir, n.CNIConfDir(), n.Lab.BinDir, interval)
	switch {
	case n.opts.BGP != "":
		cfg += "bgp:\n" + n.opts.BGP
	case len(n.opts.Peers) > 0 || len(n.opts.PeerPrefixes) > 0:
		hold := n.opts.HoldTime
		if hold == 0 {
			hold = 3 * time.Second
		}
		cfg += fmt.Sprintf("bgp:\n  keepaliveTime: %s\n  holdTime: %s\n  peers: [", hold/3, hold)
		for i, p := range n.opts.Peers {
			if i > 0 {
				cfg += ", "
			}
			cfg += p.String()
		}
		cfg += "]\n  peerPrefixes: ["
		for i, p := range n.opts.PeerPrefixes {
			if i > 0 {
				cfg += ", "
			}
			cfg += p.String()
		}
		cfg += "]\n" + n.opts.BGPExtra
		if !strings.Contains(n.opts.BGPExtra, "voters:") {
			cfg += "  voters: " + addrList(n.Lab.clusterVoters(n.PeerAddress(), n.opts.Peers)) + "\n"
		}
		if n.opts.IPv6Only && !strings.Contains(n.opts.BGPExtra, "routerID:") {
			cfg += "  routerID: " + n.Address.String() + "\n"
		}
	}
	return os.WriteFile(n.Config, []byte(cfg+n.opts.Extra), 0o644)
}

// clusterVoters is the voter list of a node the lab configures: the lab's
// Voters, or else the five lowest addresses of the node and its peers.
func (l *Lab) clusterVoters(self netip.Addr, peers []netip.Addr) []netip.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.Voters) > 0 {
		return l.Voters
	}
	all := append([]netip.Addr{self}, peers...)
	slices.SortFunc(all, netip.Addr.Compare)
	all = slices.Compact(all)
	return all[:min(len(all), 5)]
}

// PeerAddress is the address other nodes name this one by in bgp.peers
// and voters: its IPv6 address on an IPv6-only node, else Address.
func (n *Node) PeerAddress() netip.Addr {
	if n.opts.IPv6Only {
		return NodeAddress6(n)
	}
	return n.Address
}

// CNIConfDir is the node's CNI config dir, as a runtime would read it: the
// daemon's cniConfDir, holding the node's conflist.
func (n *Node) CNIConfDir() string { return filepath.Join(n.Dir, "net.d") }

// SetOptions replaces the node's options and rewrites its config; the
// daemon reads it at its next Start.
func (n *Node) SetOptions(opts NodeOptions) error {
	n.opts = opts
	return n.WriteConfig()
}

// Conflist is the one-line conflist a runtime on this node would use (the
// package's, see packaging/cni), with the node's socket and queue dir.
func (n *Node) Conflist() []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","cniVersions":["1.0.0","1.1.0"],"name":"k8s-pod-network","plugins":[{"type":"reef-cni","socket":%q,"pendingDeleteDir":%q,"capabilities":{"portMappings":true,"bandwidth":true}}]}`,
		n.Socket, n.PendingDir))
}

// Start runs the daemon in the node's namespace (nsenter --net: same mount
// namespace as the caller, so it sees the pods' netns mounts) and waits
// until it serves ADD.
func (n *Node) Start() error {
	if err := n.StartNoWait(); err != nil {
		return err
	}
	return n.WaitReady(20 * time.Second)
}

// StartNoWait runs the daemon and returns at once.
func (n *Node) StartNoWait() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("node %s: daemon already running", n.Name)
	}
	if !n.started {
		n.started = true
		// A daemon run by Command has its store initialised by the
		// test that runs it so.
		if n.opts.Command == nil {
			if err := n.initFounder(); err != nil {
				return err
			}
		}
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Its own UTS namespace gives each node daemon its own hostname, the
	// name BGP peers learn from its FQDN capability. Every step execs, so
	// the pid is the daemon's.
	argv := []string{"nsenter", "--net=" + NetnsPath(n.Netns), "--",
		"unshare", "--uts", "--", "sh", "-c", `hostname "$0" && exec "$@"`, n.Name,
		filepath.Join(n.Lab.BinDir, cmp.Or(n.opts.Binary, "reef")), "daemon", "--config", n.Config}
	if n.opts.Nice != 0 {
		argv = append([]string{"nice", "-n", strconv.Itoa(n.opts.Nice)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), n.opts.Env...)
	if n.opts.Command != nil {
		if cmd, err = n.opts.Command(); err != nil {
			logf.Close()
			return fmt.Errorf("start daemon of %s: %w", n.Name, err)
		}
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start daemon of %s: %w", n.Name, err)
	}
	n.cmd, n.done, n.exit = cmd, make(chan struct{}), nil
	done := n.done
	go func() {
		err := cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.exit = err
		n.mu.Unlock()
		close(done)
	}()
	return nil
}

// initFounder runs `reef store init` before the first start of a node
// whose config names it among several bgp.voters: a founding voter of the
// lab's cluster, initialised as an operator does on a new cluster. Later
// starts never run it, so a voter whose state dir a test wipes comes back
// with a new store, restricted, as on a real node. A config the daemon
// would refuse is left for the daemon to report.
func (n *Node) initFounder() error {
	if _, err := os.Stat(filepath.Join(n.StateDir, "reef.db")); err == nil {
		return nil
	}
	cfg, err := daemon.LoadConfig(n.Config, true)
	if err != nil {
		return nil
	}
	self := n.PeerAddress()
	if cfg.NodeAddress.IsValid() {
		self = cfg.NodeAddress
	}
	// A voter named by its nodeAddressV6 (a mixed cluster) is one too.
	named := slices.Contains(cfg.BGP.Voters, self) || cfg.NodeAddressV6.IsValid() && slices.Contains(cfg.BGP.Voters, cfg.NodeAddressV6)
	if len(cfg.BGP.Voters) < 2 || !named {
		return nil
	}
	if out, err := n.Lab.Run(n.Netns, filepath.Join(n.Lab.BinDir, "reef"), "store", "init", "--config", n.Config); err != nil {
		return fmt.Errorf("node %s: reef store init before its first start: %v\n%s", n.Name, err, out)
	}
	return nil
}

// Running reports whether the daemon process is alive.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// WaitReady waits until the daemon's STATUS says it serves ADD.
func (n *Node) WaitReady(timeout time.Duration) error {
	err := poll.Until(timeout, func() error {
		if !n.Running() {
			return poll.Stop(fmt.Errorf("daemon exited: %v", n.exitErr()))
		}
		st, err := n.Status()
		if err == nil && !st.GetReady() {
			err = errors.New("daemon not ready")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s: %v\n%s", n.Name, err, n.LogTail(20))
	}
	return nil
}

func (n *Node) exitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exit
}

// Stop sends SIGTERM and waits for the daemon to exit.
func (n *Node) Stop() error { return n.signal(syscall.SIGTERM, 15*time.Second) }

// Kill sends SIGKILL (a crash) and waits for the process to be gone.
func (n *Node) Kill() error { return n.signal(syscall.SIGKILL, 5*time.Second) }

func (n *Node) signal(sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.mu.Unlock()
	if cmd == nil {
		return nil
	}
	// nsenter execs the daemon in place, so the pid is the daemon's.
	cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(timeout):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("node %s: daemon did not exit within %s of %s", n.Name, timeout, sig)
	}
	n.mu.Lock()
	n.cmd = nil
	err := n.exit
	n.mu.Unlock()
	if sig == syscall.SIGTERM && err != nil {
		return fmt.Errorf("node %s: daemon exited with %v after SIGTERM\n%s", n.Name, err, n.LogTail(10))
	}
	return nil
}

// Restart stops the daemon with SIGTERM and starts it again.
func (n *Node) Restart() error {
	if err := n.Stop(); err != nil {
		return err
	}
	return n.Start()
}

// Wait waits for the daemon to exit by itself and returns its exit error.
func (n *Node) Wait(timeout time.Duration) (error, bool) {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	select {
	case <-done:
		n.mu.Lock()
		defer n.mu.Unlock()
		n.cmd = nil
		return n.exit, true
	case <-time.After(timeout):
		return nil, false
	}
}

// LogTail returns the last lines of the daemon's log.
func (n *Node) LogTail(lines int) string {
	b, _ := os.ReadFile(n.LogPath)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// Log returns the daemon's whole log.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.LogPath)
	return string(b)
}

func (n *Node) client() (*grpc.ClientConn, error) {
	return grpc.NewClient("unix://"+n.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
}

// Status asks the daemon for its status.
func (n *Node) Status() (*reefv1.StatusReply, error) {
	conn, err := n.client()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return reefv1.NewNodeClient(conn).Status(ctx, &reefv1.StatusRequest{})
}

// IPAM asks the daemon for pools, blocks and allocations.
func (n *Node) IPAM() (*reefv1.IPAMReply, error) {
	conn, err := n.client()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return reefv1.NewNodeClient(conn).IPAM(ctx, &reefv1.IPAMRequest{ShowBlocks: true, ShowAllocations: true})
}

// Reef runs the reef CLI against this node's daemon.
func (n *Node) Reef(args ...string) (string, error) {
	full := append(append([]string{}, args...), "--socket", n.Socket)
	out, err := exec.Command(filepath.Join(n.Lab.BinDir, "reef"), full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("reef %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// CNIClient connects to the daemon's CNI service directly, bypassing the
// shim: for tests of the daemon's own validation.
func (n *Node) CNIClient() (reefv1.CNIClient, func(), error) {
	conn, err := n.client()
	if err != nil {
		return nil, nil, err
	}
	return reefv1.NewCNIClient(conn), func() { conn.Close() }, nil
}

// Shim runs reef-cni as a runtime would, with the given CNI environment
// and stdin, and returns its stdout and exit code.
func (n *Node) Shim(env map[string]string, stdin []byte) (stdout []byte, code int, err error) {
	cmd := exec.Command(filepath.Join(n.Lab.BinDir, "reef-cni"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.Bytes(), ee.ExitCode(), nil
	}
	return out.Bytes(), 0, err
}

// Options returns the node's current options.
func (n *Node) Options() NodeOptions { return n.opts }
