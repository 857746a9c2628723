package k8simages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/internal/poll"
)

// TestImagesRunInContainerd builds the images, imports them into a
// containerd of its own (own root, state and socket, inside a network
// namespace of its own) and runs each the way the e2e tests do: a pod
// sandbox of the pause image, agnhost netexec answering curl and
// netcat-openbsd, CoreDNS as 65532 with only NET_BIND_SERVICE serving a
// Corefile, dig, nslookup and getent of the DNS querier images through
// the pod's resolv.conf, GNU wget in agnhost (a failed connect is exit
// 4, not busybox's SIGSEGV), busybox's wget from the nginx stand-in,
// conntrack, the regression server. Everything it started is gone
// after it, on failure too.
//
// It needs root, containerd, runc and crictl, and builds the images
// first (minutes, once per cache), so it runs only when asked, as
// make test's test-e2e step asks after deps-k8s has built them:
//
//	sudo REEF_K8SIMAGES_TEST=1 go test -run TestImagesRunInContainerd -v ./internal/lab/k8simages/
//
// REEF_K8SIMAGES_CONTAINERD names another containerd binary (a
// containerd 2 as containerd2, its shim beside it as
// containerd2-shim-runc-v2).
func TestImagesRunInContainerd(t *testing.T) {
	if os.Getenv("REEF_K8SIMAGES_TEST") == "" {
		t.Skip("set REEF_K8SIMAGES_TEST=1 to build the images and run them in a containerd (root; minutes the first time)")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: a network namespace and a containerd")
	}
	containerd := os.Getenv("REEF_K8SIMAGES_CONTAINERD")
	if containerd == "" {
		containerd = "containerd"
	}
	crictl := os.Getenv("REEF_CRICTL")
	if crictl == "" {
		crictl = filepath.Join(goBin(context.Background(), "go"), "crictl")
	}
	for _, p := range []string{containerd, "ctr", "runc", crictl} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("needs %s: %v", p, err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out := t.TempDir()
	start := time.Now()
	tars, err := Build(ctx, Options{Out: out, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %d images in %v", len(tars), time.Since(start).Round(time.Millisecond))

	c := startContainerd(t, containerd, crictl)
	t.Logf("containerd %s", c.version)
	start = time.Now()
	// ctr of containerd 1.6 talks to a containerd 2 as well.
	if b, err := exec.CommandContext(ctx, "ctr", "-a", c.socket, "-n", "k8s.io", "images", "import", "--snapshotter", "overlayfs", filepath.Join(out, AllArchive)).CombinedOutput(); err != nil {
		t.Fatalf("ctr images import: %v: %s", err, b)
	}
	t.Logf("imported %s in %v", AllArchive, time.Since(start).Round(time.Millisecond))
	refs := make([]string, 0, len(tars))
	for r := range tars {
		refs = append(refs, r)
	}
	sort.Strings(refs)
	for _, r := range refs {
		waitFor(t, 20*time.Second, "the CRI lists "+r, func() error {
			_, err := c.crictl(ctx, "inspecti", r)
			return err
		})
	}
	images, _ := c.crictl(ctx, "images")
	t.Logf("crictl images:\n%s", images)

	// One sandbox in the namespace's network (NODE): no CNI needed, the
	// containers reach each other on 127.0.0.1; the sandbox's
	// resolv.conf points at the CoreDNS container, as a pod's points at
	// the cluster DNS.
	corefile := filepath.Join(c.dir, "coredns")
	if err := os.MkdirAll(corefile, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(corefile, "Corefile"), []byte(".:53 {\n\thosts {\n\t\t10.1.2.3 test.reef.lab\n\t}\n\tlog\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	pod := c.writeJSON(t, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "images", "namespace": "default", "uid": c.id, "attempt": 0},
		"log_directory": filepath.Join(c.dir, "pod-logs"),
		"dns_config":    map[string]any{"servers": []string{"127.0.0.1"}, "searches": []string{"reef.lab"}, "options": []string{"ndots:2"}},
		"linux": map[string]any{
			"cgroup_parent":    "/" + c.id,
			"security_context": map[string]any{"namespace_options": map[string]any{"network": 2}},
		},
	})
	podID := c.mustCrictl(t, ctx, "runp", pod)
	if info := c.mustCrictl(t, ctx, "inspectp", "-o", "json", podID); true {
		var in struct {
			Info struct {
				Pid   int    `json:"pid"`
				Image string `json:"image"`
			} `json:"info"`
		}
		if err := json.Unmarshal([]byte(info), &in); err != nil {
			t.Fatal(err)
		}
		t.Logf("sandbox %.12s: pause pid %d, %s", podID, in.Info.Pid, procUser(in.Info.Pid))
		if u := procUser(in.Info.Pid); !strings.HasPrefix(u, "uid 65535") {
			t.Errorf("pause runs as %s, want uid 65535 (the image's USER)", u)
		}
	}

	run := func(name, image string, extra map[string]any) string {
		t.Helper()
		cfg := map[string]any{
			"metadata": map[string]any{"name": name},
			"image":    map[string]any{"image": image},
			"log_path": name + ".log",
		}
		for k, v := range extra {
			cfg[k] = v
		}
		id := c.mustCrictl(t, ctx, "create", podID, c.writeJSON(t, name+".json", cfg), pod)
		c.mustCrictl(t, ctx, "start", id)
		return id
	}
	sleep := map[string]any{"command": []string{"sh", "-c", "trap exit TERM; while true; do sleep 1; done"}}
	agnhost := run("agnhost", Agnhost, map[string]any{"args": []string{"netexec", "--http-port=8080", "--udp-port=8081"}})
	coredns := run("coredns", CoreDNS, map[string]any{
		"args":   []string{"-conf", "/etc/coredns/Corefile"},
		"mounts": []map[string]any{{"container_path": "/etc/coredns", "host_path": corefile, "readonly": true}},
		// kubeadm's CoreDNS Deployment: non-root (the image's 65532),
		// allowPrivilegeEscalation: false, only NET_BIND_SERVICE.
		"linux": map[string]any{"security_context": map[string]any{
			"capabilities":    map[string]any{"add_capabilities": []string{"NET_BIND_SERVICE"}, "drop_capabilities": []string{"ALL"}},
			"no_new_privs":    true,
			"readonly_rootfs": true,
		}},
	})
	glibc := run("glibc-dns", GlibcDNSTesting, sleep)
	busybox := run("busybox", BusyBox, map[string]any{"command": []string{"/bin/sh", "-c", "echo Pausing start. && sleep 3600"}})
	run("nginx", Nginx, nil)
	regression := run("regression", RegressionIssue74839, map[string]any{"envs": []map[string]string{{"key": "POD_IP", "value": "127.0.0.1"}}})
	distroless := run("distroless-iptables", DistrolessIptables, map[string]any{
		"command": []string{"sleep", "600"},
		"linux":   map[string]any{"security_context": map[string]any{"capabilities": map[string]any{"add_capabilities": []string{"NET_ADMIN"}}}},
	})

	// inCtr runs a command in a container until it succeeds (a server
	// may still be starting) and returns its output.
	inCtr := func(id string, cmd ...string) string {
		t.Helper()
		var out string
		waitFor(t, 20*time.Second, strings.Join(cmd, " "), func() error {
			var err error
			out, err = c.crictl(ctx, append([]string{"exec", "-s", "--timeout", "10", id}, cmd...)...)
			return err
		})
		t.Logf("%s$ %s\n%s", name(c, id), strings.Join(cmd, " "), strings.TrimRight(out, "\n"))
		return out
	}
	hostname := strings.TrimSpace(inCtr(agnhost, "hostname"))
	for _, tc := range []struct {
		id   string
		cmd  []string
		want string
	}{
		// framework/network: curl of netexec's /dial and /hostname.
		{agnhost, []string{"curl", "-g", "-q", "-s", "http://127.0.0.1:8080/hostname"}, hostname},
		{agnhost, []string{"curl", "-g", "-q", "-s", "http://127.0.0.1:8080/dial?request=hostname&protocol=udp&host=127.0.0.1&port=8081&tries=1"}, hostname},
		// DialFromNode's UDP probe and the Conntrack tests' netcat-openbsd flags.
		{agnhost, []string{"sh", "-c", "echo hostname | nc -w 1 -u 127.0.0.1 8081"}, hostname},
		{agnhost, []string{"sh", "-c", "echo hostname | nc -w 2 -W 1 -u -p 40001 127.0.0.1 8081 | tr -d '\\r\\n'"}, hostname},
		// The Netpol suite's probe.
		{agnhost, []string{"/agnhost", "connect", "127.0.0.1:8080", "--timeout=5s", "--protocol=tcp"}, ""},
		// The Services tests' probe of an address that does not answer:
		// a failure, not a crash, and one try.
		{agnhost, []string{"sh", "-c", "wget -q -O - -T 1 http://127.0.0.1:1; echo wget-exit-$?"}, "wget-exit-4"},
		{agnhost, []string{"wget", "-q", "-O", "-", "-T", "1", "http://127.0.0.1:8080/hostname"}, hostname},
		{agnhost, []string{"sh", "-c", "ss -ant46 'sport = :8080' | tail -n +2 | grep LISTEN"}, "LISTEN"},
		{agnhost, []string{"/agnhost", "dns-server-list"}, "127.0.0.1"},
		{agnhost, []string{"/agnhost", "dns-suffix"}, "reef.lab"},
		{agnhost, []string{"cat", "/etc/resolv.conf"}, "ndots:2"},
		// The DNS tests' queriers: dig +search through the pod's
		// resolv.conf to CoreDNS, UDP and TCP, and getent through NSS.
		{agnhost, []string{"dig", "+short", "+search", "test"}, "10.1.2.3"},
		{glibc, []string{"sh", "-c", `check="$(dig +notcp +noall +answer +search test.reef.lab A)" && test -n "$check" && echo OK`}, "OK"},
		{glibc, []string{"sh", "-c", `check="$(dig +tcp +noall +answer +search test.reef.lab A)" && test -n "$check" && echo OK`}, "OK"},
		{glibc, []string{"sh", "-c", `test -n "$(getent hosts localhost)" && echo OK`}, "OK"},
		{glibc, []string{"nslookup", "test.reef.lab"}, "10.1.2.3"},
		{glibc, []string{"dig", "-v"}, "DiG 9.18"},
		{glibc, []string{"sh", "-c", "for i in `seq 1 3`; do echo $i; done"}, "3"},
		{agnhost, []string{"/coredns", "-version"}, "CoreDNS-1.14.6"},
		// The busybox image's tools, and the nginx stand-in on :80.
		{busybox, []string{"wget", "-q", "-O", "-", "http://127.0.0.1:80/"}, "Welcome to nginx!"},
		// The regression server holds a connection 10 s; -e true hangs up at once.
		{busybox, []string{"sh", "-c", "nc 127.0.0.1 9000 -e true; echo nc-exit-$?"}, "nc-exit-0"},
		{busybox, []string{"nslookup", "test.reef.lab", "127.0.0.1"}, "10.1.2.3"},
		// The KubeProxy test's conntrack reader.
		{distroless, []string{"sh", "-c", "which conntrack && conntrack -L -f ipv4 2>&1 | tail -n 3"}, "flow entries have been shown"},
	} {
		if got := inCtr(tc.id, tc.cmd...); !strings.Contains(got, tc.want) {
			t.Errorf("%s: %s: %q does not contain %q", name(c, tc.id), strings.Join(tc.cmd, " "), got, tc.want)
		}
	}
	if logs := c.logs(ctx, regression); !strings.Contains(logs, "listen on 0.0.0.0:9000") {
		t.Errorf("regression-issue-74839 logs: %q", logs)
	}
	if logs := c.logs(ctx, coredns); !strings.Contains(logs, "test.reef.lab") {
		t.Errorf("CoreDNS logged no query of test.reef.lab: %q", logs)
	}
	// What containerd warned of (an unknown config key, a pull attempt).
	if b, err := os.ReadFile(filepath.Join(c.dir, "containerd.log")); err == nil {
		var warn []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "level=warn") || strings.Contains(line, "level=error") {
				warn = append(warn, line)
			}
		}
		t.Logf("containerd's warnings and errors (%d):\n%s", len(warn), strings.Join(warn, "\n"))
	}
	for _, id := range []string{coredns} {
		out := c.mustCrictl(t, ctx, "inspect", "-o", "json", id)
		var in struct {
			Info struct {
				Pid int `json:"pid"`
			} `json:"info"`
		}
		json.Unmarshal([]byte(out), &in)
		t.Logf("coredns runs as %s; it logged:\n%s", procUser(in.Info.Pid), c.logs(ctx, coredns))
		if u := procUser(in.Info.Pid); !strings.HasPrefix(u, "uid 65532") {
			t.Errorf("coredns runs as %s, want uid 65532", u)
		}
	}
}

// name is a container's name, for messages.
func name(c *testContainerd, id string) string {
	out, err := c.crictl(context.Background(), "inspect", "-o", "go-template", "--template", "{{.status.metadata.name}}", id)
	if err != nil {
		return id[:12]
	}
	return strings.TrimSpace(out)
}

// procUser is the real uid and the effective capabilities of a process.
func procUser(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return err.Error()
	}
	var uid, capEff string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "Uid:" {
			uid = f[1]
		}
		if len(f) >= 2 && f[0] == "CapEff:" {
			capEff = f[1]
		}
	}
	return "uid " + uid + " capeff " + capEff
}

