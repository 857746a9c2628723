package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

// ip runs an ip command in a reference namespace and records it for the
// report under the namespace's role.
func (b *tputBench) ip(role, netns string, args ...string) error {
	shown := make([]string, len(args))
	for i, a := range args {
		if alias, ok := b.alias[a]; ok {
			a = alias
		}
		shown[i] = a
	}
	b.setup = append(b.setup, role+": ip "+strings.Join(shown, " "))
	return b.l.IP(netns, args...)
}

func (b *tputBench) startServer(c *tputCase) error {
	stop, err := b.l.Spawn(c.srvNS, "iperf3-"+c.key+".log", "iperf3", "-s", "-B", c.dst.String(), "-p", tputPort)
	if err != nil {
		return err
	}
	c.stopServer = stop
	return poll.Until(5*time.Second, func() error {
		out, _ := b.l.Run(c.srvNS, "ss", "-Htln", "sport", "= :"+tputPort)
		if !strings.Contains(out, net.JoinHostPort(c.dst.String(), tputPort)) {
			return fmt.Errorf("iperf3 server on %s in %s not listening", c.dst, c.srvRole)
		}
		return nil
	})
}

// iperfJSON is the part of iperf3 -J we read.
type iperfJSON struct {
	Error string `json:"error"`
	End   struct {
		SumSent struct {
			BitsPerSecond float64 `json:"bits_per_second"`
			Retransmits   int     `json:"retransmits"`
		} `json:"sum_sent"`
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		CPU struct {
			HostTotal   float64 `json:"host_total"`
			RemoteTotal float64 `json:"remote_total"`
		} `json:"cpu_utilization_percent"`
	} `json:"end"`
}

// client runs one iperf3 client for secs seconds.
func (b *tputBench) client(c *tputCase, secs int) tputRun {
	ctx, cancel := context.WithTimeout(b.ctx, time.Duration(secs+20)*time.Second)
	defer cancel()
	var r tputRun
	start := time.Now()
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+lab.NetnsPath(c.cliNS), "--",
		"iperf3", "-c", c.dst.String(), "-p", tputPort, "-t", strconv.Itoa(secs), "-J")
	out, err := cmd.Output()
	r.wall = time.Since(start)
	var j iperfJSON
	if jerr := json.Unmarshal(out, &j); jerr != nil {
		if err == nil {
			err = jerr
		}
		r.rawErr = fmt.Sprintf("%v: %s", err, tputFirstLine(string(out)))
		return r
	}
	if j.Error != "" {
		r.rawErr = j.Error
		return r
	}
	if err != nil {
		r.rawErr = err.Error()
		return r
	}
	r.gbps = j.End.SumReceived.BitsPerSecond / 1e9
	r.senderGbps = j.End.SumSent.BitsPerSecond / 1e9
	r.retransmits = j.End.SumSent.Retransmits
	r.cpuHost, r.cpuPeer = j.End.CPU.HostTotal, j.End.CPU.RemoteTotal
	return r
}

// measure runs a group: a 1 s check of every case first (it fails early on
// a broken path and warms caches and ARP), then b.runs rounds in which
// every case runs once, reef first in odd rounds and last in even ones.
func (b *tputBench) measure(g *tputGroup) {
	cases := append([]*tputCase{g.reef}, g.refs...)
	g.loadStart = tputLoad1()
	defer func() { g.loadEnd = tputLoad1() }()
	for _, c := range cases {
		if r := b.client(c, 1); r.rawErr != "" {
			c.err = fmt.Errorf("1 s check: %s", r.rawErr)
			tputProgress("  %s: %v", c.label, c.err)
		}
	}
	for i := range g.counters {
		g.counters[i].before, g.counters[i].err = tputTxBytes(b.l, g.counters[i].netns, g.counters[i].dev)
	}
	for round := 0; round < b.runs; round++ {
		order := cases
		if round%2 == 1 {
			order = append([]*tputCase(nil), cases[1:]...)
			order = append(order, cases[0])
		}
		for _, c := range order {
			if c.err != nil || b.ctx.Err() != nil {
				continue
			}
			// The counters around each run, not around the group: the
			// cases of an IPv6 group share their client namespace.
			before, statErr := tputTCPStats(b.l, c.cliNS)
			r := b.client(c, b.secs)
			c.runs = append(c.runs, r)
			b.addTCPStats(c, before, statErr)
			if r.rawErr != "" {
				tputProgress("  %s run %d: %s", c.label, round+1, r.rawErr)
			} else {
				tputProgress("  %s run %d: %.2f Gbit/s, %d retransmits, CPU client %.0f%% server %.0f%%",
					c.label, round+1, r.gbps, r.retransmits, r.cpuHost, r.cpuPeer)
			}
		}
	}
	for i := range g.counters {
		if g.counters[i].err == nil {
			g.counters[i].after, g.counters[i].err = tputTxBytes(b.l, g.counters[i].netns, g.counters[i].dev)
		}
	}
}

