package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/internal/lab"
)

// pingFor runs `ping -i 0.1` from a pod for count packets in the
// background; the returned func waits and reports received and sent.
func pingFor(t *testing.T, p *lab.Pod, dst string, count int) func() (received, sent int) {
	t.Helper()
	return pingFrom(t, p.Node.Lab, p.Netns, dst, count)
}

// pingFrom pings dst from netns count times at 10 per second in the
// background; the returned function waits and gives answered and sent.
func pingFrom(t *testing.T, l *lab.Lab, netns, dst string, count int) func() (received, sent int) {
	t.Helper()
	return pingEvery(t, l, netns, dst, "0.1", count)
}

// pingEvery is pingFrom with ping's interval (-i, in seconds).
func pingEvery(t *testing.T, l *lab.Lab, netns, dst, interval string, count int) func() (received, sent int) {
	t.Helper()
	return startPings(t, l, netns, dst, interval, count).wait
}

// pingRun is one ping run in the background (startPings).
type pingRun struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan struct{}
	out    string
	err    error
}

// startPings pings dst from netns count times, every interval seconds,
// in the background.
func startPings(t *testing.T, l *lab.Lab, netns, dst, interval string, count int) *pingRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(count)*200*time.Millisecond+10*time.Second)
	p := &pingRun{t: t, cancel: cancel, done: make(chan struct{})}
	go func() {
		p.out, p.err = l.RunContext(ctx, netns, "ping", "-i", interval, "-W", "1", "-c", strconv.Itoa(count), dst)
		close(p.done)
	}()
	return p
}

