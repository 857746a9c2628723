// Package k8simages builds, with no registry, the container images a
// Kubernetes v1.37 cluster and its upstream e2e network tests run:
// pause and CoreDNS at the versions kubeadm and containerd 2 use, and
// the e2e test images of e2e.test v1.37.2 (test/utils/image/manifest.go)
// that the [sig-network] tests start, tagged with exactly the names the
// tests ask for, so that pods start with imagePullPolicy IfNotPresent
// and no pull.
//
// Their content comes from what this machine has: static Go binaries
// built from the Go module proxy (agnhost, CoreDNS, the conntrack
// regression server), pause compiled from internal/lab/image/pause.c,
// busybox-static for a shell and the small tools, and Debian's
// dynamically linked tools (dig, curl, netcat-openbsd, ss, getent,
// conntrack) copied with the libraries they need. Each image is written
// as a docker-archive tar (`ctr -n k8s.io images import` reads it), and
// all of them once more into one tar with each layer once.
//
// Where they differ from upstream: agnhost is glibc-based (upstream is
// alpine, musl), so the DNS tests' "musl" querier runs glibc's getent
// as the "glibc" one does (dig has its own resolver either way); sh is
// dash in the images with the Debian tools, busybox ash in the others;
// nginx is busybox httpd serving /usr/share/nginx/html on port 80 (the
// tests that use it only need a running pod); glibc-dns-testing and
// distroless-iptables carry the same tools as agnhost, a superset of
// what the tests exec in them.
//
// Layers are deterministic (sorted entries, fixed times and owners):
// the same inputs give the same digests, and a second Build reuses the
// binaries and layers of its cache and rewrites no tar that is current.
package k8simages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// The versions: e2e.test's and kubeadm's.
const (
	KubeVersion    = "v1.37.2"
	CoreDNSVersion = "v1.14.6" // kubeadm v1.37.2: CoreDNSVersion, cmd/kubeadm/app/constants
	// agnhostVersion is test/images/agnhost/VERSION of KubeVersion, the
	// tag of the image e2e.test asks for; stamped into the binary as
	// the upstream image build does.
	agnhostVersion = "2.66.1"
)

// The images, by the names e2e.test v1.37.2, kubeadm v1.37.2 and
// containerd 2.4 use.
const (
	// Pause is kubeadm's PauseVersion, e2e's imageutils.Pause and
	// containerd 2.4's default sandbox image.
	Pause   = "registry.k8s.io/pause:3.10.2"
	CoreDNS = "registry.k8s.io/coredns/coredns:" + CoreDNSVersion
	// Agnhost is imageutils.Agnhost: nearly every network test.
	Agnhost = "registry.k8s.io/e2e-test-images/agnhost:" + agnhostVersion
	// AgnhostNetpolAPI is the agnhost tag of the network-policy-api
	// conformance suite's manifests (sigs.k8s.io/network-policy-api
	// v0.3.0, conformance/base): the same image under a second name. Its
	// pods run serve-hostname, porter and connect, which agnhost of
	// KubeVersion has with the same flags.
	AgnhostNetpolAPI = "registry.k8s.io/e2e-test-images/agnhost:2.45"
	// GlibcDNSTesting is imageutils.GlibcDnsTesting (jessie-dnsutils
	// before): the glibc querier of the DNS tests.
	GlibcDNSTesting = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"
	// BusyBox is imageutils.BusyBox: the Conntrack tests' client and
	// init containers, and e2epod.MakePod's default.
	BusyBox = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	// Nginx is imageutils.Nginx: the Endpoints and EndpointSlice
	// conformance tests' pods, which only need to run.
	Nginx = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
	// RegressionIssue74839 is the server of the Conntrack test of
	// invalid conntrack state.
	RegressionIssue74839 = "registry.k8s.io/e2e-test-images/regression-issue-74839:1.5"
	// DistrolessIptables is the host-network pod of the KubeProxy
	// CLOSE_WAIT test, which reads conntrack entries.
	DistrolessIptables = "registry.k8s.io/build-image/distroless-iptables:v0.9.9"
)

