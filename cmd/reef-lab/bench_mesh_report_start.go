package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// The mesh start's section of the multi-node report: a full mesh of
// nodes from cold.

func (r *meshReport) meshSection(w func(string, ...any)) {
	m := r.mesh
	w("### Mesh start: %d nodes from cold\n\n", m.nodes)
	w("%d nodes with empty stores, every daemon started at once (%d sessions to establish); then one pod per node,\n", m.nodes, m.nodes*(m.nodes-1)/2)
	w("all %d ADDs at once, until every node has the route to every other node's block (%d routes). The wait for\n", m.nodes, m.nodes*(m.nodes-1))
	w("sessions polls `reef status` of every node and gives up when no session has come up for %s. ", meshStall)
	w("Every node has `bgp.voters: [%s]`, the first %d nodes, so a claim needs %d votes.\n\n", meshAddrList(m.voters), len(m.voters), len(m.voters)/2+1)
	r.meshSteps(w)
	r.meshTrouble(w)
	r.meshCosts(w)
	w("\n")
}

// meshSteps writes the table of the mesh start's steps.
func (r *meshReport) meshSteps(w func(string, ...any)) {
	m := r.mesh
	w("| step | time |\n|---|---:|\n")
	if m.started > 0 {
		w("| every daemon exec'd | %s |\n", meshSec(m.started))
	}
	if m.ready > 0 {
		w("| every daemon serves ADD | %s |\n", meshSec(m.ready))
	}
	if m.sessionsErr == "" && m.sessions > 0 {
		w("| every pair has an established session | %s |\n", meshSec(m.sessions))
	} else if m.ready > 0 {
		w("| every pair has an established session | **never** (%d of %d) |\n", meshLastEstablished(m)/2, m.nodes*(m.nodes-1)/2)
	}
	if m.adds > 0 {
		p50, _ := meshQuantile(m.addLat, 0.5)
		w("| then: half of the ADDs returned (p50 of the ADDs) | %s |\n", meshSec(p50))
		w("| then: every ADD returned (from their start) | %s |\n", meshSec(m.adds))
		if m.addErrs > 0 && m.addErrs < m.nodes {
			w("| then: every successful ADD returned | %s |\n", meshSec(m.addsOK))
		}
	}
	if m.routes > 0 || m.routesWant > 0 && m.routesHave == m.routesWant {
		what := "every other node's block"
		if m.addErrs > 0 {
			what = fmt.Sprintf("the blocks of the %d nodes whose ADD succeeded", m.nodes-m.addErrs)
		}
		w("| then: every node routes to %s (from the ADDs' start) | %s |\n", what, meshSec(m.routes))
	}
	if m.sessionsErr == "" && m.routes > 0 && m.addErrs == 0 {
		w("| **cold to every route** | **%s** |\n", meshSec(m.sessions+m.routes))
	}
	w("\n")
}

// meshTrouble writes how the sessions came up, and what went wrong.
func (r *meshReport) meshTrouble(w func(string, ...any)) {
	m := r.mesh
	if len(m.series) > 0 {
		var pts []string
		next := time.Duration(0)
		for i, p := range m.series {
			if p.at >= next || i == len(m.series)-1 {
				pts = append(pts, fmt.Sprintf("%.0f s: %d", (m.ready+p.at).Seconds(), p.established/2))
				next = p.at + 5*time.Second
			}
		}
		w("Sessions established (both ends report it) over time since the start: %s.\n\n", strings.Join(pts, ", "))
	}
	if m.sessionsErr != "" {
		w("**The full mesh was never reached**: %s. The session ends not established, by the state\n", meshFirstLine(m.sessionsErr))
		w("`reef status` shows: %s", meshStatesText(m.states))
		if len(m.pairs) > 0 {
			w("; for example %s", strings.Join(m.pairs, "; "))
		}
		w(".\n")
		if m.states["openconfirm"] > 0 {
			meshOpenConfirmNote(w)
		}
		w("\n")
	}
	if m.err != "" {
		w("Stopped: %s.\n\n", meshFirstLine(m.err))
	}
	meshRestartsNote(w, m.restarts)
	meshAddErrsNote(w, m.addErrs, m.nodes, m.addErr)
}

