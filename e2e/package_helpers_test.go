package e2e

// Helpers of package_test.go: building the packages with `make package`,
// dpkg runs with a recording systemctl, a stand-in for systemd that starts
// the installed daemon the way reef.service describes, and pods wired with
// the installed conflist and /opt/cni/bin.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/netnstest"
	"github.com/reefcni/reef/internal/poll"
	reefv1 "github.com/reefcni/reef/proto"
)

// Where the package puts things (nfpm.yaml); the tests read them there.
const (
	installedReef     = "/usr/bin/reef"
	installedShim     = "/opt/cni/bin/reef-cni"
	installedUnit     = "/lib/systemd/system/reef.service"
	installedConfig   = "/etc/reef/config.yaml"
	installedConflist = "/etc/cni/net.d/10-reef.conflist"
	installedSocket   = "/run/reef/reef.sock"
	installedStateDir = "/var/lib/reef"
	// installedKubeconfig is where `reef kubeconfig` writes by default
	// (its --out): a credential of reef's, not a file of the package.
	installedKubeconfig = "/etc/reef/kubeconfig"
	enabledLink         = "/etc/systemd/system/multi-user.target.wants/reef.service"
)

// repoRoot is the top of the work tree (the e2e tests run in e2e/).
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// builtPackages is one `make package` output.
type builtPackages struct {
	Version string
	Commit  string
	Deb     string
	RPM     string
}

// packager builds the packages once per version, into dir (a temporary
// directory of its own when that is "").
type packager struct {
	dir   string
	mu    sync.Mutex
	built map[string]*builtPackages // by requested version ("" = make's own)
}

// packages is the packager of every test in the binary: `make package`
// runs once per version (30 to 45 s each here), for whichever test asks
// first, and TestMain removes what it built.
var packages = &packager{}

// build runs `make package`: version "" builds the version that
// packaging/version.sh prints, as a plain `make package` does; anything
// else is passed as PKG_VERSION.
func (pk *packager) build(t *testing.T, version string) *builtPackages {
	t.Helper()
	pk.mu.Lock()
	defer pk.mu.Unlock()
	if p := pk.built[version]; p != nil {
		return p
	}
	if pk.built == nil {
		pk.built = map[string]*builtPackages{}
	}
	if pk.dir == "" {
		dir, err := os.MkdirTemp("", "reef-e2e-packages-")
		if err != nil {
			t.Fatal(err)
		}
		pk.dir = dir
	}
	root := repoRoot(t)
	want := version
	if want == "" {
		want = strings.TrimSpace(cmdOut(t, filepath.Join(root, "packaging/version.sh")))
	}
	commit := strings.TrimSpace(cmdOut(t, "git", "-C", root, "rev-parse", "--short", "HEAD"))
	dist := filepath.Join(pk.dir, fmt.Sprintf("dist%d", len(pk.built)))
	args := []string{"-C", root, "--no-print-directory", "package", "DIST=" + dist}
	if version != "" {
		args = append(args, "PKG_VERSION="+version)
	}
	start := time.Now()
	cmdOut(t, "make", args...)
	t.Logf("make package (version %s) took %s", want, time.Since(start).Round(100*time.Millisecond))
	p := &builtPackages{
		Version: want,
		Commit:  commit,
		Deb:     filepath.Join(dist, "reef_"+want+"_amd64.deb"),
		RPM:     filepath.Join(dist, "reef-"+want+".x86_64.rpm"),
	}
	for _, f := range []string{p.Deb, p.RPM} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("make package did not write %s: %v\n%s", f, err, cmdOut(t, "ls", "-l", dist))
		}
	}
	pk.built[version] = p
	return p
}

// needTools skips the test when a tool is missing; `make test` installs
// them all (TEST_PKGS), so a skip only happens outside it.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (make test installs it): %v", tool, err)
		}
	}
}

