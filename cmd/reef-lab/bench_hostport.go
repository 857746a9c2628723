package main

// reef-lab bench-hostport measures issue 13's figures:
//
//   - a pod's CNI ADD through libcni with two port mappings and a
//     bandwidth limit, alternating with plain ADDs on the same node;
//   - with 1,000 pods that have a hostPort each in reef's tables, in a
//     throw-away namespace: one pod's mapping added (ADD's batch), and a
//     drift check (the nftables part of a reconcile pass: desired state,
//     read the tables, diff).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/nat/nft"
)

type hostPortReport struct {
	command, loadStart, loadEnd string
	began                       time.Time
	took                        time.Duration
	plain, mapped               []time.Duration
	add, drift                  []time.Duration
	pods                        int
}

func benchHostPort(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab bench-hostport", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	out := fs.String("out", "", `write the report into this file as its "## hostPort and bandwidth" section`)
	adds := fs.Int("adds", 40, "ADDs per mode")
	pods := fs.Int("pods", 1000, "pods with a hostPort in the tables, for the nftables figures")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r := &hostPortReport{began: time.Now(), loadStart: tputLoad(), command: benchCommand("reef-lab bench-hostport", args), pods: *pods}
	say := func(format string, a ...any) { fmt.Fprintf(os.Stderr, "bench-hostport: "+format+"\n", a...) }
	say("%d ADDs per mode through libcni", *adds)
	if err := r.addBench(ctx, *bin, *adds); err != nil {
		return fmt.Errorf("bench-hostport: %w", err)
	}
	say("%d pods with a hostPort each: mapping added, drift check", *pods)
	if err := r.tableBench(*bin, *pods); err != nil {
		return fmt.Errorf("bench-hostport: %w", err)
	}
	r.took, r.loadEnd = time.Since(r.began), tputLoad()
	return printSection(r.markdown(), *out)
}

// addBench alternates a plain ADD and one with two port mappings and a
// bandwidth limit, on one node with the production reconcile interval.
func (r *hostPortReport) addBench(ctx context.Context, bin string, n int) error {
	l, err := lab.New(bin)
	if err != nil {
		return err
	}
	defer l.Close()
	node, err := l.AddNode("node1", lab.NodeOptions{ReconcileInterval: 30 * time.Second})
	if err != nil {
		return err
	}
	if err := node.Start(); err != nil {
		return err
	}
	for i := range n + 2 { // the first two of each warm up
		for _, mapped := range []bool{false, true} {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			p, err := node.NewPodNetns("bench", fmt.Sprintf("p%d-%t", i, mapped))
			if err != nil {
				return err
			}
			if mapped {
				p.CapabilityArgs = map[string]any{
					"portMappings": []lab.PortMapping{
						{HostPort: 20000 + i, ContainerPort: 80, Protocol: "tcp"},
						{HostPort: 20000 + i, ContainerPort: 53, Protocol: "udp"},
					},
					"bandwidth": lab.Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 10e6, EgressBurst: 80e3},
				}
			}
			t0 := time.Now()
			if err := p.Add(); err != nil {
				return err
			}
			d := time.Since(t0)
			if i < 2 {
				continue
			}
			if mapped {
				r.mapped = append(r.mapped, d)
			} else {
				r.plain = append(r.plain, d)
			}
		}
	}
	return nil
}

// tableBench programs reef's tables for pods pods with a hostPort each in
// a throw-away namespace of a lab's (named with the lab's prefix, so that
// a later lab removes it if this process dies), as the daemon does
// (package nat, in the namespace of the calling thread), and times what
// ADD and a reconcile pass do to them.
func (r *hostPortReport) tableBench(bin string, pods int) error {
	l, err := lab.New(bin)
	if err != nil {
		return err
	}
	defer l.Close()
	name := l.Prefix + "-hp"
	if err := l.AddNetns(name); err != nil {
		return err
	}
	runtime.LockOSThread() // this thread is left in the namespace: the process ends after the report
	target, err := netns.GetFromPath(lab.NetnsPath(name))
	if err != nil {
		return err
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		return err
	}
	pod := func(i int) nat.Pod {
		return nat.Pod{Veth: fmt.Sprintf("reef%011x", i), IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 244, byte(i >> 8), byte(i)})},
			Ports: []hostport.Mapping{{Proto: unix.IPPROTO_TCP, Port: uint16(10000 + i), PodPort: 80}}}
	}
	var all []nat.Pod
	for i := range pods {
		all = append(all, pod(i))
	}
	pools := []masq.Pool{{CIDR: netip.MustParsePrefix("10.244.0.0/16"), NATOutgoing: true}}
	k := nat.NewKernel()
	if err := k.Apply(nft.Diff(nat.Desired(pools, all), nil)); err != nil {
		return err
	}
	for i := range 200 {
		p := pod(pods + i)
		t0 := time.Now()
		if err := k.AddPod(p); err != nil {
			return err
		}
		r.add = append(r.add, time.Since(t0))
		if err := k.DelPod(p); err != nil {
			return err
		}
	}
	for range 50 {
		t0 := time.Now()
		want := nat.Desired(pools, all)
		have, err := k.Read(nat.IDs(want))
		if err != nil {
			return err
		}
		if p := nft.Diff(want, have); !p.Empty() {
			return errors.New("drift in a quiet namespace: " + p.Changes[0].Why)
		}
		r.drift = append(r.drift, time.Since(t0))
	}
	return nil
}

