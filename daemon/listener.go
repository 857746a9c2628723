package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// listenSocket serves the daemon's API on a unix socket that only root can
// reach: the directory is 0700, the socket 0600, and every connection's
// peer credentials are checked, so a mode change by hand opens nothing.
func listenSocket(path string, log *slog.Logger) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket dir %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("chmod socket dir %s: %w", dir, err)
	}
	// A socket left by a killed daemon blocks bind. The store's file lock
	// already proved no other daemon runs, so it is safe to remove; anything
	// that is not a socket is left alone.
	if st, err := os.Lstat(path); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("socket path %s exists and is not a socket; remove it or set socket in the config", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
		}
	}
	old := unix.Umask(0o177)
	l, err := net.Listen("unix", path)
	unix.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	return &rootOnlyListener{Listener: l, log: log}, nil
}

// rootOnlyListener drops connections whose peer is not uid 0.
type rootOnlyListener struct {
	net.Listener
	log *slog.Logger
}

func (l *rootOnlyListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, pid, err := peerUID(c)
		if err == nil && uid == 0 {
			return c, nil
		}
		if err != nil {
			l.log.Warn("refused a connection: cannot read peer credentials", "error", err)
		} else {
			l.log.Warn("refused a connection from a non-root process", "uid", uid, "pid", pid)
		}
		c.Close()
	}
}

func peerUID(c net.Conn) (uid uint32, pid int32, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, 0, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, fmt.Errorf("SO_PEERCRED: %w", serr)
	}
	return cred.Uid, cred.Pid, nil
}
