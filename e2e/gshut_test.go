package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// Planned restarts (docs/bgp.md, "Planned restarts"): the ToR lab's three
// nodes announce the Service CIDR with BFD to their router, which runs
// BIRD 2 (TestGracefulShutdownBird) or FRR (TestGracefulShutdownFRR) with
// multipath, BFD, and GRACEFUL_SHUTDOWN honoured (local preference 0).
// Each node answers on a Service address of the CIDR (10.96.0.10:80, on
// its lo: kube-proxy's part), and a client behind the router (the laptop)
// asks it every 10 ms, its connections spread over the nodes by the
// router (layer-4 multipath hash). Then a1's reef gets SIGTERM, and once
// it has exited a1 goes away (its link down), as a node does that is
// stopped for a reboot. The test checks:
//
//   - the order of events at the router: a1's path to the CIDR carries
//     65535:0 and local preference 0 and the router's kernel route has no
//     next hop via a1, all while its session with a1 is still
//     established; only then does the session go down;
//   - meanwhile, the router has a stand-in for a1's block from another
//     node (docs/bgp.md, "Stand-ins"), unmarked, at local preference 100;
//   - a1's reef routes stay in its kernel after the stop;
//   - not one of the client's requests failed, and a1 answered some
//     before the stop.
//
// With bgp.gracefulShutdownTime: 0 (no drain) the test fails: the router
// never marks a1's path, and requests fail (BIRD keeps routing to a1 until
// BFD notices that reef is gone, FRR, over graceful restart, until the
// restart time ends): 1 of 185 and 3 of 118 in one run each.
func TestGracefulShutdownBird(t *testing.T) { testGracefulShutdown(t, "bird", false) }

func TestGracefulShutdownFRR(t *testing.T) { slowSuite(t); testGracefulShutdown(t, "frr", false) }

// TestPlannedRestartBird and TestPlannedRestartFRR are the same stop, but
// a1's reef is started again instead of a1 going away (systemctl
// restart): not one request to the Service address fails from the
// SIGTERM until a1 is back in the router's route and two seconds after.
// Meanwhile the laptop pings a pod on a1 every 10 ms, until the
// stand-ins for a1's block have ended and two seconds after, and all
// must be answered. BIRD, with bfd on, drops a1's own paths when the BFD
// session goes down; a2 and b1 stand in for a1's block (docs/bgp.md,
// "Stand-ins"), which the test sees at the router while its session with
// a1 is still up (the stop test checks that too). Without the stand-ins
// BIRD loses pings: 340 of 698 answered in one run.
func TestPlannedRestartBird(t *testing.T) { testGracefulShutdown(t, "bird", true) }

func TestPlannedRestartFRR(t *testing.T) { slowSuite(t); testGracefulShutdown(t, "frr", true) }

// TestPlannedRestartSlowFirstPassBird: the planned restart of
// TestPlannedRestartBird on nodes whose first reconcile pass, and so
// their first announcement, comes 6 s after the speaker connects (the
// reef-test hook REEF_TEST_FIRST_PASS_DELAY): a1's mesh sessions and
// their End-of-RIBs are in long before its table. a1's End-of-RIB must
// wait for its table (docs/bgp.md, "What a restarted node waits for"):
// sent before, it had a2 and b1 drop a1's stale block and claim, and
// with them their stand-ins at the router, and the pings to a1's pod
// went unanswered until a1's table came. The deferral timer (10 s from
// each session's start) does not end the wait first.
func TestPlannedRestartSlowFirstPassBird(t *testing.T) {
	slowSuite(t)
	opts := plannedStopNodes
	opts.Binary, opts.Env = "reef-test", []string{"REEF_TEST_FIRST_PASS_DELAY=6s"}
	l, nodes, laptop, tor := serviceToRLab(t, "bird", opts, plannedStopToR, nil)
	pa1 := newPod(t, nodes[0], "pa1")
	plannedStop(t, plannedStopCase{kind: "bird", l: l, nodes: nodes, laptop: laptop, tor: tor, pod: pa1.IP, restart: true, what: "restart, its first pass 6 s late"})
	// The scenario happened: a1's restarted speaker had both mesh
	// sessions up before its own paths were in.
	log := sinceLastStart(nodes[0].Log())
	in := strings.Index(log, "the node's own paths are in")
	if in < 0 {
		t.Fatalf("a1's restarted daemon does not log that its own paths are in")
	}
	for _, n := range nodes[1:] {
		if !strings.Contains(log[:in], `msg="Peer Up" component=bgp component=gobgp Topic=Peer Key=`+n.Address.String()) {
			t.Errorf("a1's session with %s came up only after a1's own paths were in: the test did not play a slow first pass", n.Name)
		}
	}
}

