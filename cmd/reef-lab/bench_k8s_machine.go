package main

// What else the machine is doing while bench-k8s runs, and the inotify
// instances two clusters need.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// k8sOtherWork names other Kubernetes test work on the machine (the
// upstream e2e suite of another run), to say beside the figures.
func k8sOtherWork() []string {
	var found []string
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		if name := strings.TrimSpace(string(b)); name == "e2e.test" {
			found = append(found, name)
		}
	}
	return found
}

// k8sBusy is the CPUs' busy fraction between two cpuTimes.
func k8sBusy(a, b [2]uint64) float64 {
	total := b[0] - a[0]
	if b[0] <= a[0] {
		return 0
	}
	return float64(total-(b[1]-a[1])) / float64(total)
}

// k8sInotifyNeed is about how many inotify instances a cluster's
// processes open (kubelet 6 each, containerd 2 each, the control plane
// 8), with a margin.
const k8sInotifyNeed = 48

// k8sWaitInotify waits, at most 10 minutes, until the machine has
// k8sInotifyNeed inotify instances to spare under fs.inotify.max_user_instances
// (all of root's processes share it): a cluster that runs out fails to
// start, and so would the other runs' kubelets that restart meanwhile.
func k8sWaitInotify(ctx context.Context, progress func(string, ...any)) error {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances")
	if err != nil {
		return nil
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return nil
	}
	said := false
	// Every 5s: a count walks every process's file descriptors.
	err = poll.Every(5*time.Second, 10*time.Minute, func() error {
		if ctx.Err() != nil {
			return poll.Stop(ctx.Err())
		}
		used := k8sInotifyUsed()
		if limit-used >= k8sInotifyNeed {
			return nil
		}
		if !said {
			progress("%d of %d inotify instances in use by other work; waiting until %d are free", used, limit, k8sInotifyNeed)
			said = true
		}
		return fmt.Errorf("%d of %d inotify instances (fs.inotify.max_user_instances) in use, a cluster needs about %d",
			used, limit, k8sInotifyNeed)
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("bench-k8s: %w", err)
	}
	return err
}

// k8sInotifyUsed counts the inotify instances open on the machine.
func k8sInotifyUsed() int {
	n := 0
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if t, err := os.Readlink(fd); err == nil && t == "anon_inode:inotify" {
			n++
		}
	}
	return n
}

// k8sNice is this process's nice value (field 19 of /proc/self/stat),
// which the clusters' processes inherit.
func k8sNice() int {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces.
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 17 {
		return 0
	}
	n, _ := strconv.Atoi(f[16])
	return n
}
