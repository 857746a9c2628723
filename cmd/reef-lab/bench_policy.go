package main

// bench-policy: NetworkPolicy's cost (BENCHMARKS.md, "## NetworkPolicy"),
// each figure next to its reference in the same run:
//
//   - a policy created -> enforced on every node (its chain in both nodes'
//     table inet reef, seen through netlink), with the background the issue
//     names (1,000 pods and 100 policies in the API);
//   - a pod's CNI ADD through libcni on a node with policy on and 100
//     policies in place, alternating with ADDs on a node with policy off;
//   - the daemon's memory with 5,000 pods, 500 namespaces and 500 policies in
//     the API, next to the same daemon idle and a daemon with policy off;
//   - pod-to-pod TCP throughput (iperf3) across nodes with both pods
//     isolated by policies that allow the flow, alternating with the same
//     pods selected by none;
//   - with 1,000 pods, 500 policies and 50 ClusterNetworkPolicies, a
//     NetworkPolicy and a ClusterNetworkPolicy change enforced as a probe
//     sees it, the ADD, and the memory (bench_policy_cluster.go).
//
// The API's pods beyond the nodes' own are objects only, scheduled to
// nodes the lab does not run (nodeName elsewhere-N) with an address in
// status: what a node sees of the rest of a cluster.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/poll"
)

type policyBench struct {
	ctx    context.Context
	l      *lab.Lab
	api    *lab.KubeAPI
	c      *kubernetes.Clientset
	on     []*lab.Node // node1, node2: policy on, meshed
	off    *lab.Node   // node3: policy off, alone
	seq    int
	remote int // pods made by background, for their addresses
	// policies and bgNamespaces are background's so far.
	policies     int
	bgNamespaces []string
	report       policyReport
}

type policyReport struct {
	command, loadStart, loadEnd string
	began                       time.Time
	took                        time.Duration
	enforce                     []time.Duration // policy created -> chain on both nodes
	enforceBG                   string          // the background when measured
	addOn0, addOn, addOff       []time.Duration
	idleOn, idleOff, loadedOn   lab.Memory
	loadedWhat                  string
	tputOn, tputOff             []float64 // Gbit/s
	tputErr                     string
	memSeries                   []string // node1's memory while it settles after the scale step

	// The ClusterNetworkPolicy step (bench_policy_cluster.go).
	crd, clusterWhat      string
	clusters              int
	addFullOn, addFullOff []time.Duration
	npChange, cnpChange   []time.Duration // API write -> first probe decided the new way
	npFlaps, cnpFlaps     int
	npProbes, cnpProbes   string
	clusterMem            lab.Memory
	clusterMemSeries      []string
}

// policyFlags is bench-policy's command line.
type policyFlags struct {
	bin, out, only                   string
	adds, creates, changes, clusters int
}

func parsePolicyFlags(args []string) (policyFlags, error) {
	fs := flag.NewFlagSet("reef-lab bench-policy", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "", `write the report into this file as its "## NetworkPolicy" section`)
	adds := fs.Int("adds", 40, "ADDs per mode")
	creates := fs.Int("creates", 20, "policies created one by one for the enforcement figure")
	changes := fs.Int("changes", 30, "changes of each kind (NetworkPolicy, ClusterNetworkPolicy) for the probe-timed figures")
	clusters := fs.Int("cluster-policies", 50, "ClusterNetworkPolicies in the ClusterNetworkPolicy step")
	only := fs.String("only", "", `run only this step after the background ("cluster": the ClusterNetworkPolicy step), to iterate; not with --out`)
	if err := fs.Parse(args); err != nil {
		return policyFlags{}, err
	}
	if *only != "" && *only != "cluster" {
		return policyFlags{}, fmt.Errorf("bench-policy: --only %q: the only step is cluster", *only)
	}
	if *only != "" && *out != "" {
		return policyFlags{}, errors.New("bench-policy: --only leaves figures out of the section: not with --out")
	}
	return policyFlags{bin: *bin, out: *out, only: *only, adds: *adds, creates: *creates, changes: *changes, clusters: *clusters}, nil
}