// sinceLastStart is the part of a daemon's log since its last start.
func sinceLastStart(log string) string {
	return log[max(strings.LastIndex(log, `msg="starting reef"`), 0):]
}

// serviceToRLab is the lab of the Service CIDR tests with a ToR: the cross
// nodes announcing serviceCIDR (opts adds to their options), a laptop, the
// ToR of kind (BIRD or FRR) with o, multipath hashing on the 5-tuple; the
// nodes' daemons started.
// before, if set, runs after the lab is made and before the daemons start.
func serviceToRLab(t *testing.T, kind string, opts lab.NodeOptions, o lab.ToROptions, before func([]*lab.Node)) (*lab.Lab, []*lab.Node, string, lab.ToR) {
	t.Helper()
	l := newLab(t)
	opts.Extra, opts.RouterASN = torPool, lab.RouterASN
	opts.BGPExtra = fmt.Sprintf("  serviceClusterIPs: [%s]\n", serviceCIDR)
	nodes, err := l.AddCrossNodes(opts)
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := l.AddLaptop()
	if err != nil {
		t.Fatal(err)
	}
	pools := append(slices.Clone(lab.DefaultToRPools), lab.ToRPool{CIDR: serviceCIDR, BlockSize: serviceCIDR.Bits()})
	tor := startToRWith(t, l, kind, nodes, pools, o)
	if err := tor.Multipath(); err != nil {
		t.Fatal(err)
	}
	run(t, l, l.Prefix+"-xr", "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=1")
	if before != nil {
		before(nodes)
	}
	if err := lab.StartAll(nodes); err != nil {
		t.Fatal(err)
	}
	return l, nodes, laptop, tor
}