// AllArchive is the name, in Options.Out, of the tar holding every image.
const AllArchive = "all-images.tar"

// Options shape a Build.
type Options struct {
	// Out receives one tar per image, AllArchive and images.txt (a line
	// "ref tar-file" per image).
	Out string
	// Cache keeps built binaries and layers between runs; default:
	// the user cache dir's reef-k8simages.
	Cache string
	// Go is the go command; default "go".
	Go string
	// Agnhost is an agnhost binary built from k8s.io/kubernetes at
	// KubeVersion; default: $GOBIN/agnhost when `go version -m` says so,
	// else one built into Cache.
	Agnhost string
	// PauseSource is pause.c; default: internal/lab/image/pause.c of
	// the module the go command runs in (this repository).
	PauseSource string
	// PauseArgs are appended to pause's entrypoint, which ignores them:
	// a mark on every sandbox's command line to find it by.
	PauseArgs []string
	// Log receives progress; default: none.
	Log *slog.Logger
}

// tool is a Debian binary copied into the tools layer with its libraries.
type tool struct {
	path string // on the host and in the image
	pkg  string // the Debian package holding it
}

// tools are what the tests exec in agnhost and glibc-dns-testing besides
// busybox's applets (upstream: alpine's bind-tools, curl,
// netcat-openbsd, iproute2, bash): dig +search/+tcp, nslookup, curl
// -g --connect-timeout, nc -W/-u/-p (openbsd flags), ss -ant46,
// getent hosts (through glibc's NSS), conntrack -L, and wget: Debian 12's busybox-static 1.35 wget dies of
// SIGSEGV when a connection fails and -T is given, and the Services tests
// run `wget -q -O - -T 1` against Service addresses that may not answer
// yet (the shell's "Segmentation fault" lands in their output).
var tools = []tool{
	{"/usr/bin/dig", "bind9-dnsutils"},
	{"/usr/bin/nslookup", "bind9-dnsutils"},
	{"/usr/bin/curl", "curl"},
	{"/usr/bin/nc.openbsd", "netcat-openbsd"},
	{"/usr/bin/ss", "iproute2"},
	{"/usr/bin/ip", "iproute2"},
	{"/usr/bin/getent", "libc-bin"},
	{"/usr/bin/bash", "bash"},
	{"/usr/bin/dash", "dash"},
	{"/usr/sbin/conntrack", "conntrack"},
	{"/usr/bin/wget", "wget"},
}

// wgetrc makes GNU wget try once, as busybox's does: its default of 20
// tries would turn each of a test's one-second probes into twenty.
const wgetrc = "tries = 1\n"

// busyboxPath is busybox-static's binary.
const busyboxPath = "/usr/bin/busybox"

// DebianPackages are the packages Build copies binaries of.
func DebianPackages() []string {
	seen := map[string]bool{"busybox-static": true}
	pkgs := []string{"busybox-static"}
	for _, t := range tools {
		if !seen[t.pkg] {
			seen[t.pkg] = true
			pkgs = append(pkgs, t.pkg)
		}
	}
	return pkgs
}

// checkHost says which of the host's inputs are missing.
func checkHost() error {
	var missing []string
	if static, err := isStatic(busyboxPath); err != nil || !static {
		missing = append(missing, "busybox-static ("+busyboxPath+", static)")
	}
	for _, t := range tools {
		if !exists(t.path) {
			missing = append(missing, t.pkg+" ("+t.path+")")
		}
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		missing = append(missing, "gcc")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: apt-get install %s", strings.Join(missing, ", "), strings.Join(DebianPackages(), " "))
	}
	return nil
}

