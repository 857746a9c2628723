package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/internal/lab"
)

// stormPods is the size of the restart storm of issue 15: a node that
// comes back with 250 pods.
const stormPods = 250

// TestPodStorm: a node's restart storm (issue 15). 250 pod sandboxes are
// ADDed through libcni all at once and the daemon is killed -9 while they
// run, then started again: every ADD ends with a result whose address is on
// the pod's eth0 and answers a ping from the node, or with a CNI error that
// has a code and a message, and a failed ADD leaves nothing behind. The
// failed ones, retried as kubelet does, are wired by the restarted daemon;
// no address is on two pods. Then 250 DELs all at once, and the daemon is
// killed -9 again while they run, so that the rest are queued by the shim;
// the runtime repeats every DEL (with no netns, as containerd does at
// sandbox removal) while the daemon starts and drains the queue. After a
// reconcile pass nothing of the pods is left: no veth, no /32 route, no
// nftables element, no allocation (`reef ipam show`, `reef ipam check`),
// the queue is empty, the daemon's goroutines are back to what they were
// idle, and it logged no panic.
func TestPodStorm(t *testing.T) {
	needNATTools(t, "nft")
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	// The whole daemon log of a failed run, kept past the lab's cleanup:
	// the test's output has only its tail.
	t.Cleanup(func() {
		if t.Failed() {
			keep := filepath.Join(os.TempDir(), "reef-storm-failure-"+n.Name+".log")
			if err := os.WriteFile(keep, []byte(n.Log()), 0o644); err == nil {
				t.Logf("the daemon's whole log: %s", keep)
			}
		}
	})
	pods := stormNetns(t, n, stormPods)

	// The ADD storm, with a kill once a third has its result.
	addErrs := storm(t, n, pods, (*lab.Pod).Add, true)
	var wired, failed []*lab.Pod
	codes := map[uint]int{}
	for i, err := range addErrs {
		if err == nil {
			wired = append(wired, pods[i])
			continue
		}
		failed = append(failed, pods[i])
		var e *types.Error
		if !errors.As(err, &e) || e.Code == 0 || e.Msg == "" {
			t.Errorf("pod %s: ADD failed without a CNI error code and message: %v", pods[i].Name, err)
			continue
		}
		codes[e.Code]++
	}
	t.Logf("ADD storm: %d wired, %d failed (CNI codes %v)", len(wired), len(failed), codes)
	if len(wired) == 0 || len(failed) == 0 {
		t.Fatalf("the kill did not land inside the ADD storm: %d wired, %d failed", len(wired), len(failed))
	}
	checkWired(t, n, wired)
	// A failed ADD leaves nothing, once the restarted daemon has resolved
	// the ADDs it never finished; but one the kill cut off between its last
	// write and its reply is done (the runtime's retry gets the same
	// address, or its DEL frees it): it holds the wired pods' addresses and
	// such finished ones only.
	var done map[string]string // container ID -> address, of failed ADDs
	eventually(t, 15*time.Second, func() string {
		var why string
		done, why = heldBeyond(t, n, wired, failed)
		return why
	})
	t.Logf("%d failed ADDs were done in the daemon when it was killed (the reply lost)", len(done))
	consistent(t, n)

	// kubelet retries the failed sandboxes; the restarted daemon wires them,
	// the done ones with the address they have.
	for _, err := range stormNoKill(failed, (*lab.Pod).Add) {
		t.Errorf("ADD retried after the restart: %v", err)
	}
	checkWired(t, n, failed)
	for _, p := range failed {
		if ip, ok := done[p.ContainerID]; ok && ip != p.IP.String() {
			t.Errorf("pod %s: the retried ADD got %s, but the cut-off ADD had allocated %s", p.Name, p.IP, ip)
		}
	}
	uniqueAddresses(t, pods)
	for addr, on := range podAddresses(t, []*lab.Node{n}) {
		if len(on) > 1 {
			t.Errorf("%s routed to two pods", addr)
		}
	}
	eventually(t, 15*time.Second, func() string { return holdsExactly(t, n, pods) })
	if t.Failed() {
		return
	}
	idle := idleGoroutines(t, n)

	// The DEL storm, with a kill once a third is done: the rest are queued.
	for i, err := range storm(t, n, pods, (*lab.Pod).Del, false) {
		if err != nil {
			t.Errorf("pod %s: DEL in the storm: %v", pods[i].Name, err)
		}
	}
	queued, _ := filepath.Glob(filepath.Join(n.PendingDir, "*.json"))
	t.Logf("DEL storm: %d DELs queued while the daemon was down", len(queued))
	if len(queued) == 0 {
		t.Fatal("no DEL was queued: the kill did not land inside the DEL storm")
	}
	if err := n.StartNoWait(); err != nil {
		t.Fatal(err)
	}
	// The runtime repeats the DELs of half the pods while the daemon starts
	// and drains; the other half are the drain's alone (their netns stay,
	// so no reconcile pass would free them).
	var again []*lab.Pod
	for i, p := range pods {
		if i%2 == 0 {
			again = append(again, p)
		}
	}
	for _, err := range stormNoKill(again, (*lab.Pod).DelNoNetns) {
		t.Errorf("repeated DEL while the daemon starts: %v", err)
	}
	if err := n.WaitReady(30 * time.Second); err != nil {
		t.Fatal(err)
	}

	// The drain and the reconcile passes leave nothing of the pods.
	addrs := map[string]bool{}
	for _, p := range pods {
		addrs[p.IP.String()] = true
	}
	eventually(t, 15*time.Second, func() string { return leftovers(t, n, addrs) })
	if out, err := n.Reef("ipam", "check"); err != nil {
		t.Errorf("reef ipam check after the storm: %v", err)
	} else {
		t.Logf("reef ipam check: %s", strings.TrimSpace(out))
	}
	if out, err := n.Reef("ipam", "show", "--show-allocations"); err != nil {
		t.Error(err)
	} else if rows := allocationRows(out); len(rows) > 0 {
		t.Errorf("reef ipam show --show-allocations still lists %d allocations:\n%s", len(rows), strings.Join(rows, "\n"))
	}
	// DELs the runtime repeated before the socket answered were queued
	// after the start's drain; the daemon drains again every interval.
	eventually(t, 10*time.Second, func() string {
		if left, _ := filepath.Glob(filepath.Join(n.PendingDir, "*.json")); len(left) > 0 {
			return fmt.Sprintf("%d queued DELs left undrained: %v", len(left), left)
		}
		return ""
	})
	log := n.Log()
	if ran := strings.Count(log, "ran queued DEL"); ran < len(queued) {
		t.Errorf("the daemon ran %d queued DELs, want at least the %d queued", ran, len(queued))
	}
	if strings.Contains(log, "queued DEL failed") {
		t.Error("a queued DEL failed")
	}
	if strings.Contains(log, "panic") {
		t.Errorf("the daemon logged a panic:\n%s", grepLines(log, "panic"))
	}
	eventually(t, 20*time.Second, func() string {
		g, err := n.Goroutines()
		if err != nil {
			return err.Error()
		}
		if g > idle+10 {
			return fmt.Sprintf("%d goroutines after the storm, %d idle before it", g, idle)
		}
		return ""
	})
}

