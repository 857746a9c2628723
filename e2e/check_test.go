package e2e

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/internal/lab"
)

// TestCheckLimitsAndElements: CNI CHECK fails, as the spec asks, when a
// pod's traffic shaping or firewall elements are missing: its tbf, its
// hostPort element, its ARP-filter element, each deleted by hand, and
// names each; it passes once an element is back. No pass runs meanwhile (the
// reconcile interval is long), so nothing is repaired under the test.
func TestCheckLimitsAndElements(t *testing.T) {
	needNATTools(t, "nft", "tc")
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{ReconcileInterval: 10 * time.Minute})
	p, err := n.NewPodNetns("default", "checked")
	if err != nil {
		t.Fatal(err)
	}
	p.CapabilityArgs = map[string]any{
		"portMappings": []lab.PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}},
		"bandwidth":    lab.Bandwidth{IngressRate: 10e6, IngressBurst: 80e3, EgressRate: 10e6, EgressBurst: 80e3},
	}
	if err := p.Add(); err != nil {
		t.Fatal(err)
	}
	if err := p.Check(); err != nil {
		t.Fatalf("CHECK right after ADD: %v", err)
	}
	veth, ip := p.Result.Interfaces[0].Name, p.IP.String()
	for _, c := range []struct {
		name      string
		del, back []string
		want      string
	}{
		{"hostPort element", []string{"nft", "delete", "element", "inet", "reef-hostport", "hostports4", "{ tcp . 8080 }"},
			[]string{"nft", "add", "element", "inet", "reef-hostport", "hostports4", "{ tcp . 8080 : " + ip + " . 80 }"},
			"element tcp . 8080 : " + ip + " . 80 of set hostports4 in table inet reef-hostport is missing"},
		{"ARP-filter element", []string{"nft", "delete", "element", "arp", "reef", "pod-addrs", `{ "` + veth + `" . ` + ip + " }"},
			[]string{"nft", "add", "element", "arp", "reef", "pod-addrs", `{ "` + veth + `" . ` + ip + " }"},
			`element "` + veth + `" . ` + ip + " of set pod-addrs in table arp reef is missing"},
		// Last: a tbf put back by hand would not be reef's to the byte.
		{"tbf", []string{"tc", "qdisc", "del", "dev", veth, "root"}, nil, "tbf on " + veth + ": rate 10Mbit burst 80kbit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			run(t, l, n.Netns, c.del...)
			var e *types.Error
			if err := p.Check(); !errors.As(err, &e) || e.Code != 101 || !strings.Contains(e.Msg, c.want) {
				t.Errorf("CHECK without the pod's %s: %v, want CNI code 101 naming %q", c.name, err, c.want)
			}
			if c.back == nil {
				return
			}
			run(t, l, n.Netns, c.back...)
			if err := p.Check(); err != nil {
				t.Errorf("CHECK with the %s back: %v", c.name, err)
			}
		})
	}
	if err := p.Del(); err != nil {
		t.Fatal(err)
	}
}
