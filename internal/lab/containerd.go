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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// ContainerdOptions shape a node's containerd.
type ContainerdOptions struct {
	// Conflist is the one file of the CNI conf dir; default: the node's
	// reef conflist in the form every containerd accepts (CRIConflist).
	Conflist []byte
	// Plugins are copied into the CNI bin dir, next to loopback; default:
	// reef-cni of the lab's BinDir.
	Plugins []string
	// V2 runs containerd 2 ($GOBIN/containerd2, `make deps-k8s`), which
	// kubelet 1.36 and later need, instead of Debian's 1.6.
	V2 bool
	// Images are image tars to import; SandboxImage, one of them, is the
	// sandbox image then. Without them, the lab's pause image is built
	// and imported.
	Images       []string
	SandboxImage string
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
	bin       string // containerd's binary
	env       []string

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

// containerd2Config is containerdConfig in containerd 2's format 3 (2.4
// migrates it to its 4 in memory, with a warning); 2.x's CRI is split into
// images and runtime, and its CNI dirs are bin_dirs.
const containerd2Config = `# written by the reef lab: a containerd 2 of its own inside node netns %[1]s
version = 3
root = %[2]q
state = %[3]q
# NRI would listen on the host's /var/run/nri/nri.sock.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.nri.v1.nri"]

[grpc]
  address = %[4]q

[ttrpc]
  address = %[5]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[6]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[7]q

[plugins."io.containerd.cri.v1.runtime"]
  # This VM lacks CAP_SYS_RESOURCE: without it runc fails with
  # "can't get final child's PID from pipe".
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %[8]q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[9]q]
    conf_dir = %[10]q
    max_conf_num = 1

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`

// CRIConflist is the node's reef conflist (Node.Conflist) in the form
// containerd 1.6 accepts. Its libcni (1.1) knows CNI versions up
// to 1.0.0 and fails every ADD whose result says 1.1.0 ("unsupported CNI
// result version"), so cniVersion is 1.0.0; cniVersions offers 1.1.0 to a
// libcni that knows the key (1.2 on), which picks the highest
// version it supports. An older libcni ignores the key.
func (n *Node) CRIConflist() []byte {
	return []byte(fmt.Sprintf(`{"cniVersion":"1.0.0","cniVersions":["1.0.0","1.1.0"],"name":"k8s-pod-network","plugins":[{"type":"reef-cni","socket":%q,"pendingDeleteDir":%q,"capabilities":{"portMappings":true,"bandwidth":true}}]}`,
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
	if err := c.writeCNI(opts); err != nil {
		return nil, err
	}
	sandbox, err := c.writeConfig(opts)
	if err != nil {
		return nil, err
	}
	images, err := c.imageFiles(opts)
	if err != nil {
		return nil, err
	}

	// Registered before the start, so that a failure below still tears
	// down whatever did start.
	n.Lab.mu.Lock()
	n.Lab.spawned = append(n.Lab.spawned, func() { c.Close() })
	n.Lab.mu.Unlock()
	if err := c.start(); err != nil {
		return nil, err
	}
	for _, image := range images {
		if out, err := exec.Command("ctr", "-a", c.Socket, "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs", image).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ctr images import %s: %v: %s", image, err, out)
		}
	}
	// The CRI learns of the import through an event: wait until it lists it.
	if err := poll.Until(20*time.Second, func() error { _, err := c.Run(context.Background(), "inspecti", sandbox); return err }); err != nil {
		return nil, fmt.Errorf("containerd of %s: the CRI does not see %s: %v", n.Name, sandbox, err)
	}
	return c, nil
}

// writeCNI writes the CNI configuration containerd loads, opts.Conflist or
// the node's reef conflist, and copies loopback and the plugins beside it.
func (c *Containerd) writeCNI(opts ContainerdOptions) error {
	n := c.Node
	for _, d := range []string{c.ConfDir, c.CNIBinDir, filepath.Join(c.Dir, "pod-logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	conflist := opts.Conflist
	if conflist == nil {
		conflist = n.CRIConflist()
	}
	if err := os.WriteFile(filepath.Join(c.ConfDir, "10-lab.conflist"), conflist, 0o644); err != nil {
		return err
	}
	plugins := opts.Plugins
	if plugins == nil {
		plugins = []string{filepath.Join(n.Lab.BinDir, "reef-cni")}
	}
	for _, p := range append([]string{filepath.Join(RefPluginDir, "loopback")}, plugins...) {
		if err := copyFile(p, filepath.Join(c.CNIBinDir, filepath.Base(p))); err != nil {
			return err
		}
	}
	return nil
}

// writeConfig picks the containerd binary (Debian's 1.6, or with opts.V2
// the 2.x beside the Kubernetes binaries, its shim first in PATH) and
// writes its config.toml and crictl's crictl.yaml. sandbox is the pause
// image the CRI is told to use.
func (c *Containerd) writeConfig(opts ContainerdOptions) (sandbox string, err error) {
	dir := c.Dir
	format, sandbox := containerdConfig, PauseImage
	c.bin = "containerd"
	if opts.V2 {
		format = containerd2Config
		c.bin = filepath.Join(KubeBinDir(), "containerd2")
		// containerd looks for containerd-shim-runc-v2 in PATH: its own,
		// built beside it, not Debian's 1.6 one.
		shims := filepath.Join(dir, "bin")
		if err := os.MkdirAll(shims, 0o755); err != nil {
			return "", err
		}
		if err := os.Symlink(c.bin+"-shim-runc-v2", filepath.Join(shims, "containerd-shim-runc-v2")); err != nil && !os.IsExist(err) {
			return "", err
		}
		c.env = append(os.Environ(), "PATH="+shims+":"+os.Getenv("PATH"))
	}
	if opts.SandboxImage != "" {
		sandbox = opts.SandboxImage
	}
	cfg := fmt.Sprintf(format, c.Node.Netns,
		filepath.Join(dir, "root"), filepath.Join(dir, "state"),
		c.Socket, c.Socket+".ttrpc", filepath.Join(dir, "opt"),
		sandbox, filepath.Join(dir, "runc"), c.CNIBinDir, c.ConfDir)
	if err := os.WriteFile(c.Config, []byte(cfg), 0o644); err != nil {
		return "", err
	}
	crictlCfg := fmt.Sprintf("runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\ntimeout: 60\n", c.Socket, c.Socket)
	if err := os.WriteFile(filepath.Join(dir, "crictl.yaml"), []byte(crictlCfg), 0o644); err != nil {
		return "", err
	}
	return sandbox, nil
}

// imageFiles are the image archives to import: opts.Images, or the lab's
// pause image written as one.
func (c *Containerd) imageFiles(opts ContainerdOptions) ([]string, error) {
	if opts.Images != nil {
		return opts.Images, nil
	}
	pause, err := c.Node.Lab.buildPause()
	if err != nil {
		return nil, err
	}
	image := filepath.Join(c.Dir, "pause-image.tar")
	if err := writePauseImage(pause, c.Dir, image); err != nil {
		return nil, fmt.Errorf("write the pause image: %w", err)
	}
	return []string{image}, nil
}

func (c *Containerd) start() error {
	logf, err := os.OpenFile(c.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// nsenter execs containerd in place, so the pid is containerd's.
	cmd := exec.Command("nsenter", "--net="+NetnsPath(c.Node.Netns), "--", c.bin, "--config", c.Config)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = c.env
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start containerd of %s: %w", c.Node.Name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.mu.Unlock()
	answering := poll.Until(30*time.Second, func() error {
		select {
		case <-done:
			return poll.Stop(errors.New("exited"))
		default:
		}
		if strings.Contains(c.LogTail(200), `failed to load plugin io.containerd.grpc.v1.cri"`) {
			return poll.Stop(errors.New("the CRI plugin failed to load"))
		}
		_, err := c.Run(context.Background(), "version")
		return err
	})
	select {
	case <-done:
		return fmt.Errorf("containerd of %s exited:\n%s", c.Node.Name, c.LogTail(20))
	default:
	}
	if answering != nil {
		return fmt.Errorf("containerd of %s: CRI not answering: %v\n%s", c.Node.Name, answering, c.LogTail(20))
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
