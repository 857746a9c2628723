package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/routes"
)

// stateOnTmpfs adds a node whose state dir is a tmpfs of size bytes.
func stateOnTmpfs(t *testing.T, l *lab.Lab, size int) *lab.Node {
	t.Helper()
	n, err := l.AddNode("node1", lab.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d,mode=0700", size), "reef-lab-state", n.StateDir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v: %s", n.StateDir, err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", n.StateDir).Run() })
	return n
}

// fillUp writes a file into dir until its file system is full.
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			return path
		}
	}
}

// TestFullStateDir: with the state dir full, ADDs fail with CNI code 5
// naming the file and leave nothing behind, DELs succeed (the address is
// freed once the store can be written), the daemon stays up and pods keep
// their traffic; once space returns, ADDs work again without a restart.
func TestFullStateDir(t *testing.T) {
	l := newLab(t)
	n := stateOnTmpfs(t, l, 512<<10)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	a, b := newPod(t, n, "a"), newPod(t, n, "b")
	filler := fillUp(t, n.StateDir)

	// bbolt reuses pages it already wrote, so a few ADDs may still fit.
	var failed *lab.Pod
	var addErr error
	var fitted []*lab.Pod
	for i := range 50 {
		p, err := n.NewPod("default", fmt.Sprintf("full%d", i))
		if err != nil {
			failed, addErr = p, err
			break
		}
		fitted = append(fitted, p)
	}
	if failed == nil {
		t.Fatal("50 ADDs succeeded on a full state dir")
	}
	var cerr *types.Error
	db := filepath.Join(n.StateDir, "reef.db")
	if !errors.As(addErr, &cerr) || cerr.Code != types.ErrIOFailure || !strings.Contains(cerr.Msg, "no space left on device") || !strings.Contains(cerr.Msg, db) {
		t.Fatalf("ADD on a full state dir: %v, want CNI code 5 naming %s and the cause", addErr, db)
	}
	t.Logf("ADD %d on a full state dir: %s", len(fitted)+1, cerr.Msg)
	veth := vethOf(failed)
	if slices.Contains(reefVeths(t, n), veth) {
		t.Errorf("the failed ADD left its veth %s", veth)
	}
	if _, err := a.Ping(b.IP); err != nil {
		t.Errorf("a -> b with the state dir full: %v", err)
	}
	if err := a.Del(); err != nil {
		t.Fatalf("DEL with the state dir full: %v", err)
	}
	if slices.Contains(reefVeths(t, n), vethOf(a)) {
		t.Errorf("a's veth is still there after its DEL")
	}
	if !n.Running() {
		t.Fatalf("the daemon exited:\n%s", n.LogTail(20))
	}
	deferred := strings.Contains(n.Log(), "DEL done in the kernel; the store could not be written")
	t.Logf("DEL with the state dir full: the store write was deferred: %v", deferred)
	if deferred {
		if _, ok := allocations(t, n)[a.IP.String()]; !ok {
			t.Error("a deferred DEL freed the address before the store could be written")
		}
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, func() string {
		if _, ok := allocations(t, n)[a.IP.String()]; ok {
			return "a's address is still allocated"
		}
		return ""
	})
	if err := failed.Add(); err != nil {
		t.Fatalf("ADD once space returned: %v", err)
	}
	if _, err := failed.Ping(b.IP); err != nil {
		t.Errorf("new pod -> b: %v", err)
	}
	if out, err := n.Reef("ipam", "check"); err != nil {
		t.Errorf("reef ipam check: %v\n%s", err, out)
	}
}

// TestReadOnlyStateDir: a daemon started on a read-only state dir stops
// with one error naming the file and what to do, and starts once it is
// writable again. (Linux refuses to remount a file system read-only while
// the daemon holds its store open for writing, so at run time a state dir
// becomes read-only only through an error, which behaves as a full one.)
func TestReadOnlyStateDir(t *testing.T) {
	l := newLab(t)
	n := stateOnTmpfs(t, l, 1<<20)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	p := newPod(t, n, "a")
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "remount,ro", n.StateDir).CombinedOutput(); err != nil {
		t.Fatalf("remount ro: %v: %s", err, out)
	}
	if err := n.StartNoWait(); err != nil {
		t.Fatal(err)
	}
	if _, exited := n.Wait(20 * time.Second); !exited {
		t.Fatal("the daemon did not stop on a read-only state dir")
	}
	log := n.LogTail(3)
	for _, want := range []string{filepath.Join(n.StateDir, "reef.db"), "read-only file system", "remount it read-write"} {
		if !strings.Contains(log, want) {
			t.Errorf("the daemon's last words do not say %q:\n%s", want, log)
		}
	}
	if out, err := exec.Command("mount", "-o", "remount,rw", n.StateDir).CombinedOutput(); err != nil {
		t.Fatalf("remount rw: %v: %s", err, out)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if got := allocations(t, n); got[p.IP.String()] == "" {
		t.Errorf("allocations %v, want a's", got)
	}
}

