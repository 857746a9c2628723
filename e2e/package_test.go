package e2e

// The .deb and .rpm that `make package` builds: their contents, the .deb
// installed on this machine with dpkg and the installed daemon run the way
// reef.service runs it, remove and purge, an upgrade under traffic, the
// .rpm's scriptlets, and the unit checked by systemd-analyze.
//
// This machine runs no systemd as PID 1, and its host network must never
// change. So dpkg and the maintainer scripts run in a lab node's network
// namespace (the purge's `reef cleanup` cleans that namespace), the daemon
// runs there too, and the test plays systemd's part: it starts the daemon
// as ExecStart says, in a sandbox made from the unit's settings, and
// listens on NOTIFY_SOCKET (see unitDaemon).

import (
	"bytes"
	"debug/elf"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
	reefv1 "github.com/reefcni/reef/proto"
)

// packagedFile is one file the packages install.
type packagedFile struct {
	path     string
	mode     os.FileMode
	conffile bool
}

// wantFiles are the .deb's files; the .rpm has the same, with the unit in
// /usr/lib/systemd/system.
var wantFiles = []packagedFile{
	{"/etc/cni/net.d/10-reef.conflist", 0o644, true},
	{"/etc/iproute2/rt_protos.d/reef.conf", 0o644, true},
	{"/etc/reef/config.yaml", 0o644, true},
	{installedUnit, 0o644, false},
	{installedShim, 0o755, false},
	{installedReef, 0o755, false},
	{"/usr/lib/NetworkManager/conf.d/reef.conf", 0o644, false},
	{"/usr/lib/systemd/networkd.conf.d/reef.conf", 0o644, false},
	{"/usr/share/reef/rbac.yaml", 0o644, false},
	{"/usr/share/reef/reef-alerts.yml", 0o644, false},
	{"/usr/share/reef/reef-dashboard.json", 0o644, false},
}

const rpmUnit = "/usr/lib/systemd/system/reef.service"

