package lab

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Pid returns the process id of the node's daemon, or 0 when it is not
// running. nsenter execs the daemon in place, so this is the daemon itself
// (for reading /proc/<pid>/status).
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Memory is a daemon's memory from /proc/<pid>/status, in kB: VmRSS,
// VmHWM (peak RSS), and RSS split into anonymous (heap, stacks) and
// file-backed (the binary's pages) memory.
type Memory struct{ RSS, HWM, Anon, File int64 }

// Memory reads the memory of the node's daemon.
func (n *Node) Memory() (Memory, error) {
	var m Memory
	pid := n.Pid()
	if pid == 0 {
		return m, fmt.Errorf("daemon of %s not running", n.Name)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		for key, dst := range map[string]*int64{"VmRSS:": &m.RSS, "VmHWM:": &m.HWM, "RssAnon:": &m.Anon, "RssFile:": &m.File} {
			if rest, ok := strings.CutPrefix(line, key); ok {
				fmt.Sscanf(strings.TrimSpace(rest), "%d", dst)
			}
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
	}
	return m, nil
}

// Goroutines reads go_goroutines from the node's metrics listener (the
// lab's default, 127.0.0.1:9099 in the node's namespace).
func (n *Node) Goroutines() (int, error) {
	v, err := n.MetricValues("go_goroutines")
	return int(v["go_goroutines"]), err
}

// MetricValues reads unlabelled series (go_goroutines,
// go_memstats_heap_inuse_bytes) from the node's metrics listener; a name
// it does not serve is an error.
func (n *Node) MetricValues(names ...string) (map[string]float64, error) {
	resp, err := HTTPClientIn(n.Netns).Get("http://127.0.0.1:9099/metrics")
	if err != nil {
		return nil, fmt.Errorf("scrape the metrics of %s: %w", n.Name, err)
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, name := range names {
		want[name] = true
	}
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !want[name] {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %s: %w", n.Name, name, err)
		}
		got[name] = v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape the metrics of %s: %w", n.Name, err)
	}
	for _, name := range names {
		if _, ok := got[name]; !ok {
			return nil, fmt.Errorf("no %s in the metrics of %s", name, n.Name)
		}
	}
	return got, nil
}
