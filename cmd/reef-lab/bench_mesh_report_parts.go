package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/reefcni/reef/internal/lab"
)

// The route-reflector, routes and idle sections of the multi-node report.

func (r *meshReport) rrSection(w func(string, ...any)) {
	rr := r.rr
	w("### Route reflectors: %d nodes through 2 reef reflectors\n\n", rr.clients)
	if rr.notRun != "" {
		w("**%s.** reef does not take `bgp.routeReflectors` and `bgp.routeReflector` yet; `reef-lab bench-mesh --only rr`\n", rrNotBuilt)
		w("asks the reef binary (a config probe that never starts the daemon) and runs the measurement of\n")
		w("`bench_mesh_rr.go` once it does: 2 reef nodes with `routeReflector: true`, `peers:` the other reflector and\n")
		w("`peerPrefixes:` the underlay, and %d clients with `routeReflectors:` the two; every node with `voters:` the\n", rr.clients)
		w("first 3 clients; all started at once from empty stores, then one ADD per client, all at once, until every\n")
		w("client routes to every other client's block; RssAnon and RSS per client and paths per node after %s. The probe said: %s\n\n",
			meshSettle, "`"+strings.ReplaceAll(strings.TrimPrefix(rr.notRun, rrNotBuilt+" ("), "`", "'"))
		if rr.capacity != "" {
			w("Whether the lab holds %d daemons on this machine: %s.\n\n", rr.clients+2, rr.capacity)
		}
		return
	}
	w("2 reef nodes with `routeReflector: true` (%s; `peers:` the other reflector, `peerPrefixes:` the underlay) and\n", meshAddrList(rr.rrs))
	w("%d clients with `routeReflectors:` the two and no other peer; every node with `voters: [%s]` (3 clients),\n", rr.clients, meshAddrList(rr.voters))
	w("and the production BGP timers (keepalive 10 s, hold 30 s; with the lab's 3 s hold time, 102 daemons on 2 cores\n")
	w("starve each other past it during the start).\n")
	if rr.nice != 0 {
		w("The reflectors' daemons run at nice %d (`--rr-nice`), a stand-in for reflectors on machines of their own: every\n", rr.nice)
		w("update of the cluster goes through them, and at the clients' share of 2 cores a goroutine dump of a reflector\n")
		w("during the ADDs showed 193 of its goroutines runnable, its sessions to the voters unread (Recv-Q) and hold\n")
		w("timers expiring on both ends of its sessions. `--rr-nice 0` gives them the clients' share.\n")
	}
	w("All start at once from empty stores; then one pod per client, all ADDs at once, until every client routes to\n")
	w("every other client's block (%d routes).\n\n", rr.clients*(rr.clients-1))
	if rr.err != "" {
		w("Stopped: %s.\n\n", meshFirstLine(rr.err))
	}
	w("| step | time |\n|---|---:|\n")
	if rr.ready > 0 {
		w("| every daemon serves ADD | %s |\n", meshSec(rr.ready))
	}
	if rr.sessions > 0 {
		w("| every client has both reflectors' sessions | %s |\n", meshSec(rr.sessions))
	}
	if rr.adds > 0 {
		p50, _ := meshQuantile(rr.addLat, 0.5)
		w("| then: half of the ADDs returned | %s |\n", meshSec(p50))
		w("| then: every ADD returned | %s |\n", meshSec(rr.adds))
	}
	if rr.routes > 0 {
		w("| then: every client routes to every other client's block | %s |\n", meshSec(rr.routes))
		if rr.addErrs == 0 {
			w("| **cold to every route** | **%s** |\n", meshSec(rr.sessions+rr.routes))
		}
	}
	w("\n")
	meshAddErrsNote(w, rr.addErrs, rr.clients, rr.addErr)
	meshRestartsNote(w, rr.restarts)
	r.rrCosts(w)
	w("Block conflicts: %d.\n", rr.conflict)
	meshWarnings(w, "daemons'", rr.warnings)
	w("\n")
}

// rrCosts writes the route reflector run's CPU, memory and paths.
func (r *meshReport) rrCosts(w func(string, ...any)) {
	rr := r.rr
	if rr.cpuAddsClients > 0 {
		w("CPU (user + system, `/proc/<pid>/stat`): from the start to every session, clients %.1f s in all, reflectors %.1f s;\n",
			rr.cpuStartClients, rr.cpuStartRRs)
		w("from the ADDs' start to the last route, clients %.1f s (%.0f ms each), reflectors %.1f s.\n",
			rr.cpuAddsClients, 1000*rr.cpuAddsClients/float64(max(1, rr.clients)), rr.cpuAddsRRs)
	}
	if len(rr.memClients) > 0 {
		when := fmt.Sprintf("%s after the last route", meshSettle)
		if rr.err != "" {
			when = "when the wait for the routes ended"
		}
		c := spreadOf(rr.memClients)
		w("Memory %s: clients %s (file-backed avg %s); reflectors %s.\n", when, c, meshMiB(c.avg().File), spreadOf(rr.memRRs))
	}
	if len(rr.pathsClient) > 0 {
		avg, lo, hi := meshPaths(rr.pathsClient)
		ravg, _, _ := meshPaths(rr.pathsRRs)
		w("Paths received (`reef status`, both families): clients %.0f on average (min %d, max %d), reflectors %.0f, for\n", avg, lo, hi, ravg)
		w("%d blocks. A client learns everything through both reflectors, so it holds two copies of each path.\n", rr.blocks)
	}
}