// Build builds every image into opts.Out and returns the tar of each,
// by image name.
func Build(ctx context.Context, opts Options) (map[string]string, error) {
	if opts.Out == "" {
		return nil, errors.New("k8simages: no output dir")
	}
	if opts.Go == "" {
		opts.Go = "go"
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("k8simages: no cache dir: %w", err)
		}
		opts.Cache = filepath.Join(dir, "reef-k8simages")
	}
	if err := checkHost(); err != nil {
		return nil, err
	}
	for _, d := range []string{opts.Out, filepath.Join(opts.Cache, "bin"), filepath.Join(opts.Cache, "layers")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	bins, err := buildBinaries(ctx, opts)
	if err != nil {
		return nil, err
	}
	images, err := assemble(opts, bins)
	if err != nil {
		return nil, err
	}
	return writeAll(opts, images)
}

// binaries are the built inputs of the images.
type binaries struct {
	agnhost, coredns, regression, pause string
	porterCert, porterKey               string // agnhost's porter serves TLS with them
}

func buildBinaries(ctx context.Context, opts Options) (binaries, error) {
	binDir := filepath.Join(opts.Cache, "bin")
	b := binaries{
		agnhost:    opts.Agnhost,
		coredns:    filepath.Join(binDir, "coredns-"+CoreDNSVersion),
		regression: filepath.Join(binDir, "regression-issue-74839-"+KubeVersion),
	}
	if b.agnhost == "" {
		b.agnhost = filepath.Join(binDir, "agnhost-"+KubeVersion)
		if gobin := goBin(ctx, opts.Go); gobin != "" {
			p := filepath.Join(gobin, "agnhost")
			if builtFrom(ctx, opts.Go, p, "k8s.io/kubernetes/test/images/agnhost", "k8s.io/kubernetes", KubeVersion) {
				b.agnhost = p
			}
		}
	}
	work, err := os.MkdirTemp("", "reef-k8simages-")
	if err != nil {
		return b, err
	}
	defer os.RemoveAll(work)

	kube := goModule{path: "k8s.io/kubernetes", version: KubeVersion, replaceVersion: "v0." + strings.TrimPrefix(KubeVersion, "v1.")}
	kubeBins := map[string]goBinary{}
	if !exists(b.agnhost) {
		kubeBins[b.agnhost] = goBinary{pkg: "k8s.io/kubernetes/test/images/agnhost", ldflags: "-X main.Version=" + agnhostVersion}
	}
	if !exists(b.regression) {
		kubeBins[b.regression] = goBinary{pkg: "k8s.io/kubernetes/test/images/regression-issue-74839"}
	}
	if len(kubeBins) > 0 {
		opts.Log.Info("building from k8s.io/kubernetes (minutes, once)", "version", KubeVersion, "binaries", len(kubeBins))
		if err := buildGo(ctx, opts.Go, work, "kube", kube, kubeBins); err != nil {
			return b, err
		}
	}
	if !exists(b.coredns) {
		opts.Log.Info("building CoreDNS (minutes, once)", "version", CoreDNSVersion)
		coredns := goModule{path: "github.com/coredns/coredns", version: CoreDNSVersion}
		if err := buildGo(ctx, opts.Go, work, "coredns", coredns, map[string]goBinary{b.coredns: {pkg: "github.com/coredns/coredns"}}); err != nil {
			return b, err
		}
	}
	if b.pause, err = buildPause(ctx, opts.Go, opts.PauseSource, binDir, work); err != nil {
		return b, err
	}
	dir, err := moduleDir(ctx, opts.Go, work, kube.path, kube.version)
	if err != nil {
		return b, err
	}
	b.porterCert = filepath.Join(dir, "test/images/agnhost/porter/localhost.crt")
	b.porterKey = filepath.Join(dir, "test/images/agnhost/porter/localhost.key")
	return b, nil
}

