package e2e

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// ecmpTrace records, over a planned stop, what explains a request reset:
// the TCP packets of the Service's port on each node's eth0 (tcpdump, a
// capture file per node) and the changes of the router's routes (ip
// monitor). A node that gets a packet of a connection it has no socket for
// answers it with a RST; explain names, for each RST a node sent, the
// node that had the connection's SYN and the router's route changes just
// before. It is evidence, not a check: the tests' verdicts do not read it.
type ecmpTrace struct {
	t      *testing.T
	dir    string
	nodes  []string
	prefix string // the route whose changes explain shows
	port   int    // the Service's port
	cancel context.CancelFunc
	wait   []func()

	mu     sync.Mutex
	routes bytes.Buffer // ip -ts monitor route in the router
}

// startECMPTrace starts the captures on nodes and the monitor in router;
// they stop when the test ends or at explain.
func startECMPTrace(t *testing.T, nodes []*lab.Node, router string, prefix netip.Prefix, port int) *ecmpTrace {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tr := &ecmpTrace{t: t, dir: t.TempDir(), cancel: cancel, prefix: prefix.String(), port: port}
	t.Cleanup(tr.stop)
	start := func(netns string, out *bytes.Buffer, args ...string) {
		cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + lab.NetnsPath(netns), "--"}, args...)...)
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		if out != nil {
			cmd.Stdout = lockedWriter{&tr.mu, out}
		}
		if err := cmd.Start(); err != nil {
			t.Logf("ECMP trace: %s: %v", strings.Join(args, " "), err)
			return
		}
		tr.wait = append(tr.wait, func() { _ = cmd.Wait() })
	}
	for _, n := range nodes {
		tr.nodes = append(tr.nodes, n.Name)
		start(n.Netns, nil, "tcpdump", "-i", "eth0", "-nn", "-U", "-s", "96", "-w", filepath.Join(tr.dir, n.Name+".pcap"), fmt.Sprintf("tcp port %d", port))
	}
	start(router, &tr.routes, "ip", "-ts", "monitor", "route")
	time.Sleep(500 * time.Millisecond) // tcpdump opening its socket: evidence only, the test does not depend on it
	return tr
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (tr *ecmpTrace) stop() {
	if tr.cancel == nil {
		return
	}
	time.Sleep(200 * time.Millisecond) // the last packets written out
	tr.cancel()
	for _, w := range tr.wait {
		w()
	}
	tr.cancel = nil
}

// explain stops the trace and logs, for each RST a node sent to a
// client, the client's port, the packets of that connection at every
// node, and the router's changes of its route to the prefix. It returns
// how many of those RSTs a rehash explains (the connection's SYN went to
// another node: the router moved the flow while it was open) and how many
// it does not (the node that sent the RST had the SYN). A RST whose SYN
// no capture saw is counted in neither.
func (tr *ecmpTrace) explain() (rehash, unexplained int) {
	tr.stop()
	t := tr.t
	// Every packet at every node, in the order of their times.
	type packet struct {
		at     float64 // tcpdump -tt: seconds since the epoch
		node   string
		line   string
		client string // the client's address.port
		fromSv bool   // sent by the Service's side (the node)
		flags  string
	}
	lineRE := regexp.MustCompile(`^(\d+\.\d+) IP (\S+) > (\S+): Flags \[([^\]]*)\]`)
	suffix := fmt.Sprintf(".%d", tr.port)
	var pkts []packet
	for _, node := range tr.nodes {
		out, _ := exec.Command("tcpdump", "-r", filepath.Join(tr.dir, node+".pcap"), "-nn", "-tt").Output()
		for _, line := range strings.Split(string(out), "\n") {
			m := lineRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			at, _ := strconv.ParseFloat(m[1], 64)
			p := packet{at: at, node: node, line: line, flags: m[4]}
			if strings.HasSuffix(m[2], suffix) {
				p.fromSv, p.client = true, m[3]
			} else {
				p.client = m[2]
			}
			pkts = append(pkts, p)
		}
	}
	slices.SortStableFunc(pkts, func(a, b packet) int { return cmp.Compare(a.at, b.at) })
	found := 0
	for i, rst := range pkts {
		if !rst.fromSv || !strings.Contains(rst.flags, "R") {
			continue
		}
		found++
		// The connection: the client's last SYN from that port before
		// the RST (ports are reused), and its packets since.
		syn := -1
		for j := i - 1; j >= 0 && rst.at-pkts[j].at < 2; j-- {
			if pkts[j].client == rst.client && !pkts[j].fromSv && pkts[j].flags == "S" {
				syn = j
				break
			}
		}
		verdict := "its SYN seen at no node"
		var lines []string
		switch {
		case syn < 0:
		case pkts[syn].node != rst.node:
			rehash++
			verdict = "its SYN went to " + pkts[syn].node + ": the router moved the open connection to " + rst.node
		default:
			unexplained++
			verdict = "its SYN went to " + rst.node + " itself: not a rehash"
		}
		if syn >= 0 {
			for _, p := range pkts[syn : i+1] {
				if p.client == rst.client {
					lines = append(lines, p.line+"   ["+p.node+"]")
				}
			}
		}
		if found <= 20 {
			t.Logf("ECMP trace: %s sent a RST to the client %s (%s); that connection's packets at the nodes:\n%s", rst.node, rst.client, verdict, strings.Join(lines, "\n"))
		}
	}
	tr.mu.Lock()
	all := tr.routes.String()
	tr.mu.Unlock()
	// ip monitor prints a multipath route as a line with its timestamp
	// and one indented line per next hop: keep the records of prefix.
	var routes []string
	keep := false
	for _, line := range strings.Split(all, "\n") {
		if !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, " ") {
			keep = strings.Contains(line, tr.prefix)
		}
		if keep {
			routes = append(routes, line)
		}
	}
	t.Logf("ECMP trace: %d packets at the nodes, %d RST(s) sent by them (the first 20 above), %d where the router moved an open connection; the router's changes of its route to %s (ip -ts monitor route):\n%s", len(pkts), found, rehash, tr.prefix, strings.Join(routes, "\n"))
	return rehash, unexplained
}

