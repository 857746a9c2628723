package main

// `reef-lab demo-cri` and `reef-lab bench-cri`: reef driven by a real
// runtime. Each lab node runs Debian's containerd inside its network
// namespace (internal/lab/containerd.go); crictl creates and removes pod
// sandboxes through containerd's CRI, as kubelet does, and containerd
// execs reef-cni from its own CNI bin dir. Nothing runs in the host's
// network namespace.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// cri runs `reef-lab demo-cri|bench-cri [flags]`.
func cri(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet("reef-lab "+cmd, flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "", "bench-cri: append the report to this file")
	pods := fs.Int("pods", 40, "bench-cri: pods per plugin")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := lab.CheckContainerdDeps(); err != nil {
		return err
	}
	if cmd == "demo-cri" {
		return demoCRI(ctx, *bin)
	}
	return benchCRI(ctx, *bin, *out, *pods)
}

// crictlShow prints a crictl command and its output, as the demo's show
// does for commands in a namespace.
func crictlShow(ctx context.Context, c *lab.Containerd, label string, args ...string) {
	fmt.Printf("\n$ crictl %s   # %s, on %s\n", strings.Join(args, " "), label, c.Node.Name)
	out, err := c.Run(ctx, args...)
	fmt.Print(out)
	if err != nil {
		fmt.Println("(failed:", err, ")")
	}
}

func criPingFrom(nsPath string, dst netip.Addr) string {
	out, err := exec.Command("nsenter", "--net="+nsPath, "--", "ping", "-c", "1", "-W", "2", dst.String()).CombinedOutput()
	if err != nil {
		return "FAILED"
	}
	if i := strings.Index(string(out), "ttl="); i >= 0 {
		return strings.Fields(string(out)[i:])[0]
	}
	return "answered"
}

func demoCRI(ctx context.Context, bin string) error {
	say("a 2-node BGP lab; each node runs its reef daemon and a containerd %s inside the node's network namespace", lab.ContainerdVersion())
	l, err := lab.New(bin)
	if err != nil {
		return err
	}
	defer func() {
		say("tearing down: pods removed through the CRI, containerd stopped, mounts and namespaces gone")
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
		}
	}()
	nodes, err := l.AddMesh(2, "")
	if err != nil {
		return err
	}
	if err := lab.StartAll(nodes); err != nil {
		return err
	}
	cs, err := criStartContainerds(nodes)
	if err != nil {
		return err
	}

	say("crictl runp: two pods on node1, one on node2")
	pods, err := criRunPods(ctx, cs)
	if err != nil {
		return err
	}
	crictlShow(ctx, cs[0], "the sandboxes containerd knows", "pods")
	_, pid, err := pods[0].StartContainer(ctx, "sidecar")
	if err != nil {
		return err
	}
	crictlShow(ctx, cs[0], "a second container in web-1 (the pause image, pid "+fmt.Sprint(pid)+")", "ps")
	show(l, pods[0].Netns(), "web-1's netns (containerd's): eth0 with a /32", "ip", "-4", "addr", "show", "eth0")
	show(l, pods[0].Netns(), "web-1's netns: everything via the link-local gateway", "ip", "route")
	fmt.Printf("\n$ reef ipam show --show-allocations   # on node1: the CRI's IPs are reef's\n")
	o, _ := nodes[0].Reef("ipam", "show", "--show-allocations")
	fmt.Print(o)
	show(l, nodes[0].Netns, "node1: a /32 per pod, the blackhole of its block, node2's block via node2", "ip", "route", "show", "proto", "reef")

	say("waiting for BGP, then pings: from web-1's sidecar (its netns through /proc/%d/ns/net) and across nodes", pid)
	if err := lab.WaitConverged(nodes, 30*time.Second); err != nil {
		return err
	}
	failed := criPings(pods, fmt.Sprintf("/proc/%d/ns/net", pid))

	say("reef's daemon on node1 stopped: the next runp fails with reef's message")
	p, err := criDaemonDown(ctx, nodes[0], cs[0])
	if err != nil {
		return err
	}
	pods = append(pods, p)

	say("crictl stopp (CNI DEL with the netns) and rmp (DEL again, empty CNI_NETNS) of every pod")
	if err := criRemoveAll(ctx, pods, nodes); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d pings failed", failed)
	}
	say("demo-cri done: containerd's CRI created and removed %d pods through reef-cni", len(pods))
	return nil
}