// meshCosts writes the CPU, the paths per node, the memory, the block
// conflicts and the logs' warnings.
func (r *meshReport) meshCosts(w func(string, ...any)) {
	m := r.mesh
	if m.ready > 0 {
		w("**Where the time goes.** The daemons used %.1f CPU-seconds from the start to ready, %.1f while the sessions came up\n",
			m.cpuReady, m.cpuSessions)
		w("(%s of wall time), and %.1f from the ADDs' start to the last route (%s); this machine has %d CPUs, so %d\n",
			meshSec(m.waitSessions), m.cpuAdds, meshSec(max(m.routes, m.adds)), runtime.NumCPU(), runtime.NumCPU())
		w("CPU-seconds per second is all there is. Keeping the %d-node mesh up costs %.2f CPU-seconds per second when nothing\n", m.nodes, m.idleCPU)
		w("happens (5 quiet seconds before the ADDs: keepalives every 10 s on %d sessions).\n\n", m.nodes*(m.nodes-1)/2)
	}
	if len(m.pathsPer) > 0 {
		avg, lo, hi := meshPaths(m.pathsPer)
		worst, blocks := meshPerRemoteBlock(m.pathsPer, m.failed)
		when := fmt.Sprintf("%s after the last route", meshSettle)
		if m.err != "" {
			when = "When the wait for the routes ended"
		}
		w("**Paths per node.** %s, the paths each daemon had received (`reef status`: the\n", when)
		w("peers' received counts, IPv4 VPN and IPv4 unicast together; its own paths are not counted): %.0f on average,\n", avg)
		w("min %d, max %d, %d in all, with %d blocks confirmed in the cluster; per block of another node, %s at the\n", lo, hi, m.paths, blocks, meshRatio(worst))
		w("most. What a peer sends in the steady state is its record, its claims (confirmed, or still pending) in IPv4\n")
		w("VPN and its confirmed blocks in IPv4 unicast (a voter withdraws its grant once the claim it counted for is\n")
		w("confirmed and nobody else claims the block, and an iBGP speaker relays no path it learned from a peer), so\n")
		w("a node whose %d peers own one block each holds 3 × %d = %d: 3 per remote block.\n\n", m.nodes-1, m.nodes-1, 3*(m.nodes-1))
	}
	if len(m.mem) > 0 {
		sp := spreadOf(m.mem)
		w("Daemon memory at the end (%d daemons, up to %d sessions and %d remote blocks each): RssAnon total %s, %s\n",
			sp.n, m.nodes-1, m.nodes-1, meshMiB(sp.sum.Anon), sp)
		w("(RSS total %s, file-backed %s on average); highest peak RSS (VmHWM) %s.\n\n", meshMiB(sp.sum.RSS), meshMiB(sp.avg().File), meshMiB(sp.max.HWM))
	}
	w("Block claims lost to an earlier claim of the same block during the ADDs: %d; block conflicts (a confirmed\n", m.lost)
	w("block in use lost): %d.", m.conflict)
	if m.sessionsErr == "" {
		w(" Sessions down, or re-established after the mesh was complete: %d.", m.downAfter)
	}
	w("\n")
	meshWarnings(w, fmt.Sprintf("%d daemons'", m.nodes), m.warnings)
}

// meshAddErrsNote says how many of the ADDs failed, and the first error.
func meshAddErrsNote(w func(string, ...any), errs, adds int, first string) {
	if errs > 0 {
		w("%d of %d ADDs failed; the first error: %s\n\n", errs, adds, "`"+strings.ReplaceAll(meshFirstLine(first), "`", "'")+"`")
	}
}

// meshWarnings lists the most frequent warnings and errors in the logs of
// whose (the daemons'), if any.
func meshWarnings(w func(string, ...any), whose string, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	w("Most frequent warnings and errors in the %s logs:\n\n", whose)
	for _, s := range warnings {
		w("- %s\n", strings.ReplaceAll(s, "|", "\\|"))
	}
}

// meshRestartsNote lists daemons that exited and were restarted.
func meshRestartsNote(w func(string, ...any), restarts []string) {
	if len(restarts) == 0 {
		return
	}
	w("**%d daemon exits** during the run; each was restarted after %s, as reef's systemd unit would\n", len(restarts), meshRestartSec)
	w("(`Restart=always`, `RestartSec=2s`):\n\n")
	overwrite := false
	for i, x := range restarts {
		if i < 5 {
			w("- %s\n", strings.ReplaceAll(x, "|", "\\|"))
		}
		overwrite = overwrite || strings.Contains(x, "can't overwrite the existing peer")
	}
	if len(restarts) > 5 {
		w("- and %d more\n", len(restarts)-5)
	}
	w("\n")
	if overwrite {
		w("\"can't overwrite the existing peer\" is a start-up race in `bgp.Start` (bgp/speaker.go): it adds the\n")
		w("`peerPrefixes` dynamic-neighbor range before the configured `peers`; a configured peer that connects in\n")
		w("between is accepted as a dynamic peer, and the `AddPeer` of the same address that follows fails, which\n")
		w("ends the daemon. The more peers and the busier the machine, the wider the window.\n\n")
	}
}

// meshPlateau is the last count of established session ends and when
// (since the start) it was first reached.
func meshPlateau(m meshStartResult) (int, time.Duration) {
	last := meshLastEstablished(m)
	for _, p := range m.series {
		if p.established == last {
			return last, m.ready + p.at
		}
	}
	return last, 0
}

func meshLastEstablished(m meshStartResult) int {
	if len(m.series) == 0 {
		return 0
	}
	return m.series[len(m.series)-1].established
}

// meshOpenConfirmNote explains sessions stuck in openconfirm on both ends,
// what the GoBGP v4.8.0 that reef embeds does on a connection collision.
func meshOpenConfirmNote(w func(string, ...any)) {
	w("\nA pair stuck in `openconfirm` on both ends is a connection collision that GoBGP (v4.8.0, embedded) does not\n")
	w("resolve: both nodes dial each other at the same moment (every node lists every other in `bgp.peers`). Each\n")
	w("receives the other's OPEN on the connection it *accepted* while its own outgoing connection manager is still\n")
	w("waiting for an OPEN (state OpenSent, so it is not stopped), finds no outgoing connection to compare with\n")
	w("(`tryReceiveOutgoingConn` in `fsm.go` opensent), keeps the accepted one, sends its KEEPALIVE there and enters\n")
	w("OpenConfirm. Its outgoing connection is then handed to a channel OpenConfirm never reads, so the KEEPALIVE the\n")
	w("other end sent on it is never read. Each end waits for a KEEPALIVE on the connection the other abandoned, and\n")
	w("no hold timer ends the wait. The outgoing managers that are not stopped also redial established peers every\n")
	w("few seconds, which shows up as GoBGP's \"Closed an accepted connection\" warnings below.\n")
}
