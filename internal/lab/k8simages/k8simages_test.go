package k8simages

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// readTar returns the headers and contents of a tar file.
func readTar(t *testing.T, p string) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readTarFrom(t, f)
}

func readTarFrom(t *testing.T, r io.Reader) ([]*tar.Header, map[string][]byte) {
	t.Helper()
	tr := tar.NewReader(r)
	var hdrs []*tar.Header
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return hdrs, files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		hdrs = append(hdrs, h)
		files[h.Name] = b
	}
}

func TestLayerIsDeterministic(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	build := func() *layer {
		l := newLayer("test")
		// Added out of order, on purpose.
		l.symlink("/bin", "usr/bin")
		l.file("/usr/bin/tool", src, 0o755)
		l.data("/etc/passwd", []byte("root:x:0:0::/root:/bin/sh\n"), 0o644)
		l.dir("/tmp", 0o1777)
		l.setXattr("/usr/bin/tool", "security.capability", fileCapNetBindService())
		return l
	}
	a, err := build().write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := build().write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a.digest != b.digest {
		t.Fatalf("two writes of the same layer: digests %s and %s", a.digest, b.digest)
	}
	raw, err := os.ReadFile(a.path)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(raw); hex.EncodeToString(sum[:]) != a.digest || int64(len(raw)) != a.size {
		t.Fatalf("layer %s: digest or size not of its bytes", a.path)
	}

	hdrs, files := readTarFrom(t, bytes.NewReader(raw))
	var got []string
	for _, h := range hdrs {
		got = append(got, h.Name)
		if !h.ModTime.Equal(epoch) || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: time %v, owner %d:%d; want the epoch, 0:0", h.Name, h.ModTime, h.Uid, h.Gid)
		}
	}
	want := []string{"bin", "etc/", "etc/passwd", "tmp/", "usr/", "usr/bin/", "usr/bin/tool"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	for _, h := range hdrs {
		switch h.Name {
		case "tmp/":
			if h.Mode != 0o1777 {
				t.Errorf("tmp mode %o, want 1777", h.Mode)
			}
		case "usr/bin/tool":
			if h.Mode != 0o755 || string(files[h.Name]) != "#!/bin/sh\n" {
				t.Errorf("tool: mode %o content %q", h.Mode, files[h.Name])
			}
			if h.PAXRecords["SCHILY.xattr.security.capability"] != fileCapNetBindService() {
				t.Errorf("tool: no file capability in %v", h.PAXRecords)
			}
		case "bin":
			if h.Typeflag != tar.TypeSymlink || h.Linkname != "usr/bin" {
				t.Errorf("bin: type %c link %q", h.Typeflag, h.Linkname)
			}
		}
	}
}

// TestFileCap compares with what `setcap cap_net_bind_service=+ep`
// writes (getfattr -n security.capability -e hex).
func TestFileCap(t *testing.T) {
	if got, want := hex.EncodeToString([]byte(fileCapNetBindService())), "0100000200040000000000000000000000000000"; got != want {
		t.Fatalf("security.capability %s, want %s", got, want)
	}
}

func TestWrapperGoMod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		m        goModule
		upstream string
		want     string
	}{{
		name: "kubernetes",
		m:    goModule{path: "k8s.io/kubernetes", version: "v1.37.2", replaceVersion: "v0.37.2"},
		upstream: `module k8s.io/kubernetes

go 1.26.0

godebug default=go1.26

require (
	k8s.io/api v0.0.0
	github.com/x/y v1.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	github.com/x/y => github.com/x/y v1.0.1
)
`,
		want: `module reef.lab/kube

go 1.26.0
godebug default=go1.26

require k8s.io/kubernetes v1.37.2

replace (
	k8s.io/api => k8s.io/api v0.37.2
	k8s.io/client-go => k8s.io/client-go v0.37.2
)
`,
	}, {
		name:     "one-line replace with a version",
		m:        goModule{path: "go.etcd.io/etcd/server/v3", version: "v3.7.3", replaceVersion: "v3.7.3"},
		upstream: "module go.etcd.io/etcd/server/v3\n\ngo 1.25\n\nreplace go.etcd.io/etcd/api/v3 v3.0.0 => ../api\n",
		want:     "module reef.lab/kube\n\ngo 1.25\n\nrequire go.etcd.io/etcd/server/v3 v3.7.3\n\nreplace (\n\tgo.etcd.io/etcd/api/v3 => go.etcd.io/etcd/api/v3 v3.7.3\n)\n",
	}, {
		name:     "no replace",
		m:        goModule{path: "github.com/coredns/coredns", version: "v1.14.6"},
		upstream: "module github.com/coredns/coredns\n\ngo 1.25.0\n\nrequire github.com/kylelemons/godebug v1.1.0 // indirect\n",
		want:     "module reef.lab/kube\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns v1.14.6\n",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, string(wrapperGoMod("kube", tc.m, []byte(tc.upstream)))); diff != "" {
				t.Errorf("go.mod (-want +got):\n%s", diff)
			}
		})
	}
}