// buildPause compiles pause.c with gcc -static, once per source.
func buildPause(ctx context.Context, goCmd, src, binDir, work string) (string, error) {
	if src == "" {
		out, err := exec.CommandContext(ctx, goCmd, "env", "GOMOD").Output()
		if err != nil {
			return "", fmt.Errorf("go env GOMOD: %w", err)
		}
		src = filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "internal/lab/image/pause.c")
	}
	code, err := os.ReadFile(src)
	if err != nil {
		return "", fmt.Errorf("pause source (run in the reef module, or set Options.PauseSource): %w", err)
	}
	sum := sha256.Sum256(code)
	bin := filepath.Join(binDir, "pause-"+hex.EncodeToString(sum[:6]))
	if exists(bin) {
		return bin, nil
	}
	if out, err := exec.CommandContext(ctx, "gcc", "-static", "-Os", "-s", "-o", bin+".tmp", src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build pause (gcc -static): %w: %s", err, out)
	}
	return bin, os.Rename(bin+".tmp", bin)
}

// goBin is where `go install` puts binaries: GOBIN, else GOPATH's bin.
func goBin(ctx context.Context, goCmd string) string {
	out, err := exec.CommandContext(ctx, goCmd, "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return ""
	}
	lines := strings.Split(string(out), "\n") // GOBIN's line may be empty
	if gobin := strings.TrimSpace(lines[0]); gobin != "" {
		return gobin
	}
	if len(lines) >= 2 && strings.TrimSpace(lines[1]) != "" {
		return filepath.Join(strings.Split(strings.TrimSpace(lines[1]), ":")[0], "bin")
	}
	return ""
}

// moduleDir returns the extracted source of path@version from the module
// cache, downloading it if need be.
func moduleDir(ctx context.Context, goCmd, work, path, version string) (string, error) {
	cmd := exec.CommandContext(ctx, goCmd, "mod", "download", "-json", path+"@"+version)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w", path, version, err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s@%s: no dir in %q", path, version, out)
	}
	return info.Dir, nil
}

// spec is an image to assemble: its names, config and layers.
type spec struct {
	refs   []string
	config imageConfig
	layers []*layer
}

const (
	passwd = "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
	group  = "root:x:0:\nnogroup:x:65534:\n"
)