// running says whether ping has not yet sent its count.
func (p *pingRun) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits for ping to end and gives answered and sent.
func (p *pingRun) wait() (received, sent int) {
	<-p.done
	p.cancel()
	m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`).FindStringSubmatch(p.out)
	if m == nil {
		p.t.Fatalf("ping output: %v\n%s", p.err, p.out)
	}
	sent, _ = strconv.Atoi(m[1])
	received, _ = strconv.Atoi(m[2])
	return received, sent
}

// TestRestartKeepsTraffic: pods keep pinging each other, at 10 per second,
// while the daemon is stopped and started, and while it is killed -9 and
// started: the dataplane stays as it is.
func TestRestartKeepsTraffic(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	a, b := newPod(t, n, "web-1"), newPod(t, n, "web-2")
	routesBefore := reefRoutes(t, n)

	wait := pingFor(t, a, b.IP.String(), 40)
	// The times below are the scenario, not waits for the daemon: half a
	// second of traffic before the restart, and 300 ms of traffic while
	// the killed daemon is down.
	time.Sleep(500 * time.Millisecond)
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if recv, sent := wait(); recv != sent {
		t.Errorf("%d of %d pings lost across daemon restarts", sent-recv, sent)
	}
	if got := reefRoutes(t, n); strings.Join(got, "\n") != strings.Join(routesBefore, "\n") {
		t.Errorf("routes changed across restarts:\nbefore %v\nafter  %v", routesBefore, got)
	}
	if err := a.Check(); err != nil {
		t.Errorf("CHECK after restarts: %v", err)
	}
	// A restart finds the kernel as the daemon before it left it: the
	// new daemon's passes repair nothing (one that flushed and rewrote
	// would count each object it put back, as any repair counts).
	if err := n.WaitPass(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := repairs(t, n); len(got) > 0 {
		t.Errorf("the restarted daemon repaired what the one before it had left as it should be: %v\n%s", got, n.Log())
	}
	// The restarted daemon serves new pods from the same store.
	c := newPod(t, n, "web-3")
	if c.IP == a.IP || c.IP == b.IP {
		t.Errorf("new pod got an address in use: %s", c.IP)
	}
}

// TestKillDuringAddBurst kills the daemon with SIGKILL in the middle of a
// burst of parallel ADDs. After a restart, every pod that got a result
// works, and every allocation has its pod and every pod its route.
func TestKillDuringAddBurst(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	const total = 48
	pods := make([]*lab.Pod, total)
	for i := range pods {
		p, err := n.NewPodNetns("default", fmt.Sprintf("burst-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		pods[i] = p
	}
	var mu sync.Mutex
	okPods := map[*lab.Pod]bool{}
	var wg sync.WaitGroup
	next := make(chan *lab.Pod)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				if err := p.Add(); err == nil {
					mu.Lock()
					okPods[p] = true
					mu.Unlock()
				}
			}
		}()
	}
	killed := false
	for i, p := range pods {
		next <- p
		if i == total/3 {
			if err := n.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	close(next)
	wg.Wait()
	if !killed || len(okPods) == 0 || len(okPods) == total {
		t.Fatalf("the kill did not land inside the burst: %d of %d ADDs succeeded", len(okPods), total)
	}
	t.Logf("%d of %d ADDs got a result before the kill", len(okPods), total)
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}

	for p := range okPods {
		if err := p.Check(); err != nil {
			t.Errorf("pod %s got a result but fails CHECK after restart: %v", p.Name, err)
		}
		if _, err := l.Ping(n.Netns, p.IP); err != nil {
			t.Errorf("pod %s got a result but does not answer: %v", p.Name, err)
		}
	}
	consistent(t, n)
	// The runtime deletes the sandboxes whose ADD failed; then only the
	// good pods remain.
	for _, p := range pods {
		if !okPods[p] {
			if err := p.Del(); err != nil {
				t.Errorf("DEL after a failed ADD: %v", err)
			}
		}
	}
	if got := len(allocations(t, n)); got != len(okPods) {
		t.Errorf("%d allocations after the runtime's DELs, want %d", got, len(okPods))
	}
	consistent(t, n)
}

// consistent checks that the store and the kernel agree: every allocation
// is ready with its veth and route, every reef veth belongs to one.
func consistent(t *testing.T, n *lab.Node) {
	t.Helper()
	rep, err := n.IPAM()
	if err != nil {
		t.Fatal(err)
	}
	veths := map[string]bool{}
	for _, v := range reefVeths(t, n) {
		veths[v] = true
	}
	routes := strings.Join(reefRoutes(t, n), "\n")
	owned := map[string]bool{}
	for _, a := range rep.GetAllocations() {
		if a.GetState() == "reserved" {
			continue // the tunnel address
		}
		owned[a.GetHostVeth()] = true
		if a.GetState() != "ready" {
			t.Errorf("allocation %s is %s", a.GetIp(), a.GetState())
		}
		if !veths[a.GetHostVeth()] {
			t.Errorf("allocation %s has no veth %s", a.GetIp(), a.GetHostVeth())
		}
		if !strings.Contains(routes, a.GetIp()+" dev "+a.GetHostVeth()+" ") {
			t.Errorf("allocation %s has no route", a.GetIp())
		}
	}
	for v := range veths {
		if !owned[v] {
			t.Errorf("veth %s belongs to no allocation", v)
		}
	}
}

// TestGCAndStatus: CNI 1.1 GC releases what the runtime no longer lists,
// STATUS follows the daemon.
func TestGCAndStatus(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	if err := n.CNIStatus(); err != nil {
		t.Fatalf("STATUS with the daemon ready: %v", err)
	}
	p1, p2, p3 := newPod(t, n, "keep-1"), newPod(t, n, "keep-2"), newPod(t, n, "lost-3")
	// The runtime loses its own record of the stale pod (libcni's cache),
	// so only reef's GC can find it.
	if err := p3.ForgetCNICache(); err != nil {
		t.Fatal(err)
	}
	if err := n.GC(p1, p2); err != nil {
		t.Fatalf("GC: %v", err)
	}
	got := allocations(t, n)
	if _, ok := got[p3.IP.String()]; ok {
		t.Errorf("GC kept %s of the pod the runtime no longer lists", p3.IP)
	}
	for _, p := range []*lab.Pod{p1, p2} {
		if _, ok := got[p.IP.String()]; !ok {
			t.Errorf("GC released %s of a valid pod", p.IP)
		}
		if err := p.Check(); err != nil {
			t.Errorf("valid pod broken by GC: %v", err)
		}
	}
	if v := p3.Result.Interfaces[0].Name; strings.Contains(strings.Join(reefVeths(t, n), " "), v) {
		t.Errorf("GC left the veth %s of the released pod", v)
	}

	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	err := n.CNIStatus()
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrPluginNotAvailable || !strings.Contains(e.Msg, n.Socket) {
		t.Errorf("STATUS with the daemon stopped: %v, want code 50 naming the socket", err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.CNIStatus(); err != nil {
		t.Errorf("STATUS after start: %v", err)
	}
}

// TestDelWhileDaemonDown: with the daemon stopped, ADD fails with "try
// again later" naming the socket, DEL succeeds and is queued; the daemon
// runs the queued DEL when it starts.
func TestDelWhileDaemonDown(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	p := newPod(t, n, "web-1")
	veth := p.Result.Interfaces[0].Name
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	q, err := n.NewPodNetns("default", "web-2")
	if err != nil {
		t.Fatal(err)
	}
	err = q.Add()
	var e *types.Error
	if !errors.As(err, &e) || e.Code != types.ErrTryAgainLater || !strings.Contains(e.Msg, n.Socket) || !strings.Contains(e.Msg, "systemctl status reef") {
		t.Fatalf("ADD with the daemon down: %v, want code 11 naming the socket and systemctl status reef", err)
	}
	if err := p.Del(); err != nil {
		t.Fatalf("DEL with the daemon down: %v", err)
	}
	if err := p.DelNoNetns(); err != nil {
		t.Fatalf("second DEL with the daemon down: %v", err)
	}
	queued, _ := filepath.Glob(filepath.Join(n.PendingDir, "*.json"))
	if len(queued) != 1 {
		t.Fatalf("%d queued DEL files, want 1 (a repeated DEL replaces the first)", len(queued))
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if got := allocations(t, n); len(got) != 0 {
		t.Errorf("allocations after the queued DEL ran: %v", got)
	}
	if strings.Contains(strings.Join(reefVeths(t, n), " "), veth) {
		t.Errorf("veth %s still there after the queued DEL ran", veth)
	}
	if queued, _ := filepath.Glob(filepath.Join(n.PendingDir, "*.json")); len(queued) != 0 {
		t.Errorf("queue not drained: %v", queued)
	}
	if err := q.Add(); err != nil {
		t.Errorf("ADD after the daemon is back: %v", err)
	}
}

// TestNetnsGoneReleased: a pod whose netns disappears without a DEL (a
// reboot, a runtime that crashed) loses its address after two reconcile
// passes.
func TestNetnsGoneReleased(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	p := newPod(t, n, "web-1")
	keep := newPod(t, n, "web-2")
	if err := p.Remove(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() string {
		if _, ok := allocations(t, n)[p.IP.String()]; ok {
			return "address of the vanished pod still allocated"
		}
		return ""
	})
	if !strings.Contains(n.Log(), "released address: its network namespace is gone") {
		t.Error("daemon log does not say why it released the address")
	}
	if err := keep.Check(); err != nil {
		t.Errorf("the other pod was touched: %v", err)
	}
}

// TestDaemonRefusals: a second daemon on the same state dir, and bad
// configuration, stop with errors that name the file, key and value.
func TestDaemonRefusals(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})

	second := exec.Command("nsenter", "--net="+lab.NetnsPath(n.Netns), "--",
		filepath.Join(binDir, "reef"), "daemon", "--config", n.Config, "--socket", filepath.Join(n.Dir, "second.sock"))
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), filepath.Join(n.StateDir, "reef.db")) || !strings.Contains(string(out), "locked") {
		t.Errorf("second daemon on the same store: %v\n%s\nwant an error naming the locked file", err, out)
	}
	if st, err := os.Stat(n.Socket); err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket %s: %v %v, want a socket with mode 0600", n.Socket, st.Mode(), err)
	}
	if !n.Running() {
		t.Error("the first daemon died")
	}

	for _, tc := range []struct{ yaml, want string }{
		{"nodname: x\n", `unknown key "nodname" (did you mean "nodeName"?)`},
		{"pools:\n  - cidr: 10.244.0.0/33\n", `pools[0].cidr: value "10.244.0.0/33"`},
		{"pools:\n  - cidr: 10.244.0.0/16\n    vxlanMode: Sometimes\n", `"Sometimes"`},
		{"reconcileInterval: 30\n", `reconcileInterval: value "30"`},
		// A pool over the node's subnet holds its detected address (eth0's,
		// the lab node having no default route) or the one it gives.
		{"interface: eth0\npools:\n  - cidr: " + lab.Underlay.String() + "\n", `line 3: pools[0].cidr: value "` + lab.Underlay.String() + `" holds this node's address ` + n.Address.String()},
		{"nodeAddress: " + n.Address.String() + "\npools:\n  - cidr: " + lab.Underlay.String() + "\n", `line 1: nodeAddress: value "` + n.Address.String() + `" is inside pools[0].cidr`},
		{"mtu: 1000\npools:\n  - cidr: 10.244.0.0/16\n  - cidr: fd00:10:244::/56\n", `line 1: mtu: value 1000 is below 1280`},
		{"bgp:\n  peers: [192.168.77.50, 192.168.77.50]\n  voters: [192.168.77.50]\n", `line 2: bgp.peers[1]: value "192.168.77.50" is listed twice`},
		{"nodeName: n\xe91\n", `line 1: byte 0xe9 at column 12 is not UTF-8`},
		{"interface: nosuch0\n", `line 1: interface: interface nosuch0 does not exist`},
	} {
		cfg := filepath.Join(n.Dir, "bad.yaml")
		if err := os.WriteFile(cfg, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		// In the node's netns: should a config be taken after all, the daemon
		// must not touch the host; and it is stopped rather than waited for.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, "nsenter", "--net="+lab.NetnsPath(n.Netns), "--", filepath.Join(binDir, "reef"), "daemon",
			"--config", cfg, "--state-dir", filepath.Join(n.Dir, "bad-state"), "--socket", filepath.Join(n.Dir, "bad.sock")).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), tc.want) || !strings.Contains(string(out), cfg) {
			t.Errorf("config %q: %v\n%s\nwant an error naming %s and %s", tc.yaml, err, out, cfg, tc.want)
		}
	}
}

// repairs are the daemon's non-zero reef_reconcile_repairs_total series
// (from its /metrics, the lab's default 127.0.0.1:9099 in its netns).
func repairs(t *testing.T, n *lab.Node) []string {
	t.Helper()
	out := run(t, n.Lab, n.Netns, "curl", "-sS", "--max-time", "5", "http://127.0.0.1:9099/metrics")
	var got []string
	for _, l := range nonEmptyLines(out) {
		if strings.HasPrefix(l, "reef_reconcile_repairs_total{") && !strings.HasSuffix(l, " 0") {
			got = append(got, l)
		}
	}
	if !strings.Contains(out, "reef_reconcile_repairs_total{") {
		t.Fatalf("no reef_reconcile_repairs_total in the daemon's /metrics:\n%s", out)
	}
	return got
}