// TestArchive writes two images sharing a layer and reads the archive
// back the way an importer does.
func TestArchive(t *testing.T) {
	cache := t.TempDir()
	shared := newLayer("shared")
	shared.data("/etc/passwd", []byte("root:x:0:0::/root:/bin/sh\n"), 0o644)
	top := newLayer("top")
	top.data("/hello", []byte("hello\n"), 0o755)
	s, err := shared.write(cache)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := top.write(cache)
	if err != nil {
		t.Fatal(err)
	}
	one, err := newImage([]string{"registry.k8s.io/pause:3.10.2"}, imageConfig{Entrypoint: []string{"/pause"}, User: "65535:65535"}, []builtLayer{s}, []string{"shared"})
	if err != nil {
		t.Fatal(err)
	}
	two, err := newImage([]string{"localhost:5000/a/b:1.0"}, imageConfig{Cmd: []string{"/hello"}, ExposedPorts: []string{"80/tcp"}}, []builtLayer{s, tp}, []string{"shared", "top"})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "all.tar")
	if err := writeArchive(out, []builtImage{one, two}); err != nil {
		t.Fatal(err)
	}
	hdrs, files := readTar(t, out)
	layerEntries := 0
	for _, h := range hdrs {
		if strings.HasSuffix(h.Name, "/layer.tar") {
			layerEntries++
		}
	}
	if layerEntries != 2 {
		t.Errorf("%d layer entries, want 2 (the shared one once)", layerEntries)
	}

	var manifest []archiveManifest
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest) != 2 {
		t.Fatalf("manifest.json: %d images, want 2", len(manifest))
	}
	wantTags := [][]string{{"registry.k8s.io/pause:3.10.2"}, {"localhost:5000/a/b:1.0"}}
	for i, m := range manifest {
		if diff := cmp.Diff(wantTags[i], m.RepoTags); diff != "" {
			t.Errorf("image %d tags (-want +got):\n%s", i, diff)
		}
		cfgBytes := files[m.Config]
		if sum := sha256.Sum256(cfgBytes); hex.EncodeToString(sum[:])+".json" != m.Config {
			t.Errorf("image %d: config %s is not named by its digest", i, m.Config)
		}
		var cfg ociConfig
		if err := json.Unmarshal(cfgBytes, &cfg); err != nil {
			t.Fatal(err)
		}
		if len(cfg.RootFS.DiffIDs) != len(m.Layers) || len(cfg.History) != len(m.Layers) {
			t.Fatalf("image %d: %d diff ids, %d history rows, %d layers", i, len(cfg.RootFS.DiffIDs), len(cfg.History), len(m.Layers))
		}
		for j, l := range m.Layers {
			sum := sha256.Sum256(files[l])
			if got := "sha256:" + hex.EncodeToString(sum[:]); got != cfg.RootFS.DiffIDs[j] {
				t.Errorf("image %d layer %d: content %s, diff id %s", i, j, got, cfg.RootFS.DiffIDs[j])
			}
		}
	}
	var repos map[string]map[string]string
	if err := json.Unmarshal(files["repositories"], &repos); err != nil {
		t.Fatal(err)
	}
	if repos["localhost:5000/a/b"]["1.0"] != tp.digest || repos["registry.k8s.io/pause"]["3.10.2"] != s.digest {
		t.Errorf("repositories: %v", repos)
	}
}