// storm runs f on every pod at once, kills the daemon with SIGKILL once a
// third of the calls returned without error, starts it again if restart
// is set (else the calls still to come find it down), and returns each
// pod's error once every call returned.
func storm(t *testing.T, n *lab.Node, pods []*lab.Pod, f func(*lab.Pod) error, restart bool) []error {
	t.Helper()
	errs := make([]error, len(pods))
	var ok, returned atomic.Int32
	// third is closed by the call that makes a third of them succeed, or
	// by the last to return: the moment of the kill.
	start, third := make(chan struct{}), make(chan struct{})
	var thirdOnce sync.Once
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = f(p)
			okNow := ok.Load()
			if errs[i] == nil {
				okNow = ok.Add(1)
			}
			if r := returned.Add(1); okNow >= int32(len(pods)/3) || r == int32(len(pods)) {
				thirdOnce.Do(func() { close(third) })
			}
		}()
	}
	close(start)
	select {
	case <-third:
	case <-time.After(3 * time.Minute):
	}
	t.Logf("killing the daemon: %d of %d calls returned, %d without error", returned.Load(), len(pods), ok.Load())
	if err := n.Kill(); err != nil {
		t.Error(err)
	}
	if restart {
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	return errs
}

// stormNoKill runs f on every pod at once and returns the errors.
func stormNoKill(pods []*lab.Pod, f func(*lab.Pod) error) []error {
	return inParallel(pods, len(pods), f)
}

// stormNetns creates count unwired pod namespaces on the node.
func stormNetns(t *testing.T, n *lab.Node, count int) []*lab.Pod {
	t.Helper()
	pods := make([]*lab.Pod, count)
	errs := make([]error, count)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			pods[i], errs[i] = n.NewPodNetns("default", fmt.Sprintf("storm-%d", i))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return pods
}

