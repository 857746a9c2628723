package e2e

// reef driven by a real runtime: Debian's containerd, one per lab node,
// running inside the node's network namespace (lab/containerd.go), creates
// and removes pod sandboxes through its CRI, driven by crictl as kubelet
// drives it. containerd reads the conflist from its own conf dir and execs
// reef-cni and loopback from its own bin dir; the node's reef daemon wires
// the pods.

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/reefcni/reef/internal/lab"
	reefv1 "github.com/reefcni/reef/proto"
)

// startContainerd starts a containerd in the node's namespace with the
// node's reef conflist; on failure its log is printed. Lab.Close tears it
// down with its pods; the cleanup here reports what that teardown hit.
func startContainerd(t *testing.T, n *lab.Node, opts lab.ContainerdOptions) *lab.Containerd {
	t.Helper()
	if err := lab.CheckContainerdDeps(); err != nil {
		t.Fatal(err)
	}
	c, err := n.StartContainerd(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("containerd log of %s:\n%s", n.Name, c.LogTail(30))
		}
		if err := c.Close(); err != nil {
			t.Errorf("containerd teardown on %s: %v", n.Name, err)
		}
	})
	return c
}

func criCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func runPod(t *testing.T, ctx context.Context, c *lab.Containerd, name string) *lab.CRIPod {
	t.Helper()
	p, err := c.RunPod(ctx, "default", name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// podAllocations returns the node's allocations that belong to pods, by
// IP (the node's VXLAN tunnel address is an allocation too).
func podAllocations(t *testing.T, n *lab.Node) map[string]*reefv1.Allocation {
	t.Helper()
	rep, err := n.IPAM()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]*reefv1.Allocation{}
	for _, a := range rep.GetAllocations() {
		if a.GetContainerId() != "" {
			m[a.GetIp()] = a
		}
	}
	return m
}

// criPing pings dst once from the network namespace at nsPath (a pod's
// cni-… file, or /proc/<pid>/ns/net of a container) and returns the TTL.
func criPing(nsPath string, dst netip.Addr) (int, error) {
	out, err := exec.Command("nsenter", "--net="+nsPath, "--", "ping", "-c", "1", "-W", "2", dst.String()).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ping %s from %s: %v: %s", dst, nsPath, err, out)
	}
	m := regexp.MustCompile(`ttl=(\d+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("ping %s from %s: no ttl in %q", dst, nsPath, out)
	}
	return strconv.Atoi(string(m[1]))
}

func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// checkCRIPod checks a Ready sandbox against reef's record and the model:
// the CRI's IP is the one reef allocated to this sandbox, the netns is
// containerd's cni-… file and holds eth0 /32 with the model's routes, and
// the node has the veth and the /32 route.
func checkCRIPod(t *testing.T, n *lab.Node, p *lab.CRIPod) *reefv1.Allocation {
	t.Helper()
	if p.State != "SANDBOX_READY" {
		t.Errorf("%s: sandbox state %s, want SANDBOX_READY", p.Name, p.State)
	}
	a, ok := podAllocations(t, n)[p.IP.String()]
	if !ok {
		t.Fatalf("%s: the CRI's IP %s is not one of reef's allocations on %s", p.Name, p.IP, n.Name)
	}
	if a.GetContainerId() != p.ID || a.GetPod() != "default/"+p.Name || a.GetState() != "ready" || a.GetNetns() != p.NetnsPath {
		t.Errorf("%s: reef's allocation of %s = %v, want container %s, pod default/%s, netns %s, ready", p.Name, p.IP, a, p.ID, p.Name, p.NetnsPath)
	}
	if !strings.HasPrefix(p.NetnsPath, "/var/run/netns/cni-") {
		t.Errorf("%s: netns %s, want containerd's /var/run/netns/cni-…", p.Name, p.NetnsPath)
	}
	l := n.Lab
	if got := run(t, l, p.Netns(), "ip", "-4", "-o", "addr", "show", "dev", "eth0"); !strings.Contains(got, "inet "+p.IP.String()+"/32 ") {
		t.Errorf("%s: eth0 in %s lacks %s/32:\n%s", p.Name, p.NetnsPath, p.IP, got)
	}
	routes := strings.Join(nonEmptyLines(run(t, l, p.Netns(), "ip", "-4", "route")), "\n")
	if want := "default via 169.254.1.1 dev eth0\n169.254.1.1 dev eth0 scope link"; routes != want {
		t.Errorf("%s: pod routes:\n%s\nwant:\n%s", p.Name, routes, want)
	}
	if neigh := run(t, l, p.Netns(), "ip", "neigh", "show", "169.254.1.1"); !strings.Contains(neigh, "lladdr ee:ee:ee:ee:ee:ee PERMANENT") {
		t.Errorf("%s: pod neighbour 169.254.1.1: %q", p.Name, neigh)
	}
	route := strings.TrimSpace(run(t, l, n.Netns, "ip", "-4", "route", "show", "exact", p.IP.String()+"/32"))
	if want := p.IP.String() + " dev " + a.GetHostVeth() + " proto reef scope link"; route != want {
		t.Errorf("%s: node route %q, want %q", p.Name, route, want)
	}
	return a
}

// checkGone checks that a removed pod left nothing: no allocation, no veth,
// no route.
func checkGone(t *testing.T, n *lab.Node, ip netip.Addr, veth string) {
	t.Helper()
	if a, ok := podAllocations(t, n)[ip.String()]; ok {
		t.Errorf("address %s still allocated: %v", ip, a)
	}
	for _, v := range reefVeths(t, n) {
		if v == veth {
			t.Errorf("veth %s still on %s", veth, n.Name)
		}
	}
	if r := strings.TrimSpace(run(t, n.Lab, n.Netns, "ip", "-4", "route", "show", "exact", ip.String()+"/32")); r != "" {
		t.Errorf("route to %s still on %s: %s", ip, n.Name, r)
	}
}

// TestCRIPodsAcrossNodes: two meshed nodes, each with its containerd.
// runp gives a Ready sandbox with reef's address and the model's wiring; a
// second container shares the pod's netns; pods ping on one node and
// across nodes; stopp (DEL with the netns) then rmp (DEL with an empty
// CNI_NETNS) both succeed and leave nothing.
func TestCRIPodsAcrossNodes(t *testing.T) {
	l := newLab(t)
	nodes := startMesh(t, l, 2, "")
	n1, n2 := nodes[0], nodes[1]
	c1 := startContainerd(t, n1, lab.ContainerdOptions{})
	c2 := startContainerd(t, n2, lab.ContainerdOptions{})
	ctx := criCtx(t)

	a := runPod(t, ctx, c1, "web-a")
	allocA := checkCRIPod(t, n1, a)
	// The CLI an operator reads says the same.
	out, err := n1.Reef("ipam", "show", "--show-allocations")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(a.IP.String()) + `\s+default/web-a\s+` + a.ID[:12] + `\s+` + allocA.GetHostVeth() + `\s+ready`).MatchString(out) {
		t.Errorf("reef ipam show --show-allocations lacks %s default/web-a %.12s:\n%s", a.IP, a.ID, out)
	}

	// A second container of the pod (the pause image again) is in the
	// same network namespace: the sandbox's netns file and the
	// container's /proc/<pid>/ns/net are one namespace.
	_, pid, err := a.StartContainer(ctx, "sidecar")
	if err != nil {
		t.Fatal(err)
	}
	sidecarNS := fmt.Sprintf("/proc/%d/ns/net", pid)
	if got, want := nsInode(t, sidecarNS), nsInode(t, a.NetnsPath); got != want {
		t.Errorf("sidecar's netns inode %d, the sandbox's %d: not shared", got, want)
	}
	if out, err := exec.Command("nsenter", "--net="+sidecarNS, "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0").CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "inet "+a.IP.String()+"/32") {
		t.Errorf("eth0 seen from the sidecar: %s %v", out, err)
	}

	b := runPod(t, ctx, c1, "web-b")
	checkCRIPod(t, n1, b)
	c := runPod(t, ctx, c2, "web-c")
	checkCRIPod(t, n2, c)
	converge(t, n1, n2)
	// Each node owns one block, and knows the other's: BLOCKS OWNED is
	// this node's alone.
	if out, err := n1.Reef("ipam", "show"); err != nil || !regexp.MustCompile(`(?m)^10\.244\.0\.0/16\s+/26\s+1\s+2 of 1024\s`).MatchString(out) {
		t.Errorf("reef ipam show on node1: want 1 block owned, 2 of 1024 in the cluster: %v\n%s", err, out)
	}
	// TTL: one routed hop on a node (63), two across nodes (62).
	for _, ping := range []struct {
		from, label string
		to          netip.Addr
		ttl         int
	}{
		{sidecarNS, "sidecar of web-a -> web-b (node1)", b.IP, 63},
		{sidecarNS, "sidecar of web-a -> web-c (node2)", c.IP, 62},
		{b.NetnsPath, "web-b -> web-a", a.IP, 63},
		{c.NetnsPath, "web-c (node2) -> web-a (node1)", a.IP, 62},
	} {
		if ttl, err := criPing(ping.from, ping.to); err != nil || ttl != ping.ttl {
			t.Errorf("%s: ttl %d, %v; want %d", ping.label, ttl, err, ping.ttl)
		}
	}

	// stopp: the CNI DEL with the netns frees the address, the veth and
	// the route; rmp: the second DEL, with an empty CNI_NETNS, succeeds.
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Inspect(ctx); err != nil || a.State != "SANDBOX_NOTREADY" {
		t.Errorf("after stopp: state %s, %v; want SANDBOX_NOTREADY", a.State, err)
	}
	checkGone(t, n1, a.IP, allocA.GetHostVeth())
	if err := a.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	checkGone(t, n1, a.IP, allocA.GetHostVeth())
	if _, err := os.Stat(a.NetnsPath); !os.IsNotExist(err) {
		t.Errorf("netns %s still there after rmp: %v", a.NetnsPath, err)
	}
	if n := strings.Count(n1.Log(), "container="+a.ID); n < 3 {
		t.Errorf("reef logged %d CNI calls for %.12s, want ADD and two DELs", n, a.ID)
	}
	// web-b was not touched by web-a's removal.
	if ttl, err := criPing(c.NetnsPath, b.IP); err != nil || ttl != 62 {
		t.Errorf("web-c -> web-b after web-a's removal: ttl %d, %v", ttl, err)
	}

	for _, p := range []struct {
		pod  *lab.CRIPod
		node *lab.Node
	}{{b, n1}, {c, n2}} {
		veth := podAllocations(t, p.node)[p.pod.IP.String()].GetHostVeth()
		if err := p.pod.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := p.pod.Remove(ctx); err != nil {
			t.Fatal(err)
		}
		checkGone(t, p.node, p.pod.IP, veth)
	}
	for _, n := range nodes {
		if got := podAllocations(t, n); len(got) != 0 {
			t.Errorf("%s: allocations left: %v", n.Name, got)
		}
		if got := reefVeths(t, n); len(got) != 0 {
			t.Errorf("%s: veths left: %v", n.Name, got)
		}
	}
}

// TestCRIDaemonDown: with reef's daemon stopped, runp fails with reef's
// "try again later" in containerd's error and leaves nothing; a pod
// removed meanwhile is removed (its DEL queued); once the daemon is back,
// the queued DEL has run and the next runp succeeds. containerd 1.6 has
// no CNI STATUS, so the CRI keeps saying NetworkReady; a containerd that
// calls STATUS must say not ready.
func TestCRIDaemonDown(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	c := startContainerd(t, n, lab.ContainerdOptions{})
	ctx := criCtx(t)

	old := runPod(t, ctx, c, "before")
	oldVeth := checkCRIPod(t, n, old).GetHostVeth()
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}

	ready, reason, err := c.NetworkReady(ctx)
	if err != nil {
		t.Fatal(err)
	}
	usesStatus := lab.ContainerdKnowsCNI11()
	t.Logf("containerd %s (CNI STATUS: %v), daemon down: NetworkReady=%v %s", lab.ContainerdVersion(), usesStatus, ready, reason)
	if !usesStatus && !ready {
		t.Errorf("containerd %s has no CNI STATUS, yet reports the network not ready: %s", lab.ContainerdVersion(), reason)
	}
	if usesStatus && ready {
		t.Errorf("containerd %s calls CNI STATUS, yet reports the network ready while reef's daemon is down", lab.ContainerdVersion())
	}

	_, err = c.RunPod(ctx, "default", "while-down")
	if err == nil {
		t.Fatal("runp succeeded with reef's daemon stopped")
	}
	// crictl prints the CRI's error with its quotes escaped.
	msg := strings.ReplaceAll(err.Error(), `\"`, `"`)
	reefMsg := "reef daemon not reachable at " + n.Socket + ", try again later; check `systemctl status reef`"
	for _, want := range []string{"failed to setup network for sandbox", `plugin type="reef-cni" failed (add): ` + reefMsg} {
		if !strings.Contains(msg, want) {
			t.Errorf("runp error lacks %q:\n%s", want, msg)
		}
	}
	if log := c.LogTail(50); !strings.Contains(log, "while-down") || !strings.Contains(log, reefMsg) {
		t.Errorf("containerd's log lacks the failed RunPodSandbox with reef's message:\n%s", log)
	}
	if ids, err := c.PodIDs(ctx); err != nil || len(ids) != 1 || ids[0] != old.ID {
		t.Errorf("sandboxes after the failed runp: %v, %v; want only %.12s", ids, err, old.ID)
	}

	// Removing a pod needs no daemon: the shim queues the DEL.
	if err := old.Stop(ctx); err != nil {
		t.Errorf("stopp with the daemon down: %v", err)
	}
	if err := old.Remove(ctx); err != nil {
		t.Errorf("rmp with the daemon down: %v", err)
	}

	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, n, old.IP, oldVeth) // the queued DEL ran before ADD was served
	p := runPod(t, ctx, c, "after")
	checkCRIPod(t, n, p)
	if ready, reason, err := c.NetworkReady(ctx); err != nil || !ready {
		t.Errorf("NetworkReady after the restart: %v %s %v", ready, reason, err)
	}
}

// TestCRIFiftyPods: 50 pods through crictl (4 at a time, as kubelet starts
// pods in parallel), then all removed: no address, veth, route or netns
// left.
func TestCRIFiftyPods(t *testing.T) {
	slowSuite(t)
	const pods, workers = 50, 4
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	c := startContainerd(t, n, lab.ContainerdOptions{})
	ctx := criCtx(t)

	created := make([]*lab.CRIPod, pods)
	start := time.Now()
	parallel(t, pods, workers, func(i int) error {
		p, err := c.RunPod(ctx, "default", fmt.Sprintf("bulk-%02d", i))
		created[i] = p
		return err
	})
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d runp, %d at a time: %s", pods, workers, time.Since(start).Round(time.Millisecond))
	seen := map[netip.Addr]bool{}
	for _, p := range created {
		if seen[p.IP] {
			t.Errorf("address %s given twice", p.IP)
		}
		seen[p.IP] = true
		if p.State != "SANDBOX_READY" {
			t.Errorf("%s: %s", p.Name, p.State)
		}
	}
	if got := len(podAllocations(t, n)); got != pods {
		t.Errorf("%d pod allocations, want %d", got, pods)
	}
	if got := len(reefVeths(t, n)); got != pods {
		t.Errorf("%d veths, want %d", got, pods)
	}
	// Two pods chosen far apart still talk.
	if ttl, err := criPing(created[0].NetnsPath, created[pods-1].IP); err != nil || ttl != 63 {
		t.Errorf("bulk-00 -> bulk-%02d: ttl %d, %v", pods-1, ttl, err)
	}

	start = time.Now()
	parallel(t, pods, workers, func(i int) error {
		if err := created[i].Stop(ctx); err != nil {
			return err
		}
		return created[i].Remove(ctx)
	})
	t.Logf("%d stopp+rmp, %d at a time: %s", pods, workers, time.Since(start).Round(time.Millisecond))
	if ids, err := c.PodIDs(ctx); err != nil || len(ids) != 0 {
		t.Errorf("sandboxes left: %v %v", ids, err)
	}
	if got := podAllocations(t, n); len(got) != 0 {
		t.Errorf("%d allocations leaked: %v", len(got), got)
	}
	if got := reefVeths(t, n); len(got) != 0 {
		t.Errorf("%d veths leaked: %v", len(got), got)
	}
	for _, r := range reefRoutes(t, n) {
		if !strings.HasPrefix(r, "blackhole") {
			t.Errorf("route leaked: %s", r)
		}
	}
	for _, p := range created {
		if _, err := os.Stat(p.NetnsPath); !os.IsNotExist(err) {
			t.Errorf("netns %s of %s left: %v", p.NetnsPath, p.Name, err)
		}
	}
}

// TestCRIConflistVersions: what containerd makes of reef's conflist
// versions. containerd 1.6 vendors libcni 1.1, which knows CNI up to
// 1.0.0: with the 1.1.0 conflist every runp fails on the result's version
// (reef's DEL after the failure leaves nothing behind). The conflist the
// lab gives containerd says cniVersion 1.0.0 and offers 1.1.0 in
// cniVersions, which a newer libcni (the lab's own) picks.
func TestCRIConflistVersions(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{})
	list, err := libcni.ConfListFromBytes(n.CRIConflist())
	if err != nil {
		t.Fatal(err)
	}
	if list.CNIVersion != "1.1.0" {
		t.Errorf("libcni of the lab reads the CRI conflist as %s, want 1.1.0", list.CNIVersion)
	}

	// A plain 1.1.0 conflist (the first design's), which the package does not ship.
	plain := strings.Replace(string(n.Conflist()), `"cniVersion":"1.0.0","cniVersions":["1.0.0","1.1.0"]`, `"cniVersion":"1.1.0"`, 1)
	if !strings.HasPrefix(plain, `{"cniVersion":"1.1.0","name"`) {
		t.Fatalf("could not make a plain 1.1.0 conflist from %s", n.Conflist())
	}
	c := startContainerd(t, n, lab.ContainerdOptions{Conflist: []byte(plain)})
	ctx := criCtx(t)
	p, err := c.RunPod(ctx, "default", "v110")
	if lab.ContainerdKnowsCNI11() {
		if err != nil {
			t.Fatalf("containerd %s with the 1.1.0 conflist: %v", lab.ContainerdVersion(), err)
		}
		checkCRIPod(t, n, p)
		return
	}
	if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), `\"`, `"`), `unsupported CNI result version "1.1.0"`) {
		t.Fatalf("containerd %s with the 1.1.0 conflist: runp error %v, want unsupported CNI result version \"1.1.0\"", lab.ContainerdVersion(), err)
	}
	t.Logf("containerd %s, cniVersion 1.1.0: %v", lab.ContainerdVersion(), err)
	if got := podAllocations(t, n); len(got) != 0 {
		t.Errorf("allocations left by the failed runp: %v", got)
	}
	if got := reefVeths(t, n); len(got) != 0 {
		t.Errorf("veths left by the failed runp: %v", got)
	}
}

// parallel runs f(0..n-1) on workers goroutines and fails the test with
// every error.
func parallel(t *testing.T, n, workers int, f func(i int) error) {
	t.Helper()
	next := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					t.Errorf("#%d: %v", i, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
}
