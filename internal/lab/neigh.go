package lab

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// The kernel keeps one ARP table for all network namespaces, and its
// garbage-collection limits (net.ipv4.neigh.default.gc_thresh3, 1024 on
// Debian) count every namespace's dynamic entries, the host's included. A
// lab of tens of nodes in a full mesh would fill it ("neighbor table
// overflow") and starve the host's own ARP. So nodes on one bridge know
// each other through permanent entries, which the limits do not count,
// and never ARP for each other.

// macOf returns the MAC of dev in netns.
func (l *Lab) macOf(netns, dev string) (string, error) {
	out, err := l.Run(netns, "ip", "-j", "link", "show", "dev", dev)
	if err != nil {
		return "", err
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		return "", fmt.Errorf("MAC of %s in %s: %q", dev, netns, out)
	}
	return links[0].Address, nil
}

// pinNeighbors adds permanent underlay neighbour entries between n and every
// node already on bridge, both ways.
func (l *Lab) pinNeighbors(n *Node, bridge string) error {
	mac, err := l.macOf(n.Netns, "eth0")
	if err != nil {
		return err
	}
	n.mac, n.bridge = mac, bridge
	var mine strings.Builder
	for _, m := range l.Nodes() {
		if m == n || m.bridge != bridge {
			continue
		}
		fmt.Fprintf(&mine, "neigh replace %s lladdr %s dev eth0 nud permanent\n", m.Address, m.mac)
		if err := l.ipBatch(m.Netns, fmt.Sprintf("neigh replace %s lladdr %s dev eth0 nud permanent\n", n.Address, mac)); err != nil {
			return err
		}
	}
	return l.ipBatch(n.Netns, mine.String())
}

// ipBatch runs `ip -batch -` in netns with the given commands.
func (l *Lab) ipBatch(netns, cmds string) error {
	if cmds == "" {
		return nil
	}
	cmd := exec.Command("nsenter", "--net="+NetnsPath(netns), "--", "ip", "-batch", "-")
	cmd.Stdin = strings.NewReader(cmds)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("in %s: ip -batch: %v: %s", netns, err, out)
	}
	return nil
}