// serveOnEveryNode puts svc's address on each node's lo and a TCP server
// on it (kube-proxy's stand-in), closed when the test ends.
func serveOnEveryNode(t *testing.T, l *lab.Lab, nodes []*lab.Node, svc netip.AddrPort) map[string]*lab.TCPServer {
	t.Helper()
	servers := map[string]*lab.TCPServer{}
	for _, n := range nodes {
		run(t, l, n.Netns, "ip", "addr", "add", svc.Addr().String()+"/32", "dev", "lo")
		srv, err := l.ListenTCP(n.Netns, svc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		servers[n.Name] = srv
	}
	return servers
}

func testGracefulShutdown(t *testing.T, kind string, restart bool) {
	l, nodes, laptop, tor := serviceToRLab(t, kind, plannedStopNodes, plannedStopToR, nil)
	pa1 := newPod(t, nodes[0], "pa1")
	what := "stop"
	if restart {
		what = "restart"
	}
	plannedStop(t, plannedStopCase{kind: kind, l: l, nodes: nodes, laptop: laptop, tor: tor, pod: pa1.IP, restart: restart, what: what})
}

// The nodes and router of the planned stop tests: BFD 300 ms × 3 with
// a long hold time, GRACEFUL_SHUTDOWN honoured.
var (
	plannedStopNodes = lab.NodeOptions{RouterExtra: bfdPeerExtra}
	plannedStopToR   = lab.ToROptions{Hold: bfdHold, BFD: 300 * time.Millisecond, GracefulShutdown: true}
)

// plannedStopCase is one planned stop of a1 (nodes[0]) in the lab of
// serviceToRLab with plannedStopNodes and plannedStopToR, its daemons
// started.
type plannedStopCase struct {
	kind    string // the router: "bird" or "frr"
	l       *lab.Lab
	nodes   []*lab.Node
	laptop  string
	tor     lab.ToR
	pod     netip.Addr // of a pod on a1
	restart bool       // a1's daemon starts again (else a1 goes away)
	what    string     // the stop, in messages: "stop", "restart", "package upgrade"
	// beforeStop, if set, runs with the client's requests and the pings
	// going, right before the SIGTERM: the package upgrade's dpkg -i,
	// whose postinst asks systemd for the try-restart the SIGTERM and
	// the start then play.
	beforeStop func()
}

// plannedStop runs c: the client's requests to the Service address and
// the checks of testGracefulShutdown's comment over a1's SIGTERM (and
// start, with c.restart).
func plannedStop(t *testing.T, c plannedStopCase) {
	kind, l, nodes, laptop, tor, restart, what := c.kind, c.l, c.nodes, c.laptop, c.tor, c.restart, c.what
	a1 := nodes[0]
	converge(t, nodes...)

	// The Service address on every node, kube-proxy's stand-in.
	svc := netip.AddrPortFrom(netip.MustParseAddr("10.96.0.10"), 80)
	servers := serveOnEveryNode(t, l, nodes, svc)
	router := l.Prefix + "-xr"
	var legs []netip.Addr
	for _, n := range nodes {
		legs = append(legs, n.Address)
	}
	slices.SortFunc(legs, netip.Addr.Compare)
	waitBFDUp(t, tor, nodes)
	eventually(t, 20*time.Second, func() string {
		out := run(t, l, router, "ip", "-4", "route", "show", "exact", serviceCIDR.String())
		for _, a := range legs {
			if !strings.Contains(out, "nexthop via "+a.String()+" ") {
				return fmt.Sprintf("the router's route to %s: %q, want a next hop via each node %v", serviceCIDR, strings.TrimSpace(out), legs)
			}
		}
		return ""
	})

	// What explains a reset, if one comes: the nodes' packets of the
	// Service's port and the router's route changes (ecmptrace_test.go).
	var trace *ecmpTrace
	if _, err := exec.LookPath("tcpdump"); err == nil {
		trace = startECMPTrace(t, nodes, router, serviceCIDR, int(svc.Port()))
	}
	// The client: a request every 10 ms, each a new connection that must
	// not lose its SYN (lab.Request).
	var mu sync.Mutex
	var failures, resets []string
	requests := 0
	stop := make(chan struct{})
	clientDone := make(chan struct{})
	go func() {
		defer close(clientDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			err := l.Request(laptop, svc, 900*time.Millisecond)
			mu.Lock()
			requests++
			switch line := time.Now().Format("15:04:05.000") + " " + err2s(err); {
			case err == nil:
			case errors.Is(err, syscall.ECONNRESET):
				resets = append(resets, line)
			default:
				failures = append(failures, line)
			}
			mu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-clientDone
	}()
	// More clients, each a request after the other without a pause, for
	// the evidence only (REEF_ECMP_TRACE_CLIENTS=<clients>): with more
	// connections open at a time, a change of the router's route meets
	// some. Their outcomes are logged, not judged.
	var extraReq, extraReset, extraOther int
	var extra sync.WaitGroup
	if n, _ := strconv.Atoi(os.Getenv("REEF_ECMP_TRACE_CLIENTS")); n > 0 {
		for range n {
			extra.Add(1)
			go func() {
				defer extra.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					err := l.Request(laptop, svc, 900*time.Millisecond)
					mu.Lock()
					extraReq++
					switch {
					case err == nil:
					case errors.Is(err, syscall.ECONNRESET):
						extraReset++
					default:
						extraOther++
					}
					mu.Unlock()
				}
			}()
		}
	}
	time.Sleep(time.Second) // a second of requests before the stop: the scenario, not a wait
	if len(servers["a1"].Peers()) == 0 {
		t.Fatalf("a1 answered none of the client's requests before the stop; the router's route: %s", run(t, l, router, "ip", "-4", "route", "show", "exact", serviceCIDR.String()))
	}
	routesBefore := reefRoutes(t, a1)
	var pings func() (int, int)
	if restart {
		// Pings every 10 ms, over the stop and the start, until the
		// stand-ins have ended and two seconds after.
		pings = pingUntil(t, laptop, c.pod.String(), "0.01")
	}
	if c.beforeStop != nil {
		c.beforeStop()
	}

	// SIGTERM, and the router watched meanwhile.
	stopped := make(chan error, 1)
	sigterm := time.Now()
	go func() { stopped <- a1.Stop() }()
	var drained, down, stoodIn time.Time
	var a2StandIns []string // what a2's reef status says meanwhile
	var drainedPaths []lab.ToRPath
	var stopErr error
	// a1's block: a2 and b1 announce it for a1 (stand-ins), next hop a1,
	// before the router's session with a1 goes down.
	block := netip.PrefixFrom(c.pod, lab.DefaultToRPools[0].BlockSize).Masked()
	for exited := false; !exited || down.IsZero(); {
		select {
		case stopErr = <-stopped:
			exited = true
		default:
		}
		if time.Since(sigterm) > 30*time.Second {
			t.Fatalf("30s after SIGTERM: reef exited %v, the router's session with a1 down at %v", exited, down)
		}
		s, err := tor.Session(a1.Address)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Established {
			if down.IsZero() {
				down = time.Now()
			}
			continue
		}
		if stoodIn.IsZero() {
			paths, err := tor.PathsTo(block)
			if err != nil {
				t.Fatal(err)
			}
			if slices.ContainsFunc(paths, func(p lab.ToRPath) bool { return p.From != a1.Address && p.LocalPref == 100 && !p.GShut }) {
				if s, err := tor.Session(a1.Address); err == nil && s.Established {
					stoodIn = time.Now()
					if st, err := nodes[1].Status(); err == nil {
						a2StandIns = st.GetStandIns()
					}
					t.Logf("%s after SIGTERM, session with a1 established: the router's paths to a1's block %s: %+v",
						time.Since(sigterm).Round(time.Millisecond), block, paths)
				}
			}
		}
		if !drained.IsZero() {
			continue
		}
		paths, err := tor.PathsTo(serviceCIDR)
		if err != nil {
			t.Fatal(err)
		}
		route := run(t, l, router, "ip", "-4", "route", "show", "exact", serviceCIDR.String())
		i := slices.IndexFunc(paths, func(p lab.ToRPath) bool { return p.From == a1.Address })
		if i >= 0 && paths[i].GShut && paths[i].LocalPref == 0 && !strings.Contains(route, "via "+a1.Address.String()+" ") {
			if s, err := tor.Session(a1.Address); err == nil && s.Established {
				drained, drainedPaths = time.Now(), paths
				t.Logf("%s after SIGTERM, session with a1 established: the router's paths to %s: %+v; its route: %s",
					time.Since(sigterm).Round(time.Millisecond), serviceCIDR, paths, strings.Join(strings.Fields(route), " "))
			}
		}
	}
	if stopErr != nil {
		t.Fatal(stopErr)
	}
	if drained.IsZero() {
		t.Errorf("the router never had a1's path to %s marked GRACEFUL_SHUTDOWN with local preference 0 and out of its route while the session was up", serviceCIDR)
	} else if !drained.Before(down) {
		t.Errorf("the router took a1's path out at %v, after its session went down at %v", drained, down)
	}
	for _, p := range drainedPaths {
		if p.From != a1.Address && (p.GShut || p.LocalPref != 100) {
			t.Errorf("during the drain the router has the path from %s at local preference %d (graceful shutdown %v); want 100, unmarked", p.From, p.LocalPref, p.GShut)
		}
	}
	if stoodIn.IsZero() {
		t.Errorf("the router never had a stand-in for a1's block %s (a path from another node, unmarked) while its session with a1 was up", block)
	} else if !slices.ContainsFunc(a2StandIns, func(s string) bool { return strings.HasPrefix(s, block.String()+" via "+a1.Address.String()+" to ") }) {
		t.Errorf("a2's status lists the stand-ins %q meanwhile, want %s via a1", a2StandIns, block)
	}
	if !drained.IsZero() {
		t.Logf("%s: SIGTERM at 0; a1 drained at the router after %s; the router's session with a1 down after %s",
			kind, drained.Sub(sigterm).Round(time.Millisecond), down.Sub(sigterm).Round(time.Millisecond))
	}
	if !strings.Contains(a1.Log(), "planned stop: Service traffic drained to the other nodes") {
		t.Errorf("a1 does not log the drain")
	}
	if got := reefRoutes(t, a1); !slices.Equal(got, routesBefore) {
		t.Errorf("a1's reef routes changed over the stop:\n%s\nwas\n%s", strings.Join(got, "\n"), strings.Join(routesBefore, "\n"))
	}

	if restart {
		// a1's reef starts again, as systemctl restart does, and a1
		// comes back into the router's route to the CIDR.
		if err := a1.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() string {
			out := run(t, l, router, "ip", "-4", "route", "show", "exact", serviceCIDR.String())
			if !strings.Contains(out, "nexthop via "+a1.Address.String()+" ") {
				return fmt.Sprintf("the router's route to %s after a1's restart: %q, want a next hop via a1", serviceCIDR, strings.TrimSpace(out))
			}
			return ""
		})
		// The stand-ins end once a1's own path is back at the router:
		// then it has a1's path alone, unmarked.
		eventually(t, 30*time.Second, func() string {
			paths, err := tor.PathsTo(block)
			if err != nil {
				return err.Error()
			}
			if len(paths) != 1 || paths[0].From != a1.Address || paths[0].GShut || paths[0].LocalPref != 100 {
				return fmt.Sprintf("the router's paths to a1's block %s after a1's restart: %+v, want a1's alone, unmarked", block, paths)
			}
			return ""
		})
		t.Logf("%s after SIGTERM: the stand-ins for a1's block have ended, a1's own path is back", time.Since(sigterm).Round(time.Millisecond))
		if !strings.Contains(a1.Log(), "mark taken off, the other nodes' stand-ins end") {
			t.Errorf("a1 does not log the end of the stand-ins")
		}
		answeredBefore := len(servers["a1"].Peers())
		time.Sleep(2 * time.Second) // two seconds of requests and pings with a1 back: the scenario, not a wait
		if len(servers["a1"].Peers()) == answeredBefore {
			t.Errorf("a1 answered none of the client's requests after its restart")
		}
		recv, sent := pings()
		if recv < sent {
			t.Errorf("%s: %d of %d pings (every 10 ms) to the pod %s on a1 answered over a1's planned %s", kind, recv, sent, c.pod, what)
		} else {
			t.Logf("%s: %d of %d pings (every 10 ms) to the pod %s on a1 answered over a1's planned %s", kind, recv, sent, c.pod, what)
		}
	} else {
		// a1 goes away, as a node stopped for a reboot does.
		run(t, l, a1.Netns, "ip", "link", "set", "eth0", "down")
		time.Sleep(2 * time.Second) // two seconds of requests without a1: the scenario, not a wait
	}
	close(stop)
	<-clientDone
	extra.Wait()
	mu.Lock()
	defer mu.Unlock()
	// A connection open while the router's ECMP set for the Service CIDR
	// changes may be hashed to another node in the middle of its
	// handshake, which resets it: any ECMP announcement of a Service does
	// this, and no announcement can avoid it. The stop changes the set
	// once (a1 drained), the restart twice (a1 back), and the client has
	// one request open at a time: at most that many resets. A request lost
	// for lack of a route (a timeout) or refused fails the test.
	maxResets := 1
	if restart {
		maxResets = 2
	}
	if extraReq > 0 {
		t.Logf("the extra clients (REEF_ECMP_TRACE_CLIENTS): %d requests, %d reset, %d failed otherwise", extraReq, extraReset, extraOther)
	}
	if trace != nil && (len(failures)+len(resets) > 0 || os.Getenv("REEF_ECMP_TRACE") != "") {
		// Each reset must be the router's doing: a node reset a
		// connection whose SYN had gone to another node.
		if _, unexplained := trace.explain(); unexplained > 0 {
			t.Errorf("%d RST(s) from a node for a connection whose SYN it had itself: not the router's ECMP change (the trace above)", unexplained)
		}
	}
	switch {
	case len(failures) > 0 || len(resets) > maxResets:
		t.Errorf("%d of %d requests to %s failed over a1's planned %s, and %d reset (at most %d: the router's ECMP changes):\n%s", len(failures), requests, svc, what,
			len(resets), maxResets, strings.Join(append(failures, resets...), "\n"))
	case len(resets) > 0:
		t.Logf("%s: %d requests to %s over a1's planned %s, none lost; %d reset where the router's ECMP set changed under an open connection:\n%s", kind, requests, svc, what,
			len(resets), strings.Join(resets, "\n"))
	default:
		t.Logf("%s: %d requests to %s over a1's planned %s, none failed; a1 answered %d of them", kind, requests, svc, what, len(servers["a1"].Peers()))
	}
}

// pingUntil pings dst from netns every interval seconds until the
// returned function is called, which stops ping (SIGINT, so that it
// prints its count) and returns the pings answered and sent.
func pingUntil(t *testing.T, netns, dst, interval string) func() (received, sent int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "nsenter", "--net="+lab.NetnsPath(netns), "--", "ping", "-i", interval, "-W", "1", dst)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return func() (int, int) {
		cancel()
		err := cmd.Wait()
		m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("ping output: %v\n%s", err, out.String())
		}
		sent, _ := strconv.Atoi(m[1])
		recv, _ := strconv.Atoi(m[2])
		return recv, sent
	}
}

// err2s is err's text, "" for nil.
func err2s(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
