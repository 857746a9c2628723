package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestFailoverFigures measures what BENCHMARKS.md ("Failover") reports:
// a client behind the router starts a request to a Service address every
// 10 ms, each a new TCP connection with a 900 ms timeout, while the ToR
// lab's three nodes announce the Service CIDR and each answers on the
// address (kube-proxy's part, as in TestGracefulShutdownBird); the router,
// BIRD 2 or FRR with multipath, spreads the connections over the nodes.
// Then a1 fails in one of three ways, several runs each, with BFD
// (300 ms × 3) and without:
//
//   - link cut: a1's eth0 goes down, the node is gone for the router;
//   - reef killed: a1's reef gets SIGKILL and a1 drops the Service's
//     traffic (a blackhole route in place of its address), a node whose
//     software died while its kernel lives on;
//   - planned restart: a1's reef gets SIGTERM and starts again;
//   - package upgrade (upgradeFigures, a lab of its own): a1 runs reef
//     from the installed .deb and the next version is installed over it
//     with dpkg, its postinst's try-restart played.
//
// For each it records how many requests failed and how long after the
// failure the last failed one started: from then on every request
// succeeded, through the other nodes. It runs only with
// REEF_FAILOVER_FIGURES set (to the number of runs, default 3), asserts
// nothing about the times, and with REEF_FAILOVER_OUT set writes its
// section into that markdown file (lab.WriteSection): `make bench-failover`.
// It builds the packages first (N and one more version per run: `make
// package`, 30 to 45 s each here) and holds lockPackageTests over each
// upgrade lab.
//
// The sessions use keepalive 3 s and hold 9 s, and graceful restart keeps
// a node's paths for 10 s (REEF_TEST_BGP_RESTART_TIME), so that the runs
// without BFD end in seconds; with reef's defaults (hold 30 s, restart
// time 120 s) those figures grow accordingly.
func TestFailoverFigures(t *testing.T) {
	if os.Getenv("REEF_FAILOVER_FIGURES") == "" {
		t.Skip("figures for BENCHMARKS.md: REEF_FAILOVER_FIGURES=<runs> runs it")
	}
	runs, _ := strconv.Atoi(os.Getenv("REEF_FAILOVER_FIGURES"))
	if runs < 1 {
		runs = 3
	}
	// The packages of the upgrades, N and N+1 to N+runs, built before
	// any lab runs, so that the builds do not share the CPU with one.
	needTools(t, "dpkg", "dpkg-deb", "setpriv", "unshare", "make", "git")
	pkgs := []*builtPackages{packages.build(t, "")}
	for i := range runs {
		pkgs = append(pkgs, packages.build(t, fmt.Sprintf("%s.%d", pkgs[0].Version, i+1)))
	}
	var rows []failoverRow
	for _, kind := range []string{"bird", "frr"} {
		for _, withBFD := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/bfd=%v", kind, withBFD), func(t *testing.T) {
				row := failoverFigures(t, kind, withBFD, runs)
				row.upgrade = upgradeFigures(t, kind, withBFD, pkgs)
				rows = append(rows, row)
			})
		}
	}
	md := failoverSection(rows, runs)
	t.Logf("\n%s", md)
	// Only a run of every router and setting makes the section.
	if out := os.Getenv("REEF_FAILOVER_OUT"); out != "" && !t.Failed() && len(rows) == 4 {
		if err := lab.WriteSection(out, md); err != nil {
			t.Fatal(err)
		}
	}
}

// failoverRow is one router and BFD setting: an outcome per run of each
// failure.
type failoverRow struct {
	router  string
	bfd     bool
	cut     []outage
	killed  []outage
	restart []outage
	upgrade []outage
}

// outage is what the client saw over one failure: how many requests it
// started and how many failed, and when the last failed one started,
// counted from the failure.
type outage struct {
	requests, failed int
	last             time.Duration
}

