// Command reef-lab runs reef clusters made of network namespaces on this
// machine: `demo` shows pods talking and tears everything down, `up` keeps
// a lab running for exploring until Ctrl-C, `bench` measures reef next to
// the CNI reference plugins.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "reef-lab:", err)
		os.Exit(1)
	}
}

// commands are the commands with flags of their own, each run with a
// context that SIGINT and SIGTERM cancel.
var commands = map[string]func(ctx context.Context, args []string) error{
	"speaker":            speaker,
	"demo-cri":           func(ctx context.Context, args []string) error { return cri(ctx, "demo-cri", args) }, // containerd's CRI (cri.go)
	"bench-cri":          func(ctx context.Context, args []string) error { return cri(ctx, "bench-cri", args) },
	"bench-mesh":         benchMesh,         // multi-node benchmarks (bench_mesh.go)
	"bench-sim":          benchSim,          // the block protocol simulated (bench_sim.go)
	"bench-policy":       benchPolicy,       // NetworkPolicy's cost (bench_policy.go)
	"bench-metrics":      benchMetrics,      // the metrics listener's cost (bench_metrics.go)
	"bench-hostport":     benchHostPort,     // hostPort and bandwidth (bench_hostport.go)
	"bench-storm":        benchStorm,        // 250 ADDs and DELs at once (bench_storm.go)
	"bench-tput":         benchTput,         // iperf3 throughput (bench_tput.go)
	"bench-k8s":          benchK8s,          // pod startup latency in real clusters, reef and the reference plugins (bench_k8s.go)
	"demo-k8s":           demoK8s,           // the lab's Kubernetes cluster shown (demo_k8s.go)
	"conformance":        conformance,       // the upstream e2e suite against reef in a real cluster (conformance.go)
	"conformance-policy": conformancePolicy, // the network-policy-api conformance suite against reef (conformance_policy.go)
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: reef-lab demo|up|bench|speaker [flags]")
	}
	if cmd, ok := commands[args[0]]; ok {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return cmd(ctx, args[1:])
	}
	if agent, ok := agentCommands[args[0]]; ok { // serve-ports, probe: the NetworkPolicy probe agent (netpol_agent.go)
		return agent(args[1:])
	}
	fs := flag.NewFlagSet("reef-lab "+args[0], flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	pods := fs.Int("pods", 3, "pods per node")
	out := fs.String("out", "", "bench: write the report to this file")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch args[0] {
	case "demo":
		return demo(ctx, *bin, *pods, false)
	case "up":
		return demo(ctx, *bin, *pods, true)
	case "bench":
		return bench(ctx, *bin, *out)
	}
	return fmt.Errorf("unknown command %q: use demo, up or bench", args[0])
}