func TestSplitRefAndTarName(t *testing.T) {
	for _, tc := range []struct{ ref, name, tag, file string }{
		{"registry.k8s.io/e2e-test-images/agnhost:2.66.1", "registry.k8s.io/e2e-test-images/agnhost", "2.66.1", "agnhost_2.66.1.tar"},
		{"registry.k8s.io/coredns/coredns:v1.14.6", "registry.k8s.io/coredns/coredns", "v1.14.6", "coredns_v1.14.6.tar"},
		{"localhost:5000/pause", "localhost:5000/pause", "latest", "pause_latest.tar"},
	} {
		name, tag := splitRef(tc.ref)
		if name != tc.name || tag != tc.tag || tarName(tc.ref) != tc.file {
			t.Errorf("%s: %s %s %s, want %s %s %s", tc.ref, name, tag, tarName(tc.ref), tc.name, tc.tag, tc.file)
		}
	}
}

func TestImagePath(t *testing.T) {
	for host, want := range map[string]string{
		"/lib/x86_64-linux-gnu/libc.so.6": "/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/lib64/ld-linux-x86-64.so.2":     "/usr/lib64/ld-linux-x86-64.so.2",
		"/usr/bin/dig":                    "/usr/bin/dig",
		"/sbin/conntrack":                 "/usr/sbin/conntrack",
		"/library/x":                      "/library/x",
	} {
		if got := imagePath(host); got != want {
			t.Errorf("imagePath(%s) = %s, want %s", host, got, want)
		}
	}
}

func TestSharedLibs(t *testing.T) {
	const bin = "/usr/bin/getent" // libc-bin: on every Debian
	if !exists(bin) {
		t.Skip(bin + " not on this machine")
	}
	libs, err := sharedLibs(bin)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range libs {
		names = append(names, filepath.Base(l))
	}
	for _, want := range []string{"ld-linux-x86-64.so.2", "libc.so.6"} {
		if !strings.Contains(strings.Join(names, " "), want) {
			t.Errorf("getent needs %v, missing %s", names, want)
		}
	}
	if static, err := isStatic(bin); err != nil || static {
		t.Errorf("isStatic(getent) = %v, %v", static, err)
	}
}

// testLogger logs through t.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestToolsOverrideBusybox checks that PATH finds the Debian tools, not
// busybox's applets of the same names, in the images that carry both.
func TestToolsOverrideBusybox(t *testing.T) {
	if err := checkHost(); err != nil {
		t.Skip(err)
	}
	base, err := baseLayer()
	if err != nil {
		t.Fatal(err)
	}
	tl, err := toolsLayer(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		typ  byte
		link string
	}{
		{"usr/bin/sh", tar.TypeSymlink, "/usr/bin/dash"},        // busybox ash prefers its applets to PATH
		{"usr/sbin/ip", tar.TypeSymlink, "/usr/bin/ip"},         // busybox's ip is in sbin, first in PATH
		{"usr/bin/nc", tar.TypeSymlink, "/usr/bin/nc.openbsd"},  // -W, -p of the Conntrack tests
		{"usr/bin/nslookup", tar.TypeReg, ""},                   // bind9's
		{"usr/bin/wget", tar.TypeReg, ""},                       // GNU wget: busybox's crashes on a failed connect with -T
		{"etc/wgetrc", tar.TypeReg, ""},                         // tries = 1
		{"usr/lib64/ld-linux-x86-64.so.2", tar.TypeReg, ""},     // the loader, at /lib64 through the usr-merge link
		{"usr/lib/x86_64-linux-gnu/libc.so.6", tar.TypeReg, ""}, // found by ELF DT_NEEDED
	} {
		e, ok := tl.entries[tc.path]
		if !ok || e.typ != tc.typ || e.link != tc.link {
			t.Errorf("%s: %+v (present %v), want type %c link %q", tc.path, e, ok, tc.typ, tc.link)
		}
	}
	if e := base.entries["lib64"]; e.typ != tar.TypeSymlink || e.link != "usr/lib64" {
		t.Errorf("base lib64: %+v, want a link to usr/lib64", e)
	}
}