// TestECMPRehashFigures shows which of the router's flows to the Service
// CIDR change node when a1 is drained and when it comes back: the lab of
// the planned restart tests (BIRD, multipath, layer-4 hash), the router
// asked with ip route get where a connection from the laptop to
// 10.96.0.10:80 goes, for 3,000 source ports, with a1 in the route, after
// a1's SIGTERM (drained), and after a1's reef is back. A flow that changes
// node while its connection is open reaches a node with no socket for it,
// which resets it: that is the reset of docs/bgp.md ("Planned restarts").
// Skipped unless REEF_ECMP_FIGURES is set; it asserts nothing.
func TestECMPRehashFigures(t *testing.T) {
	if os.Getenv("REEF_ECMP_FIGURES") == "" {
		t.Skip("REEF_ECMP_FIGURES not set")
	}
	l, nodes, _, tor := serviceToRLab(t, "bird", plannedStopNodes, plannedStopToR, nil)
	converge(t, nodes...)
	waitBFDUp(t, tor, nodes)
	router := l.Prefix + "-xr"
	hops := map[string]string{}
	for _, n := range nodes {
		hops[n.Address.String()] = n.Name
	}
	nextHops := func(want int) {
		eventually(t, 30*time.Second, func() string {
			out := run(t, l, router, "ip", "-4", "route", "show", "exact", serviceCIDR.String())
			if got := strings.Count(out, "nexthop via "); got != want {
				return fmt.Sprintf("the router's route to %s: %q, want %d next hops", serviceCIDR, strings.TrimSpace(out), want)
			}
			return ""
		})
	}
	const ports = 3000
	where := func() []string {
		var batch strings.Builder
		for p := 0; p < ports; p++ {
			fmt.Fprintf(&batch, "route get 10.96.0.10 from %s iif eth2 ipproto tcp sport %d dport 80\n", lab.LaptopAddr, 32768+p)
		}
		cmd := exec.Command("nsenter", "--net="+lab.NetnsPath(router), "--", "ip", "-4", "-o", "-batch", "-")
		cmd.Stdin = strings.NewReader(batch.String())
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ip route get: %v", err)
		}
		var got []string
		re := regexp.MustCompile(`via (\S+) `)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			m := re.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("ip route get: %q", line)
			}
			got = append(got, hops[m[1]])
		}
		if len(got) != ports {
			t.Fatalf("ip route get: %d answers, want %d", len(got), ports)
		}
		return got
	}
	moved := func(what string, before, after []string) {
		count := map[string]int{}
		n := 0
		for i := range before {
			if before[i] != after[i] {
				count[before[i]+" -> "+after[i]]++
				n++
			}
		}
		t.Logf("%s: %d of %d flows change node: %v", what, n, ports, count)
	}
	nextHops(3)
	all := where()
	a1 := nodes[0]
	stopped := make(chan error, 1)
	go func() { stopped <- a1.Stop() }()
	nextHops(2)
	drained := where()
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if err := a1.Start(); err != nil {
		t.Fatal(err)
	}
	nextHops(3)
	back := where()
	moved("a1 drained (3 next hops -> 2)", all, drained)
	moved("a1 back (2 next hops -> 3)", drained, back)
	moved("over the restart (3 -> 3)", all, back)
}