// failoverLab is the lab of the figures: the ToR lab's nodes serving the
// Service address svc, with kind's router; before (serviceToRLab's) runs
// before the daemons start. ready waits until the router routes the
// Service CIDR over every node (and BFD is up with a1): the lab as before
// a failure.
func failoverLab(t *testing.T, kind string, withBFD bool, before func([]*lab.Node)) (l *lab.Lab, nodes []*lab.Node, laptop string, svc netip.AddrPort, ready func()) {
	extra := "      holdTime: 9s\n      keepaliveTime: 3s\n"
	o := lab.ToROptions{Hold: 9 * time.Second, GracefulShutdown: true}
	if withBFD {
		extra += "      bfd: {minInterval: 300ms, multiplier: 3}\n"
		o.BFD = 300 * time.Millisecond
	}
	l, nodes, laptop, tor := serviceToRLab(t, kind, lab.NodeOptions{RouterExtra: extra,
		Binary: "reef-test", Env: []string{"REEF_TEST_BGP_RESTART_TIME=10s"}}, o, before)
	router := l.Prefix + "-xr"
	converge(t, nodes...)
	svc = netip.AddrPortFrom(netip.MustParseAddr("10.96.0.10"), 80)
	serveOnEveryNode(t, l, nodes, svc)
	ready = func() {
		t.Helper()
		eventually(t, 60*time.Second, func() string {
			out := run(t, l, router, "ip", "-4", "route", "show", "exact", serviceCIDR.String())
			for _, n := range nodes {
				if !strings.Contains(out, "nexthop via "+n.Address.String()+" ") {
					return fmt.Sprintf("the router's route to %s: %q, want a next hop via %s", serviceCIDR, strings.TrimSpace(out), n.Name)
				}
			}
			if withBFD {
				if s, err := tor.BFDSessions(); err != nil || s[nodes[0].Address] != "up" {
					return fmt.Sprintf("the router's BFD sessions: %v %v", s, err)
				}
			}
			return ""
		})
	}
	return l, nodes, laptop, svc, ready
}

func failoverFigures(t *testing.T, kind string, withBFD bool, runs int) failoverRow {
	l, nodes, laptop, svc, ready := failoverLab(t, kind, withBFD, nil)
	a1 := nodes[0]
	row := failoverRow{router: kind, bfd: withBFD}
	for range runs {
		ready()
		row.cut = append(row.cut, clientOver(t, l, laptop, svc, "link cut", func() {
			run(t, l, a1.Netns, "ip", "link", "set", "eth0", "down")
		}, 15*time.Second))
		run(t, l, a1.Netns, "ip", "link", "set", "eth0", "up")
		// a1's routes through the router went with the link.
		run(t, l, a1.Netns, "ip", "route", "replace", lab.SubnetB.String(), "via", lab.RouterA.String())
		run(t, l, a1.Netns, "ip", "route", "replace", lab.LaptopNet.String(), "via", lab.RouterLeg(a1.Address).String())

		ready()
		row.killed = append(row.killed, clientOver(t, l, laptop, svc, "reef killed", func() {
			if err := a1.Kill(); err != nil {
				t.Fatal(err)
			}
			run(t, l, a1.Netns, "ip", "addr", "del", svc.Addr().String()+"/32", "dev", "lo")
			run(t, l, a1.Netns, "ip", "route", "add", "blackhole", svc.Addr().String()+"/32")
		}, 15*time.Second))
		run(t, l, a1.Netns, "ip", "route", "del", "blackhole", svc.Addr().String()+"/32")
		run(t, l, a1.Netns, "ip", "addr", "add", svc.Addr().String()+"/32", "dev", "lo")
		if err := a1.Start(); err != nil {
			t.Fatal(err)
		}

		ready()
		row.restart = append(row.restart, clientOver(t, l, laptop, svc, "planned restart", func() {
			if err := a1.Restart(); err != nil {
				t.Fatal(err)
			}
			ready()
		}, 2*time.Second))
	}
	return row
}

// upgradeFigures is the package upgrade column: in a lab of its own, a1
// runs reef from the installed package pkgs[0] (installAsUnit, as
// TestPackageUpgradeServiceBird does; a2 and b1 run the lab's daemon as
// in failoverFigures), and each run installs the next of pkgs over it
// with dpkg and plays the try-restart its postinst asks of systemd
// (SIGTERM, the new /usr/bin/reef started as reef.service does), until
// a1 is back in the router's route. The installed daemon is reef, not
// reef-test: its graceful restart time is reef's own (120 s), which a
// planned stop does not wait for.
func upgradeFigures(t *testing.T, kind string, withBFD bool, pkgs []*builtPackages) []outage {
	lockPackageTests(t)
	cleanInstalled(t)
	var env *pkgEnv
	l, nodes, laptop, svc, ready := failoverLab(t, kind, withBFD, func(nodes []*lab.Node) {
		env, _ = installAsUnit(t, nodes[0].Lab, nodes[0], pkgs[0])
	})
	a1 := nodes[0]
	var out []outage
	for _, next := range pkgs[1:] {
		ready()
		out = append(out, clientOver(t, l, laptop, svc, "package upgrade", func() {
			installOver(t, env, next)
			if err := a1.Restart(); err != nil {
				t.Fatal(err)
			}
			ready()
		}, 2*time.Second))
		checkUpgraded(t, next)
	}
	return out
}

