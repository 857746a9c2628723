package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestCrashRestartSlowFirstPassBird: a router without BFD keeps a node's
// routes over a crash of its daemon, also when the new daemon's first
// reconcile pass is slow. The ToR lab's nodes with their router (graceful
// restart on, no BFD); the laptop pings a pod on a1 at 10 per second while
// a1's reef is killed (SIGKILL) and started again with its first pass held
// 6 s (the reef-test hook REEF_TEST_FIRST_PASS_DELAY), so that its
// session with the router is up seconds before its table is in GoBGP.
// The kernel kept a1's forwarding state, so the new daemon starts as a
// restarting speaker (Restart State and Forwarding State bits, daemon/
// restart.go): the router keeps a1's stale routes until a1's End-of-RIB,
// which follows a1's table. Every ping is answered. Started without the
// bits, as before, the router dropped a1's block when the session came
// up (Forwarding State bit clear) and had it again only after the first
// pass: 77 of 116 pings answered with BIRD, 74 of 116 with FRR.
func TestCrashRestartSlowFirstPassBird(t *testing.T) { testCrashRestartSlowFirstPass(t, "bird") }

func TestCrashRestartSlowFirstPassFRR(t *testing.T) {
	slowSuite(t)
	testCrashRestartSlowFirstPass(t, "frr")
}

func testCrashRestartSlowFirstPass(t *testing.T, kind string) {
	timerBound(t)
	needNATTools(t, "ping")
	l := newLab(t)
	nodes, err := l.AddCrossNodes(lab.NodeOptions{Extra: torPool, RouterASN: lab.RouterASN,
		Binary: "reef-test", Env: []string{"REEF_TEST_FIRST_PASS_DELAY=6s"}})
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := l.AddLaptop()
	if err != nil {
		t.Fatal(err)
	}
	startToR(t, l, kind, nodes, lab.DefaultToRPools, "")
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	a1 := nodes[0]
	pa := newPod(t, a1, "pa")
	converge(t, nodes...)
	router := l.Prefix + "-xr"
	block := blocksOf(t, a1)[0]
	eventually(t, 20*time.Second, func() string {
		if via := poolRoutes(t, l, router)[block]; via != a1.Address.String() {
			return "the router's route to a1's block " + block + " is via " + via
		}
		if _, err := l.Ping(laptop, pa.IP); err != nil {
			return "laptop -> pa: " + err.Error()
		}
		return ""
	})

	stop := pingUntil(t, laptop, pa.IP.String(), "0.1")
	// A second of pings before the crash and one while the daemon is
	// away: the scenario, not waits for the daemon.
	time.Sleep(time.Second)
	if err := a1.Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if err := a1.Start(); err != nil {
		t.Fatal(err)
	}
	const in = "the node's own paths are in"
	eventually(t, time.Minute, func() string {
		if !strings.Contains(sinceLastStart(a1.Log()), in) {
			return "a1's new daemon does not log that its own paths are in"
		}
		return ""
	})
	if err := a1.WaitPass(time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // pings after a1's End-of-RIB: the scenario
	recv, sent := stop()
	if recv != sent {
		t.Errorf("laptop -> pa on a1 over a crash of a1's reef and a slow first pass: %d of %d pings answered", recv, sent)
	} else {
		t.Logf("laptop -> pa on a1 over a crash of a1's reef and a slow first pass: %d of %d pings answered", recv, sent)
	}
	if via := poolRoutes(t, l, router)[block]; via != a1.Address.String() {
		t.Errorf("after a1's restart the router's route to its block %s is via %q, want %s", block, via, a1.Address)
	}
	// The scenario happened: the new daemon started as a restarting
	// speaker, and its session with the router was up before its own
	// paths were in.
	log := sinceLastStart(a1.Log())
	if !strings.Contains(log, "plannedRestart=false restarting=true") {
		t.Errorf("a1's new daemon did not start as a restarting speaker with the kernel's routes kept")
	}
	if i := strings.Index(log, in); !strings.Contains(log[:max(i, 0)], `msg="Peer Up" component=bgp component=gobgp Topic=Peer Key=`+lab.RouterLeg(a1.Address).String()) {
		t.Errorf("a1's session with the router came up only after its own paths were in: the test did not play a slow first pass")
	}
}
