package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandLineErrors runs command lines that fail (or ask for help)
// before any command does its work, through Run and Report as main does:
// the exit status (0 help, 2 bad command line, 1 failure) and that stderr
// says what to fix. None reaches a daemon, the kernel or a store: every
// config path named does not exist.
func TestCommandLineErrors(t *testing.T) {
	const noFile = "/nonexistent-reef-test/config.yaml"
	// A socket file no daemon serves, as a crash leaves it.
	stale := filepath.Join(t.TempDir(), "reef.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	// A config file that moves the socket: the client commands ask the
	// daemon there, as the daemon serves it.
	moved := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(moved, []byte("socket: "+stale+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		status int
		stderr string // "" when stderr may be anything
	}{
		{[]string{"--help"}, 0, ""},
		{[]string{"status", "--help"}, 0, "-socket"},
		{[]string{"daemon", "-h"}, 0, "-config"},
		{[]string{"ipam", "check", "-h"}, 0, "usage: reef ipam check"},
		{[]string{}, 2, "usage: reef"},
		{[]string{"bogus"}, 2, `unknown command "bogus"`},
		{[]string{"ipam", "bogus"}, 2, `reef: unknown ipam command "bogus"`},
		{[]string{"store"}, 2, "reef: store: give a command"},
		{[]string{"peer"}, 2, "reef: peer: give a command, such as reef peer reset ADDRESS"},
		{[]string{"peer", "enable"}, 2, `reef: unknown peer command "enable"`},
		{[]string{"peer", "reset"}, 2, "reef: reef peer reset takes one address"},
		{[]string{"peer", "reset", "node3"}, 2, `reef: reef peer reset: "node3" is not an IP address`},
		{[]string{"peer", "reset", "192.168.77.60", "-o", "xml"}, 2, `reef: -o "xml": use table or json`},
		{[]string{"peer", "reset", "-h"}, 0, "-socket"},
		{[]string{"peer", "reset", "192.168.77.60", "--socket", stale}, 1, "connection refused: no daemon serves it"},
		{[]string{"status", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"status", "-o", "yaml"}, 2, `reef: -o "yaml": use table or json`},
		{[]string{"status", "extra"}, 2, "reef: reef status: unexpected arguments: extra"},
		{[]string{"routes", "-o", "xml"}, 2, `reef: -o "xml": use table or json`},
		{[]string{"policy", "show", "foo"}, 2, `reef: pod "foo": want NAMESPACE/NAME`},
		{[]string{"kubeconfig", "--duration", "1m"}, 2, "reef: --duration 1m0s: want 1h or more"},
		// The flag package stops at the first operand: without the check
		// the daemon would ignore what follows and run on the defaults.
		{[]string{"daemon", "--config", noFile, "extra"}, 2, "reef: reef daemon: unexpected arguments: extra"},
		{[]string{"diagnose", "--config", noFile, "out.tar.gz"}, 2, "reef: reef diagnose: unexpected arguments: out.tar.gz"},
		{[]string{"kubeconfig", "--duration", "1m", "extra"}, 2, "reef: reef kubeconfig: unexpected arguments: extra"},
		{[]string{"diagnose", "--config", noFile, "--log-lines", "-5"}, 2, "reef: --log-lines -5: want 0 or more"},
		{[]string{"cleanup", "--config", noFile, "extra"}, 2, "reef: reef cleanup: unexpected arguments: extra"},
		{[]string{"daemon", "--config", noFile}, 1, "reef: config " + noFile + ": no such file or directory"},
		{[]string{"status", "--socket", "/nonexistent-reef-test/reef.sock"}, 1, "is the daemon running?"},
		{[]string{"status", "--socket", stale}, 1, "connection refused: no daemon serves it (is the daemon running?"},
		{[]string{"status", "--config", moved}, 1, "reef daemon socket " + stale + ": dial unix " + stale + ": connect: connection refused"},
		{[]string{"routes", "--config", moved}, 1, "reef daemon socket " + stale + ": dial unix " + stale + ": connect: connection refused"},
		{[]string{"status", "--config", noFile}, 1, "reef: config " + noFile + ": open " + noFile + ": no such file or directory"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			status := Report(Run(context.Background(), tc.args, &stdout, &stderr), &stderr)
			if status != tc.status {
				t.Errorf("exit status %d, want %d; stderr:\n%s", status, tc.status, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Errorf("stderr does not say %q:\n%s", tc.stderr, stderr.String())
			}
		})
	}
}
