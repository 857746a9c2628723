package lab

import (
	"fmt"
	"os/exec"
	"strings"
)

// splitTable is the nftables bridge table of Split, in the switch's
// namespace; DropNode has a table of its own (reeflab), so a split and
// dropped nodes combine.
const splitTable = "reefsplit"

// Split cuts the underlay between two groups of nodes, as a failed link
// between two racks does: the switch drops every frame from a port of one
// group to a port of the other, both ways, while the nodes of one group
// still reach each other and every link stays up (sessions across the cut
// stay established until their hold time runs out; new ones cannot open).
// A new Split replaces the previous one; Heal ends it.
func (l *Lab) Split(a, b []*Node) error {
	if len(a) == 0 || len(b) == 0 {
		return fmt.Errorf("split: both groups need a node (%d, %d)", len(a), len(b))
	}
	ports := func(g []*Node) string {
		var q []string
		for _, n := range g {
			q = append(q, fmt.Sprintf("%q", switchPort(l, n.Name)))
		}
		return "{ " + strings.Join(q, ", ") + " }"
	}
	pa, pb := ports(a), ports(b)
	return l.splitNft(fmt.Sprintf("table bridge %[1]s\ndelete table bridge %[1]s\ntable bridge %[1]s {\n  chain forward {\n"+
		"    type filter hook forward priority 0; policy accept;\n"+
		"    iifname %[2]s oifname %[3]s drop\n    iifname %[3]s oifname %[2]s drop\n  }\n}\n", splitTable, pa, pb))
}

// Heal ends the cut of Split (nothing if there is none).
func (l *Lab) Heal() error {
	return l.splitNft(fmt.Sprintf("table bridge %[1]s\ndelete table bridge %[1]s\n", splitTable))
}

func (l *Lab) splitNft(script string) error {
	cmd := exec.Command("nsenter", "--net="+NetnsPath(l.Switch), "--", "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %v: %s\n%s", l.Switch, err, out, script)
	}
	return nil
}

// switchPort is the name of a namespace's port on the switch (AddNode,
// AddHost): the last 15 characters of the lab prefix and its name.
func switchPort(l *Lab, name string) string {
	port := l.Prefix + name
	if len(port) > 15 {
		port = port[len(port)-15:]
	}
	return port
}