// clientOver runs the client: a second of requests, then fail, then
// after more requests, and returns what the requests started from fail
// on saw. It logs the first failed requests of what, with their errors.
func clientOver(t *testing.T, l *lab.Lab, netns string, svc netip.AddrPort, what string, fail func(), after time.Duration) outage {
	t.Helper()
	type result struct {
		at  time.Time
		err error
	}
	var mu sync.Mutex
	var results []result
	var wg sync.WaitGroup
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			wg.Add(1)
			go func(at time.Time) {
				defer wg.Done()
				err := l.Request(netns, svc, 900*time.Millisecond)
				mu.Lock()
				results = append(results, result{at, err})
				mu.Unlock()
			}(time.Now())
		}
	}()
	time.Sleep(time.Second) // a second of requests before the failure: the scenario, not a wait
	failed := time.Now()
	fail()
	time.Sleep(after) // requests after the failure: the scenario, not a wait
	close(stop)
	<-done
	wg.Wait()
	slices.SortFunc(results, func(a, b result) int { return a.at.Compare(b.at) })
	var o outage
	var errs []string
	for _, r := range results {
		if r.at.Before(failed) {
			if r.err != nil {
				t.Errorf("a request at %s, before the %s, failed: %v", r.at.Format("15:04:05.000"), what, r.err)
			}
			continue
		}
		o.requests++
		if r.err != nil {
			o.failed++
			o.last = max(o.last, r.at.Sub(failed))
			if len(errs) < 5 {
				errs = append(errs, fmt.Sprintf("%s after: %v", r.at.Sub(failed).Round(time.Millisecond), r.err))
			}
		}
	}
	if o.failed > 0 {
		t.Logf("%s: %d of %d requests failed, the last %s after; the first:\n%s", what, o.failed, o.requests, o.last.Round(time.Millisecond), strings.Join(errs, "\n"))
	}
	return o
}