func wantPaths(rpm bool) []string {
	var out []string
	for _, f := range wantFiles {
		p := f.path
		if rpm && p == installedUnit {
			p = rpmUnit
		}
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// TestSystemdUnit: systemd-analyze verify accepts systemd/reef.service and
// its exposure score stays what the hardening makes it; the unit says what
// the issue asks of it. verify needs the ExecStart binary and the units the
// service depends on under its --root, so the check builds such a root.
func TestSystemdUnit(t *testing.T) {
	needTools(t, "systemd-analyze")
	unitPath := filepath.Join(repoRoot(t), "systemd/reef.service")
	root := t.TempDir()
	for _, d := range []string{"etc/systemd/system", "usr/bin", "usr/lib/systemd"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmdOut(t, "cp", "-a", "/usr/lib/systemd/system", filepath.Join(root, "usr/lib/systemd/"))
	cmdOut(t, "cp", unitPath, filepath.Join(root, "etc/systemd/system/reef.service"))
	cmdOut(t, "cp", filepath.Join(binDir, "reef"), filepath.Join(root, "usr/bin/reef"))

	// verify prints problems (an unknown key, a bad value) as warnings and
	// may still exit 0: any line naming the unit fails the test.
	out, err := exec.Command("systemd-analyze", "verify", "--root="+root, "reef.service").CombinedOutput()
	if err != nil || strings.Contains(string(out), "reef") {
		t.Errorf("systemd-analyze verify reef.service: %v\n%s", err, out)
	}

	out, err = exec.Command("systemd-analyze", "security", "--offline=yes", "--root="+root, "reef.service").CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for reef.service: ([0-9.]+)`).FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	// 10 is no hardening at all. CAP_SYS_ADMIN and CAP_NET_ADMIN alone weigh
	// heavily, and the daemon must be root and reach the network.
	if score, _ := strconv.ParseFloat(string(m[1]), 64); score > 6.0 {
		t.Errorf("systemd-analyze security: exposure %.1f, want at most 6.0 (it was 5.3 when the unit was written)\n%s", score, out)
	} else {
		t.Logf("systemd-analyze security: exposure %.1f", score)
	}

	u := parseUnit(t, unitPath)
	for key, want := range map[string]string{
		"Unit.Wants":                    "network-online.target",
		"Unit.After":                    "network-online.target",
		"Unit.Before":                   "kubelet.service",
		"Service.Type":                  "notify",
		"Service.ExecStart":             "/usr/bin/reef daemon --config /etc/reef/config.yaml",
		"Service.Restart":               "always",
		"Service.WatchdogSec":           "60s",
		"Service.ProtectSystem":         "strict",
		"Service.NoNewPrivileges":       "yes",
		"Service.CapabilityBoundingSet": "CAP_NET_ADMIN CAP_SYS_ADMIN CAP_NET_BIND_SERVICE",
		"Install.WantedBy":              "multi-user.target",
	} {
		if got := u.get(key); got != want {
			t.Errorf("reef.service: %s=%q, want %q", key, got, want)
		}
	}
	// Settings that would hide the pods' network namespaces or /proc/sys.
	for _, key := range []string{"Service.ProtectProc", "Service.ProcSubset", "Service.ProtectKernelTunables", "Service.PrivateNetwork", "Service.PrivateMounts", "Service.InaccessiblePaths", "Service.TemporaryFileSystem", "Service.RestrictNamespaces"} {
		if v := u.get(key); v != "" {
			t.Errorf("reef.service sets %s=%s, which keeps the daemon from pod namespaces or sysctls", key, v)
		}
	}
}

// TestPackage builds the packages once and runs the package tests on them.
// Those that install run one at a time, also across test binaries.
func TestPackage(t *testing.T) {
	needTools(t, "dpkg", "dpkg-deb", "rpm", "setpriv", "unshare", "systemctl", "make", "git")
	pk := packages
	t.Run("Contents", func(t *testing.T) { testPackageContents(t, pk) })
	t.Run("RPMScriptlets", func(t *testing.T) { testRPMScriptlets(t, pk) })
	t.Run("InstallRunRemovePurge", func(t *testing.T) { testInstallRunRemovePurge(t, pk) })
	t.Run("Upgrade", func(t *testing.T) { testUpgrade(t, pk) })
}

// testPackageContents: both packages hold the files, modes and conffiles of
// wantFiles, the same bytes, static binaries stamped with the package
// version and commit, and the maintainer scripts of packaging/scripts.
func testPackageContents(t *testing.T, pk *packager) {
	p := pk.build(t, "")
	root := repoRoot(t)

	// The .deb: control fields, files with modes and owners, conffiles.
	for field, want := range map[string]string{"Package": "reef", "Version": p.Version, "Architecture": "amd64"} {
		if got := strings.TrimSpace(cmdOut(t, "dpkg-deb", "-f", p.Deb, field)); got != want {
			t.Errorf(".deb %s: %q, want %q", field, got, want)
		}
	}
	debFiles := map[string]string{} // path -> "mode owner"
	for _, l := range nonEmptyLines(cmdOut(t, "dpkg-deb", "-c", p.Deb)) {
		f := strings.Fields(l) // -rwxr-xr-x root/root 123 2025-01-01 12:00 ./usr/bin/reef
		if len(f) < 6 || strings.HasPrefix(f[0], "d") {
			continue
		}
		debFiles[strings.TrimPrefix(f[5], ".")] = f[0] + " " + f[1]
	}
	var gotPaths []string
	for path := range debFiles {
		gotPaths = append(gotPaths, path)
	}
	slices.Sort(gotPaths)
	if d := cmp.Diff(wantPaths(false), gotPaths); d != "" {
		t.Errorf(".deb files (-want +got):\n%s", d)
	}
	var wantConf []string
	for _, f := range wantFiles {
		if got, want := debFiles[f.path], f.mode.String()+" root/root"; got != want {
			t.Errorf(".deb %s: %q, want %q", f.path, got, want)
		}
		if f.conffile {
			wantConf = append(wantConf, f.path)
		}
	}
	if d := cmp.Diff(wantConf, nonEmptyLines(cmdOut(t, "dpkg-deb", "-I", p.Deb, "conffiles"))); d != "" {
		t.Errorf(".deb conffiles (-want +got):\n%s", d)
	}
	ctrl := t.TempDir()
	cmdOut(t, "dpkg-deb", "-e", p.Deb, ctrl)
	for _, s := range []string{"postinst", "prerm", "postrm"} {
		got, err := os.ReadFile(filepath.Join(ctrl, s))
		if err != nil {
			t.Errorf(".deb has no %s: %v", s, err)
			continue
		}
		want, _ := os.ReadFile(filepath.Join(root, "packaging/scripts/deb", s))
		if !bytes.Equal(got, want) {
			t.Errorf(".deb %s differs from packaging/scripts/deb/%s", s, s)
		}
		if st, _ := os.Stat(filepath.Join(ctrl, s)); st.Mode().Perm() != 0o755 {
			t.Errorf(".deb %s has mode %v, want 0755", s, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(ctrl, "preinst")); err == nil {
		t.Errorf(".deb has a preinst; packaging/ has none")
	}

	// The .rpm: header, digests, files with modes, owners, config flags.
	if out, err := exec.Command("rpm", "-K", "--nosignature", p.RPM).CombinedOutput(); err != nil || !strings.Contains(string(out), "digests OK") {
		t.Errorf("rpm -K: %v: %s", err, out)
	}
	if got, want := cmdOut(t, "rpm", "-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}", p.RPM), "reef "+p.Version+" 1 x86_64"; got != want {
		t.Errorf(".rpm header: %q, want %q", got, want)
	}
	rpmFiles := map[string][]string{} // path -> dump fields
	for _, l := range nonEmptyLines(cmdOut(t, "rpm", "-qp", "--dump", p.RPM)) {
		// path size mtime digest mode owner group isconfig isdoc rdev symlink
		f := strings.Fields(l)
		if len(f) < 9 {
			t.Fatalf("rpm --dump line %q", l)
		}
		rpmFiles[f[0]] = f[1:]
	}
	for _, d := range []string{"/etc/reef", "/usr/share/reef"} {
		if dir := rpmFiles[d]; dir == nil || dir[3] != "040755" {
			t.Errorf(".rpm does not own %s as a directory 0755: %v", d, dir)
		}
		delete(rpmFiles, d)
	}
	gotPaths = gotPaths[:0]
	for path := range rpmFiles {
		gotPaths = append(gotPaths, path)
	}
	slices.Sort(gotPaths)
	if d := cmp.Diff(wantPaths(true), gotPaths); d != "" {
		t.Errorf(".rpm files (-want +got):\n%s", d)
	}
	extracted := t.TempDir()
	cmdOut(t, "dpkg-deb", "-x", p.Deb, extracted)
	for _, f := range wantFiles {
		rpmPath := f.path
		if rpmPath == installedUnit {
			rpmPath = rpmUnit
		}
		d := rpmFiles[rpmPath]
		if d == nil {
			continue
		}
		wantMode := fmt.Sprintf("0100%o", f.mode)
		wantConfig := map[bool]string{true: "1", false: "0"}[f.conffile]
		if d[3] != wantMode || d[4] != "root" || d[5] != "root" || d[6] != wantConfig {
			t.Errorf(".rpm %s: mode %s owner %s:%s config %s; want %s root:root config %s", rpmPath, d[3], d[4], d[5], d[6], wantMode, wantConfig)
		}
		// Both packages carry the same bytes.
		sum := strings.Fields(cmdOut(t, "sha256sum", filepath.Join(extracted, f.path)))[0]
		if d[2] != sum {
			t.Errorf("%s differs between the .rpm (sha256 %s) and the .deb (%s)", f.path, d[2], sum)
		}
	}
	if d := cmp.Diff(wantConf, nonEmptyLines(cmdOut(t, "rpm", "-qcp", p.RPM))); d != "" {
		t.Errorf(".rpm config files (-want +got):\n%s", d)
	}
	for tag, file := range map[string]string{"POSTIN": "post", "PREUN": "preun", "POSTUN": "postun"} {
		got := cmdOut(t, "rpm", "-qp", "--qf", "%{"+tag+"}", p.RPM)
		want, _ := os.ReadFile(filepath.Join(root, "packaging/scripts/rpm", file))
		if strings.TrimSpace(got) != strings.TrimSpace(string(want)) {
			t.Errorf(".rpm %%%s differs from packaging/scripts/rpm/%s:\n%s", strings.ToLower(tag), file, got)
		}
	}
	for _, tag := range []string{"PREIN", "PRETRANS", "POSTTRANS"} {
		if got := cmdOut(t, "rpm", "-qp", "--qf", "%{"+tag+"}", p.RPM); got != "(none)" {
			t.Errorf(".rpm has a %s scriptlet: %q", tag, got)
		}
	}

	// The binaries: static, and stamped with the package's version.
	for _, bin := range []string{installedReef, installedShim} {
		assertStatic(t, filepath.Join(extracted, bin))
	}
	checkVersions(t, extracted, p)
}

// assertStatic fails unless path is an ELF executable without an
// interpreter or shared libraries.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s is dynamically linked (program header %v)", path, p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", path, libs)
	}
}

// checkVersions runs reef and reef-cni under root (a package's file tree,
// or "/" once installed) and checks that both report the package's version
// and commit: `reef version` (and the patched GoBGP), and reef-cni run without CNI_COMMAND (the
// "about" line skel prints to stderr). CNI_COMMAND=VERSION prints what the
// CNI spec defines, the protocol versions, which must include 1.1.0.
func checkVersions(t *testing.T, root string, p *builtPackages) {
	t.Helper()
	want := fmt.Sprintf("%s (commit %s)", p.Version, p.Commit)
	// The package embeds the GoBGP of third_party/gobgp, as every build does.
	if got, wantReef := strings.TrimSpace(cmdOut(t, filepath.Join(root, installedReef), "version")), "reef "+want+", GoBGP "; !strings.HasPrefix(got, wantReef) || !strings.HasSuffix(got, "(patched: third_party/gobgp)") {
		t.Errorf("reef version: %q, want %q<version> (patched: third_party/gobgp)", got, wantReef)
	}
	shim := exec.Command(filepath.Join(root, installedShim))
	shim.Env = []string{}
	out, err := shim.CombinedOutput()
	if first, _, _ := strings.Cut(string(out), "\n"); err != nil || first != "reef-cni "+want {
		t.Errorf("reef-cni without CNI_COMMAND: %v: first line %q, want %q", err, first, "reef-cni "+want)
	}
	shim = exec.Command(filepath.Join(root, installedShim))
	shim.Env = []string{"CNI_COMMAND=VERSION"}
	shim.Stdin = strings.NewReader(`{"cniVersion":"1.1.0"}`)
	out, err = shim.Output()
	var v struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if err != nil || json.Unmarshal(out, &v) != nil || !slices.Contains(v.SupportedVersions, "1.1.0") {
		t.Errorf("reef-cni CNI_COMMAND=VERSION: %v: %s", err, out)
	}
}

// testRPMScriptlets runs the .rpm's scriptlets, as rpm would run them
// (sh with $1 = the number of reef packages after the transaction), with
// /run/systemd/system present and a recording systemctl, and checks their
// systemctl calls: install reloads only, never enables or starts; upgrade
// try-restarts; erase stops and disables. This machine has no rpm database
// to install into; reef is not installed while they run, so the erase's
// `reef cleanup` and state removal meet nothing.
func testRPMScriptlets(t *testing.T, pk *packager) {
	p := pk.build(t, "")
	lockPackageTests(t)
	cleanInstalled(t)
	l := newLab(t)
	ns := l.Prefix + "-rpm"
	if err := l.AddNetns(ns); err != nil {
		t.Fatal(err)
	}
	env := newPkgEnv(t, ns, true)
	dir := t.TempDir()
	for _, tc := range []struct {
		tag, arg string
		want     []string
	}{
		{"POSTIN", "1", []string{"daemon-reload"}},
		{"POSTIN", "2", []string{"daemon-reload", "try-restart reef.service"}},
		{"PREUN", "1", nil},
		{"POSTUN", "1", []string{"daemon-reload"}},
		{"PREUN", "0", []string{"stop reef.service", "disable reef.service"}},
		{"POSTUN", "0", []string{"daemon-reload"}},
	} {
		if prog := cmdOut(t, "rpm", "-qp", "--qf", "%{"+tc.tag+"PROG}", p.RPM); prog != "/bin/sh" {
			t.Errorf("%%%s runs with %q, want /bin/sh", tc.tag, prog)
		}
		script := filepath.Join(dir, tc.tag)
		if err := os.WriteFile(script, []byte(cmdOut(t, "rpm", "-qp", "--qf", "%{"+tc.tag+"}", p.RPM)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := env.run("sh", script, tc.arg)
		if err != nil {
			t.Errorf("%%%s %s: %v\n%s", tc.tag, tc.arg, err, out)
		}
		if d := cmp.Diff(tc.want, env.calls(t)); d != "" {
			t.Errorf("%%%s %s: systemctl calls (-want +got):\n%s\noutput: %s", tc.tag, tc.arg, d, out)
		}
	}
}

// newPackageNode is a lab node for the installed daemon (packageNode).
func newPackageNode(t *testing.T) (*lab.Lab, *lab.Node) {
	t.Helper()
	l := newLab(t)
	n, err := l.AddNode("node1", lab.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	packageNode(t, l, n, lab.Underlay.Addr().Next())
	return l, n
}

// packageNode readies lab node n for the installed daemon. It gets a
// default route of gw's family (to a gateway that does not exist) so that
// the installed config's node address detection works as on a real node:
// without one, reef falls back to the first plausible interface and skips
// veths, and the lab node's eth0 is a veth. The runtime's CNI cache of an
// earlier run goes.
func packageNode(t *testing.T, l *lab.Lab, n *lab.Node, gw netip.Addr) {
	t.Helper()
	args := []string{"route", "add", "default", "via", gw.String(), "dev", "eth0"}
	if gw.Is6() {
		args = append([]string{"-6"}, args...)
	}
	if err := l.IP(n.Netns, args...); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(filepath.Join(os.TempDir(), "reef-e2e-pkg-cni-cache"))
}

// purgeAtEnd purges the package when the test ends, however it ends.
func purgeAtEnd(t *testing.T, netns string) {
	t.Helper()
	keepHostFile(t, "/etc/iproute2/rt_protos.d/reef.conf")
	t.Cleanup(func() {
		if dpkgStatus("reef") == "" {
			return
		}
		pids, _ := installedDaemons()
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		out, err := exec.Command("nsenter", "--net="+lab.NetnsPath(netns), "--", "dpkg", "--purge", "reef").CombinedOutput()
		if err != nil {
			t.Errorf("cleanup: dpkg --purge reef: %v\n%s", err, out)
		}
	})
}

// existing returns which of paths exist.
func existing(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// testInstallRunRemovePurge: dpkg -i on this machine (no systemd running);
// the files as dpkg records them; the binaries from their installed paths;
// the installed unit verified; the daemon run as the unit runs it, with the
// installed config, serving pods wired through the installed conflist and
// /opt/cni/bin, with exactly the unit's capabilities, each of which it
// needs; remove keeps only the conffiles, the state and the kubeconfig
// `reef kubeconfig` wrote; purge leaves nothing.
func testInstallRunRemovePurge(t *testing.T, pk *packager) {
	p := pk.build(t, "")
	lockPackageTests(t)
	cleanInstalled(t)
	l, node := newPackageNode(t)
	// Directories the package shares with others: dpkg removes them on
	// purge only if they are empty and were not there before.
	shared := existing("/etc/cni", "/etc/cni/net.d", "/opt/cni", "/opt/cni/bin", "/usr/lib/NetworkManager", "/usr/lib/NetworkManager/conf.d", "/usr/lib/systemd/networkd.conf.d")
	purgeAtEnd(t, node.Netns)
	env := newPkgEnv(t, node.Netns, false)

	out := env.dpkg(t, "-i", p.Deb)
	if !strings.Contains(out, "systemctl enable --now reef") {
		t.Errorf("dpkg -i does not tell the operator how to start reef:\n%s", out)
	}
	if calls := env.calls(t); len(calls) > 0 {
		t.Errorf("without a running systemd, installing called systemctl %q", calls)
	}
	if got := dpkgStatus("reef"); got != "installed" {
		t.Fatalf("dpkg status after dpkg -i: %q", got)
	}
	// The operator runs `reef kubeconfig`, which writes reef's service
	// account token to /etc/reef/kubeconfig (mode 0600); written here as
	// it writes it, without an API server to ask for the token.
	if err := os.WriteFile(installedKubeconfig, []byte("apiVersion: v1\nkind: Config\n# reef's service account token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(installedKubeconfig) }) // before purgeAtEnd's purge, should the test stop early
	var listed []string
	for _, path := range nonEmptyLines(cmdOut(t, "dpkg", "-L", "reef")) {
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			listed = append(listed, path)
		}
	}
	slices.Sort(listed)
	if d := cmp.Diff(wantPaths(false), listed); d != "" {
		t.Errorf("dpkg -L reef, files (-want +got):\n%s", d)
	}
	for _, f := range wantFiles {
		if st, err := os.Stat(f.path); err != nil || st.Mode() != f.mode {
			t.Errorf("installed %s: %v, mode %v, want %v", f.path, err, st.Mode(), f.mode)
		}
	}
	if out, err := exec.Command("dpkg", "--verify", "reef").CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("dpkg --verify reef: %v\n%s", err, out)
	}
	checkVersions(t, "/", p)
	if _, err := exec.LookPath("systemd-analyze"); err == nil {
		if out, err := exec.Command("systemd-analyze", "verify", installedUnit).CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", installedUnit, err, out)
		}
	}
	// The operator enables the unit; remove must disable it again. Without
	// a running systemd, systemctl enable only writes the symlink.
	cmdOut(t, "systemctl", "enable", "reef.service")
	if existing(enabledLink) == nil {
		t.Fatalf("systemctl enable reef did not create %s", enabledLink)
	}

	unit := parseUnit(t, installedUnit)
	d := startUnitDaemon(t, node, unit, daemonOptions{watchdog: time.Second})
	if err := d.waitReady(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	var wantCaps uint64
	for _, c := range unit.capabilities() {
		bit, ok := capBits[c]
		if !ok {
			t.Fatalf("capability %s of the unit is not in capBits", c)
		}
		wantCaps |= 1 << bit
	}
	if got := effectiveCaps(t, d.pid()); got != wantCaps {
		t.Errorf("daemon's effective capabilities %#x, want %#x (the unit's bounding set)", got, wantCaps)
	}
	// The stand-in's sandbox took: the daemon sees / read-only and only the
	// unit's directories writable.
	mounts := daemonMounts(t, d.pid())
	if !strings.HasPrefix(mounts["/"], "ro") {
		t.Errorf("the daemon sees / mounted %q, want read-only (ProtectSystem=strict)", mounts["/"])
	}
	for _, dir := range unit.writablePaths() {
		if !strings.HasPrefix(mounts[dir], "rw") {
			t.Errorf("the daemon sees %s mounted %q, want read-write", dir, mounts[dir])
		}
	}
	a, err := newInstalledPod(t, l, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := newInstalledPod(t, l, "web-2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Ping(a.netns, b.ip); err != nil {
		t.Errorf("pod to pod: %v", err)
	}
	if _, err := l.Ping(a.netns, node.Address); err != nil {
		t.Errorf("pod to node: %v", err)
	}
	if rt := run(t, l, node.Netns, "ip", "-4", "route", "show", b.ip.String()+"/32"); !strings.Contains(rt, "proto reef") {
		t.Errorf("ip route does not name reef's protocol (rt_protos.d/reef.conf): %q", rt)
	}
	if status := cmdOut(t, installedReef, "status"); !strings.Contains(status, "is ready") {
		t.Errorf("reef status from %s:\n%s", installedReef, status)
	}
	_, ipam := installedIPAM(t)
	for _, p := range []*installedPod{a, b} {
		if !slices.ContainsFunc(ipam.GetAllocations(), func(al *reefv1.Allocation) bool {
			return al.GetIp() == p.ip.String() && al.GetPod() == "default/"+p.name
		}) {
			t.Errorf("the store has no allocation of %s for %s: %v", p.ip, p.name, allocs(ipam.GetAllocations()))
		}
	}
	// Watchdog: WATCHDOG_USEC=1s asks for a ping every 0.5 s while healthy;
	// 1.6 s is the bound of the rate under test.
	if err := poll.Until(1600*time.Millisecond, func() error {
		if n, _ := d.notify.count("WATCHDOG=1"); n < 2 {
			return fmt.Errorf("%d WATCHDOG=1 pings at WATCHDOG_USEC=1s, want at least 2", n)
		}
		return nil
	}); err != nil {
		t.Errorf("%v\n%s", err, d.logTail(10))
	}
	if err := d.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if n, _ := d.notify.count("STOPPING=1"); n != 1 {
		t.Errorf("STOPPING=1 sent %d times on SIGTERM, want 1", n)
	}

	// Each capability of the unit is needed: without it, the daemon fails
	// to start or fails an ADD. CAP_NET_BIND_SERVICE is for BGP's port 179.
	t.Run("Capabilities", func(t *testing.T) { testEachCapabilityNeeded(t, l, node, unit) })

	// remove: binaries, unit and drop-ins go, the unit is disabled; the
	// conffiles and the state stay.
	out = env.dpkg(t, "-r", "reef")
	if d := cmp.Diff([]string{"disable reef.service"}, env.calls(t)); d != "" {
		t.Errorf("dpkg -r: systemctl calls without a running systemd (-want +got):\n%s", d)
	}
	if got := dpkgStatus("reef"); got != "config-files" {
		t.Errorf("dpkg status after dpkg -r: %q", got)
	}
	var left []string
	for _, f := range wantFiles {
		left = append(left, existing(f.path)...)
	}
	if d := cmp.Diff(wantConf(), left); d != "" {
		t.Errorf("files left after dpkg -r (-want +got):\n%s", d)
	}
	if got := existing(enabledLink); got != nil {
		t.Errorf("dpkg -r left the unit enabled: %s", enabledLink)
	}
	if got := existing(filepath.Join(installedStateDir, "reef.db")); got == nil {
		t.Errorf("dpkg -r removed the store; only purge may")
	}
	if got := existing(installedKubeconfig); got == nil {
		t.Errorf("dpkg -r removed %s, which `reef kubeconfig` wrote; only purge may", installedKubeconfig)
	}

	// installed again after the remove: the unit stays disabled, and the
	// operator is told so (dpkg passes the removed version, as for an
	// upgrade, so the first install's hint did not come); removed again.
	out = env.dpkg(t, "-i", p.Deb)
	if !strings.Contains(out, "reef installed again") || !strings.Contains(out, "systemctl enable --now reef") {
		t.Errorf("dpkg -i after dpkg -r does not tell the operator that reef is disabled and how to start it:\n%s", out)
	}
	if got := existing(enabledLink); got != nil {
		t.Errorf("dpkg -i after dpkg -r enabled the unit: %s", enabledLink)
	}
	if calls := env.calls(t); len(calls) > 0 {
		t.Errorf("without a running systemd, installing again called systemctl %q", calls)
	}
	env.dpkg(t, "-r", "reef")
	env.calls(t)

	// purge: `reef cleanup --yes` in the node's namespace, then nothing of
	// reef is left.
	out = env.dpkg(t, "--purge", "reef")
	if calls := env.calls(t); len(calls) > 0 {
		t.Errorf("dpkg --purge without a running systemd called systemctl %q", calls)
	}
	if strings.Contains(out, "has no cleanup command") {
		t.Logf("`reef cleanup` does not exist yet; the purge said so:\n%s", out)
	} else {
		if v := reefVethsIn(t, l, node.Netns); len(v) > 0 {
			t.Errorf("reef cleanup (dpkg --purge) left veths %v\n%s", v, out)
		}
		if r := nonEmptyLines(run(t, l, node.Netns, "ip", "-4", "route", "show", "proto", "238")); len(r) > 0 {
			t.Errorf("reef cleanup (dpkg --purge) left routes %v\n%s", r, out)
		}
		if tables := run(t, l, node.Netns, "nft", "list", "tables"); strings.Contains(tables, "reef") {
			t.Errorf("reef cleanup (dpkg --purge) left nftables tables:\n%s\n%s", tables, out)
		}
		t.Logf("dpkg --purge ran reef cleanup in the node's namespace:\n%s", out)
	}
	if got := dpkgStatus("reef"); got != "" {
		t.Errorf("dpkg status after --purge: %q", got)
	}
	if out, err := exec.Command("dpkg", "-L", "reef").CombinedOutput(); err == nil {
		t.Errorf("dpkg -L reef after purge lists:\n%s", out)
	}
	var all []string
	for _, f := range wantFiles {
		all = append(all, f.path, filepath.Dir(f.path))
	}
	all = append(all, installedStateDir, filepath.Dir(installedSocket), enabledLink, installedKubeconfig, "/etc/cni", "/opt/cni", "/usr/lib/NetworkManager")
	var leftovers []string
	for _, path := range existing(all...) {
		if !slices.Contains(shared, path) && path != "/usr/bin" && path != "/lib/systemd/system" && path != "/etc/iproute2/rt_protos.d" {
			leftovers = append(leftovers, path)
		}
	}
	slices.Sort(leftovers)
	if len(slices.Compact(leftovers)) > 0 {
		t.Errorf("left after dpkg --purge: %v", slices.Compact(leftovers))
	}
}

// daemonMounts maps the mount points a process sees to their options.
func daemonMounts(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, l := range nonEmptyLines(string(b)) {
		if f := strings.Fields(l); len(f) > 5 {
			m[f[4]] = f[5]
		}
	}
	return m
}

// wantConf lists the conffiles in wantFiles order.
func wantConf() []string {
	var out []string
	for _, f := range wantFiles {
		if f.conffile {
			out = append(out, f.path)
		}
	}
	return out
}

// reefVethsIn lists the reef* links of a namespace.
func reefVethsIn(t *testing.T, l *lab.Lab, netns string) []string {
	t.Helper()
	var names []string
	for _, line := range nonEmptyLines(run(t, l, netns, "ip", "-br", "link")) {
		name, _, _ := strings.Cut(strings.Fields(line)[0], "@")
		if strings.HasPrefix(name, "reef") || name == "vxlan.reef" {
			names = append(names, name)
		}
	}
	return names
}

// testEachCapabilityNeeded starts the installed daemon without one of the
// unit's capabilities at a time and shows that something then fails.
func testEachCapabilityNeeded(t *testing.T, l *lab.Lab, node *lab.Node, unit unitFile) {
	bgpListens := false
	{
		d := startUnitDaemon(t, node, unit, daemonOptions{logFileName: "full.log"})
		if err := d.waitReady(20 * time.Second); err != nil {
			t.Fatal(err)
		}
		out := run(t, l, node.Netns, "ss", "-Hltn", "sport = :179")
		bgpListens = strings.TrimSpace(out) != ""
		if err := d.stop(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range unit.capabilities() {
		t.Run(c, func(t *testing.T) {
			if c == "net_bind_service" && !bgpListens {
				// Every daemon listens on bgp.port (179 by default, as in the
				// installed config), alone or not: one that did not, even
				// with every capability, is a fault.
				t.Fatal("the daemon did not listen on BGP's port 179 even with every capability (ss -Hltn saw no listener)")
			}
			d := startUnitDaemon(t, node, unit, daemonOptions{dropCap: c, logFileName: "without-" + c + ".log"})
			defer d.stop(syscall.SIGKILL)
			if err := d.waitReady(10 * time.Second); err != nil {
				t.Logf("without CAP_%s the daemon does not start: %v", strings.ToUpper(c), firstLine(err.Error()))
				return
			}
			if c == "net_bind_service" {
				if out := run(t, l, node.Netns, "ss", "-Hltn", "sport = :179"); strings.TrimSpace(out) != "" {
					t.Errorf("without CAP_NET_BIND_SERVICE the daemon still listens on port 179: %s", out)
				}
				return
			}
			p, err := newInstalledPod(t, l, "cap-"+c)
			if err == nil {
				t.Errorf("without CAP_%s the daemon still serves ADD (pod got %s): the unit need not grant it", strings.ToUpper(c), p.ip)
				return
			}
			t.Logf("without CAP_%s ADD fails: %v", strings.ToUpper(c), firstLine(err.Error()))
		})
	}
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// testUpgrade installs version N and starts it with the operator's
// dual-stack pools, wires two pods that ping each other 10 times a second
// over IPv4 and IPv6, installs N+1 over it with dpkg, and plays systemd's
// try-restart (the postinst's call): stop the old daemon, start the new
// /usr/bin/reef. No ping of either family is lost, the pods keep their
// addresses, the store is kept and reopened by the new daemon, and the
// operator's change to config.yaml survives.
func testUpgrade(t *testing.T, pk *packager) {
	oldPkg, newPkg := upgradePackages(t, pk)
	l, node := newPackageNode(t)
	purgeAtEnd(t, node.Netns)
	// Here /run/systemd/system exists for the maintainer scripts.
	env := newPkgEnv(t, node.Netns, true)

	// The operator's edit: a node name of its own, and dual-stack pools.
	const nodeName = "reef-e2e-upgrade"
	edited := installConfigured(t, env, oldPkg, "nodeName: "+nodeName+"\n"+
		"pools:\n  - cidr: 10.244.0.0/16\n  - cidr: fd00:10:244::/56\n    vxlanMode: Never\n")
	unit, old := startInstalled(t, node)
	a, err := newInstalledPod(t, l, "web-1")
	if err != nil {
		t.Fatal(err)
	}
	b, err := newInstalledPod(t, l, "web-2")
	if err != nil {
		t.Fatal(err)
	}
	addrA, addrB := a.eth0Addr(t), b.eth0Addr(t)
	stBefore, ipamBefore := installedIPAM(t)
	dbBefore, err := os.Stat(filepath.Join(installedStateDir, "reef.db"))
	if err != nil {
		t.Fatal(err)
	}

	if !a.ip6.IsValid() || !b.ip6.IsValid() {
		t.Fatalf("pods without an IPv6 address under dual-stack pools: %s, %s", a.eth0Addr(t), b.eth0Addr(t))
	}
	wait := pingFor(t, &lab.Pod{Node: node, Netns: a.netns}, b.ip.String(), 60)
	wait6 := pingFor(t, &lab.Pod{Node: node, Netns: b.netns}, a.ip6.String(), 60)
	time.Sleep(500 * time.Millisecond) // half a second of traffic before the upgrade: the scenario, not a wait
	nu := upgradeUnit(t, env, node, unit, old, newPkg)
	if recv, sent := wait(); recv != sent || sent == 0 {
		t.Errorf("%d of %d pings lost across the upgrade", sent-recv, sent)
	}
	if recv, sent := wait6(); recv != sent || sent == 0 {
		t.Errorf("%d of %d IPv6 pings lost across the upgrade", sent-recv, sent)
	}

	st, ipamAfter := checkUpgraded(t, newPkg)
	if st.GetEndpoints() != stBefore.GetEndpoints() {
		t.Errorf("daemon after the upgrade has %d endpoints, before it had %d", st.GetEndpoints(), stBefore.GetEndpoints())
	}
	if got, want := allocs(ipamAfter.GetAllocations()), allocs(ipamBefore.GetAllocations()); !slices.Equal(got, want) {
		t.Errorf("allocations changed across the upgrade:\nbefore %v\nafter  %v", want, got)
	}
	if a.eth0Addr(t) != addrA || b.eth0Addr(t) != addrB {
		t.Errorf("pod addresses changed across the upgrade")
	}
	for _, p := range []*installedPod{a, b} {
		if err := p.check(t); err != nil {
			t.Errorf("CHECK %s after the upgrade: %v", p.name, err)
		}
	}
	dbAfter, err := os.Stat(filepath.Join(installedStateDir, "reef.db"))
	if err != nil || !os.SameFile(dbBefore, dbAfter) {
		t.Errorf("the store file was replaced or removed by the upgrade: %v", err)
	}
	if st.GetNodeName() != nodeName {
		t.Errorf("the new daemon's node name is %q, want %q from the operator's config.yaml", st.GetNodeName(), nodeName)
	}
	if got, _ := os.ReadFile(installedConfig); !bytes.Equal(got, edited) {
		t.Errorf("the upgrade replaced the operator's %s", installedConfig)
	}
	c, err := newInstalledPod(t, l, "web-3")
	if err != nil {
		t.Fatalf("ADD after the upgrade: %v", err)
	}
	if c.ip == a.ip || c.ip == b.ip || !c.ip6.IsValid() || c.ip6 == a.ip6 || c.ip6 == b.ip6 {
		t.Errorf("a new pod got %s and %s; a and b have %s, %s and %s, %s", c.ip, c.ip6, a.ip, a.ip6, b.ip, b.ip6)
	}

	// Remove and purge with systemd running: stop and disable, reloads.
	if err := nu.stop(syscall.SIGTERM); err != nil { // what systemctl stop does
		t.Fatal(err)
	}
	env.dpkg(t, "-r", "reef")
	if d := cmp.Diff([]string{"stop reef.service", "disable reef.service", "daemon-reload"}, env.calls(t)); d != "" {
		t.Errorf("dpkg -r with systemd running: systemctl calls (-want +got):\n%s", d)
	}
	env.dpkg(t, "--purge", "reef")
	if d := cmp.Diff([]string{"daemon-reload"}, env.calls(t)); d != "" {
		t.Errorf("dpkg --purge with systemd running: systemctl calls (-want +got):\n%s", d)
	}
}

// installConfigured installs pkg with dpkg in env, where systemd runs
// (the postinst then only reloads, and neither enables nor starts reef),
// and adds the operator's lines to config.yaml, which it returns.
func installConfigured(t *testing.T, env *pkgEnv, pkg *builtPackages, operator string) []byte {
	t.Helper()
	env.dpkg(t, "-i", pkg.Deb)
	if d := cmp.Diff([]string{"daemon-reload"}, env.calls(t)); d != "" {
		t.Errorf("first install with systemd running: systemctl calls (-want +got) (it must not enable or start reef):\n%s", d)
	}
	cfg, err := os.ReadFile(installedConfig)
	if err != nil {
		t.Fatal(err)
	}
	edited := append(cfg, []byte("\n# changed by the operator\n"+operator)...)
	if err := os.WriteFile(installedConfig, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	return edited
}

// startInstalled starts the installed daemon on node as the unit does and
// waits until it is ready.
func startInstalled(t *testing.T, node *lab.Node) (unitFile, *unitDaemon) {
	t.Helper()
	unit := parseUnit(t, installedUnit)
	d := startUnitDaemon(t, node, unit, daemonOptions{logFileName: "old.log"})
	if err := d.waitReady(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	return unit, d
}

// upgradeUnit installs newPkg with dpkg over the running daemon old, in
// env, where systemd runs, and plays the try-restart the postinst asks of
// systemd: stop old, start the new /usr/bin/reef as the unit does. It
// returns the new daemon, ready.
func upgradeUnit(t *testing.T, env *pkgEnv, node *lab.Node, unit unitFile, old *unitDaemon, newPkg *builtPackages) *unitDaemon {
	t.Helper()
	start := time.Now()
	installOver(t, env, newPkg)
	if err := old.stop(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	nu := startUnitDaemon(t, node, unit, daemonOptions{logFileName: "new.log"})
	if err := nu.waitReady(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("dpkg -i of the new version and the daemon's restart took %s", time.Since(start).Round(10*time.Millisecond))
	return nu
}

// installOver installs newPkg with dpkg over the installed version in
// env, where systemd runs, with the daemon running: the postinst asks
// systemd for a reload and a try-restart of reef.service, which the
// caller plays (the recording systemctl does nothing).
func installOver(t *testing.T, env *pkgEnv, newPkg *builtPackages) {
	t.Helper()
	env.dpkg(t, "-i", newPkg.Deb)
	if d := cmp.Diff([]string{"daemon-reload", "try-restart reef.service"}, env.calls(t)); d != "" {
		t.Errorf("upgrade: systemctl calls (-want +got):\n%s", d)
	}
}

// checkUpgraded checks that dpkg has newPkg installed and that the daemon
// on the installed socket is newPkg's, and returns its status and IPAM.
func checkUpgraded(t *testing.T, newPkg *builtPackages) (*reefv1.StatusReply, *reefv1.IPAMReply) {
	t.Helper()
	if got := strings.TrimSpace(cmdOut(t, "dpkg-query", "-W", "-f=${Version}", "reef")); got != newPkg.Version {
		t.Errorf("installed version after the upgrade: %q, want %q", got, newPkg.Version)
	}
	st, ipam := installedIPAM(t)
	if want := newPkg.Version + " (" + newPkg.Commit + ")"; st.GetVersion() != want {
		t.Errorf("daemon after the upgrade reports %q, want %q", st.GetVersion(), want)
	}
	return st, ipam
}

// allocs lists allocations as "ip pod veth state", sorted.
func allocs(as []*reefv1.Allocation) []string {
	var out []string
	for _, a := range as {
		out = append(out, strings.Join([]string{a.GetIp(), a.GetPod(), a.GetHostVeth(), a.GetState()}, " "))
	}
	slices.Sort(out)
	return out
}
