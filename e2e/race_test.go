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
// bandwidth limits, and DEL every other one, in three rounds; then every
// fourth live pod gets a new sandbox (same veth name) while passes release
// the old one, whose netns is gone. Every operation succeeds; once the
// operations end, each live pod has its veth,
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
	strictLog := len(n.Log())
	// Then a new sandbox for every fourth live pod, as a crashed sandbox
	// gives: the same pod name, so the same veth name, which the new ADD
	// takes over, and the old sandbox's netns gone without a DEL, so that
	// passes release its record while the new ADD runs.
	var renewed []*lab.Pod
	for i := 0; i < len(live); i += 4 {
		old := live[i]
		p, err := n.NewPodNetns(old.Namespace, old.Name)
		if err != nil {
			t.Fatal(err)
		}
		if _, limited := old.CapabilityArgs["bandwidth"]; limited {
			// Not its hostPort: the old record holds it until a pass frees it.
			p.CapabilityArgs = map[string]any{"bandwidth": old.CapabilityArgs["bandwidth"]}
		}
		if err := old.Remove(); err != nil {
			t.Fatal(err)
		}
		renewed = append(renewed, p)
		live[i] = p
	}
	if errs := inParallel(renewed, workers, (*lab.Pod).Add); len(errs) > 0 {
		t.Fatalf("%d ADDs of new sandboxes failed beside the passes, first: %v", len(errs), errs[0])
	}
	// Two passes that see an old sandbox's netns gone release it; one more
	// begun after.
	if err := n.WaitPasses(3, time.Minute); err != nil {
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
			if !strings.Contains(hostports, fmt.Sprintf("%d : %s . 80", pm[0].HostPort, p.IP)) {
				t.Errorf("pod %s (%s) lost hostPort %d", p.Name, p.IP, pm[0].HostPort)
			}
		}
		if _, ok := p.CapabilityArgs["bandwidth"]; ok {
			limited++
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
	// Until the new sandboxes, no pass had anything to repair or release.
	// After them, a pass rightly removes what the old sandboxes left (the
	// ifb, and the elements of a record that lost its veth to the new
	// sandbox) and releases their records; it still never removes a veth or
	// releases a pending record, and never fails.
	for i, line := range strings.Split(n.Log(), "\n") {
		bad := []string{"removing veth no pod owns", "its ADD never finished", "reconcile pass failed"}
		if i < strings.Count(n.Log()[:strictLog], "\n") {
			bad = append(bad, "repairing nftables", "removed an ifb", "released address", "repairing route",
				"removing route no pod or block needs", "adding route")
		}
		for _, b := range bad {
			if strings.Contains(line, b) && !strings.Contains(line, "blackhole") {
				t.Errorf("a pass took a CNI operation's objects for its own to fix, or failed: %s", line)
			}
		}
	}
	if errs := inParallel(live, workers, (*lab.Pod).Del); len(errs) > 0 {
		t.Fatalf("%d DELs failed, first: %v", len(errs), errs[0])
	}
}
