package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestAddDelRacePasses: CNI operations and reconcile passes run side by
// side, with no lock between them (docs/design.md, "Who owns which kernel
// object"). bin/reef-test runs a whole pass right after each
// (REEF_TEST_PASS_LOOP), while 8 workers ADD 120 pods, with hostPorts and
// bandwidth limits, and DEL every other one, in three rounds. Every
// operation succeeds; once the operations end, each live pod has its veth,
// /32, ARP-filter element, hostPort and ifb, and talks; nothing of a deleted
// pod is left; and no pass removed or released anything, or repaired
// nftables: each would be a pass taking a half-done ADD for an orphan, or
// putting back what a DEL removed.
func TestAddDelRacePasses(t *testing.T) {
	l := newLab(t)
	n := startNode(t, l, "node1", lab.NodeOptions{Binary: "reef-test", Env: []string{"REEF_TEST_PASS_LOOP=1"},
		Extra: "pools:\n  - cidr: 10.244.0.0/16\n    blockSize: 26\n"})
	const rounds, perRound, workers = 3, 40, 8
	passesBefore, err := n.Passes()
	if err != nil {
		t.Fatal(err)
	}
	var live []*lab.Pod
	for r := range rounds {
		pods := make([]*lab.Pod, perRound)
		for i := range pods {
			k := r*perRound + i
			p, err := n.NewPodNetns("default", fmt.Sprintf("race-%d", k))
			if err != nil {
				t.Fatal(err)
			}
			if k%3 == 0 {
				p.CapabilityArgs = map[string]any{
					"portMappings": []lab.PortMapping{{HostPort: 20000 + k, ContainerPort: 80, Protocol: "tcp"}},
					"bandwidth":    lab.Bandwidth{EgressRate: 10_000_000, EgressBurst: 1_000_000, IngressRate: 10_000_000, IngressBurst: 1_000_000},
				}
			}
			pods[i] = p
		}
		if errs := inParallel(pods, workers, (*lab.Pod).Add); len(errs) > 0 {
			t.Fatalf("round %d: %d ADDs failed beside the passes, first: %v", r, len(errs), errs[0])
		}
		var gone []*lab.Pod
		for i, p := range pods {
			if i%2 == 0 {
				gone = append(gone, p)
			} else {
				live = append(live, p)
			}
		}
		if errs := inParallel(gone, workers, (*lab.Pod).Del); len(errs) > 0 {
			t.Fatalf("round %d: %d DELs failed beside the passes, first: %v", r, len(errs), errs[0])
		}
	}
	if err := n.WaitPasses(2, time.Minute); err != nil {
		t.Fatal(err)
	}
	passes, err := n.Passes()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d passes ran beside the operations", passes-passesBefore)
	if passes-passesBefore < 10 {
		t.Errorf("only %d passes ran: the operations did not meet passes", passes-passesBefore)
	}

	if got, want := len(allocations(t, n)), len(live); got != want {
		t.Errorf("%d allocations, want %d (the live pods)", got, want)
	}
	if got, want := len(reefVeths(t, n)), len(live); got != want {
		t.Errorf("%d reef veths, want %d: %v", got, want, reefVeths(t, n))
	}
	routes := strings.Join(reefRoutes(t, n), "\n")
	arp := nftPodSet(t, n)
	hostports := run(t, l, n.Netns, "nft", "list", "table", "inet", "reef-hostport")
	ifbs := run(t, l, n.Netns, "ip", "-br", "link", "show", "type", "ifb")
	limited := 0
	for _, p := range live {
		if !strings.Contains(routes+"\n", p.IP.String()+" dev ") {
			t.Errorf("pod %s (%s) has no /32 route", p.Name, p.IP)
		}
		if !arp[podSetKey(p)] {
			t.Errorf("pod %s (%s) has no ARP-filter element %q", p.Name, p.IP, podSetKey(p))
		}
		if pm, ok := p.CapabilityArgs["portMappings"].([]lab.PortMapping); ok {
			limited++
			if !strings.Contains(hostports, fmt.Sprintf("%d : %s . 80", pm[0].HostPort, p.IP)) {
				t.Errorf("pod %s (%s) lost hostPort %d", p.Name, p.IP, pm[0].HostPort)
			}
		}
	}
	if got := len(nonEmptyLines(ifbs)); got != limited {
		t.Errorf("%d ifbs, want %d (the live pods with an egress limit):\n%s", got, limited, ifbs)
	}
	if got := len(arp); got != len(live) {
		t.Errorf("%d ARP-filter elements, want %d", got, len(live))
	}
	for i := 0; i+1 < len(live); i += 7 {
		if _, err := live[i].Ping(live[i+1].IP); err != nil {
			t.Errorf("ping %s -> %s: %v", live[i].Name, live[i+1].Name, err)
		}
	}
	for _, line := range strings.Split(n.Log(), "\n") {
		for _, bad := range []string{"removing veth no pod owns", "released address", "repairing nftables", "removed an ifb",
			"repairing route", "removing route no pod or block needs", "adding route", "reconcile pass failed"} {
			if strings.Contains(line, bad) && !strings.Contains(line, "blackhole") {
				t.Errorf("a pass took a CNI operation's objects for its own to fix, or failed: %s", line)
			}
		}
	}
	if errs := inParallel(live, workers, (*lab.Pod).Del); len(errs) > 0 {
		t.Fatalf("%d DELs failed, first: %v", len(errs), errs[0])
	}
}