func (r *meshReport) routesSection(w func(string, ...any)) {
	rt := r.routes
	w("### Route programming: %d remote blocks\n\n", rt.blocks)
	w("One fresh node (pool %s with /27 blocks, `peerPrefixes` the underlay, no `bgp.peers`, no `bgp.voters`, no pods)\n", meshRoutesPool)
	w("and `reef-lab speaker` in a namespace of its own on the underlay (%s), announcing what a reef node that owns\n", meshSpeakerAddr)
	w("%d confirmed /27 blocks of that pool would: in IPv4 VPN its record (born an hour ago) and %d confirmed claims\n", rt.blocks, rt.blocks)
	w("(`bgp.EncodeRecord`, `bgp.EncodeClaim`: RD type 1, label 0, next hop the speaker, large communities), and in\n")
	w("IPv4 unicast the %d blocks, next hop the speaker (`bgp.EncodeUnicast`); %d paths, on a session with both\n", rt.blocks, 2*rt.blocks+1)
	w("families. The speaker's voter list is the node's own default (%s: the node alone), so the node sees no\n", rt.voters)
	w("disagreement; it remembers confirmed claims under any list. The clock starts when the speaker is started (it\n")
	w("connects within its 1 s connect-retry) and stops when the node's kernel holds %d proto 238 routes via the\n", rt.blocks)
	w("speaker (netlink dumps every 10 ms).\n\n")
	if rt.err != "" {
		w("Not completed: %s (%d routes installed).\n\n", meshFirstLine(rt.err), rt.installed)
		return
	}
	w("| figure | value |\n|---|---:|\n")
	if rt.peerUp >= 0 {
		w("| speaker start to its session up (\"Peer Up\" in the node's log) | %s ms |\n", meshMs(rt.peerUp, true))
	}
	if rt.peerUp >= 0 && rt.firstAdding >= 0 {
		w("| session up to the first \"adding route\" in the node's log | %s ms |\n", meshMs(rt.firstAdding-rt.peerUp, true))
	}
	w("| speaker start to the first route | %s ms |\n", meshMs(rt.firstRoute, true))
	w("| speaker start to all %d routes | %s ms |\n", rt.blocks, meshMs(rt.allRoutes, true))
	w("| first to last route | %s ms |\n", meshMs(rt.allRoutes-rt.firstRoute, true))
	if rt.storeBytes > 0 {
		w("| store file (bbolt) after | %.1f MiB |\n", float64(rt.storeBytes)/(1<<20))
	}
	if rt.paths > 0 {
		w("| paths the node received from the speaker (`reef status`), both families | %d |\n", rt.paths)
	}
	w("\n| the daemon | RSS | RssAnon | file-backed |\n|---|---:|---:|---:|\n")
	mem := func(when string, m lab.Memory) {
		w("| %s | %s | %s | %s |\n", when, meshMiB(m.RSS), meshMiB(m.Anon), meshMiB(m.File))
	}
	mem("idle, before the speaker (after 5 s)", rt.idle)
	mem(fmt.Sprintf("when all %d routes are in", rt.blocks), rt.with)
	mem("5 s later", rt.steady)
	w("\nPeak RSS (VmHWM): %s.\n\n", meshMiB(rt.steady.HWM))
	if len(rt.disagree) > 0 {
		w("The node reported nodes with another voter list: %s.\n\n", strings.Join(rt.disagree, "; "))
	}
	w("Between the session coming up and the first route the node runs the protocol on the table it learned and\n")
	w("persists what each decision learned (here the blocks, remembered as the speaker's) in one bbolt transaction\n")
	w("per decision (`ApplyProtocol`) before it programs routes. The kernel side (netlink) is the row \"first to\n")
	w("last route\".\n\n")
}

func (r *meshReport) idleSection(w func(string, ...any)) {
	w("### Daemon memory, idle\n\n")
	if r.idle.err != "" {
		w("Not measured: %s.\n\n", meshFirstLine(r.idle.err))
		return
	}
	w("One fresh node, no pods, no BGP peers (the speaker runs, listening), 5 s after it became ready:\n")
	w("RssAnon %s (heap, stacks, runtime); RSS %s, of which %s file-backed (pages of the %s reef binary and libraries),\n",
		meshMiB(r.idle.Anon), meshMiB(r.idle.RSS), meshMiB(r.idle.File), meshFileMiB(filepath.Join(r.bin, "reef")))
	w("peak RSS (VmHWM) %s.\n\n", meshMiB(r.idle.HWM))
}

func meshFileMiB(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", float64(fi.Size())/(1<<20))
}
