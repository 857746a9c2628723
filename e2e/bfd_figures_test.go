package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestBFDFigures measures what docs/bgp.md ("BFD") reports: the time from
// a node's failure to the router dropping its block, with and without
// BFD, BIRD and FRR, for a killed reef (SIGKILL) and a cut link, several
// runs each; and how many pings at 10 per second from the laptop to a pod
// on a node are answered over a planned restart of its reef. It only runs with REEF_BFD_FIGURES set (to the number of
// runs, default 3): it takes minutes, and asserts nothing about the times.
//
//	REEF_BFD_FIGURES=3 REEF_BIN_DIR=$PWD/bin go test -count=1 -timeout 30m -run '^TestBFDFigures$' -v ./e2e/
//
// The sessions use keepalive 3 s and hold 9 s, fast BGP timers, so that a
// run without BFD ends in seconds; graceful restart keeps a node's routes
// for 10 s after its session ends (REEF_TEST_BGP_RESTART_TIME; 120 s by
// default). BFD: 300 ms × 3.
func TestBFDFigures(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("REEF_BFD_FIGURES"))
	if os.Getenv("REEF_BFD_FIGURES") == "" {
		t.Skip("figures for docs/bgp.md: REEF_BFD_FIGURES=<runs> runs it")
	}
	if runs < 1 {
		runs = 3
	}
	var report []string
	for _, kind := range []string{"bird", "frr"} {
		for _, withBFD := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/bfd=%v", kind, withBFD), func(t *testing.T) {
				report = append(report, bfdFigures(t, kind, withBFD, runs)...)
			})
		}
	}
	t.Logf("figures (failure to the router's kernel route gone):\n%s", strings.Join(report, "\n"))
}

func bfdFigures(t *testing.T, kind string, withBFD bool, runs int) []string {
	l := newLab(t)
	extra := "      holdTime: 9s\n      keepaliveTime: 3s\n"
	o := lab.ToROptions{Hold: 9 * time.Second}
	if withBFD {
		extra += "      bfd: {minInterval: 300ms, multiplier: 3}\n"
		o.BFD = 300 * time.Millisecond
	}
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: torPool, RouterASN: lab.RouterASN, RouterExtra: extra,
		Binary: "reef-test", Env: []string{"REEF_TEST_BGP_RESTART_TIME=10s"}})
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := l.AddLaptop()
	if err != nil {
		t.Fatal(err)
	}
	tor := startToRWith(t, l, kind, nodes, lab.DefaultToRPools, o)
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a1, a2 := nodes[0], nodes[1]
	pa1 := newPod(t, a1, "pa1")
	newPod(t, a2, "pa2")
	converge(t, nodes...)
	router := l.Prefix + "-xr"
	if withBFD {
		waitBFDUp(t, tor, nodes)
	}
	// routed waits for the steady state before a step: the router routes
	// n's block by n's own path (its session up, BFD up), the mesh is up,
	// and no node's blocks are marked or stood in for: a step right after
	// a start or a planned restart measures those instead (docs/bgp.md,
	// "Stand-ins", what they do not cover).
	routed := func(n *lab.Node) {
		converge(t, nodes...)
		block := blocksOf(t, n)[0]
		eventually(t, 60*time.Second, func() string {
			if poolRoutes(t, l, router)[block] != n.Address.String() {
				return "the router does not route " + block + " via " + n.Name
			}
			for _, m := range nodes {
				st := mustStatus(t, m)
				if st.GetBlocksMarked() || len(st.GetStandIns()) > 0 {
					return fmt.Sprintf("%s: blocks marked %v, stands in for %v", m.Name, st.GetBlocksMarked(), st.GetStandIns())
				}
			}
			if s, err := tor.Session(n.PeerAddress()); err != nil || !s.Established {
				return fmt.Sprintf("the router's session with %s: %+v %v", n.Name, s, err)
			}
			if withBFD {
				if s, err := tor.BFDSessions(); err != nil || s[n.Address] != "up" {
					return fmt.Sprintf("BFD with %s: %v %v", n.Name, s, err)
				}
			}
			return ""
		})
	}
	var kills, cuts []time.Duration
	var answered []string
	for range runs {
		// A planned restart of a1, pinged from the laptop at 10 per second.
		routed(a1)
		ping := pingFrom(t, l, laptop, pa1.IP.String(), 100)
		time.Sleep(2 * time.Second) // pings before the restart: the scenario, not a wait
		if err := a1.Restart(); err != nil {
			t.Fatal(err)
		}
		recv, sent := ping()
		answered = append(answered, fmt.Sprintf("%d/%d", recv, sent))
		routed(a1)
		kills = append(kills, waitDropped(t, l, router, a1, blocksOf(t, a1)[0], a1.Kill))
		if err := a1.Start(); err != nil {
			t.Fatal(err)
		}
		routed(a2)
		cuts = append(cuts, waitDropped(t, l, router, a2, blocksOf(t, a2)[0], func() error { return l.IP(a2.Netns, "link", "set", "eth0", "down") }))
		run(t, l, a2.Netns, "ip", "link", "set", "eth0", "up")
		// The node's route to the other subnet went with the link.
		run(t, l, a2.Netns, "ip", "route", "replace", lab.SubnetB.String(), "via", lab.RouterA.String())
	}
	mode := "without BFD (hold 9 s, restart time 10 s)"
	if withBFD {
		mode = "with BFD 300 ms × 3 (hold 9 s, restart time 10 s)"
	}
	return []string{
		fmt.Sprintf("%-4s %s, reef killed: %s", kind, mode, durations(kills)),
		fmt.Sprintf("%-4s %s, link cut:    %s", kind, mode, durations(cuts)),
		fmt.Sprintf("%-4s %s, pings from behind the router to a pod on a node whose reef restarts (planned): %s answered", kind, mode, strings.Join(answered, ", ")),
	}
}

func durations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Round(10*time.Millisecond).String())
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return fmt.Sprintf("%s (median %s)", strings.Join(s, ", "), sorted[len(sorted)/2].Round(10*time.Millisecond))
}
