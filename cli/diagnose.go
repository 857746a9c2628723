package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/nft"
	"github.com/reefcni/reef/policy"
)

// diagnoseFile is one file of the bundle: its name and how it is made.
type diagnoseFile struct {
	name string
	make func(ctx context.Context) ([]byte, error)
}

// runDiagnose is `reef diagnose [-o FILE]`: one tar.gz with what a bug
// report needs: the daemon's status, IPAM, checks and routes, reef's
// nftables tables, the links, the configuration without its BGP
// passwords, and the daemon's last log lines from journald. A part that
// cannot be had is in the bundle as the error it got (MANIFEST.txt lists
// every file and how it went); the bundle is written anyway.
func runDiagnose(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reef diagnose", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := registerConfig(fs, "configuration file (its copy in the bundle has no passwords)")
	outPath := fs.String("o", "", "write the bundle here (default reef-diagnose-<node>-<time>.tar.gz in the current directory)")
	lines := fs.Int("log-lines", 2000, "the daemon's last log lines to include (journalctl -u reef)")
	if err := fs.Parse(args); err != nil {
		return flagError(err)
	}
	if err := noOperands(fs); err != nil {
		return err
	}
	if *lines < 0 {
		return UsageError{msg: fmt.Sprintf("--log-lines %d: want 0 or more", *lines)}
	}
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	if err := cfg.Finish(); err != nil {
		return err
	}
	files := diagnoseFiles(cfg.Socket, *cf.path, *lines)
	node := cfg.NodeName
	stamp := time.Now().UTC().Format("20060102T150405Z")
	path := *outPath
	if path == "" {
		path = fmt.Sprintf("reef-diagnose-%s-%s.tar.gz", node, stamp)
	}
	if err := writeBundle(ctx, path, node, stamp, files); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%d files; MANIFEST.txt lists them)\n", path, len(files)+1)
	return nil
}

// diagnoseFiles is what goes in the bundle: the CLI's views through the
// daemon's socket, the redacted config at cfgPath and the kernel's state.
func diagnoseFiles(socketPath, cfgPath string, logLines int) []diagnoseFile {
	socket := []string{"--socket", socketPath}
	cli := func(args ...string) func(ctx context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			var out bytes.Buffer
			err := Run(ctx, append(args, socket...), &out, &out)
			return out.Bytes(), err
		}
	}
	command := func(name string, args ...string) func(ctx context.Context) ([]byte, error) {
		return func(ctx context.Context) ([]byte, error) {
			if _, err := exec.LookPath(name); err != nil {
				return nil, fmt.Errorf("%s is not installed", name)
			}
			return exec.CommandContext(ctx, name, args...).CombinedOutput()
		}
	}
	files := []diagnoseFile{
		{"status.txt", cli("status")},
		{"status.json", cli("status", "-o", "json")},
		{"ipam-show.txt", cli("ipam", "show", "--show-blocks", "--show-allocations")},
		{"ipam-show.json", cli("ipam", "show", "--show-blocks", "--show-allocations", "-o", "json")},
		{"ipam-check.txt", cli("ipam", "check")},
		{"routes.txt", cli("routes")},
		{"version.txt", cli("version")},
		{"config.yaml", func(context.Context) ([]byte, error) { return redactedConfig(cfgPath) }},
	}
	for _, c := range kernelCommands(logLines) {
		files = append(files, diagnoseFile{c.name, command(c.argv[0], c.argv[1:]...)})
	}
	return files
}

// writeBundle writes files and a MANIFEST.txt of them, under a folder
// named after node and stamp, to the gzipped tar at path. A file whose
// command fails goes in with the error at its end.
func writeBundle(ctx context.Context, path, node, stamp string, files []diagnoseFile) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	dir := fmt.Sprintf("reef-diagnose-%s-%s/", node, stamp)
	put := func(name string, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: dir + name, Mode: 0o600, Size: int64(len(body)), ModTime: time.Now()}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	var manifest strings.Builder
	fmt.Fprintf(&manifest, "reef diagnose of node %s at %s\n\n", node, stamp)
	for _, file := range files {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		body, err := file.make(cctx)
		cancel()
		state := "ok"
		if err != nil {
			state = "error: " + err.Error()
			body = append(body, []byte("\n# "+state+"\n")...)
		}
		fmt.Fprintf(&manifest, "%-32s %s\n", file.name, state)
		if err := put(file.name, body); err != nil {
			return err
		}
	}
	if err := put("MANIFEST.txt", []byte(manifest.String())); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return f.Close()
}

// kernelCommand is a file of the bundle that a command writes.
type kernelCommand struct {
	name string
	argv []string
}

// kernelCommands are the bundle's files read from the kernel and the
// journal: the links, reef's routes of both families (proto 238) and
// each of reef's nftables tables (package nat's, of both families, and
// NetworkPolicy's inet reef), whether the node has it or not.
func kernelCommands(logLines int) []kernelCommand {
	cmds := []kernelCommand{
		{"links.txt", []string{"ip", "-d", "link", "show"}},
		{"ip-routes.txt", []string{"ip", "route", "show", "table", "all", "proto", "238"}},
		{"ip6-routes.txt", []string{"ip", "-6", "route", "show", "table", "all", "proto", "238"}},
		{"journal.txt", []string{"journalctl", "-u", "reef", "-n", fmt.Sprint(logLines), "--no-pager", "-o", "short-iso-precise"}},
	}
	for _, id := range append(nat.TableIDs(), policy.TableID) {
		fam := nft.FamilyName(id.Family)
		cmds = append(cmds, kernelCommand{"nftables-" + fam + "-" + id.Name + ".txt", []string{"nft", "list", "table", fam, id.Name}})
	}
	return cmds
}

// redactedConfig is the configuration file with the value of every key
// named password replaced, wherever it is (bgp.password,
// bgp.externalPeers[].password), and without its comments.
func redactedConfig(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s is not YAML (left out, it may hold a password): %w", path, err)
	}
	redact(&doc)
	return yaml.Marshal(&doc)
}

func redact(n *yaml.Node) {
	n.HeadComment, n.LineComment, n.FootComment = "", "", "" // a comment may hold an old password
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if strings.EqualFold(n.Content[i].Value, "password") && n.Content[i+1].Kind == yaml.ScalarNode {
				n.Content[i+1].Value, n.Content[i+1].Tag, n.Content[i+1].Style = "REDACTED", "!!str", 0
			}
		}
	}
	for _, c := range n.Content {
		redact(c)
	}
}