// assemble makes the layers and lists the images.
func assemble(opts Options, b binaries) ([]spec, error) {
	base, err := baseLayer()
	if err != nil {
		return nil, err
	}
	toolsLayer, err := toolsLayer(base)
	if err != nil {
		return nil, err
	}

	// /coredns twice: plain in the test images (upstream agnhost and
	// glibc-dns-testing carry a CoreDNS release at /coredns, which the
	// DNS tests start with their own Corefile), and with
	// cap_net_bind_service=+ep in CoreDNS's image, whose Dockerfile
	// does that setcap: it runs as 65532 and binds :53.
	corednsPlain := newLayer("coredns")
	corednsPlain.file("/coredns", b.coredns, 0o755)
	corednsCap := newLayer("coredns-cap")
	corednsCap.file("/coredns", b.coredns, 0o755)
	corednsCap.setXattr("/coredns", "security.capability", fileCapNetBindService())
	corednsEtc := newLayer("coredns-etc")
	corednsEtc.data("/etc/passwd", []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), 0o644)
	corednsEtc.data("/etc/group", []byte("root:x:0:\nnonroot:x:65532:\n"), 0o644)
	corednsEtc.dir("/home/nonroot", 0o700)
	corednsEtc.dir("/tmp", 0o1777)
	if ca := "/etc/ssl/certs/ca-certificates.crt"; exists(ca) {
		corednsEtc.file(ca, ca, 0o644)
	}

	agnhost := newLayer("agnhost")
	agnhost.file("/agnhost", b.agnhost, 0o755)
	// entrypoint-tester's tests override the entrypoint with /agnhost-2.
	agnhost.symlink("/agnhost-2", "agnhost")
	agnhost.file("/localhost.crt", b.porterCert, 0o644)
	agnhost.file("/localhost.key", b.porterKey, 0o644)
	agnhost.dir("/uploads", 0o755) // netexec's /upload
	// The SupplementalGroups test's user and group of the upstream image.
	agnhost.data("/etc/passwd", []byte(passwd+"user-defined-in-image:x:1000:1000::/home/user-defined-in-image:/bin/sh\n"), 0o644)
	agnhost.data("/etc/group", []byte(group+"user-defined-in-image:x:1000:\ngroup-defined-in-image:x:50000:user-defined-in-image\n"), 0o644)
	agnhost.dir("/home/user-defined-in-image", 0o755)

	nginx := newLayer("nginx")
	nginx.data("/usr/share/nginx/html/index.html", []byte("<!DOCTYPE html>\n<html><body><h1>Welcome to nginx!</h1><p>busybox httpd standing in for nginx (reef lab)</p></body></html>\n"), 0o644)

	regression := newLayer("regression-issue-74839")
	regression.file("/regression-issue-74839", b.regression, 0o755)

	pause := newLayer("pause")
	pause.file("/pause", b.pause, 0o755)

	env := []string{defaultPath}
	return []spec{
		{refs: []string{Pause}, layers: []*layer{pause},
			config: imageConfig{Entrypoint: append([]string{"/pause"}, opts.PauseArgs...), User: "65535:65535", WorkingDir: "/"}},
		{refs: []string{CoreDNS}, layers: []*layer{corednsCap, corednsEtc},
			config: imageConfig{Entrypoint: []string{"/coredns"}, User: "65532:65532", WorkingDir: "/", Env: env, ExposedPorts: []string{"53/tcp", "53/udp"}}},
		{refs: []string{Agnhost, AgnhostNetpolAPI}, layers: []*layer{base, toolsLayer, corednsPlain, agnhost},
			config: imageConfig{Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Env: env, WorkingDir: "/",
				ExposedPorts: []string{"80/tcp", "8080/tcp", "8081/tcp", "9376/tcp", "5000/tcp"}}},
		{refs: []string{GlibcDNSTesting}, layers: []*layer{base, toolsLayer, corednsPlain},
			config: imageConfig{Cmd: []string{"bash"}, Env: env, WorkingDir: "/"}},
		{refs: []string{BusyBox}, layers: []*layer{base},
			config: imageConfig{Cmd: []string{"sh"}, Env: env, WorkingDir: "/"}},
		{refs: []string{Nginx}, layers: []*layer{base, nginx},
			config: imageConfig{Cmd: []string{"httpd", "-f", "-v", "-p", "80", "-h", "/usr/share/nginx/html"}, Env: env, WorkingDir: "/", ExposedPorts: []string{"80/tcp"}}},
		{refs: []string{RegressionIssue74839}, layers: []*layer{base, regression},
			config: imageConfig{Entrypoint: []string{"/regression-issue-74839"}, Env: env, WorkingDir: "/"}},
		{refs: []string{DistrolessIptables}, layers: []*layer{base, toolsLayer},
			config: imageConfig{Cmd: []string{"sh"}, Env: env, WorkingDir: "/"}},
	}, nil
}

// baseLayer is a usr-merged root with busybox-static and a link for each
// of its applets: sh, cat, grep, seq, sleep, wget, nc, nslookup,
// hostname, httpd, ...
func baseLayer() (*layer, error) {
	l := newLayer("busybox")
	for _, d := range []string{"bin", "sbin", "lib", "lib64"} {
		l.dir("/usr/"+d, 0o755)
		l.symlink("/"+d, "usr/"+d)
	}
	for _, d := range []string{"/etc", "/home", "/var", "/usr/local/bin", "/usr/share"} {
		l.dir(d, 0o755)
	}
	l.dir("/root", 0o700)
	l.dir("/tmp", 0o1777)
	l.file(busyboxPath, busyboxPath, 0o755)
	out, err := exec.Command(busyboxPath, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("busybox --list-full: %w", err)
	}
	for _, p := range strings.Fields(string(out)) {
		name := filepath.Base(p)
		switch {
		case name == "busybox":
		case strings.HasPrefix(p, "sbin/") || strings.HasPrefix(p, "usr/sbin/"):
			l.symlink("/usr/sbin/"+name, "/usr/bin/busybox")
		case strings.HasPrefix(p, "bin/") || strings.HasPrefix(p, "usr/bin/"):
			l.symlink("/usr/bin/"+name, "busybox")
		}
	}
	l.data("/etc/passwd", []byte(passwd), 0o644)
	l.data("/etc/group", []byte(group), 0o644)
	// getent and curl resolve through glibc's NSS: /etc/hosts first.
	l.data("/etc/nsswitch.conf", []byte("passwd: files\ngroup: files\nhosts: files dns\nnetworks: files\n"), 0o644)
	return l, nil
}

