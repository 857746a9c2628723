package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCleanupWithABadConfig: a config the daemon refuses for a key that
// is not a path still tells `reef cleanup` where reef's state is. The
// cleanup is not confirmed, so nothing is removed; it reads this network
// namespace's nftables tables, links and routes (root).
func TestCleanupWithABadConfig(t *testing.T) {
	dir, state, db := cleanupStateDir(t)
	cfg := filepath.Join(dir, "config.yaml")
	bad := "stateDir: " + state + "\nsocket: " + filepath.Join(dir, "reef.sock") + "\nbgp:\n  asn: 0\n"
	if err := os.WriteFile(cfg, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	old := cleanupStdin
	cleanupStdin = strings.NewReader("n\n")
	t.Cleanup(func() { cleanupStdin = old })
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"cleanup", "--config", cfg}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "cleanup not confirmed") {
		t.Errorf("reef cleanup with a bad config, not confirmed: %v, want it to ask and remove nothing\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "the store "+db) {
		t.Errorf("reef cleanup does not list the store %s:\n%s", db, &stdout)
	}
	if !strings.Contains(stderr.String(), "line 4: bgp.asn: value 0") {
		t.Errorf("reef cleanup does not say what the config's problem is:\n%s", &stderr)
	}
	if _, err := os.Stat(db); err != nil {
		t.Errorf("the store is gone although the cleanup was not confirmed: %v", err)
	}
}

// TestCleanupWithUnreadableConfig: a config that is not YAML tells
// `reef cleanup` nothing of where reef's state is. It says so once and
// what to do, and with --state-dir and --socket it goes on with those:
// it lists the store there and asks. It used to fail either way, with the
// YAML error twice. Not confirmed, nothing is removed; it reads this
// network namespace's nftables tables, links and routes (root).
func TestCleanupWithUnreadableConfig(t *testing.T) {
	dir, state, db := cleanupStateDir(t)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("nodeName: a\n  stateDir: "+state+"\npools: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := cleanupStdin
	t.Cleanup(func() { cleanupStdin = old })

	cleanupStdin = strings.NewReader("n\n")
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), []string{"cleanup", "--config", cfg}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "give the daemon's paths with --state-dir DIR --socket PATH") || strings.Count(err.Error(), "line 2") != 1 {
		t.Errorf("reef cleanup with a config that is not YAML: %v, want the YAML error once and what to do\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}

	cleanupStdin = strings.NewReader("n\n")
	stdout.Reset()
	stderr.Reset()
	err = Run(context.Background(), []string{"cleanup", "--config", cfg, "--state-dir", state, "--socket", filepath.Join(dir, "reef.sock")}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "cleanup not confirmed") {
		t.Errorf("reef cleanup with a config that is not YAML and --state-dir, --socket, not confirmed: %v, want it to ask and remove nothing\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	if !strings.Contains(stdout.String(), "the store "+db) {
		t.Errorf("reef cleanup does not list the store %s:\n%s", db, &stdout)
	}
	if !strings.Contains(stderr.String(), "cleanup uses --state-dir "+state) {
		t.Errorf("reef cleanup does not say it passes over the config:\n%s", &stderr)
	}
	if _, err := os.Stat(db); err != nil {
		t.Errorf("the store is gone although the cleanup was not confirmed: %v", err)
	}
}

// cleanupStateDir makes a state directory with a file where the store
// would be, for a cleanup that lists it and is not confirmed (root:
// reef cleanup reads nftables).
func cleanupStateDir(t *testing.T) (dir, state, db string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: reef cleanup reads nftables")
	}
	dir = t.TempDir()
	state = filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	db = filepath.Join(state, "reef.db")
	if err := os.WriteFile(db, []byte("not a store"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, state, db
}

// TestCleanupRelativePathFlag: a relative --state-dir is refused naming
// the flag, not the config file, which says nothing of it.
func TestCleanupRelativePathFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("logLevel: info\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := Run(context.Background(), []string{"cleanup", "--config", cfg, "--state-dir", "state", "--socket", "/run/reef/reef.sock"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), `--state-dir "state": reef cleanup wants the daemon's absolute path`) || strings.Contains(err.Error(), cfg) {
		t.Errorf("reef cleanup --state-dir state: %q, want it refused naming --state-dir, not the config", err)
	}
}