// cmdOut runs a command and fails the test if it fails.
func cmdOut(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// upgradePackages is the start of every upgrade test: it builds version
// N and N+1 of the packages, then takes the machine's package lock and
// removes what an earlier, killed run installed.
func upgradePackages(t *testing.T, pk *packager) (oldPkg, newPkg *builtPackages) {
	t.Helper()
	oldPkg = pk.build(t, "")
	newPkg = pk.build(t, oldPkg.Version+".1")
	lockPackageTests(t)
	cleanInstalled(t)
	return oldPkg, newPkg
}

// lockPackageTests serialises the tests that install the package: there is
// one dpkg database, one /usr/bin/reef and one /var/lib/reef per machine,
// and two test binaries (two developers' `make test`) may run at once.
func lockPackageTests(t *testing.T) {
	t.Helper()
	dir := "/run/lock"
	if _, err := os.Stat(dir); err != nil {
		dir = "/run"
	}
	f, err := os.OpenFile(filepath.Join(dir, "reef-e2e-package.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("waited %s for another test run's package tests", d.Round(time.Second))
	}
	t.Cleanup(func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	})
}

// netnsInode identifies a network namespace.
func netnsInode(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// installedDaemons lists the processes running /usr/bin/reef (also a
// replaced or deleted one) and whether each is in the host's network
// namespace.
func installedDaemons() (pids []int, onHost []bool) {
	host, _ := netnsInode("/proc/self/ns/net")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		exe, err := os.Readlink(p + "/exe")
		if err != nil || strings.TrimSuffix(exe, " (deleted)") != installedReef {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(p))
		ino, _ := netnsInode(p + "/ns/net")
		pids, onHost = append(pids, pid), append(onHost, ino == host)
	}
	return pids, onHost
}

// cleanInstalled removes what a test run killed half-way left: daemons of
// the installed binary in lab namespaces, the package (purged from a
// namespace of its own, so that its `reef cleanup` cannot touch the host),
// and reef's state directories. A reef daemon in the host's own network
// namespace is not the tests': the test stops rather than touch it.
func cleanInstalled(t *testing.T) {
	t.Helper()
	keepHostFile(t, "/etc/iproute2/rt_protos.d/reef.conf") // a leftover's purge removes it
	pids, onHost := installedDaemons()
	for i, pid := range pids {
		if onHost[i] {
			t.Fatalf("%s runs as pid %d in the host's network namespace; the package tests install and purge reef and would disturb it", installedReef, pid)
		}
		t.Logf("killing pid %d, a daemon of an earlier run of these tests", pid)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if len(pids) > 0 {
		if err := poll.Until(5*time.Second, func() error {
			if p, _ := installedDaemons(); len(p) > 0 {
				return fmt.Errorf("daemons %v still run", p)
			}
			return nil
		}); err != nil {
			t.Log(err)
		}
	}
	if status := dpkgStatus("reef"); status != "" {
		t.Logf("reef is %q from an earlier run; purging it", status)
		out, err := netnstest.Output(netnstest.New(t), "dpkg", "--purge", "reef")
		if err != nil {
			t.Fatalf("dpkg --purge reef (leftover): %v\n%s", err, out)
		}
	}
	for _, d := range []string{installedStateDir, filepath.Dir(installedSocket)} {
		if _, err := os.Stat(d); err == nil {
			t.Logf("removing %s, left by an earlier run", d)
			os.RemoveAll(d)
		}
	}
}

// dpkgStatus is the package's dpkg status ("installed", "config-files",
// ...) or "" when dpkg does not know it.
func dpkgStatus(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${db:Status-Status}", pkg).Output()
	if err != nil {
		return ""
	}
	s := strings.TrimSpace(string(out))
	if s == "not-installed" {
		return ""
	}
	return s
}

// keepHostFile saves a file the package also installs (make deps-test
// puts rt_protos.d/reef.conf in place for the lab) and puts it back when
// the test ends, after the purge removed it.
func keepHostFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	st, _ := os.Stat(path)
	t.Cleanup(func() {
		if _, err := os.Stat(path); err == nil {
			return
		}
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, b, st.Mode().Perm()); err != nil {
			t.Errorf("restore %s: %v", path, err)
		}
	})
}

// pkgEnv is where dpkg and the maintainer scripts run: in a lab network
// namespace (so that the purge's `reef cleanup` cleans that namespace, never
// the host), with a systemctl on PATH that records each call. With
// fakeSystemd, /run/systemd/system exists for them (a tmpfs in a mount
// namespace of their own), so the scripts take their "systemd runs" path;
// the recording systemctl changes nothing then, and the test plays
// systemd's part. Without it, the scripts see this machine as it is (no
// systemd as PID 1) and the recording systemctl passes calls to the real
// one, which can only edit unit symlinks then.
type pkgEnv struct {
	netns       string
	fakeSystemd bool
	log         string // one line per systemctl call
	stubDir     string
}