// testContainerd is a containerd of the test's own.
type testContainerd struct {
	dir, socket, version, crictlBin string
	id                              string // the dir's name: the sandbox's uid and cgroup parent
}

func (c *testContainerd) crictl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.crictlBin, append([]string{"--runtime-endpoint", "unix://" + c.socket, "--image-endpoint", "unix://" + c.socket, "--timeout", "60s"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), fmt.Errorf("crictl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()+" "+stdout.String()))
	}
	return stdout.String(), nil
}

// logs is what a container wrote, stdout and stderr.
func (c *testContainerd) logs(ctx context.Context, id string) string {
	out, err := exec.CommandContext(ctx, c.crictlBin, "--runtime-endpoint", "unix://"+c.socket, "logs", id).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("crictl logs %s: %v: %s", id, err, out)
	}
	return string(out)
}

func (c *testContainerd) mustCrictl(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	out, err := c.crictl(ctx, args...)
	if err != nil {
		t.Fatalf("%v\ncontainerd log:\n%s", err, tail(filepath.Join(c.dir, "containerd.log"), 15))
	}
	return strings.TrimSpace(out)
}

func (c *testContainerd) writeJSON(t *testing.T, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// containerdConfig is a config in the format of containerd 1.x (version 2)
// or 2.x (version 3, which containerd 2.4 migrates to its 4 in memory;
// bin_dirs is 2.1's), with the sandbox image Pause.
func containerdConfig(v2 bool, dir, socket string) string {
	common := fmt.Sprintf("root = %q\nstate = %q\n[grpc]\n  address = %q\n[ttrpc]\n  address = %q\n[plugins.\"io.containerd.internal.v1.opt\"]\n  path = %q\n",
		filepath.Join(dir, "root"), filepath.Join(dir, "state"), socket, socket+".ttrpc", filepath.Join(dir, "opt"))
	runcRoot := filepath.Join(dir, "runc")
	cniBin, cniConf := filepath.Join(dir, "cni-bin"), filepath.Join(dir, "net.d")
	if !v2 {
		return "version = 2\n" + common + fmt.Sprintf(`[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
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
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, Pause, runcRoot, cniBin, cniConf)
	}
	return "version = 3\n" + common + fmt.Sprintf(`[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %q
[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%q]
    conf_dir = %q
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, Pause, runcRoot, cniBin, cniConf)
}

// startContainerd starts containerd in a new network namespace, with
// everything under a new dir, and registers its teardown: the pods
// through the CRI, containerd by its pid, then whatever names the dir on
// its command line (shims and their children), the mounts under the
// dir, the cgroups, the dir and the namespace.
func startContainerd(t *testing.T, bin, crictl string) *testContainerd {
	// The namespace goes after the teardown below (cleanups run last
	// first), once nothing of containerd's is in it.
	netns := netnstest.New(t)
	dir, err := os.MkdirTemp("", "reefimgtest-")
	if err != nil {
		t.Fatal(err)
	}
	c := &testContainerd{dir: dir, socket: filepath.Join(dir, "containerd.sock"), id: filepath.Base(dir), crictlBin: crictl}
	var cmd *exec.Cmd
	done := make(chan struct{})
	t.Cleanup(func() {
		if cmd != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			c.crictl(ctx, "rmp", "-fa")
			cancel()
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
		killNaming(t, dir)
		unmountUnder(t, dir)
		removeCgroups("/" + c.id)
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("remove %s: %v", dir, err)
		}
	})
	netnstest.Run(t, netns, "ip", "link", "set", "lo", "up")
	for _, d := range []string{"net.d", "cni-bin", "pod-logs", "bin"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ver, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", bin, err)
	}
	c.version = strings.TrimSpace(string(ver))
	f := strings.Fields(c.version)
	v2 := len(f) >= 3 && strings.HasPrefix(f[2], "v2.")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(containerdConfig(v2, dir, c.socket)), 0o644); err != nil {
		t.Fatal(err)
	}
	// A containerd 2 built as containerd2 has its shim beside it as
	// containerd2-shim-runc-v2; containerd looks for
	// containerd-shim-runc-v2 in PATH.
	path := os.Getenv("PATH")
	if full, err := exec.LookPath(bin); err == nil {
		shim := filepath.Join(filepath.Dir(full), filepath.Base(full)+"-shim-runc-v2")
		if filepath.Base(full) != "containerd" && exists(shim) {
			if err := os.Symlink(shim, filepath.Join(dir, "bin", "containerd-shim-runc-v2")); err != nil {
				t.Fatal(err)
			}
			path = filepath.Join(dir, "bin") + ":" + path
		}
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd = exec.Command("nsenter", "--net="+netns.Path(), "--", bin, "--config", filepath.Join(dir, "config.toml"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "PATH="+path)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	waitFor(t, 30*time.Second, "containerd's CRI answers", func() error {
		select {
		case <-done:
			return poll.Stop(fmt.Errorf("containerd exited:\n%s", tail(filepath.Join(dir, "containerd.log"), 20)))
		default:
		}
		_, err := c.crictl(context.Background(), "version")
		return err
	})
	return c
}

// killNaming kills the processes whose command line names dir.
func killNaming(t *testing.T, dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(dir)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pid == os.Getpid() || pid == 0 {
			continue
		}
		t.Logf("killing %d: %s", pid, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// unmountUnder unmounts every mount under dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mounts = append(mounts, f[4])
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Logf("umount %s: %v", m, err)
		}
	}
}

// removeCgroups removes the empty cgroup dirs under parent in every
// hierarchy, deepest first.
func removeCgroups(parent string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		top := filepath.Join(root, parent)
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
	}
}

// waitFor polls f until it returns nil (poll.Until), failing the test
// with what it waited for after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	if err := poll.Until(timeout, f); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func tail(p string, n int) string {
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
