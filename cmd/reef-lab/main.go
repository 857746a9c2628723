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

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: reef-lab demo|up|bench|speaker [flags]")
	}
	if args[0] == "speaker" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return speaker(ctx, args[1:])
	}
	if args[0] == "demo-cri" || args[0] == "bench-cri" { // containerd's CRI: flags of their own (cri.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return cri(ctx, args[0], args[1:])
	}
	if args[0] == "bench-mesh" { // multi-node benchmarks: flags of its own (bench_mesh.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return benchMesh(ctx, args[1:])
	}
	if args[0] == "bench-sim" { // the block protocol simulated: flags of its own (bench_sim.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return benchSim(ctx, args[1:])
	}
	if args[0] == "bench-policy" { // NetworkPolicy's cost: flags of its own (bench_policy.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return benchPolicy(ctx, args[1:])
	}
	if args[0] == "bench-metrics" { // the metrics listener's cost: flags of its own (bench_metrics.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return benchMetrics(ctx, args[1:])
	}
	if args[0] == "bench-hostport" { // hostPort and bandwidth: flags of its own (bench_hostport.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return benchHostPort(ctx, args[1:])
	}
	if args[0] == "bench-storm" { // 250 ADDs and DELs at once: flags of its own (bench_storm.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return benchStorm(ctx, args[1:])
	}
	if args[0] == "bench-tput" { // iperf3 throughput: flags of its own (bench_tput.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return benchTput(ctx, args[1:])
	}
	if args[0] == "bench-k8s" { // pod startup latency in real clusters, reef and the reference plugins: flags of its own (bench_k8s.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return benchK8s(ctx, args[1:])
	}
	if args[0] == "demo-k8s" { // the lab's Kubernetes cluster shown (demo_k8s.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return demoK8s(ctx, args[1:])
	}
	if args[0] == "conformance" { // the upstream e2e suite against reef in a real cluster (conformance.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return conformance(ctx, args[1:])
	}
	if args[0] == "conformance-policy" { // the network-policy-api conformance suite against reef (conformance_policy.go)
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		return conformancePolicy(ctx, args[1:])
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