// checkWired fails the test for every pod whose address is not on its
// eth0 or does not answer a ping from the node.
func checkWired(t *testing.T, n *lab.Node, pods []*lab.Pod) {
	t.Helper()
	for _, err := range inParallel(pods, 8, func(p *lab.Pod) error {
		if !p.IP.IsValid() {
			return fmt.Errorf("pod %s: no address in its result", p.Name)
		}
		out, err := p.Run("ip", "-4", "-o", "addr", "show", "dev", "eth0")
		if err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
		if !strings.Contains(out, " "+p.IP.String()+"/32 ") {
			return fmt.Errorf("pod %s: its result's address %s is not on its eth0: %s", p.Name, p.IP, out)
		}
		if _, err := n.Lab.Ping(n.Netns, p.IP); err != nil {
			return fmt.Errorf("pod %s (%s) does not answer the node: %w", p.Name, p.IP, err)
		}
		return nil
	}) {
		t.Error(err)
	}
}

// holdsExactly describes how the node's allocations differ from the
// pods' addresses ("" if they do not).
func holdsExactly(t *testing.T, n *lab.Node, pods []*lab.Pod) string {
	t.Helper()
	_, why := heldBeyond(t, n, pods, nil)
	return why
}

// heldBeyond describes how the node's allocations differ from the wired
// pods' addresses ("" if they do not), allowing ready allocations of pods
// whose ADD failed, which it returns by container ID.
func heldBeyond(t *testing.T, n *lab.Node, wired, failed []*lab.Pod) (map[string]string, string) {
	t.Helper()
	rep, err := n.IPAM()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	mayHold := map[string]bool{}
	for _, p := range failed {
		mayHold[p.ContainerID] = true
	}
	want := map[string]bool{}
	for _, p := range wired {
		want[p.IP.String()] = true
	}
	done := map[string]string{}
	var extra []string
	for _, a := range rep.GetAllocations() {
		switch {
		case a.GetState() == "reserved": // the tunnel address
		case want[a.GetIp()] && a.GetState() == "ready":
			got[a.GetIp()] = true
		case mayHold[a.GetContainerId()] && a.GetState() == "ready":
			done[a.GetContainerId()] = a.GetIp()
		default:
			extra = append(extra, a.GetIp()+" ("+a.GetState()+", "+a.GetPod()+")")
		}
	}
	for _, p := range wired {
		if !got[p.IP.String()] {
			return nil, fmt.Sprintf("pod %s's address %s is not allocated and ready", p.Name, p.IP)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Sprintf("%d allocations of no wired pod: %v", len(extra), extra)
	}
	return done, ""
}

// leftovers describes what of the pods (addresses addrs) the node still
// has: veths, /32 routes, nftables elements, allocations.
func leftovers(t *testing.T, n *lab.Node, addrs map[string]bool) string {
	t.Helper()
	if v := reefVeths(t, n); len(v) > 0 {
		return fmt.Sprintf("%d reef veths left, such as %s", len(v), v[0])
	}
	for _, r := range reefRoutes(t, n) {
		if dst := strings.Fields(r)[0]; addrs[dst] || addrs[strings.TrimSuffix(dst, "/32")] || strings.Contains(r, " dev reef") {
			return "route left: " + r
		}
	}
	if set := nftPodSet(t, n); len(set) > 0 {
		return fmt.Sprintf("%d elements left in the set arp reef pod-addrs", len(set))
	}
	ruleset := run(t, n.Lab, n.Netns, "nft", "list", "ruleset")
	for _, tok := range nftAddrToken.FindAllString(ruleset, -1) {
		if addrs[tok] {
			return "nft list ruleset still names pod address " + tok
		}
	}
	if got := allocations(t, n); len(got) > 0 {
		return fmt.Sprintf("%d allocations left", len(got))
	}
	return ""
}

var nftAddrToken = regexp.MustCompile(`\b\d+\.\d+\.\d+\.\d+\b`)

// allocationRows are the pods' rows of `reef ipam show
// --show-allocations`'s allocation table: all but the reserved ones (the
// node's VXLAN tunnel address).
func allocationRows(out string) []string {
	var rows []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "IP "):
			in = true
		case in && strings.TrimSpace(line) != "" && !slices.Contains(strings.Fields(line), "reserved"):
			rows = append(rows, line)
		}
	}
	return rows
}

// idleGoroutines is the lowest of three readings of the daemon's
// goroutines, a second apart.
func idleGoroutines(t *testing.T, n *lab.Node) int {
	t.Helper()
	low := -1
	for range 3 {
		time.Sleep(time.Second) // samples a second apart: a measurement, not a wait
		g, err := n.Goroutines()
		if err != nil {
			t.Fatal(err)
		}
		if low < 0 || g < low {
			low = g
		}
	}
	t.Logf("daemon idle with %d pods: %d goroutines", stormPods, low)
	return low
}

// grepLines are the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