func newPkgEnv(t *testing.T, netns string, fakeSystemd bool) *pkgEnv {
	t.Helper()
	real, err := exec.LookPath("systemctl")
	if err != nil {
		t.Fatalf("systemctl: %v", err)
	}
	dir := t.TempDir()
	e := &pkgEnv{netns: netns, fakeSystemd: fakeSystemd, log: filepath.Join(dir, "systemctl.log"), stubDir: filepath.Join(dir, "bin")}
	pass := ""
	if !fakeSystemd {
		pass = fmt.Sprintf("exec %s \"$@\"\n", real)
	}
	stub := fmt.Sprintf("#!/bin/sh\n# records the maintainer scripts' systemctl calls for the reef e2e tests\necho \"$*\" >> %s\n%sexit 0\n", e.log, pass)
	if err := os.MkdirAll(e.stubDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.stubDir, "systemctl"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// dpkg runs dpkg with args and returns its output.
func (e *pkgEnv) dpkg(t *testing.T, args ...string) string {
	t.Helper()
	out, err := e.run(append([]string{"dpkg"}, args...)...)
	if err != nil {
		t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// run runs a command in the environment.
func (e *pkgEnv) run(args ...string) (string, error) {
	full := []string{"--net=" + lab.NetnsPath(e.netns), "--"}
	if e.fakeSystemd {
		// unshare --mount makes every mount private, so the tmpfs never
		// reaches the host; the guard refuses to mount in the host's
		// mount namespace should unshare not have made a new one.
		host, _ := os.Readlink("/proc/self/ns/mnt")
		full = append(full, "unshare", "--mount", "--", "sh", "-ec",
			`[ "$(readlink /proc/self/ns/mnt)" != "$0" ] || { echo "not in a new mount namespace" >&2; exit 1; }
mount -t tmpfs -o mode=0755 reef-e2e-fake-systemd /run/systemd
mkdir /run/systemd/system
exec "$@"`, host)
	}
	full = append(full, args...)
	cmd := exec.Command("nsenter", full...)
	cmd.Env = append(os.Environ(), "PATH="+e.stubDir+":"+os.Getenv("PATH"), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// calls returns the systemctl calls recorded since the last call of calls.
func (e *pkgEnv) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(e.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	os.Remove(e.log)
	return nonEmptyLines(string(b))
}

// unitFile is a parsed systemd unit: "Section.Key" -> values in order.
type unitFile map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "["):
			section = strings.Trim(l, "[]")
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok {
				t.Fatalf("%s: line %q is not key=value", path, l)
			}
			u[section+"."+k] = append(u[section+"."+k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// get returns the last value of a key ("" if unset), as systemd reads it.
func (u unitFile) get(key string) string {
	v := u[key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// capabilities of the unit's CapabilityBoundingSet, lower-case without
// "cap_", as setpriv takes them.
func (u unitFile) capabilities() []string {
	var caps []string
	for _, c := range strings.Fields(u.get("Service.CapabilityBoundingSet")) {
		caps = append(caps, strings.TrimPrefix(strings.ToLower(c), "cap_"))
	}
	return caps
}

// capBits maps the capabilities the unit may name to their numbers
// (linux/capability.h), to check /proc/<pid>/status.
var capBits = map[string]uint{
	"net_bind_service": 10, "net_admin": 12, "net_raw": 13, "sys_ptrace": 19, "sys_admin": 21,
}

// writablePaths are the directories the unit lets the daemon write, with
// ProtectSystem=strict: StateDirectory= and RuntimeDirectory= (relative to
// /var/lib and /run) and ReadWritePaths=.
func (u unitFile) writablePaths() []string {
	var out []string
	for _, d := range strings.Fields(u.get("Service.StateDirectory")) {
		out = append(out, filepath.Join("/var/lib", d))
	}
	for _, d := range strings.Fields(u.get("Service.RuntimeDirectory")) {
		out = append(out, filepath.Join("/run", d))
	}
	return append(out, strings.Fields(u.get("Service.ReadWritePaths"))...)
}

// sdMessage is one sd_notify datagram.
type sdMessage struct {
	at   time.Time
	text string
}

// notifySocket is the socket systemd passes as NOTIFY_SOCKET.
type notifySocket struct {
	path string
	conn *net.UnixConn
	mu   sync.Mutex
	msgs []sdMessage
}

func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	s := &notifySocket{path: path, conn: conn}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.msgs = append(s.msgs, sdMessage{time.Now(), string(buf[:n])})
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return s
}

// count returns how many messages had the line, and when the last came.
func (s *notifySocket) count(line string) (int, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, last := 0, time.Time{}
	for _, m := range s.msgs {
		if slices.Contains(strings.Split(m.text, "\n"), line) {
			n, last = n+1, m.at
		}
	}
	return n, last
}

// unitDaemon is the installed daemon, started as systemd would start
// reef.service, so far as this machine without systemd allows:
//   - the command line is the unit's ExecStart;
//   - in a mount namespace of its own with slave propagation, like the one
//     systemd sets up for ProtectSystem=strict: every mount read-only but
//     /proc, /sys and /dev, the unit's state and runtime directories
//     writable (created 0700, as systemd does); mounts made on the host later
//     (pod namespaces) reach it;
//   - with the unit's CapabilityBoundingSet and NoNewPrivileges (setpriv);
//   - with NOTIFY_SOCKET and WATCHDOG_USEC, a clean environment;
//   - in a lab node's network namespace, which systemd would not do: the
//     host network of the test machine stays untouched.
//
// The other hardening settings (PrivateTmp, ProtectHome, the seccomp-based
// ones) are not reproduced; systemd-analyze checks their syntax only.
type unitDaemon struct {
	cmd    *exec.Cmd
	done   chan struct{}
	exit   error
	log    string
	notify *notifySocket
}

// daemonOptions vary the start for the capability tests.
type daemonOptions struct {
	dropCap     string        // a capability of the unit's set to leave out
	watchdog    time.Duration // WATCHDOG_USEC; 0: none
	extraArgs   []string
	logFileName string
}

func startUnitDaemon(t *testing.T, node *lab.Node, unit unitFile, opts daemonOptions) *unitDaemon {
	t.Helper()
	d := &unitDaemon{done: make(chan struct{}), notify: newNotifySocket(t)}
	name := opts.logFileName
	if name == "" {
		name = "daemon.log"
	}
	d.log = filepath.Join(t.TempDir(), name)
	logf, err := os.Create(d.log)
	if err != nil {
		t.Fatal(err)
	}
	d.cmd = unitCommand(t, node, unit, opts, d.notify)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	if err := d.cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	go func() {
		d.exit = d.cmd.Wait()
		logf.Close()
		close(d.done)
	}()
	t.Cleanup(func() {
		d.stop(syscall.SIGKILL)
		if t.Failed() {
			t.Logf("log of %s:\n%s", strings.Fields(unit.get("Service.ExecStart"))[0], d.logTail(30))
		}
	})
	return d
}

// unitCommand is the command startUnitDaemon runs: the unit's ExecStart
// in node's network namespace, sandboxed as that describes, with notify
// as its NOTIFY_SOCKET. It creates the unit's writable directories.
func unitCommand(t *testing.T, node *lab.Node, unit unitFile, opts daemonOptions, notify *notifySocket) *exec.Cmd {
	t.Helper()
	if unit.get("Service.ProtectSystem") != "strict" {
		t.Fatalf("the unit has ProtectSystem=%q; this stand-in only knows strict", unit.get("Service.ProtectSystem"))
	}
	exe := strings.Fields(unit.get("Service.ExecStart"))
	if len(exe) == 0 || !strings.HasPrefix(exe[0], "/") {
		t.Fatalf("ExecStart=%q: want an absolute path and no prefixes", unit.get("Service.ExecStart"))
	}
	rw := unit.writablePaths()
	for _, d := range rw {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(d, 0o700)
	}
	var ro []string
	for _, m := range mountPoints(t) {
		if m == "/proc" || m == "/sys" || m == "/dev" || strings.HasPrefix(m, "/proc/") || strings.HasPrefix(m, "/sys/") || strings.HasPrefix(m, "/dev/") {
			continue
		}
		ro = append(ro, m)
	}
	bset := "-all"
	for _, c := range unit.capabilities() {
		if c != opts.dropCap {
			bset += ",+" + c
		}
	}
	privs := []string{"setpriv", "--bounding-set", bset}
	if unit.get("Service.NoNewPrivileges") == "yes" {
		privs = append(privs, "--no-new-privs")
	}
	host, _ := os.Readlink("/proc/self/ns/mnt")
	script := `host=$0
[ "$(readlink /proc/self/ns/mnt)" != "$host" ] || { echo "not in a new mount namespace" >&2; exit 1; }
while [ "$1" != -- ]; do mount -o remount,bind,ro "$1" 2>/dev/null || echo "sandbox: $1 stays writable" >&2; shift; done; shift
while [ "$1" != -- ]; do mount --bind "$1" "$1" && mount -o remount,bind,rw "$1"; shift; done; shift
exec "$@"`
	args := []string{"--mount", "--propagation", "slave", "--", "sh", "-ec", script, host}
	args = append(append(args, ro...), "--")
	args = append(append(args, rw...), "--")
	args = append(args, "nsenter", "--net="+lab.NetnsPath(node.Netns), "--")
	args = append(append(args, privs...), "--")
	args = append(append(args, exe...), opts.extraArgs...)
	cmd := exec.Command("unshare", args...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "NOTIFY_SOCKET=" + notify.path}
	if opts.watchdog > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("WATCHDOG_USEC=%d", opts.watchdog.Microseconds()))
	}
	return cmd
}

// mountPoints lists this mount namespace's mount points, less the network
// namespace files (nsfs) under /run/netns.
func mountPoints(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range nonEmptyLines(string(b)) {
		f := strings.Fields(l)
		sep := slices.Index(f, "-")
		if len(f) < 5 || sep < 0 || sep+1 >= len(f) || f[sep+1] == "nsfs" {
			continue
		}
		// mountinfo escapes space, tab, newline and backslash in octal.
		m := f[4]
		for _, esc := range []struct{ from, to string }{{`\040`, " "}, {`\011`, "\t"}, {`\012`, "\n"}, {`\134`, `\`}} {
			m = strings.ReplaceAll(m, esc.from, esc.to)
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func (d *unitDaemon) pid() int { return d.cmd.Process.Pid }

func (d *unitDaemon) running() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// waitReady waits for READY=1 (systemd's start job completing).
func (d *unitDaemon) waitReady(timeout time.Duration) error {
	err := poll.Until(timeout, func() error {
		if n, _ := d.notify.count("READY=1"); n > 0 {
			return nil
		}
		if !d.running() {
			return poll.Stop(fmt.Errorf("daemon exited before READY=1: %v", d.exit))
		}
		return errors.New("no READY=1")
	})
	if err != nil {
		return fmt.Errorf("%v\n%s", err, d.logTail(20))
	}
	return nil
}

// stop signals the daemon and waits until it is gone (systemctl stop:
// SIGTERM, then SIGKILL after TimeoutStopSec; the test uses 30 s).
func (d *unitDaemon) stop(sig syscall.Signal) error {
	if !d.running() {
		return nil
	}
	d.cmd.Process.Signal(sig)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
		return fmt.Errorf("daemon did not exit within 30s of %s", sig)
	}
	if sig == syscall.SIGTERM && d.exit != nil {
		return fmt.Errorf("daemon exited with %v after SIGTERM\n%s", d.exit, d.logTail(10))
	}
	return nil
}

func (d *unitDaemon) logText() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

func (d *unitDaemon) logTail(n int) string {
	lines := strings.Split(strings.TrimRight(d.logText(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// effectiveCaps reads CapEff of a process.
func effectiveCaps(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no CapEff in /proc/%d/status", pid)
	return 0
}

// nodeStatus asks the daemon on the installed socket for its status, as
// `reef status` does.
func installedIPAM(t *testing.T) (*reefv1.StatusReply, *reefv1.IPAMReply) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+installedSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := reefv1.NewNodeClient(conn)
	st, err := c.Status(ctx, &reefv1.StatusRequest{})
	if err != nil {
		t.Fatalf("status over %s: %v", installedSocket, err)
	}
	ipam, err := c.IPAM(ctx, &reefv1.IPAMRequest{ShowBlocks: true, ShowAllocations: true})
	if err != nil {
		t.Fatalf("ipam over %s: %v", installedSocket, err)
	}
	return st, ipam
}

// installedPod is a pod namespace wired the way containerd would do it on
// a node with the package: libcni with the installed conflist and
// /opt/cni/bin.
type installedPod struct {
	l           *lab.Lab
	name        string
	netns       string
	containerID string
	ip          netip.Addr // invalid with IPv6 pools only
	ip6         netip.Addr // with an IPv6 pool in the config
}

var installedPodSeq int

func newInstalledPod(t *testing.T, l *lab.Lab, name string) (*installedPod, error) {
	t.Helper()
	installedPodSeq++
	id := make([]byte, 32)
	rand.Read(id)
	p := &installedPod{l: l, name: name, netns: fmt.Sprintf("%s-pk%d", l.Prefix, installedPodSeq), containerID: hex.EncodeToString(id)}
	if err := l.AddNetns(p.netns); err != nil {
		t.Fatal(err)
	}
	return p, p.add(t)
}

func installedCNI(t *testing.T) (*libcni.CNIConfig, *libcni.NetworkConfigList) {
	t.Helper()
	list, err := libcni.ConfListFromFile(installedConflist)
	if err != nil {
		t.Fatalf("the installed conflist: %v", err)
	}
	// The runtime's cache dir; lab namespaces are gone after the test, so
	// what libcni keeps there is stale then and may be overwritten.
	return libcni.NewCNIConfigWithCacheDir([]string{filepath.Dir(installedShim)}, filepath.Join(os.TempDir(), "reef-e2e-pkg-cni-cache"), nil), list
}

func (p *installedPod) rt() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: p.containerID, NetNS: lab.NetnsPath(p.netns), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", p.name}}}
}

func (p *installedPod) add(t *testing.T) error {
	t.Helper()
	cni, list := installedCNI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := cni.AddNetworkList(ctx, list, p.rt())
	if err != nil {
		return fmt.Errorf("ADD %s: %w", p.name, err)
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return err
	}
	for _, ip := range r.IPs {
		a, _ := netip.AddrFromSlice(ip.Address.IP)
		switch a = a.Unmap(); {
		case a.Is4() && !p.ip.IsValid():
			p.ip = a
		case a.Is6() && !p.ip6.IsValid():
			p.ip6 = a
		default:
			return fmt.Errorf("ADD %s: addresses %v in the result, want at most one address of each family", p.name, r.IPs)
		}
	}
	if !p.ip.IsValid() && !p.ip6.IsValid() {
		return fmt.Errorf("ADD %s: no address in the result %v", p.name, r.IPs)
	}
	return nil
}

func (p *installedPod) check(t *testing.T) error {
	t.Helper()
	cni, list := installedCNI(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return cni.CheckNetworkList(ctx, list, p.rt())
}

// eth0Addr reads the pod's addresses (of both families) from the kernel.
func (p *installedPod) eth0Addr(t *testing.T) string {
	t.Helper()
	return strings.TrimSpace(run(t, p.l, p.netns, "ip", "-o", "addr", "show", "dev", "eth0", "scope", "global"))
}

// installAsUnit installs pkg on lab node n before the lab starts its
// daemon, and makes the lab run the installed daemon as reef.service does
// (unitCommand, with the unit file installed at that moment) at each
// start of n: a node that runs reef from the package among the lab's
// daemons. config.yaml is the package's with the operator's edit: n's
// lab config less the paths the package sets (state, socket, CNI), and
// the store is initialised with the installed binary, as the operator of
// a new cluster does on a founding voter, which n must be. n's Config,
// StateDir and Socket become the installed ones, so that the lab's
// status calls and waits reach the installed daemon. It returns the dpkg
// environment, in n's namespace with systemd played (upgrades go through
// it), and the daemon's NOTIFY_SOCKET. The caller holds
// lockPackageTests and ran cleanInstalled; the package is purged when
// the test ends.
func installAsUnit(t *testing.T, l *lab.Lab, n *lab.Node, pkg *builtPackages) (*pkgEnv, *notifySocket) {
	t.Helper()
	labCfg, err := os.ReadFile(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	var operator []string
	for _, line := range strings.Split(string(labCfg), "\n") {
		key, _, _ := strings.Cut(line, ":")
		if strings.HasPrefix(line, "#") || slices.Contains([]string{"stateDir", "socket", "pendingDeleteDir", "cniConfDir", "cniBinDir"}, key) {
			continue
		}
		operator = append(operator, line)
	}
	purgeAtEnd(t, n.Netns)
	env := newPkgEnv(t, n.Netns, true)
	installConfigured(t, env, pkg, strings.Join(operator, "\n"))
	run(t, l, n.Netns, installedReef, "store", "init", "--config", installedConfig)
	notify := newNotifySocket(t)
	opts := n.Options()
	opts.Command = func() (*exec.Cmd, error) {
		return unitCommand(t, n, parseUnit(t, installedUnit), daemonOptions{}, notify), nil
	}
	if err := n.SetOptions(opts); err != nil {
		t.Fatal(err)
	}
	n.Config, n.StateDir, n.Socket = installedConfig, installedStateDir, installedSocket
	return env, notify
}