// toolsLayer holds the Debian tools and their libraries, over the base
// layer: the real nslookup, nc and ip replace busybox's, also where
// busybox links them in another PATH dir (its ip is /usr/sbin/ip, before
// /usr/bin in PATH). sh is dash, as in Debian: Debian's busybox-static
// shell runs its own applet for any name it has, whatever PATH says, so
// `sh -c "nc -W 1 ..."` would get busybox's nc, which has no -W.
func toolsLayer(base *layer) (*layer, error) {
	l := newLayer("tools")
	real := map[string]string{"nc": "/usr/bin/nc.openbsd", "sh": "/usr/bin/dash"}
	for _, t := range tools {
		p := imagePath(t.path)
		l.file(p, t.path, 0o755)
		real[filepath.Base(p)] = p
		libs, err := sharedLibs(t.path)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			l.file(imagePath(lib), lib, 0o755)
		}
	}
	l.data("/etc/wgetrc", []byte(wgetrc), 0o644)
	for name, p := range real {
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			q := dir + "/" + name
			if _, ok := base.entries[clean(q)]; ok && q != p {
				l.symlink(q, p)
			}
		}
	}
	return l, nil
}

// writeAll writes the layers, each image's tar and the tar of all, and
// images.txt.
func writeAll(opts Options, specs []spec) (map[string]string, error) {
	layerDir := filepath.Join(opts.Cache, "layers")
	written := map[*layer]builtLayer{}
	var images []builtImage
	tars := map[string]string{}
	var list strings.Builder
	for _, s := range specs {
		var layers []builtLayer
		var names []string
		for _, l := range s.layers {
			bl, ok := written[l]
			if !ok {
				var err error
				if bl, err = l.write(layerDir); err != nil {
					return nil, err
				}
				written[l] = bl
			}
			layers = append(layers, bl)
			names = append(names, l.name)
		}
		img, err := newImage(s.refs, s.config, layers, names)
		if err != nil {
			return nil, err
		}
		images = append(images, img)
		out := filepath.Join(opts.Out, tarName(s.refs[0]))
		if err := writeIfChanged(out, []builtImage{img}); err != nil {
			return nil, err
		}
		opts.Log.Info("image", "ref", s.refs[0], "tar", out, "config", img.configDigest[:12])
		for _, r := range s.refs {
			tars[r] = out
			fmt.Fprintf(&list, "%s %s\n", r, filepath.Base(out))
		}
	}
	if err := writeIfChanged(filepath.Join(opts.Out, AllArchive), images); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(opts.Out, "images.txt"), []byte(list.String()), 0o644); err != nil {
		return nil, err
	}
	return tars, nil
}

// writeIfChanged writes the archive of images at out unless out holds
// those images already, as its sidecar out.id (written after it) says.
func writeIfChanged(out string, images []builtImage) error {
	h := sha256.New()
	for _, img := range images {
		refs := append([]string(nil), img.refs...)
		sort.Strings(refs)
		fmt.Fprintln(h, strings.Join(refs, ","), img.configDigest)
	}
	id := hex.EncodeToString(h.Sum(nil))
	if old, err := os.ReadFile(out + ".id"); err == nil && string(old) == id && exists(out) {
		return nil
	}
	os.Remove(out + ".id")
	if err := writeArchive(out, images); err != nil {
		return err
	}
	return os.WriteFile(out+".id", []byte(id), 0o644)
}

// tarName is the file name of an image's tar: agnhost_2.66.1.tar.
func tarName(ref string) string {
	name, tag := splitRef(ref)
	return filepath.Base(name) + "_" + tag + ".tar"
}