// criStartContainerds starts a containerd in each node's namespace and
// shows node1's CNI conf and bin dirs.
func criStartContainerds(nodes []*lab.Node) ([]*lab.Containerd, error) {
	var cs []*lab.Containerd
	for _, n := range nodes {
		c, err := n.StartContainerd(lab.ContainerdOptions{})
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
		fmt.Printf("%s: netns %s; containerd pid %d, socket %s\n", n.Name, n.Netns, c.Pid(), c.Socket)
		fmt.Printf("       config %s, log %s\n", c.Config, c.LogPath)
	}
	conf, _ := os.ReadFile(filepath.Join(cs[0].ConfDir, "10-lab.conflist"))
	fmt.Printf("\nthe only file of node1's CNI conf dir %s:\n%s\n", cs[0].ConfDir, conf)
	entries, _ := os.ReadDir(cs[0].CNIBinDir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	fmt.Printf("its CNI bin dir %s: %s\n", cs[0].CNIBinDir, strings.Join(names, " "))
	fmt.Println("(cniVersion 1.0.0: containerd 1.6's libcni rejects 1.1.0 results; libcni 1.2 on picks 1.1.0 from cniVersions; docs/cri.md)")
	return cs, nil
}

// criRunPods runs web-1 and web-2 on node1 and web-3 on node2.
func criRunPods(ctx context.Context, cs []*lab.Containerd) ([]*lab.CRIPod, error) {
	var pods []*lab.CRIPod
	for _, spec := range []struct {
		c    *lab.Containerd
		name string
	}{{cs[0], "web-1"}, {cs[0], "web-2"}, {cs[1], "web-3"}} {
		start := time.Now()
		p, err := spec.c.RunPod(ctx, "default", spec.name)
		if err != nil {
			return nil, err
		}
		pods = append(pods, p)
		fmt.Printf("  %s  pod %-6s sandbox %.12s  %s  ip %-12s netns %s  (%s)\n", spec.c.Node.Name, p.Name, p.ID, p.State, p.IP, p.NetnsPath,
			time.Since(start).Round(time.Millisecond))
	}
	return pods, nil
}

// criPings pings from web-1's sidecar (its netns at sidecar) to web-2 and
// web-3, and from web-3 to web-1; it returns how many failed.
func criPings(pods []*lab.CRIPod, sidecar string) int {
	failed := 0
	for _, ping := range []struct {
		from, label string
		to          *lab.CRIPod
	}{
		{sidecar, "web-1's sidecar (node1)", pods[1]},
		{sidecar, "web-1's sidecar (node1)", pods[2]},
		{pods[2].NetnsPath, "web-3 (node2)", pods[0]},
	} {
		r := criPingFrom(ping.from, ping.to.IP)
		if r == "FAILED" {
			failed++
		}
		fmt.Printf("  %s -> %s %s (%s): %s\n", ping.label, ping.to.Name, ping.to.IP, ping.to.C.Node.Name, r)
	}
	return failed
}

// criDaemonDown stops n's daemon, shows that a runp fails with reef's
// message and what containerd says of the network, starts the daemon
// again and returns the pod a runp then makes.
func criDaemonDown(ctx context.Context, n *lab.Node, c *lab.Containerd) (*lab.CRIPod, error) {
	if err := n.Stop(); err != nil {
		return nil, err
	}
	_, err := c.RunPod(ctx, "default", "while-down")
	if err == nil {
		return nil, errors.New("runp succeeded with the daemon stopped")
	}
	msg := strings.ReplaceAll(err.Error(), `\"`, `"`)
	if i := strings.Index(msg, "failed to setup network"); i >= 0 {
		msg = msg[i:]
		if j := strings.Index(msg, "\n"); j >= 0 {
			msg = msg[:j]
		}
	}
	fmt.Printf("  containerd: %s\n", msg)
	ready, reason, err := c.NetworkReady(ctx)
	if err != nil {
		return nil, err
	}
	status := "does not call CNI STATUS, so the network stays ready"
	if lab.ContainerdKnowsCNI11() {
		status = "calls CNI STATUS"
	}
	fmt.Printf("  crictl info: NetworkReady=%v %s (containerd %s %s)\n", ready, reason, lab.ContainerdVersion(), status)
	if err := n.Start(); err != nil {
		return nil, err
	}
	p, err := c.RunPod(ctx, "default", "after-restart")
	if err != nil {
		return nil, err
	}
	fmt.Printf("  daemon started again: runp %s -> %s, ip %s\n", p.Name, p.State, p.IP)
	return p, nil
}

// criRemoveAll stops and removes every pod through the CRI and shows
// that the nodes hold no address.
func criRemoveAll(ctx context.Context, pods []*lab.CRIPod, nodes []*lab.Node) error {
	for _, p := range pods {
		if err := p.Stop(ctx); err != nil {
			return err
		}
		if err := p.Remove(ctx); err != nil {
			return err
		}
		fmt.Printf("  %s: stopped and removed\n", p.Name)
	}
	for _, n := range nodes {
		fmt.Printf("\n$ reef ipam show --show-allocations   # on %s: nothing held\n", n.Name)
		o, _ := n.Reef("ipam", "show", "--show-allocations")
		fmt.Print(o)
	}
	return nil
}

// criTarget is one CNI setup under the benchmark: a containerd and how
// its pods are run.
type criTarget struct {
	label       string
	c           *lab.Containerd
	hostNetwork bool
	lat         map[string][]time.Duration // runp, stopp, rmp
}

func (t *criTarget) timed(op string, f func() error) error {
	start := time.Now()
	err := f()
	t.lat[op] = append(t.lat[op], time.Since(start))
	return err
}

func benchCRI(ctx context.Context, bin, out string, podsPer int) error {
	began, load0 := time.Now(), criLoad()
	for _, p := range []string{"ptp", "host-local"} {
		if _, err := os.Stat(filepath.Join(lab.RefPluginDir, p)); err != nil {
			return fmt.Errorf("bench-cri: %s/%s missing (apt-get install containernetworking-plugins)", lab.RefPluginDir, p)
		}
	}
	l, err := lab.New(bin)
	if err != nil {
		return err
	}
	defer func() {
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "bench-cri cleanup:", err)
		}
	}()
	targets, err := criTargets(l)
	if err != nil {
		return err
	}
	// crictl's own cost: a CRI call that does nothing.
	floor := &criTarget{lat: map[string][]time.Duration{}}

	const warm = 3
	rounds := 4
	perRound := (podsPer + rounds - 1) / rounds
	seq := 0
	for r := -1; r < rounds; r++ {
		n := perRound
		if r < 0 {
			n = warm
		}
		fmt.Fprintf(os.Stderr, "bench-cri: round %d of %d\n", r+1, rounds)
		// Setups alternate pod by pod; the order rotates between rounds.
		order := append([]*criTarget(nil), targets...)
		if r > 0 {
			k := r % len(order)
			order = append(order[k:], order[:k]...)
		}
		if err := criRound(ctx, order, floor, targets[0].c, n, &seq); err != nil {
			return err
		}
		if r < 0 { // the warm-up is not counted
			for _, t := range append(targets, floor) {
				t.lat = map[string][]time.Duration{}
			}
		}
	}
	report := criReport(targets, floor, perRound*rounds, rounds, began, load0)
	fmt.Print(report)
	if out == "" {
		return nil
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(report); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// criTargets starts reef's node as in production (default reconcile
// interval, info logs) and a reference node without a daemon for ptp and
// host-local, each with a containerd, and returns what bench-cri
// measures: reef, ptp+host-local and hostNetwork pods (no CNI), reef's
// first.
func criTargets(l *lab.Lab) ([]*criTarget, error) {
	node, err := l.AddNode("reef", lab.NodeOptions{ReconcileInterval: 30 * time.Second})
	if err != nil {
		return nil, err
	}
	if cfg, err := os.ReadFile(node.Config); err != nil {
		return nil, err
	} else if err := os.WriteFile(node.Config, []byte(strings.Replace(string(cfg), "logLevel: debug", "logLevel: info", 1)), 0o644); err != nil {
		return nil, err
	}
	if err := node.Start(); err != nil {
		return nil, err
	}
	// ptp + host-local: a node namespace of its own without a daemon;
	// ptp's host veths and routes land there.
	refNode, err := l.AddNode("ref", lab.NodeOptions{})
	if err != nil {
		return nil, err
	}
	refConflist := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"bench-ptp","plugins":[{"type":"ptp","ipMasq":false,"mtu":1450,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.246.0.0/16"}]],"dataDir":%q}}]}`,
		filepath.Join(refNode.Dir, "host-local"))
	fmt.Fprintln(os.Stderr, "bench-cri: starting two containerds")
	reefC, err := node.StartContainerd(lab.ContainerdOptions{})
	if err != nil {
		return nil, err
	}
	refC, err := refNode.StartContainerd(lab.ContainerdOptions{Conflist: []byte(refConflist),
		Plugins: []string{filepath.Join(lab.RefPluginDir, "ptp"), filepath.Join(lab.RefPluginDir, "host-local")}})
	if err != nil {
		return nil, err
	}
	return []*criTarget{
		{label: "reef", c: reefC, lat: map[string][]time.Duration{}},
		{label: "ptp+host-local", c: refC, lat: map[string][]time.Duration{}},
		{label: "hostNetwork (no CNI)", c: refC, hostNetwork: true, lat: map[string][]time.Duration{}},
	}, nil
}

// criRound times n pod setups of each target, alternating in order (and
// a call of floor's through reefC after each), then the stopp and rmp of
// every pod made; seq numbers the pods across rounds.
func criRound(ctx context.Context, order []*criTarget, floor *criTarget, reefC *lab.Containerd, n int, seq *int) error {
	var made []*lab.CRIPod
	var by []*criTarget
	for i := 0; i < n; i++ {
		for _, t := range order {
			*seq++
			cfg, uid, err := t.c.PodConfig("default", fmt.Sprintf("b%d", *seq), t.hostNetwork)
			if err != nil {
				return err
			}
			var out string
			if err := t.timed("runp", func() error { out, err = t.c.Run(ctx, "runp", cfg); return err }); err != nil {
				return fmt.Errorf("%s: %w", t.label, err)
			}
			p := &lab.CRIPod{C: t.c, ID: strings.TrimSpace(out), Name: fmt.Sprintf("b%d", *seq), Namespace: "default", UID: uid}
			if err := p.Inspect(ctx); err != nil { // outside the clock; records it for cleanup
				return err
			}
			made, by = append(made, p), append(by, t)
		}
		floor.timed("version", func() error { _, err := reefC.Run(ctx, "version"); return err })
	}
	for _, op := range []string{"stopp", "rmp"} {
		for i, p := range made {
			err := by[i].timed(op, func() error {
				if op == "stopp" {
					return p.Stop(ctx)
				}
				return p.Remove(ctx)
			})
			if err != nil {
				return fmt.Errorf("%s: %w", by[i].label, err)
			}
		}
	}
	return nil
}

func criPct(lat []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), lat...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	if len(s) == 0 {
		return 0
	}
	i := int(p*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func criMs(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }

func criLoad() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

func criReport(targets []*criTarget, floor *criTarget, pods, rounds int, began time.Time, load0 string) string {
	var b strings.Builder
	crictlVer := lab.CrictlVersion()
	fmt.Fprintf(&b, "\n## containerd (CRI)\n\n")
	fmt.Fprintf(&b, "From `sudo make bench`, which runs\n\n    bin/reef-lab bench-cri --bin $PWD/bin --out BENCHMARKS.md\n\n")
	fmt.Fprintf(&b, "on %s, which took %s; it appends this section.\n\n", began.UTC().Format("2006-01-02 15:04 UTC"), time.Since(began).Round(time.Second))
	fmt.Fprintf(&b, "**What is measured.** The wall time of one `crictl runp`, `crictl stopp` and `crictl rmp`, as kubelet\n"+
		"asks for them: crictl %s → containerd %s (Debian's, with runc) → the CNI plugin it execs. Each containerd\n"+
		"runs inside a lab node network namespace with its own root, state, socket and CNI dirs; the sandbox image\n"+
		"is the lab's static pause. reef (the node's daemon, `reconcileInterval: 30s`, `logLevel: info`; conflist\n"+
		"cniVersion 1.0.0, see docs/cri.md) runs next to Debian's ptp + host-local (cniVersion 1.0.0,\n"+
		"`ipMasq: false`) and a hostNetwork pod (no netns, no CNI call: what containerd, runc and crictl cost\n"+
		"alone), in the same run. %d pods per setup in %d rounds; setups alternate pod by pod and rotate between\n"+
		"rounds; each round creates its pods, then stops them all, then removes them all. 3 warm-up pods per setup\n"+
		"are not counted. Each figure is one crictl process; its own start and a CRI round trip that does\n"+
		"nothing (`crictl version`) take %s ms at p50.\n\n",
		crictlVer, lab.ContainerdVersion(), pods, rounds, criMs(criPct(floor.lat["version"], 0.5)))
	fmt.Fprintf(&b, "| setup | op | p50 ms | p90 ms | max ms | n |\n|---|---|---:|---:|---:|---:|\n")
	for _, op := range []string{"runp", "stopp", "rmp"} {
		for _, t := range targets {
			lat := t.lat[op]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d |\n", t.label, op, criMs(criPct(lat, 0.5)), criMs(criPct(lat, 0.9)), criMs(criPct(lat, 1)), len(lat))
		}
	}
	fmt.Fprintf(&b, "\nWhat the pod network adds, p50 minus the hostNetwork pod's p50 (containerd's netns, loopback and the plugin):\n\n")
	for _, op := range []string{"runp", "stopp", "rmp"} {
		base := criPct(targets[2].lat[op], 0.5)
		fmt.Fprintf(&b, "- %s: reef %s ms, ptp+host-local %s ms\n", op,
			criMs(criPct(targets[0].lat[op], 0.5)-base), criMs(criPct(targets[1].lat[op], 0.5)-base))
	}
	fmt.Fprintf(&b, "\n1-minute load average %s at the start, %s at the end (other work on the machine shows in the figures).\n", load0, criLoad())
	return b.String()
}