func benchPolicy(ctx context.Context, args []string) error {
	f, err := parsePolicyFlags(args)
	if err != nil {
		return err
	}
	if _, err := exec.LookPath("iperf3"); err != nil {
		return errors.New("bench-policy: iperf3 not found (apt-get install iperf3, or make bench)")
	}
	b := &policyBench{ctx: ctx}
	b.report.clusters = f.clusters
	b.report.began, b.report.loadStart, b.report.command = time.Now(), tputLoad(), benchCommand("reef-lab bench-policy", args)
	l, err := lab.New(f.bin)
	if err != nil {
		return err
	}
	defer l.Close()
	b.l = l
	if err := b.start(); err != nil {
		return err
	}
	if err := b.steps(f); err != nil {
		return err
	}
	b.report.took, b.report.loadEnd = time.Since(b.report.began), tputLoad()
	return printSection(b.report.markdown(), f.out)
}

func policyProgress(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "bench-policy: "+format+"\n", a...)
}

// start runs the API, two meshed nodes with policy on and one with policy
// off, and takes the idle figures once the policy-on nodes have listed
// the API.
func (b *policyBench) start() error {
	policyProgress("starting the API and two nodes with policy on, one with policy off")
	quiet := lab.NodeOptions{ReconcileInterval: 30 * time.Second}
	var err error
	if b.api, b.on, err = b.l.StartPolicyMesh(2, quiet); err != nil {
		return fmt.Errorf("bench-policy: %w", err)
	}
	if err := lab.WaitConverged(b.on, 30*time.Second); err != nil {
		return fmt.Errorf("bench-policy: %w", err)
	}
	if b.off, err = b.l.AddNode("node3", quiet); err != nil {
		return err
	}
	if err := b.off.Start(); err != nil {
		return err
	}
	cfg := b.api.AdminConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	if b.c, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	// Idle: both policy-on nodes have listed the API (their informers
	// synced), the state the idle figure is of.
	if err := poll.Until(30*time.Second, func() error {
		for _, n := range b.on {
			st, err := n.Status()
			if err != nil {
				return err
			}
			if !st.GetPolicy().GetSynced() {
				return fmt.Errorf("%s has not listed the API yet: %s", n.Name, st.GetPolicy().GetApiError())
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("bench-policy: %w", err)
	}
	// A second of idle after that, as bench's idle figure: the
	// measurement, not a wait.
	time.Sleep(time.Second)
	if b.report.idleOn, err = b.on[0].Memory(); err != nil {
		return err
	}
	b.report.idleOff, err = b.off.Memory()
	return err
}

// steps measures, in order: ADDs with no policy, the background, ADDs
// with 100 policies, enforcement, throughput, the ClusterNetworkPolicy
// step and the scale step (with f.only, the cluster step alone after the
// background).
func (b *policyBench) steps(f policyFlags) error {
	var err error
	policyProgress("%d ADDs per mode with no policy", f.adds)
	if err := b.namespace("bench", nil); err != nil {
		return err
	}
	if b.report.addOn0, _, err = b.adds(f.adds, false); err != nil {
		return err
	}
	policyProgress("background: 1,000 pods in 50 namespaces and 100 policies")
	if err := b.background(1000, 50, 100); err != nil {
		return err
	}
	if f.only == "" {
		policyProgress("%d ADDs per mode with 100 policies", f.adds)
		if b.report.addOn, b.report.addOff, err = b.adds(f.adds, true); err != nil {
			return err
		}
		policyProgress("%d policies created one by one", f.creates)
		b.report.enforceBG = "1,000 pods and 100 policies in the API"
		if b.report.enforce, err = b.enforcement(f.creates); err != nil {
			return err
		}
		policyProgress("throughput, isolated and allowed vs not isolated")
		b.throughput()
	}
	if err := b.clusterStep(500, f.clusters, f.changes, f.adds); err != nil {
		return fmt.Errorf("bench-policy: ClusterNetworkPolicy step: %w", err)
	}
	if f.only != "" {
		return nil
	}
	policyProgress("scale: 5,000 pods, 500 namespaces, 500 policies")
	if err := b.background(4000, 450, 400); err != nil {
		return err
	}
	if b.report.loadedOn, err = b.settledMemory(500, 0, &b.report.memSeries); err != nil {
		return err
	}
	b.report.loadedWhat = "5,000 pods, 500 namespaces and 500 policies in the API"
	return nil
}
