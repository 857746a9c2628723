package lab

// A lab node can run a real containerd (Debian's package) inside its
// network namespace, driven through its CRI with crictl, the way kubelet
// drives it: containerd reads the node's one-line conflist from a conf dir
// of its own, execs reef-cni (and the reference loopback) from a bin dir of
// its own, and the node's reef daemon wires the pods.
//
// containerd is started with `nsenter --net`, like the daemon: both stay in
// the caller's mount namespace, so the netns files containerd mounts under
// /var/run/netns/cni-… are seen by the daemon. Everything else containerd
// writes (root, state, runc's state, sockets, the rootfs and shm mounts)
// lives under the node's work dir.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ContainerdOptions shape a node's containerd.
type ContainerdOptions struct {
	// Conflist is the one file of the CNI conf dir; default: the node's
	// reef conflist in the form every containerd accepts (CRIConflist).
	Conflist []byte
	// Plugins are copied into the CNI bin dir, next to loopback; default:
	// reef-cni of the lab's BinDir.
	Plugins []string
}

// Containerd is a containerd running in a lab node's namespace.
type Containerd struct {
	Node      *Node
	Dir       string // everything of this containerd lives here
	Config    string // config.toml
	Socket    string // the CRI (and containerd) socket
	ConfDir   string // CNI conf dir: only the conflist
	CNIBinDir string // CNI bin dir: loopback and the plugins
	LogPath   string
	Crictl    string // path of the crictl binary

	seq       atomic.Int64
	closeOnce sync.Once

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// RefPluginDir holds Debian's reference CNI plugins
// (containernetworking-plugins): loopback, ptp, host-local.
const RefPluginDir = "/usr/lib/cni"

// CrictlPath finds crictl: $REEF_CRICTL, then PATH, then the Go bin dir
// where `make deps-cri` installs it.
func CrictlPath() (string, error) {
	if p := os.Getenv("REEF_CRICTL"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("crictl"); err == nil {
		return p, nil
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			gopath = strings.TrimSpace(string(out))
		}
	}
	if gopath == "" {
		gopath = filepath.Join(os.Getenv("HOME"), "go")
	}
	p := filepath.Join(gopath, "bin", "crictl")
	if _, err := os.Stat(p); err != nil {
		return "", errors.New("crictl not found (make deps-cri installs it: go install sigs.k8s.io/cri-tools/cmd/crictl@v1.37.0)")
	}
	return p, nil
}

// CheckContainerdDeps says what the CRI lab is missing on this machine.
func CheckContainerdDeps() error {
	var missing []string
	for _, tool := range []string{"containerd", "ctr", "runc", "containerd-shim-runc-v2", "gcc"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(filepath.Join(RefPluginDir, "loopback")); err != nil {
		missing = append(missing, RefPluginDir+"/loopback")
	}
	if _, err := CrictlPath(); err != nil {
		missing = append(missing, "crictl")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the CRI lab needs %s (sudo make deps-cri installs them)", strings.Join(missing, ", "))
	}
	return nil
}

// CrictlVersion returns the module version crictl was built from (a
// `go install`ed crictl reports "unknown" itself).
func CrictlVersion() string {
	p, err := CrictlPath()
	if err != nil {
		return "unknown"
	}
	out, _ := exec.Command("go", "version", "-m", p).Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" && f[1] == "sigs.k8s.io/cri-tools" {
			return f[2]
		}
	}
	return "unknown"
}

// ContainerdKnowsCNI11 reports whether the installed containerd's libcni
// knows CNI 1.1 (libcni 1.2 on: STATUS, GC, 1.1.0 results), read off the
// binary's symbols: Debian 12's containerd 1.6.20 does not.
func ContainerdKnowsCNI11() bool {
	p, err := exec.LookPath("containerd")
	if err != nil {
		return false
	}
	b, err := os.ReadFile(p)
	return err == nil && bytes.Contains(b, []byte("libcni.(*CNIConfig).GetStatusNetworkList"))
}