// vethOf is the node-side veth of a pod.
func vethOf(p *lab.Pod) string { return routes.HostVethName(p.Namespace, p.Name, p.ContainerID) }

// TestStateDirGoesReadOnly: the state dir's ext4 hits an error and goes
// read-only under the running daemon (errors=remount-ro; the kernel's
// trigger_fs_error stands in for a failing disk). ADDs fail with CNI code 5
// and leave nothing, a DEL succeeds and holds the address until the store
// can be written (queued beside the socket), the daemon stays up and pods
// keep their traffic. Once the file system is mounted again, the restarted
// daemon runs the queued DEL and ADDs work.
func TestStateDirGoesReadOnly(t *testing.T) {
	l := newLab(t)
	n, err := l.AddNode("node1", lab.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(t.TempDir(), "state.ext4")
	mount := func() {
		t.Helper()
		if out, err := exec.Command("mount", "-o", "loop,errors=remount-ro", img, n.StateDir).CombinedOutput(); err != nil {
			t.Skipf("the kernel test needs a loop device for an ext4 state dir: mount: %v: %s", err, out)
		}
	}
	if out, err := exec.Command("truncate", "-s", "32M", img).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.ext4 (e2fsprogs) for an ext4 state dir: %v: %s", err, out)
	}
	if err := os.MkdirAll(n.StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	mount()
	t.Cleanup(func() { exec.Command("umount", "-l", n.StateDir).Run() })
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	a, b, x := newPod(t, n, "a"), newPod(t, n, "b"), newPod(t, n, "x")

	src, err := exec.Command("findmnt", "-n", "-o", "SOURCE", n.StateDir).Output()
	if err != nil {
		t.Fatal(err)
	}
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(strings.TrimSpace(string(src))), "trigger_fs_error")
	if err := os.WriteFile(trigger, []byte("1"), 0o200); err != nil {
		t.Skipf("the kernel test needs ext4's %s: %v", trigger, err)
	}
	eventually(t, 5*time.Second, func() string {
		if err := os.WriteFile(filepath.Join(n.StateDir, "probe"), nil, 0o600); err == nil {
			return "the state dir still takes writes"
		}
		return ""
	})

	c, err := n.NewPod("default", "c")
	var cerr *types.Error
	if !errors.As(err, &cerr) || cerr.Code != types.ErrIOFailure || !strings.Contains(cerr.Msg, "read-only file system") {
		t.Fatalf("ADD on a read-only state dir: %v, want CNI code 5 saying read-only file system", err)
	}
	if slices.Contains(reefVeths(t, n), vethOf(c)) {
		t.Errorf("the failed ADD left its veth")
	}
	// /readyz and reef status say why ADDs fail, and keep saying it:
	// the file system refuses the empty commit /readyz tries too.
	for range 2 {
		if code, body := readyz(t, n); code != 503 || !strings.Contains(body, "cannot write the state file") {
			t.Errorf("/readyz with the state dir read-only: %d %q, want 503 naming the state file", code, body)
		}
	}
	if out, err := n.Reef("status"); err != nil || !strings.Contains(out, "running but not ready: cannot write the state file") {
		t.Errorf("reef status with the state dir read-only: %v\n%s", err, out)
	}
	if err := a.Del(); err != nil {
		t.Fatalf("DEL on a read-only state dir: %v", err)
	}
	if slices.Contains(reefVeths(t, n), vethOf(a)) {
		t.Errorf("a's veth is still there after its DEL")
	}
	if _, ok := allocations(t, n)[a.IP.String()]; !ok {
		t.Errorf("a's address was freed although the store cannot be written")
	}
	if !strings.Contains(n.Log(), "DEL done in the kernel; the store could not be written") {
		t.Errorf("the daemon did not log the deferred DEL")
	}
	if _, err := x.Ping(b.IP); err != nil {
		t.Errorf("x -> b with the state dir read-only: %v", err)
	}
	if !n.Running() {
		t.Fatalf("the daemon exited:\n%s", n.LogTail(20))
	}

	// The operator's repair: stop reef, mount the file system again.
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("umount", n.StateDir).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v: %s", err, out)
	}
	exec.Command("e2fsck", "-p", "-f", img).Run() // clears the error mark
	mount()
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if _, ok := allocations(t, n)[a.IP.String()]; ok {
		t.Errorf("a's address is still allocated after the queued DEL ran")
	}
	if err := c.Add(); err != nil {
		t.Fatalf("ADD after the repair: %v", err)
	}
	if _, err := c.Ping(b.IP); err != nil {
		t.Errorf("c -> b: %v", err)
	}
	if out, err := n.Reef("ipam", "check"); err != nil {
		t.Errorf("reef ipam check: %v\n%s", err, out)
	}
}
