package daemon

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// dialEnv makes the test binary, re-executed as an unprivileged user,
// connect to the socket it names instead of running tests (see TestMain).
const dialEnv = "REEF_TEST_DIAL"

// Exit codes of the dialing child.
const (
	dialRefused  = 0 // the server closed the connection: what a non-root peer must see
	dialNoSocket = 2 // connect itself failed
	dialServed   = 3 // the connection stayed open or carried data
)

func TestMain(m *testing.M) {
	if path := os.Getenv(dialEnv); path != "" {
		os.Exit(dialAndWait(path))
	}
	os.Exit(m.Run())
}

// dialAndWait connects to path and reports whether the server hung up.
func dialAndWait(path string) int {
	c, err := net.Dial("unix", path)
	if err != nil {
		os.Stderr.WriteString("dial: " + err.Error() + "\n")
		return dialNoSocket
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var b [1]byte
	_, err = c.Read(b[:])
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		return dialRefused
	}
	os.Stderr.WriteString("read: " + errString(err) + "\n")
	return dialServed
}

func errString(err error) string {
	if err == nil {
		return "got data"
	}
	return err.Error()
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to run a client as another user (uid 65534) and to check peer credentials")
	}
}

// syncBuffer is a log sink the listener's goroutine can write to while the
// test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode()
}

func TestListenSocketModes(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"new dir", func(t *testing.T, dir string) {}},
		{"existing open dir", func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run", "reef")
			tt.setup(t, dir)
			path := filepath.Join(dir, "reef.sock")
			l, err := listenSocket(path, discardLog())
			if err != nil {
				t.Fatalf("listenSocket: %v", err)
			}
			defer l.Close()
			if m := mode(t, dir); !m.IsDir() || m.Perm() != 0o700 {
				t.Errorf("socket dir mode = %v, want drwx------", m)
			}
			if m := mode(t, path); m&os.ModeSocket == 0 || m.Perm() != 0o600 {
				t.Errorf("socket mode = %v, want Srw-------", m)
			}
		})
	}
}

func TestListenSocketReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.sock")
	// A socket file left behind by a daemon that was killed.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	stale.Close()
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("stale socket still accepts connections; the test needs a dead one")
	}

	l, err := listenSocket(path, discardLog())
	if err != nil {
		t.Fatalf("listenSocket over a stale socket: %v", err)
	}
	defer l.Close()
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial the new socket: %v", err)
	}
	c.Close()
	if os.Geteuid() == 0 { // only root passes the peer check
		if err := <-accepted; err != nil {
			t.Errorf("Accept: %v", err)
		}
	}
}

func TestListenSocketRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := listenSocket(path, discardLog())
	if err == nil {
		l.Close()
		t.Fatal("listenSocket over a regular file succeeded, want an error")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Errorf("the regular file was changed: %q, %v", b, err)
	}
}

// TestListenSocketPeerCredentials opens the socket to everyone by hand and
// checks that a non-root client is still turned away while root is served.
func TestListenSocketPeerCredentials(t *testing.T) {
	requireRoot(t)
	// t.TempDir is 0700; uid 65534 must be able to reach the socket and
	// execute the copy of the test binary.
	base, err := os.MkdirTemp("", "reef-listener-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(base, "daemon.test")
	copyFile(t, self, bin, 0o755)

	dir := filepath.Join(base, "run")
	path := filepath.Join(dir, "reef.sock")
	var logs syncBuffer
	l, err := listenSocket(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatalf("listenSocket: %v", err)
	}
	defer l.Close()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}

	type acceptResult struct {
		c   net.Conn
		err error
	}
	accepted := make(chan acceptResult, 1)
	go func() {
		c, err := l.Accept()
		accepted <- acceptResult{c, err}
	}()

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), dialEnv+"="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	if err != nil && code < 0 {
		t.Fatalf("run client as uid 65534: %v\n%s", err, out)
	}
	switch code {
	case dialRefused:
	case dialNoSocket:
		t.Fatalf("client as uid 65534 could not connect (the test opened the socket to all): %s", out)
	default:
		t.Fatalf("client as uid 65534 exited %d, want %d (server hangs up): %s", code, dialRefused, out)
	}
	select {
	case r := <-accepted:
		t.Fatalf("Accept returned a connection from uid 65534: %v, %v", r.c, r.err)
	default:
	}
	if l := logs.String(); !strings.Contains(l, "uid=65534") {
		t.Errorf("refusal not logged with the peer's uid:\n%s", l)
	}

	// Root is served, by the same Accept call that turned the other away.
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("dial as root: %v", err)
	}
	defer c.Close()
	var r acceptResult
	select {
	case r = <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("Accept did not return the root connection")
	}
	if r.err != nil {
		t.Fatalf("Accept: %v", r.err)
	}
	defer r.c.Close()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := io.ReadFull(r.c, b[:]); err != nil || b[0] != 'x' {
		t.Errorf("accepted connection is not the root client's: read %q, %v", b, err)
	}
}

func copyFile(t *testing.T, from, to string, perm os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, perm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
