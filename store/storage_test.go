package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// tmpfs mounts a tmpfs of size bytes on a fresh dir (root only; skipped
// otherwise) and unmounts it when the test ends.
func tmpfs(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fill writes a file until the file system is full and returns its path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			return path
		}
	}
}

// A full state dir: allocations fail with a StorageError that names the
// file and writes nothing; once space returns they work again on the same
// Store, and the file passes bbolt's check.
func TestFullStateDir(t *testing.T) {
	dir := tmpfs(t, 256<<10)
	path := filepath.Join(dir, "state", "reef.db")
	s := openProtoAt(t, path)
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 20}
	claimConfirmed(t, s, pool)
	filler := fill(t, dir)
	var failed error
	ok := 0
	for i := range 200 {
		h := fmt.Sprintf("net.%03d-%s", i, strings.Repeat("x", 200))
		if _, _, err := s.Allocate(Endpoint{Handle: h}, pool); err != nil {
			failed = err
			break
		}
		ok++
	}
	var se *StorageError
	if !errors.As(failed, &se) || !errors.Is(failed, ErrNotWritable) || !strings.Contains(failed.Error(), path) || !strings.Contains(failed.Error(), "no space left on device") {
		t.Fatalf("Allocate on a full disk: %v, want a StorageError naming %s", failed, path)
	}
	if s.refused.Load() == nil {
		t.Errorf("the refused write is not remembered")
	}
	// Writable's empty commit rewrites the meta page, which a full
	// file system takes: it clears the mark (store.Writable's doc).
	if err := s.Writable(); err != nil || s.refused.Load() != nil {
		t.Errorf("Writable after an empty commit was taken: %v (mark %v)", err, s.refused.Load())
	}
	eps, _ := s.Endpoints()
	if len(eps) != ok {
		t.Fatalf("%d endpoints after %d allocations succeeded: the failed one left something", len(eps), ok)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Allocate(Endpoint{Handle: "net.after"}, pool); err != nil {
		t.Fatalf("Allocate once space returned: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path, Options{Node: "node-a", Address: protoSelf})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	s2.Close()
}

// A read-only state dir at start: one error naming the file and what to do.
func TestReadOnlyStateDirAtOpen(t *testing.T) {
	dir := tmpfs(t, 1<<20)
	path := filepath.Join(dir, "reef.db")
	s := openProtoAt(t, path)
	s.Close()
	if out, err := exec.Command("mount", "-o", "remount,ro", dir).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v: %s", err, out)
	}
	_, err := Open(path, Options{Node: "node-a", Address: protoSelf})
	if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), "read-only file system") || !strings.Contains(err.Error(), "remount it read-write") {
		t.Fatalf("Open on a read-only file system: %v", err)
	}
	fresh := filepath.Join(dir, "new", "reef.db")
	if _, err := Open(fresh, Options{Node: "node-a"}); !errors.Is(err, ErrNotWritable) {
		t.Fatalf("Open of a new store on a read-only file system: %v", err)
	}
}

// TestStorageErrorKinds: the file system's refusals become a StorageError
// whether the errno is wrapped or only in the text (bbolt's "file resize
// error: %s"); other errors pass through.
func TestStorageErrorKinds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.EROFS}, true},
		{fmt.Errorf("file resize error: %s", syscall.EROFS), true},
		{fmt.Errorf("file resize error: %s", syscall.ENOSPC), true},
		{fmt.Errorf("file resize error: %s", syscall.EDQUOT), true},
		{errors.New("bucket not found"), false},
		{fmt.Errorf("file resize error: %s", syscall.EIO), false},
	} {
		got := storageError("/var/lib/reef/reef.db", tc.err)
		if errors.Is(got, ErrNotWritable) != tc.want {
			t.Errorf("storageError(%v) = %v, want a StorageError: %v", tc.err, got, tc.want)
		}
	}
}
