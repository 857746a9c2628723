package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// Close removes every pod through the CRI (stopp, rmp), stops containerd
// by its pid, kills what it left (shims, pause processes), unmounts what
// is mounted under its dir and removes the sandboxes' netns files and
// cgroups. It is safe to call more than once; Lab.Close calls it.
func (c *Containerd) Close() error {
	var errs []error
	c.closeOnce.Do(func() {
		if c.Pid() != 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			ids, err := c.PodIDs(ctx)
			if err != nil {
				errs = append(errs, err)
			}
			for _, id := range ids {
				if _, err := c.Run(ctx, "stopp", id); err != nil {
					errs = append(errs, err)
				}
				if _, err := c.Run(ctx, "rmp", id); err != nil {
					errs = append(errs, err)
				}
			}
			cancel()
		}
		if err := c.stop(); err != nil {
			errs = append(errs, err)
		}
		cleanContainerdDir(c.Dir, c.Node.Netns)
	})
	return errors.Join(errs...)
}

// stop sends SIGTERM to containerd and waits; SIGKILL after 10s.
func (c *Containerd) stop() error {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return nil
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("containerd of %s did not exit within 10s of SIGTERM", c.Node.Name)
	}
}

// cleanContainerdDir removes what the containerd of a node (netns name
// nodeNetns) with work dir dir may have left once containerd itself is
// gone: processes whose command line names dir (its shims, and the
// sandboxes' and containers' pause, whose image passes dir as an
// argument), mounts under dir, and for each sandbox it knew of its netns
// file, its shim's socket and containerd's CNI cache entries; then the
// pods' cgroups. The sandboxes are found in three places: the ids this
// lab recorded (dir/sandboxes), the bundles in containerd's state dir,
// and containerd's CNI cache (/var/lib/cni/results, not configurable in
// containerd 1.6), whose entries name the pod's UID, which starts with
// nodeNetns. A sandbox caught between its netns and its CNI ADD by a kill
// is in none of them: its empty netns file stays.
func cleanContainerdDir(dir, nodeNetns string) {
	killNaming(dir)
	unmountUnder(dir)
	ids, netns := map[string]bool{}, map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(dir, "sandboxes")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				ids[f[0]], netns[f[1]] = true, true
			}
		}
	}
	bundles, _ := filepath.Glob(filepath.Join(dir, "state", "io.containerd.runtime.v2.task", "k8s.io", "*", "config.json"))
	for _, cfg := range bundles {
		ids[filepath.Base(filepath.Dir(cfg))] = true
		var spec struct {
			Linux struct {
				Namespaces []struct{ Type, Path string } `json:"namespaces"`
			} `json:"linux"`
		}
		if b, err := os.ReadFile(cfg); err == nil && json.Unmarshal(b, &spec) == nil {
			for _, ns := range spec.Linux.Namespaces {
				if ns.Type == "network" {
					netns[ns.Path] = true
				}
			}
		}
	}
	cached, _ := filepath.Glob("/var/lib/cni/results/*")
	for _, f := range cached {
		var entry struct {
			ContainerID string      `json:"containerId"`
			CNIArgs     [][2]string `json:"cniArgs"`
			Result      struct {
				Interfaces []struct{ Sandbox string } `json:"interfaces"`
			} `json:"result"`
		}
		b, err := os.ReadFile(f)
		if err != nil || json.Unmarshal(b, &entry) != nil {
			continue
		}
		ours := false
		for _, kv := range entry.CNIArgs {
			ours = ours || (kv[0] == "K8S_POD_UID" && strings.HasPrefix(kv[1], nodeNetns+"-"))
		}
		if !ours {
			continue
		}
		ids[entry.ContainerID] = true
		for _, i := range entry.Result.Interfaces {
			netns[i.Sandbox] = true
		}
		os.Remove(f)
	}
	for p := range netns {
		if strings.HasPrefix(p, "/var/run/netns/cni-") || strings.HasPrefix(p, "/run/netns/cni-") {
			if _, err := os.Stat(p); err == nil {
				syscall.Unmount(p, syscall.MNT_DETACH)
				os.Remove(p)
			}
		}
	}
	for id := range ids {
		os.Remove(shimSocket(filepath.Join(dir, "containerd.sock"), id))
	}
	removeCgroups("/reef-lab/" + nodeNetns)
}

// shimSocket is where containerd 1.6 puts the socket of a sandbox's
// runc shim (runtime/v2/shim.SocketAddress): /run/containerd/s/ and the
// sha256 of "<containerd address>/<namespace>/<id>". A killed shim leaves
// it behind.
func shimSocket(address, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(address, "k8s.io", id)))
	return "/run/containerd/s/" + hex.EncodeToString(sum[:])
}

// cleanStaleContainerd cleans the containerd work dirs of a dead lab's
// dir (CleanStale has killed its processes already).
func cleanStaleContainerd(labDir string) {
	dirs, _ := filepath.Glob(filepath.Join(labDir, "*", "containerd"))
	for _, d := range dirs {
		cleanContainerdDir(d, filepath.Base(labDir)+"-"+filepath.Base(filepath.Dir(d)))
	}
}

// killNaming SIGKILLs every process whose command line contains s, and
// waits a moment for them to go.
func killNaming(s string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var killed []int
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(s)) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed = append(killed, pid)
		}
	}
	poll.Until(5*time.Second, func() error {
		for _, pid := range killed {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(b, []byte(") Z ")) {
				return fmt.Errorf("pid %d still runs", pid)
			}
		}
		return nil
	})
}

// unmountUnder lazily unmounts every mount point under dir, deepest
// first (the shm and rootfs mounts of sandboxes and containers).
func unmountUnder(dir string) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, mp := range points {
		syscall.Unmount(mp, syscall.MNT_DETACH)
	}
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// removeCgroups removes the (empty, their processes gone) cgroup dirs
// under parent in every hierarchy, deepest first, then the shared
// /reef-lab parent if nothing else uses it.
func removeCgroups(parent string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		top := filepath.Join(root, parent)
		if _, err := os.Stat(top); err != nil {
			continue
		}
		var dirs []string
		filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			syscall.Rmdir(d)
		}
		syscall.Rmdir(filepath.Dir(top)) // fails while another lab uses it
	}
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o755)
}
