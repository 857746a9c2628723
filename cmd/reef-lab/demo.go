package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// say prints a step of the demo in a way that stands out from the output
// of the commands it runs.
func say(format string, args ...any) { fmt.Printf("\n\033[1m==> "+format+"\033[0m\n", args...) }

func show(l *lab.Lab, netns, label string, args ...string) {
	fmt.Printf("\n$ %s   # %s\n", strings.Join(args, " "), label)
	out, err := l.Run(netns, args...)
	fmt.Print(out)
	if err != nil {
		fmt.Println("(failed:", err, ")")
	}
}

const demoNodes = 3

func demo(ctx context.Context, bin string, podsPerNode int, keep bool) error {
	if podsPerNode < 1 {
		return fmt.Errorf("--pods %d: the demo shows pods talking, so it needs at least 1 pod per node", podsPerNode)
	}
	say("building a %d-node lab in network namespaces (nothing on this host's own network changes)", demoNodes)
	l, err := lab.New(bin)
	if err != nil {
		return err
	}
	defer func() {
		say("tearing the lab down")
		if err := l.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
		}
	}()
	nodes, err := l.AddMesh(demoNodes, "")
	if err != nil {
		return err
	}
	if err := lab.StartAll(nodes); err != nil {
		return err
	}
	for _, n := range nodes {
		fmt.Printf("%s: netns %s, underlay %s, reef daemon with a BGP session to every other node (log: %s)\n", n.Name, n.Netns, n.Address, n.LogPath)
	}

	say("creating %d pods on each node through libcni and reef-cni with the one-line conflist", podsPerNode)
	fmt.Printf("%s\n", nodes[0].Conflist())
	var pods []*lab.Pod
	for _, n := range nodes {
		for i := 1; i <= podsPerNode; i++ {
			p, err := n.NewPod("default", fmt.Sprintf("%s-web-%d", n.Name, i))
			if err != nil {
				return err
			}
			pods = append(pods, p)
			fmt.Printf("  %-5s pod %-22s ip %s\n", n.Name, p.Name, p.IP)
		}
	}
	say("waiting until every node routes to every other node's blocks (learned over BGP)")
	start := time.Now()
	if err := lab.WaitConverged(nodes, 30*time.Second); err != nil {
		return err
	}
	fmt.Printf("converged in %s\n", time.Since(start).Round(time.Millisecond))

	say("every pod pings every other pod: TTL 63 on one node (one routed hop), 62 across nodes (two)")
	failed := demoPings(pods)

	say("what to look at")
	demoShow(l, nodes, pods[0])

	if keep {
		say("lab is up; explore with: nsenter --net=/var/run/netns/%s bash   (Ctrl-C here tears it down)", nodes[0].Netns)
		for _, n := range nodes {
			fmt.Printf("reef CLI on %s: %s/reef status --socket %s\n", n.Name, bin, n.Socket)
		}
		<-ctx.Done()
	}
	for _, p := range pods {
		if err := p.Del(); err != nil {
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d pings failed", failed)
	}
	say("demo done: %d nodes, %d pods, all pings answered", len(nodes), len(pods))
	return nil
}

// demoPings pings every pod from every other and returns how many failed.
func demoPings(pods []*lab.Pod) int {
	failed := 0
	for _, a := range pods {
		var line []string
		for _, b := range pods {
			if a == b {
				continue
			}
			ttl, err := a.Ping(b.IP)
			if err != nil {
				failed++
				line = append(line, b.Name+":FAILED")
				continue
			}
			line = append(line, fmt.Sprintf("%s:ttl=%d", b.Name, ttl))
		}
		fmt.Printf("  %s -> %s\n", a.Name, strings.Join(line, " "))
	}
	return failed
}

// demoShow shows a pod's address and routes, every node's reef routes,
// and reef status and reef ipam show on the first node.
func demoShow(l *lab.Lab, nodes []*lab.Node, pod *lab.Pod) {
	show(l, pod.Netns, "inside a pod: a /32 on eth0", "ip", "-4", "addr", "show", "eth0")
	show(l, pod.Netns, "inside a pod: everything via the link-local gateway", "ip", "route")
	for _, n := range nodes {
		show(l, n.Netns, n.Name+": /32 per local pod, blackhole for its own block, one route per other node's block", "ip", "route", "show", "proto", "reef")
	}
	fmt.Printf("\n$ reef status   # on %s\n", nodes[0].Name)
	out, _ := nodes[0].Reef("status")
	fmt.Print(out)
	fmt.Printf("\n$ reef ipam show --show-blocks   # on %s\n", nodes[0].Name)
	out, _ = nodes[0].Reef("ipam", "show", "--show-blocks")
	fmt.Print(out)
}
