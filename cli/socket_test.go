package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonAway: the commands that ask the daemon fail with a message
// that says why and what to do: no socket, a socket a crashed daemon left
// (connection refused, which gRPC used to hand over as its own text), a
// daemon that does not answer, a socket the user may not open.
func TestDaemonAway(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false) // as kill -9 leaves it
	l.Close()
	for _, tc := range []struct {
		name, socket string
		want         []string
	}{
		{"no socket", filepath.Join(dir, "none.sock"), []string{"no such file or directory", "is the daemon running? `systemctl status reef`"}},
		{"stale socket", stale, []string{"connection refused: no daemon serves it", "is the daemon running? `systemctl status reef`, `journalctl -u reef`"}},
	} {
		for _, args := range [][]string{{"status"}, {"status", "-o", "json"}, {"ipam", "show"}, {"routes"}, {"node", "forget", "n3"}, {"peer", "reset", "192.168.77.60"}} {
			t.Run(tc.name+"/"+strings.Join(args, " "), func(t *testing.T) {
				var out, errOut bytes.Buffer
				err := Run(context.Background(), append(args, "--socket", tc.socket), &out, &errOut)
				if err == nil {
					t.Fatalf("reef %s with %s succeeded: %s", strings.Join(args, " "), tc.name, out.String())
				}
				for _, w := range append(tc.want, tc.socket) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("reef %s: %q, want it to say %q", strings.Join(args, " "), err, w)
					}
				}
				if strings.Contains(err.Error(), "rpc error") {
					t.Errorf("reef %s: %q: gRPC's text, not what is wrong", strings.Join(args, " "), err)
				}
			})
		}
	}
	// A daemon that takes the connection and never answers (stopped, stuck).
	stuck := filepath.Join(dir, "stuck.sock")
	sl, err := net.Listen("unix", stuck)
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := sl.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	defer func(d time.Duration) { callTimeout = d }(callTimeout)
	callTimeout = 200 * time.Millisecond
	for _, args := range [][]string{{"status"}, {"node", "forget", "n3"}, {"peer", "reset", "192.168.77.60"}} {
		err := Run(context.Background(), append(args, "--socket", stuck), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "reef daemon at "+stuck+" did not answer within 200ms: it is stuck or busy") {
			t.Errorf("reef %s with a daemon that does not answer: %v, want it to say so", strings.Join(args, " "), err)
		}
	}

	// Root opens any socket: the refusals a user gets are made up.
	for _, err := range []error{
		&os.PathError{Op: "stat", Path: "/run/reef/reef.sock", Err: syscall.EACCES},
		&net.OpError{Op: "dial", Net: "unix", Err: os.NewSyscallError("connect", syscall.EACCES)},
	} {
		got := socketError("/run/reef/reef.sock", err).Error()
		if !strings.Contains(got, "permission denied: it admits root only; run reef as root") || strings.Contains(got, "is the daemon running") {
			t.Errorf("%v: %q, want it to say the socket admits root only, not ask whether the daemon runs", err, got)
		}
	}
}
