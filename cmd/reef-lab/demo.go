package main

import (
	"context"
	"fmt"
	"os"
	"strings"

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

func demo(ctx context.Context, bin string, podsPerNode int, keep bool) error {
	say("building a one-node lab in network namespaces (nothing on this host's own network changes)")
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
	node, err := l.AddNode("node1", lab.NodeOptions{})
	if err != nil {
		return err
	}
	if err := node.Start(); err != nil {
		return err
	}
	fmt.Printf("node1: netns %s, underlay address %s, reef daemon running (log: %s)\n", node.Netns, node.Address, node.LogPath)

	say("creating %d pods through libcni and reef-cni with the one-line conflist", podsPerNode)
	fmt.Printf("%s\n", node.Conflist())
	var pods []*lab.Pod
	for i := 1; i <= podsPerNode; i++ {
		p, err := node.NewPod("default", fmt.Sprintf("web-%d", i))
		if err != nil {
			return err
		}
		pods = append(pods, p)
		fmt.Printf("  pod default/web-%d  netns %-22s ip %s\n", i, p.Netns, p.IP)
	}

	say("every pod pings every other pod (one hop through the node: TTL 63)")
	failed := 0
	for _, a := range pods {
		for _, b := range pods {
			if a == b {
				continue
			}
			ttl, err := a.Ping(b.IP)
			status := fmt.Sprintf("ok, ttl=%d", ttl)
			if err != nil {
				status, failed = "FAILED: "+err.Error(), failed+1
			}
			fmt.Printf("  %s -> %s  %s\n", a.Name, b.Name, status)
		}
	}
	ttl, err := pods[0].Ping(node.Address)
	fmt.Printf("  %s -> node1 (%s)  ttl=%d %v\n", pods[0].Name, node.Address, ttl, errString(err))

	say("what to look at")
	show(l, pods[0].Netns, "inside a pod: a /32 on eth0", "ip", "-4", "addr", "show", "eth0")
	show(l, pods[0].Netns, "inside a pod: everything via the link-local gateway", "ip", "route")
	show(l, pods[0].Netns, "inside a pod: the gateway's MAC is fixed, no ARP needed", "ip", "neigh")
	show(l, node.Netns, "on the node: one /32 per pod and a blackhole for the block", "ip", "route")
	show(l, node.Netns, "on the node: the pods' veths, MAC ee:ee:ee:ee:ee:ee", "ip", "-br", "link", "show", "type", "veth")
	fmt.Printf("\n$ reef status\n")
	out, _ := node.Reef("status")
	fmt.Print(out)
	fmt.Printf("\n$ reef ipam show --show-blocks --show-allocations\n")
	out, _ = node.Reef("ipam", "show", "--show-blocks", "--show-allocations")
	fmt.Print(out)

	if keep {
		say("lab is up; explore with: nsenter --net=/var/run/netns/%s bash   (Ctrl-C here tears it down)", node.Netns)
		fmt.Printf("reef CLI: %s/reef status --socket %s\n", bin, node.Socket)
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
	say("demo done: %d pods, all pings answered", len(pods))
	return nil
}

func errString(err error) string {
	if err != nil {
		return "FAILED: " + err.Error()
	}
	return "ok"
}