// benchMS writes a figure in milliseconds, "?" when there is none.
func benchMS(d time.Duration, ok bool) string {
	if !ok {
		return "?"
	}
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func (r *hostPortReport) markdown() string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	q := func(ds []time.Duration, p float64) string { return benchMS(meshQuantile(ds, p)) }
	w("## hostPort and bandwidth\n\n")
	w("From `sudo make bench`, which runs `%s`, on %s (%s). 1-minute load average %s at the start,\n", r.command, r.began.UTC().Format("2006-01-02 15:04 UTC"), meshSec(r.took), r.loadStart)
	w("%s at the end (2 cores; other work shows).\n\n", r.loadEnd)
	w("### Aims\n\nFrom issue 13, \"Measured in `make bench`\".\n\n")
	pm, pok := meshQuantile(r.mapped, 0.5)
	pp, ppok := meshQuantile(r.plain, 0.5)
	ratio := 0.0
	if pok && ppok && pp > 0 {
		ratio = float64(pm) / float64(pp)
	}
	w("- ADD p50 with two port mappings and a bandwidth limit at most 1.2x a plain ADD: %s vs %s, %.2fx: %s\n",
		benchMS(pm, pok), benchMS(pp, ppok), ratio, meshMet(pok && ppok && ratio <= 1.2))
	am, aok := meshQuantile(r.add, 0.5)
	w("- %d pods with a hostPort each: one mapping added in at most 1 ms: p50 %s (p90 %s): %s\n", r.pods, benchMS(am, aok), q(r.add, 0.9), meshMet(aok && am <= time.Millisecond))
	dm, dok := meshQuantile(r.drift, 0.5)
	w("- a drift check at most 10 ms: p50 %s (p90 %s): %s\n\n", benchMS(dm, dok), q(r.drift, 0.9), meshMet(dok && dm <= 10*time.Millisecond))
	w("### CNI ADD through libcni\n\nOne node (production reconcile interval, 30 s), the two kinds alternating, after two of each to warm up.\n")
	w("The mapped pod has TCP and UDP hostPorts and 10 Mbit/s each way (burst 80 kbit): its ADD claims the ports in the store,\n")
	w("adds the map elements with the ARP element, flushes the UDP port's conntrack entries, turns route_localnet on, and sets up\n")
	w("the tbf, the ingress qdisc with its redirect, and the ifb with its tbf.\n\n")
	w("| ADD | p50 | p90 | n |\n|---|---|---|---|\n")
	w("| plain | %s | %s | %d |\n", benchMS(pp, ppok), q(r.plain, 0.9), len(r.plain))
	w("| two hostPorts and a bandwidth limit | %s | %s | %d |\n\n", benchMS(pm, pok), q(r.mapped, 0.9), len(r.mapped))
	w("### nftables with %d hostPorts\n\nIn a throw-away namespace, through package nat as the daemon calls it: the three tables\n", r.pods)
	w("(inet reef-nat, arp reef, inet reef-hostport) with %d pods that have a hostPort each. \"Mapping added\" is one pod's\n", r.pods)
	w("ARP element, map element and hairpin pair in one batch (ADD's); the drift check computes the desired tables,\n")
	w("reads all three back (the sets' dumps at once on separate sockets) and diffs them.\n\n")
	w("| operation | p50 | p90 | n |\n|---|---|---|---|\n")
	w("| mapping added | %s | %s | %d |\n", benchMS(am, aok), q(r.add, 0.9), len(r.add))
	w("| drift check | %s | %s | %d |\n", benchMS(dm, dok), q(r.drift, 0.9), len(r.drift))
	return b.String()
}