// ContainerdVersion returns `containerd --version`'s version field.
func ContainerdVersion() string {
	out, err := exec.Command("containerd", "--version").Output()
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(out))
	if len(f) >= 3 {
		return f[2]
	}
	return strings.TrimSpace(string(out))
}

const containerdConfig = `# written by the reef lab: a containerd of its own inside node netns %[1]s
version = 2
root = %[2]q
state = %[3]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]

[grpc]
  address = %[4]q

[ttrpc]
  address = %[5]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[6]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[7]q
  # This VM lacks CAP_SYS_RESOURCE: without it runc fails with
  # "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[8]q

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[9]q
    conf_dir = %[10]q
    max_conf_num = 1
`

// CRIConflist is the node's reef conflist (Node.Conflist) in the form
// containerd 1.6 accepts. Its libcni (1.1) knows CNI versions up
// to 1.0.0 and fails every ADD whose result says 1.1.0 ("unsupported CNI
// result version"), so cniVersion is 1.0.0; cniVersions offers 1.1.0 to a
// libcni that knows the key (1.2 on), which picks the highest
// version it supports. An older libcni ignores the key.
func (n *Node) CRIConflist() []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","cniVersions":["1.0.0","1.1.0"],"name":"k8s-pod-network","plugins":[{"type":"reef-cni","socket":%q,"pendingDeleteDir":%q}]}`,
		n.Socket, n.PendingDir))
}