// failoverSection renders BENCHMARKS.md's "## Failover".
func failoverSection(rows []failoverRow, runs int) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Failover\n\n")
	w("A client behind the ToR starts a request to a Service address every 10 ms (each a new TCP\n")
	w("connection, 900 ms timeout) while the ToR lab's three nodes announce the Service CIDR\n")
	w("(`bgp.serviceClusterIPs`) and each answers on the address (kube-proxy's part); the router, BIRD 2\n")
	w("or FRR with multipath and a layer-4 hash, spreads the connections over the nodes and honours\n")
	w("GRACEFUL_SHUTDOWN (docs/bgp.md, \"Planned restarts\"). Then node a1 fails, %d runs each:\n\n", runs)
	w("- **link cut**: a1's eth0 down, the node gone for the router (as a node that loses power);\n")
	w("- **reef killed**: `kill -9` of a1's reef and a1 dropping the Service's traffic (a blackhole route\n")
	w("  in place of the address): software dead, kernel alive, so the BGP connection closes at once;\n")
	w("- **planned restart**: SIGTERM to a1's reef, then a new daemon, until a1 is back in the route;\n")
	w("- **package upgrade**: in a lab of its own, a1 runs reef from the installed .deb, started as\n")
	w("  reef.service runs it, and the next version is installed over it with `dpkg -i`; the run plays\n")
	w("  the `systemctl try-restart` its postinst asks for (SIGTERM, then the new /usr/bin/reef) until a1\n")
	w("  is back in the route (`TestPackageUpgradeServiceBird` and `...FRR` check the same with more);\n")
	w("  the installed daemon is reef, not reef-test, with reef's restart time, which a planned stop\n")
	w("  does not wait for.\n\n")
	w("Each cell: per run, the time from the failure to the start of the last failed request (every\n")
	w("later request succeeded, through the other nodes), and failed of all requests started after the\n")
	w("failure. BFD 300 ms × 3 on both sides; BGP keepalive 3 s, hold 9 s, graceful restart time 10 s\n")
	w("(`REEF_TEST_BGP_RESTART_TIME`, the reef-test binary) so that the runs without BFD end in seconds:\n")
	w("with reef's defaults (hold 30 s, restart time 120 s) those grow to the hold and restart times.\n\n")
	w("| router | BFD | link cut | reef killed | planned restart: failed requests | package upgrade: failed requests |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		name := map[string]string{"bird": "BIRD " + upstreamVersion("bird2"), "frr": "FRR " + upstreamVersion("frr")}[r.router]
		bfd := "off"
		if r.bfd {
			bfd = "300 ms × 3"
		}
		w("| %s | %s | %s | %s | %s | %s |\n", name, bfd, outages(r.cut), outages(r.killed), failedOf(r.restart), failedOf(r.upgrade))
	}
	w("\nWithout BFD a cut link is noticed when the hold time has passed since the node's last keepalive,\n")
	w("so up to 9 s after the cut. When only reef dies, the node's kernel closes the BGP connection at\n")
	w("once. Without BFD the router starts a graceful restart and keeps a1's paths for the restart time;\n")
	w("a router with BFD is offered no graceful restart (docs/bgp.md, \"BFD\") and drops a1 then. The\n")
	w("\"reef killed\" column without BFD is the worst case of graceful restart: a killed reef normally\n")
	w("leaves the node's dataplane and kube-proxy working, and then requests through a1 keep succeeding\n")
	w("and keeping its paths is right. A planned restart drains the Service traffic\n")
	w("first (GRACEFUL_SHUTDOWN), and so does a package upgrade, whose restart is the same SIGTERM;\n")
	w("failed requests over all runs, planned restart: %s; package upgrade: %s\n",
		summary(rows, func(r failoverRow) []outage { return r.restart }), summary(rows, func(r failoverRow) []outage { return r.upgrade }))
	w("(a request counts as failed here on any error, a reset where the router's ECMP set changed too: the router's\n")
	w("stateless multipath moves half of the open flows at each change of its next hops, a1's drain and its return, which no\n")
	w("announcement avoids; docs/bgp.md, \"Resets where the router's ECMP set changes\", has the packets).\n\n")
	w("From `make bench-failover`, which runs, after `make build`:\n\n")
	w("    REEF_FAILOVER_FIGURES=%d REEF_FAILOVER_OUT=$PWD/BENCHMARKS.md REEF_BIN_DIR=$PWD/bin go test -count=1 -timeout 60m -run '^TestFailoverFigures$' -v ./e2e/\n\n", runs)
	w("on %s; 1-minute load average after the run: %s (the lab shares a 2-core VM).\n", time.Now().UTC().Format("2006-01-02"), loadAverage())
	return b.String()
}

// summary says how many requests failed over the runs of one column
// (of), per router.
func summary(rows []failoverRow, of func(failoverRow) []outage) string {
	var parts []string
	for _, kind := range []string{"bird", "frr"} {
		failed, requests := 0, 0
		for _, r := range rows {
			if r.router != kind {
				continue
			}
			for _, o := range of(r) {
				failed += o.failed
				requests += o.requests
			}
		}
		name := map[string]string{"bird": "BIRD", "frr": "FRR"}[kind]
		parts = append(parts, fmt.Sprintf("%s %d of %d", name, failed, requests))
	}
	return strings.Join(parts, ", ")
}

func outages(runs []outage) string {
	var s []string
	for _, o := range runs {
		if o.failed == 0 {
			s = append(s, fmt.Sprintf("0 s (0/%d)", o.requests))
			continue
		}
		s = append(s, fmt.Sprintf("%.2f s (%d/%d)", o.last.Seconds(), o.failed, o.requests))
	}
	return strings.Join(s, ", ")
}

func failedOf(runs []outage) string {
	var s []string
	for _, o := range runs {
		s = append(s, fmt.Sprintf("%d/%d", o.failed, o.requests))
	}
	return strings.Join(s, ", ")
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(b))[0]
}

// upstreamVersion is the upstream part of an installed Debian package's
// version (bird2 2.0.12-7: 2.0.12), or "?".
func upstreamVersion(pkg string) string {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", pkg).Output()
	if err != nil || len(out) == 0 {
		return "?"
	}
	v, _, _ := strings.Cut(string(out), "-")
	return v
}
