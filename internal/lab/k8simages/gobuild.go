package k8simages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// A goModule is a module whose commands are built, static
// (CGO_ENABLED=0), in a wrapper module, the way
// internal/lab/kube/build.sh builds kube-apiserver: k8s.io/kubernetes
// requires its staging modules at v0.0.0 and replaces them with
// directories a module download does not have, so `go install pkg@v`
// refuses it; the wrapper replaces each with its published release.
type goModule struct {
	path    string // k8s.io/kubernetes
	version string // v1.37.2
	// replaceVersion is the version each locally replaced module of
	// path's go.mod is replaced with (v0.37.2 for kubernetes v1.37.2).
	replaceVersion string
}

// goBinary is one command of a goModule.
type goBinary struct {
	pkg     string // the main package
	ldflags string // besides -s -w
}

// localReplace matches a replace directive to a directory ("=> ./x",
// "=> ../x"), in a block or on its own line.
var localReplace = regexp.MustCompile(`(?m)^[ \t]*(?:replace[ \t]+)?([^\s(]\S*)(?:[ \t]+\S+)?[ \t]+=>[ \t]+\.\.?/`)

// wrapperGoMod returns the go.mod of the wrapper module of m, given m's
// own go.mod: its go and godebug lines, a requirement of m, and each
// module m replaces with a directory replaced by its release.
func wrapperGoMod(name string, m goModule, upstream []byte) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "module reef.lab/%s\n\n", name)
	for _, line := range strings.Split(string(upstream), "\n") {
		if strings.HasPrefix(line, "go ") || strings.HasPrefix(line, "godebug ") {
			b.WriteString(line + "\n")
		}
	}
	fmt.Fprintf(&b, "\nrequire %s %s\n", m.path, m.version)
	matches := localReplace.FindAllStringSubmatch(string(upstream), -1)
	if len(matches) > 0 {
		b.WriteString("\nreplace (\n")
		for _, r := range matches {
			fmt.Fprintf(&b, "\t%s => %s %s\n", r[1], r[1], m.replaceVersion)
		}
		b.WriteString(")\n")
	}
	return b.Bytes()
}

// buildGo builds bins of m into out (binary name => package), each
// written beside its path and renamed, in one wrapper module under
// work. The go command's module and build caches make a second build
// of the same versions quick.
func buildGo(ctx context.Context, goCmd, work, name string, m goModule, bins map[string]goBinary) error {
	dir := filepath.Join(work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "CGO_ENABLED=0")
	run := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, goCmd, args...)
		cmd.Dir, cmd.Env = dir, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
		}
		return out, nil
	}
	// go mod download needs a module to run in; an empty go.mod will do.
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module reef.lab/"+name+"\n"), 0o644); err != nil {
		return err
	}
	out, err := run("mod", "download", "-json", m.path+"@"+m.version)
	if err != nil {
		return err
	}
	var info struct{ GoMod string }
	if err := json.Unmarshal(out, &info); err != nil || info.GoMod == "" {
		return fmt.Errorf("go mod download %s@%s: no go.mod in %q", m.path, m.version, out)
	}
	upstream, err := os.ReadFile(info.GoMod)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), wrapperGoMod(name, m, upstream), 0o644); err != nil {
		return err
	}
	for out, bin := range bins {
		if _, err := run("get", bin.pkg+"@"+m.version); err != nil {
			return err
		}
		tmp := out + ".tmp"
		if _, err := run("build", "-trimpath", "-ldflags", strings.TrimSpace("-s -w "+bin.ldflags), "-o", tmp, bin.pkg); err != nil {
			return err
		}
		if err := os.Rename(tmp, out); err != nil {
			return err
		}
	}
	return nil
}

// builtFrom reports whether the Go binary bin was built from module path
// at version (go version -m: the main module or a dependency).
func builtFrom(ctx context.Context, goCmd, bin, pkg, path, version string) bool {
	out, err := exec.CommandContext(ctx, goCmd, "version", "-m", bin).Output()
	if err != nil {
		return false
	}
	var pkgOK, modOK bool
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "path" && f[1] == pkg {
			pkgOK = true
		}
		if len(f) >= 3 && (f[0] == "mod" || f[0] == "dep") && f[1] == path && f[2] == version {
			modOK = true
		}
	}
	return pkgOK && modOK
}
