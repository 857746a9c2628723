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
// VmHWM (peak RSS), and RSS split into RssAnon, the daemon's own memory
// (heap, stacks, runtime), and RssFile, pages of the binary that the
// page cache holds anyway. Memory aims are set on Anon; RSS is reported
// next to it.
type Memory struct{ RSS, HWM, Anon, File int64 }

// Max is the higher of m and o, field by field.
func (m Memory) Max(o Memory) Memory {
	return Memory{RSS: max(m.RSS, o.RSS), HWM: max(m.HWM, o.HWM), Anon: max(m.Anon, o.Anon), File: max(m.File, o.File)}
}

// Plus is m and o added, field by field.
func (m Memory) Plus(o Memory) Memory {
	return Memory{RSS: m.RSS + o.RSS, HWM: m.HWM + o.HWM, Anon: m.Anon + o.Anon, File: m.File + o.File}
}

// Memory reads the memory of the node's daemon.
func (n *Node) Memory() (Memory, error) {
	pid := n.Pid()
	if pid == 0 {
		return Memory{}, fmt.Errorf("daemon of %s not running", n.Name)
	}
	return ProcMemory(pid)
}

// ProcMemory reads the memory of process pid from /proc/<pid>/status.
func ProcMemory(pid int) (Memory, error) {
	var m Memory
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	fields := map[string]*int64{"VmRSS": &m.RSS, "VmHWM": &m.HWM, "RssAnon": &m.Anon, "RssFile": &m.File}
	found := 0
	for _, line := range strings.Split(string(data), "\n") {
		key, val, _ := strings.Cut(line, ":")
		dst := fields[key]
		if dst == nil {
			continue
		}
		kB, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			return m, fmt.Errorf("/proc/%d/status: %s: %w", pid, key, err)
		}
		*dst = kB
		found++
	}
	if found != len(fields) {
		return m, fmt.Errorf("/proc/%d/status: want VmRSS, VmHWM, RssAnon and RssFile, found %d of them", pid, found)
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