// addTCPStats adds to c's totals what its client namespace's TCP counters
// moved by since before (read with error statErr); a failed read marks
// them unknown.
func (b *tputBench) addTCPStats(c *tputCase, before map[string]int64, statErr error) {
	if c.statErr != nil {
		return
	}
	after, err := tputTCPStats(b.l, c.cliNS)
	if c.statErr = cmp.Or(statErr, err); c.statErr != nil {
		return
	}
	c.retransSegs += after["Tcp:RetransSegs"] - before["Tcp:RetransSegs"]
	c.dsackSegs += after["TcpExt:TCPDSACKRecvSegs"] - before["TcpExt:TCPDSACKRecvSegs"]
}

// tputTxBytes reads a device's transmitted bytes in a namespace (through
// ip -s -j: /sys would show the host's devices, not the namespace's).
func tputTxBytes(l *lab.Lab, netns, dev string) (int64, error) {
	out, err := l.Run(netns, "ip", "-s", "-j", "link", "show", "dev", dev)
	if err != nil {
		return 0, err
	}
	var links []struct {
		Stats64 struct {
			TX struct {
				Bytes int64 `json:"bytes"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return 0, fmt.Errorf("ip -s -j link show %s in %s: %v: %s", dev, netns, err, tputFirstLine(out))
	}
	return links[0].Stats64.TX.Bytes, nil
}

func tputLoad() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func tputFirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// tputNftChains lists the base chains (those on a hook, which packets
// pass) of every nftables table in a namespace.
func tputNftChains(l *lab.Lab, netns string) string {
	out, err := l.Run(netns, "nft", "-j", "list", "chains")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var doc struct {
		Nftables []struct {
			Chain *struct {
				Family string `json:"family"`
				Table  string `json:"table"`
				Name   string `json:"name"`
				Type   string `json:"type"`
				Hook   string `json:"hook"`
				Prio   int    `json:"prio"`
			} `json:"chain"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return "unknown (" + err.Error() + ")"
	}
	var chains []string
	for _, e := range doc.Nftables {
		if c := e.Chain; c != nil && c.Hook != "" {
			chains = append(chains, fmt.Sprintf("`%s %s` chain %s (%s, hook %s, priority %d)", c.Family, c.Table, c.Name, c.Type, c.Hook, c.Prio))
		}
	}
	if len(chains) == 0 {
		return "none"
	}
	return strings.Join(chains, "; ")
}

// tputTCPStats reads the TCP counters of a namespace: /proc/net/snmp and
// /proc/net/netstat as a process in it sees them, keyed "Tcp:RetransSegs".
func tputTCPStats(l *lab.Lab, netns string) (map[string]int64, error) {
	out, err := l.Run(netns, "cat", "/proc/net/snmp", "/proc/net/netstat")
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	lines := strings.Split(out, "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) < 2 || len(names) != len(values) || names[0] != values[0] || !strings.HasSuffix(names[0], ":") {
			continue
		}
		if _, err := strconv.ParseInt(values[1], 10, 64); err != nil {
			continue // a header line followed by another header
		}
		for k := 1; k < len(names); k++ {
			v, err := strconv.ParseInt(values[k], 10, 64)
			if err == nil {
				m[names[0]+names[k]] = v
			}
		}
		i++
	}
	if _, ok := m["Tcp:RetransSegs"]; !ok {
		return nil, fmt.Errorf("no Tcp RetransSegs in /proc/net/snmp of %s", netns)
	}
	return m, nil
}

func tputLoad1() string {
	if f := strings.Fields(tputLoad()); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}