// StartContainerd starts a containerd in the node's namespace, imports the
// pause image and waits until its CRI answers. The node's daemon need not
// run (a node for another plugin has none). Lab.Close tears it down, with
// its pods, if the caller does not.
func (n *Node) StartContainerd(opts ContainerdOptions) (*Containerd, error) {
	if err := CheckContainerdDeps(); err != nil {
		return nil, err
	}
	crictl, _ := CrictlPath()
	dir := filepath.Join(n.Dir, "containerd")
	c := &Containerd{
		Node: n, Dir: dir, Crictl: crictl,
		Config:    filepath.Join(dir, "config.toml"),
		Socket:    filepath.Join(dir, "containerd.sock"),
		ConfDir:   filepath.Join(dir, "net.d"),
		CNIBinDir: filepath.Join(dir, "cni-bin"),
		LogPath:   filepath.Join(dir, "containerd.log"),
	}
	for _, d := range []string{c.ConfDir, c.CNIBinDir, filepath.Join(dir, "pod-logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	conflist := opts.Conflist
	if conflist == nil {
		conflist = n.CRIConflist()
	}
	if err := os.WriteFile(filepath.Join(c.ConfDir, "10-lab.conflist"), conflist, 0o644); err != nil {
		return nil, err
	}
	plugins := opts.Plugins
	if plugins == nil {
		plugins = []string{filepath.Join(n.Lab.BinDir, "reef-cni")}
	}
	for _, p := range append([]string{filepath.Join(RefPluginDir, "loopback")}, plugins...) {
		if err := copyFile(p, filepath.Join(c.CNIBinDir, filepath.Base(p))); err != nil {
			return nil, err
		}
	}
	cfg := fmt.Sprintf(containerdConfig, n.Netns,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"),
		c.Socket, c.Socket+".ttrpc", filepath.Join(dir, "opt"),
		PauseImage, filepath.Join(dir, "runc"), c.CNIBinDir, c.ConfDir)
	if err := os.WriteFile(c.Config, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	crictlCfg := fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n", c.Socket, c.Socket)
	if err := os.WriteFile(filepath.Join(dir, "crictl.yaml"), []byte(crictlCfg), 0o644); err != nil {
		return nil, err
	}
	pause, err := n.Lab.buildPause()
	if err != nil {
		return nil, err
	}
	image := filepath.Join(dir, "pause-image.tar")
	if err := writePauseImage(pause, dir, image); err != nil {
		return nil, fmt.Errorf("write the pause image: %w", err)
	}

	// Registered before the start, so that a failure below still tears
	// down whatever did start.
	n.Lab.mu.Lock()
	n.Lab.spawned = append(n.Lab.spawned, func() { c.Close() })
	n.Lab.mu.Unlock()
	if err := c.start(); err != nil {
		return nil, err
	}
	if out, err := exec.Command("ctr", "-a", c.Socket, "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs", image).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ctr images import %s: %v: %s", image, err, out)
	}
	// The CRI learns of the import through an event: wait until it lists it.
	var last error
	if !waitFor(20*time.Second, func() bool {
		_, last = c.Run(context.Background(), "inspecti", PauseImage)
		return last == nil
	}) {
		return nil, fmt.Errorf("containerd of %s: the CRI does not see %s: %v", n.Name, PauseImage, last)
	}
	return c, nil
}

func (c *Containerd) start() error {
	logf, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// nsenter execs containerd in place, so the pid is containerd's.
	cmd := exec.Command("nsenter", "--net="+NetnsPath(c.Node.Netns), "--", "containerd", "--config", c.Config)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start containerd of %s: %w", c.Node.Name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.mu.Unlock()
	var last error
	ok := waitFor(30*time.Second, func() bool {
		select {
		case <-done:
			return true
		default:
		}
		if strings.Contains(c.LogTail(200), `failed to load plugin io.containerd.grpc.v1.cri"`) {
			last = errors.New("the CRI plugin failed to load")
			return true
		}
		_, last = c.Run(context.Background(), "version")
		return last == nil
	})
	select {
	case <-done:
		return fmt.Errorf("containerd of %s exited:\n%s", c.Node.Name, c.LogTail(20))
	default:
	}
	if !ok || last != nil {
		return fmt.Errorf("containerd of %s: CRI not answering after 30s: %v\n%s", c.Node.Name, last, c.LogTail(20))
	}
	return nil
}

// Pid is containerd's process id, 0 when it does not run.
func (c *Containerd) Pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Run runs crictl against this containerd and returns its stdout; the
// error carries stderr, where crictl prints the CRI's error.
func (c *Containerd) Run(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"--config", filepath.Join(c.Dir, "crictl.yaml"),
		"--runtime-endpoint", "unix://" + c.Socket, "--image-endpoint", "unix://" + c.Socket}, args...)
	cmd := exec.CommandContext(ctx, c.Crictl, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("crictl %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// LogTail returns the last lines of containerd's log.
func (c *Containerd) LogTail(lines int) string {
	b, _ := os.ReadFile(c.LogPath)
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// CRIPod is a pod sandbox created through the CRI.
type CRIPod struct {
	C         *Containerd
	ID        string // sandbox id
	Name      string
	Namespace string
	UID       string
	IP        netip.Addr // the CRI's status.network.ip while the sandbox was ready
	NetnsPath string     // /var/run/netns/cni-…, containerd's
	State     string     // SANDBOX_READY, SANDBOX_NOTREADY
}

// Netns is the pod's netns name (the base of NetnsPath), for Lab.Run.
func (p *CRIPod) Netns() string { return filepath.Base(p.NetnsPath) }

// PodConfig writes a crictl pod sandbox config and returns its path and
// the pod's UID. A hostNetwork pod shares the node's namespace: no CNI.
func (c *Containerd) PodConfig(namespace, name string, hostNetwork bool) (string, string, error) {
	uid := fmt.Sprintf("%s-%s-%d", c.Node.Netns, name, c.seq.Add(1))
	linux := map[string]any{"cgroup_parent": "/reef-lab/" + c.Node.Netns + "/" + uid}
	if hostNetwork {
		linux["security_context"] = map[string]any{"namespace_options": map[string]any{"network": 2}} // NODE
	}
	cfg := map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": namespace, "uid": uid, "attempt": 0},
		"log_directory": filepath.Join(c.Dir, "pod-logs", uid),
		"linux":         linux,
	}
	if !hostNetwork { // a hostNetwork pod shares the node's UTS namespace too
		cfg["hostname"] = name
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", "", err
	}
	path := filepath.Join(c.Dir, "pod-"+uid+".json")
	return path, uid, os.WriteFile(path, b, 0o644)
}

// RunPod runs `crictl runp` for a new pod and inspects the sandbox. On
// error the returned error carries the CRI's message.
func (c *Containerd) RunPod(ctx context.Context, namespace, name string) (*CRIPod, error) {
	return c.runPod(ctx, namespace, name, false)
}

// RunHostNetworkPod runs a pod in the node's network namespace: the CRI's
// path without CNI (a floor for the benchmark).
func (c *Containerd) RunHostNetworkPod(ctx context.Context, namespace, name string) (*CRIPod, error) {
	return c.runPod(ctx, namespace, name, true)
}

func (c *Containerd) runPod(ctx context.Context, namespace, name string, hostNetwork bool) (*CRIPod, error) {
	cfg, uid, err := c.PodConfig(namespace, name, hostNetwork)
	if err != nil {
		return nil, err
	}
	out, err := c.Run(ctx, "runp", cfg)
	if err != nil {
		return nil, err
	}
	p := &CRIPod{C: c, ID: strings.TrimSpace(out), Name: name, Namespace: namespace, UID: uid}
	if err := p.Inspect(ctx); err != nil {
		return p, err
	}
	return p, nil
}

// sandboxInspect is the part of `crictl inspectp` the lab reads.
type sandboxInspect struct {
	Status struct {
		ID      string `json:"id"`
		State   string `json:"state"`
		Network struct {
			IP string `json:"ip"`
		} `json:"network"`
	} `json:"status"`
	Info struct {
		Pid         int `json:"pid"`
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct {
					Type string `json:"type"`
					Path string `json:"path"`
				} `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	} `json:"info"`
}

// Inspect refreshes IP, NetnsPath and State from `crictl inspectp`.
func (p *CRIPod) Inspect(ctx context.Context) error {
	out, err := p.C.Run(ctx, "inspectp", "-o", "json", p.ID)
	if err != nil {
		return err
	}
	var in sandboxInspect
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		return fmt.Errorf("crictl inspectp %s: %w", p.ID, err)
	}
	p.State = in.Status.State
	// A stopped sandbox reports no IP; IP keeps the one it had.
	if in.Status.Network.IP != "" {
		if p.IP, err = netip.ParseAddr(in.Status.Network.IP); err != nil {
			return fmt.Errorf("crictl inspectp %s: ip: %w", p.ID, err)
		}
	}
	for _, ns := range in.Info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			p.NetnsPath = ns.Path
		}
	}
	p.C.recordSandbox(p.ID, p.NetnsPath)
	return nil
}

// Stop runs `crictl stopp` (CNI DEL with the netns).
func (p *CRIPod) Stop(ctx context.Context) error {
	_, err := p.C.Run(ctx, "stopp", p.ID)
	return err
}

// Remove runs `crictl rmp` (CNI DEL again, with an empty CNI_NETNS).
func (p *CRIPod) Remove(ctx context.Context) error {
	_, err := p.C.Run(ctx, "rmp", p.ID)
	return err
}

// StartContainer creates and starts a container of the pause image in the
// pod, and returns its id and its process id on the host.
func (p *CRIPod) StartContainer(ctx context.Context, name string) (id string, pid int, err error) {
	cfg, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": name},
		"image":    map[string]any{"image": PauseImage},
		// What kubelet sets, so that crictl ps names the pod.
		"labels":   map[string]any{"io.kubernetes.pod.name": p.Name, "io.kubernetes.pod.namespace": p.Namespace},
		"log_path": name + ".log",
	})
	if err != nil {
		return "", 0, err
	}
	ccfg := filepath.Join(p.C.Dir, "ctr-"+p.UID+"-"+name+".json")
	if err := os.WriteFile(ccfg, cfg, 0o644); err != nil {
		return "", 0, err
	}
	podCfg := filepath.Join(p.C.Dir, "pod-"+p.UID+".json")
	out, err := p.C.Run(ctx, "create", p.ID, ccfg, podCfg)
	if err != nil {
		return "", 0, err
	}
	id = strings.TrimSpace(out)
	if _, err := p.C.Run(ctx, "start", id); err != nil {
		return id, 0, err
	}
	out, err = p.C.Run(ctx, "inspect", "-o", "json", id)
	if err != nil {
		return id, 0, err
	}
	var in struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		return id, 0, fmt.Errorf("crictl inspect %s: %w", id, err)
	}
	if in.Info.Pid == 0 {
		return id, 0, fmt.Errorf("crictl inspect %s: no pid", id)
	}
	return id, in.Info.Pid, nil
}

// PodIDs lists the ids of every sandbox the CRI knows.
func (c *Containerd) PodIDs(ctx context.Context) ([]string, error) {
	out, err := c.Run(ctx, "pods", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Info returns `crictl info` as JSON (the CRI's Status: runtime and
// network conditions, the loaded CNI config).
func (c *Containerd) Info(ctx context.Context) (map[string]any, error) {
	out, err := c.Run(ctx, "info")
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return nil, fmt.Errorf("crictl info: %w", err)
	}
	return m, nil
}

// NetworkReady reads the NetworkReady condition of `crictl info`.
func (c *Containerd) NetworkReady(ctx context.Context) (ready bool, reason string, err error) {
	m, err := c.Info(ctx)
	if err != nil {
		return false, "", err
	}
	status, _ := m["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, x := range conds {
		cond, _ := x.(map[string]any)
		if cond["type"] == "NetworkReady" {
			ready, _ := cond["status"].(bool)
			r, _ := cond["reason"].(string)
			msg, _ := cond["message"].(string)
			return ready, strings.TrimSpace(r + " " + msg), nil
		}
	}
	return false, "", errors.New("crictl info: no NetworkReady condition")
}

// recordSandbox notes a sandbox and its netns in the work dir, so that a
// later lab can clean up after it if this process is killed before the
// sandbox is removed.
func (c *Containerd) recordSandbox(id, netns string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.OpenFile(filepath.Join(c.Dir, "sandboxes"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	if netns == "" {
		netns = "-"
	}
	fmt.Fprintln(f, id, netns)
	f.Close()
}

// Close removes every pod through the CRI (stopp, rmp), stops containerd
// by its pid, kills what it left (shims, pause processes), unmounts what
// is mounted under its dir and removes the sandboxes' netns files and
// cgroups. It is safe to call more than once; Lab.Close calls it.
func (c *Containerd) Close() error {
	var errs []error
	c.closeOnce.Do(func() {
		if c.Pid() != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			ids, err := c.PodIDs(ctx)
			if err != nil {
				errs = append(errs, err)
			}
			for _, id := range ids {
				if _, err := c.Run(ctx, "stopp", id); err != nil {
					errs = append(errs, err)
				}
				if _, err := c.Run(ctx, "rmp", id); err != nil {
					errs = append(errs, err)
				}
			}
			cancel()
		}
		if err := c.stop(); err != nil {
			errs = append(errs, err)
		}
		cleanContainerdDir(c.Dir, c.Node.Netns)
	})
	return errors.Join(errs...)
}

// stop sends SIGTERM to containerd and waits; SIGKILL after 10s.
func (c *Containerd) stop() error {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("containerd of %s did not exit within 10s of SIGTERM", c.Node.Name)
	}
}

// cleanContainerdDir removes what the containerd of a node (netns name
// nodeNetns) with work dir dir may have left once containerd itself is
// gone: processes whose command line names dir (its shims, and the
// sandboxes' and containers' pause, whose image passes dir as an
// argument), mounts under dir, and for each sandbox it knew of its netns
// file, its shim's socket and containerd's CNI cache entries; then the
// pods' cgroups. The sandboxes are found in three places: the ids this
// lab recorded (dir/sandboxes), the bundles in containerd's state dir,
// and containerd's CNI cache (/var/lib/cni/results, not configurable in
// containerd 1.6), whose entries name the pod's UID, which starts with
// nodeNetns. A sandbox caught between its netns and its CNI ADD by a kill
// is in none of them: its empty netns file stays.
func cleanContainerdDir(dir, nodeNetns string) {
	killNaming(dir)
	unmountUnder(dir)
	ids, netns := map[string]bool{}, map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(dir, "sandboxes")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				ids[f[0]], netns[f[1]] = true, true
			}
		}
	}
	bundles, _ := filepath.Glob(filepath.Join(dir, "state", "io.containerd.runtime.v2.task", "k8s.io", "*", "config.json"))
	for _, cfg := range bundles {
		ids[filepath.Base(filepath.Dir(cfg))] = true
		var spec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"linux"`
		}
		if b, err := os.ReadFile(cfg); err == nil && json.Unmarshal(b, &spec) == nil {
			for _, ns := range spec.Linux.Namespaces {
				if ns.Type == "network" {
					netns[ns.Path] = true
				}
			}
		}
	}
	cached, _ := filepath.Glob("/var/lib/cni/results/*")
	for _, f := range cached {
		var entry struct {
			ContainerID string      `json:"containerId"`
			CNIArgs     [][2]string `json:"cniArgs"`
			Result      struct {
				Interfaces []struct{ Sandbox string } `json:"interfaces"`
			} `json:"result"`
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &entry) != nil {
			continue
		}
		ours := false
		for _, kv := range entry.CNIArgs {
			ours = ours || (kv[0] == "K8S_POD_UID" && strings.HasPrefix(kv[1], nodeNetns+"-"))
		}
		if !ours {
			continue
		}
		ids[entry.ContainerID] = true
		for _, i := range entry.Result.Interfaces {
			netns[i.Sandbox] = true
		}
		os.Remove(f)
	}
	for p := range netns {
		if strings.HasPrefix(p, "/var/run/netns/cni-") || strings.HasPrefix(p, "/run/netns/cni-") {
			if _, err := os.Stat(p); err == nil {
				syscall.Unmount(p, syscall.MNT_DETACH)
				os.Remove(p)
			}
		}
	}
	for id := range ids {
		os.Remove(shimSocket(filepath.Join(dir, "containerd.sock"), id))
	}
	removeCgroups("/reef-lab/" + nodeNetns)
}

// shimSocket is where containerd 1.6 puts the socket of a sandbox's
// runc shim (runtime/v2/shim.SocketAddress): /run/containerd/s/ and the
// sha256 of "<containerd address>/<namespace>/<id>". A killed shim leaves
// it behind.
func shimSocket(address, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(address, "k8s.io", id)))
	return "/run/containerd/s/" + hex.EncodeToString(sum[:])
}

// cleanStaleContainerd cleans the containerd work dirs of a dead lab's
// dir (CleanStale has killed its processes already).
func cleanStaleContainerd(labDir string) {
	dirs, _ := filepath.Glob(filepath.Join(labDir, "*", "containerd"))
	for _, d := range dirs {
		cleanContainerdDir(d, filepath.Base(labDir)+"-"+filepath.Base(filepath.Dir(d)))
	}
}

// killNaming SIGKILLs every process whose command line contains s, and
// waits a moment for them to go.
func killNaming(s string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var killed []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	waitFor(5*time.Second, func() bool {
		for _, pid := range killed {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(b, []byte(") Z ")) {
				return false
			}
		}
		return true
	})
}

// unmountUnder lazily unmounts every mount point under dir, deepest
// first (the shm and rootfs mounts of sandboxes and containers).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, mp := range points {
		syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// removeCgroups removes the (empty, their processes gone) cgroup dirs
// under parent in every hierarchy, deepest first, then the shared
// /reef-lab parent if nothing else uses it.
func removeCgroups(parent string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		top := filepath.Join(root, parent)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			syscall.Rmdir(d)
		}
		syscall.Rmdir(filepath.Dir(top)) // fails while another lab uses it
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
