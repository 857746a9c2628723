package main

// bench-sim: the pure block protocol (package blockproto) simulated for
// 10, 100 and 1,000 nodes in this one process (BENCHMARKS.md, "## Block
// protocol, simulated"): issue 10's "past this machine, by simulation".
// blocksim.Run does the work; this file runs the sizes and writes the
// section.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/blockproto/blocksim"
)

func simProgress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench-sim: "+format+"\n", args...)
}

func benchSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab bench-sim", flag.ContinueOnError)
	out := fs.String("out", "", `write the report into this file as its "## Block protocol, simulated" section (replacing only that section)`)
	sizes := fs.String("nodes", "10,100,1000", "comma-separated cluster sizes")
	voters := fs.Int("voters", 3, "voters (the first nodes)")
	want := fs.String("want", "3,4", "blocks each node wants: node i the i-th value of this list, cycled (3,4: 3.5 on average)")
	loss := fs.Float64("loss", 0.1, "chance that one delivery of one sender's announcements to one receiver is lost in a step")
	partAt := fs.Int("partition-at", 3, "step at which the network splits (0: never)")
	partSteps := fs.Int("partition-steps", 10, "steps the split lasts")
	partShare := fs.Float64("partition-share", 0.3, "share of the non-voters on the first voter's side of the split")
	maxSteps := fs.Int("max-steps", 400, "give up after this many steps")
	seed := fs.Uint64("seed", 1, "random seed (the same seed gives the same figures)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench-sim: unexpected arguments %q", fs.Args())
	}
	var wants []int
	for _, f := range strings.Split(*want, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			return fmt.Errorf("bench-sim: --want: %q is not a number of blocks", f)
		}
		wants = append(wants, k)
	}
	var ns []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < *voters {
			return fmt.Errorf("bench-sim: --nodes: %q is not a size of at least %d nodes", f, *voters)
		}
		ns = append(ns, n)
	}
	// Decide allocates a few MB per call at 1,000 nodes and keeps little:
	// fewer collections, more memory (up to 4 GiB, past which it collects
	// as often as it must).
	debug.SetGCPercent(400)
	debug.SetMemoryLimit(4 << 30)
	rep := simReport{began: time.Now(), command: "bin/reef-lab bench-sim " + strings.Join(args, " "), loadStart: meshLoad()}
	for _, n := range ns {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("bench-sim: interrupted: %w", err)
		}
		sc := blocksim.Scenario{Nodes: n, Voters: *voters, Wants: wants, Pool: blocksim.Pool, Loss: *loss,
			PartitionAt: *partAt, PartitionSteps: *partSteps, PartitionShare: *partShare, MaxSteps: *maxSteps, Seed: *seed}
		if *partAt <= 0 {
			sc.PartitionSteps = 0
		}
		simProgress("%d nodes, %d voters, blocks wanted %s each, of %d", n, *voters, *want, sc.Pool.NumBlocks())
		t0 := time.Now()
		sc.Progress = func(step, decisions int, satisfied bool) bool {
			simProgress("  %d nodes: step %d, %d decisions so far, every node has its blocks: %v (%s)", n, step, decisions, satisfied, time.Since(t0).Round(time.Second))
			return ctx.Err() == nil
		}
		cpu0 := simCPU()
		r := blocksim.Run(sc)
		rep.cpu = append(rep.cpu, simCPU()-cpu0)
		if r.Stopped {
			return fmt.Errorf("bench-sim: interrupted at %d nodes: %w", n, ctx.Err())
		}
		simProgress("  %d nodes: every node had its blocks after %d steps, settled after %d; %.1f messages per claim; %s",
			n, r.Steps, r.Settled, perClaim(r.Messages, r.Claims), r.Wall.Round(time.Millisecond))
		rep.runs = append(rep.runs, r)
	}
	rep.took, rep.loadEnd = time.Since(rep.began), meshLoad()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.heapSys = ms.HeapSys
	if err := printSection(rep.markdown(), *out); err != nil || *out == "" {
		return err
	}
	simProgress("section written to %s (%s)", *out, rep.took.Round(time.Second))
	return nil
}

type simReport struct {
	began              time.Time
	took               time.Duration
	command            string
	loadStart, loadEnd string
	heapSys            uint64
	runs               []blocksim.Result
	cpu                []time.Duration // CPU time (user + system) of this process per run
}

// simCPU is the CPU time this process used so far.
func simCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func simList(v []int) string {
	var s []string
	for _, x := range v {
		s = append(s, strconv.Itoa(x))
	}
	return strings.Join(s, " or ")
}

// simWanted is how many blocks n nodes want.
func simWanted(wants []int, n int) int {
	k := 0
	for i := range n {
		k += wants[i%len(wants)]
	}
	return k
}

func simWantsAt(wants []int, n int) string {
	k := simWanted(wants, n)
	return fmt.Sprintf("%d,%03d blocks", k/1000, k%1000)
}

func perClaim(k, claims int) float64 {
	if claims == 0 {
		return 0
	}
	return float64(k) / float64(claims)
}

func (r *simReport) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## Block protocol, simulated\n\n")
	w("Every figure in this section comes from one run of\n\n    %s\n\n", r.command)
	w("(a step of `sudo make bench`; it needs no root) on %s, which took %s, on this machine (nproc %d;\n",
		r.began.UTC().Format("2006-01-02 15:04 UTC"), r.took.Round(time.Second), runtime.NumCPU())
	w("1-minute load average %s at the start, %s at the end). Nothing here is edited by hand.\n\n", r.loadStart, r.loadEnd)
	if len(r.runs) == 0 {
		return b.String()
	}
	r.simSetup(w)
	r.simTable(w)
	r.simGrowth(w)
	r.simTime(w)
	return b.String()
}

// simSetup writes what runs, the scenario and what is counted.
func (r *simReport) simSetup(w func(string, ...any)) {
	sc := r.runs[0].Scenario
	w("**What runs.** The pure protocol, `blockproto.Decide`, the code every reef daemon runs, for N simulated nodes in\n")
	w("one process (`blocksim.Cluster`, `blocksim.Run`; blockproto/blocksim/); no BGP, no daemon. The network\n")
	w("carries state, as BGP does: each receiver holds the last copy of each sender's announcements that got through.\n")
	w("One **step**: every node decides once from the copies it holds, then every sender's current announcements\n")
	w("are delivered to every node it can reach, each delivery lost with probability %.0f%% (it gets through at a\n", 100*sc.Loss)
	w("later step). A decision never sees another decision of the same step, so a claim made in step s is at the\n")
	w("voters at the end of s, their votes are back at the end of s+1 and the claimant confirms in step s+2: **one\n")
	w("round trip is 2 steps**.\n\n")
	w("**The scenario**, the same at every size: nodes 10.0.0.1 onwards, of which the first **%d are the voters**\n", sc.Voters)
	w("(`bgp.voters`, the same list on every node; a claim needs %d votes); pool %s of /%d blocks (%d blocks);\n",
		blockproto.Majority(sc.Voters), sc.Pool.CIDR, sc.Pool.BlockSize, sc.Pool.NumBlocks())
	w("node i wants %s blocks (the i-th of these, cycled; %s at 1,000 nodes would fill %.0f%% of the pool, and\n",
		simList(sc.Wants), simWantsAt(sc.Wants, 1000), 100*float64(simWanted(sc.Wants, 1000))/float64(sc.Pool.NumBlocks()))
	w("with 4 each, 98%%, the last claims mostly race each other for the last free blocks: `--want 4`), one claim at a\n")
	w("time (as the daemon asks: one pending claim per pool), starting its search at the block its name hashes to;\n")
	w("loss %.0f%% throughout; and one **partition**: from step %d for %d steps, the first voter and the last %.0f%%\n",
		100*sc.Loss, sc.PartitionAt, sc.PartitionSteps, 100*sc.PartitionShare)
	w("of the other nodes are cut off from the rest (each side keeps the last copies it got of the other's\n")
	w("announcements, as BGP does until the hold time ends: the cut-off side claims, gets its own voter's vote\n")
	w("only, and waits). Seed %d: the same command gives the same figures.\n\n", sc.Seed)
	w("**What is counted.**\n\n")
	w("- *Two owners*: after **every** step, whether any block is confirmed by two current nodes (`Cluster.Violation`).\n")
	w("- *Claim latency*: for each confirmed block, the steps from the node's first claim since its previous\n")
	w("  confirmation (or the start) to the step that confirmed it, retries after a lost race included; 2 steps = 1 round trip.\n")
	w("- *Messages per claim*: the protocol's messages divided by the claims made (`Decision.Claim`, over all nodes).\n")
	w("  A message is one delivery of one announcement (one NLRI: one node's claim of one block, or one voter's\n")
	w("  grant of one block) that is new, changed or withdrawn in the receiver's copy, sent by or to a voter as a\n")
	w("  party of that claim: a claim delivered to a voter; a grant (or its withdrawal) delivered by its voter to the\n")
	w("  node it grants, or to a node that itself claims the block. This is what issue 10 means by \"a claim costs\n")
	w("  O(voters) messages\" (`Cluster.Messages`).\n")
	w("- *Updates per claim*: every delivery of a new, changed or withdrawn announcement to any node, records included:\n")
	w("  the BGP UPDATEs a full mesh carries, where every node also hears every claim and every vote (`Cluster.Updates`).\n")
	w("- *Held per node*: the announcements a node holds of the others once the run has settled (nothing left to\n")
	w("  deliver, no node changing what it announces): records and claims, votes withdrawn; IPv4 unicast, not\n")
	w("  simulated, would add one path per remote block.\n\n")
}

// simTable writes a row of figures per size, then what went wrong.
func (r *simReport) simTable(w func(string, ...any)) {
	w("| nodes | blocks wanted | all blocks after (steps) | settled (steps) | every node got its blocks | two owners ever | claims | confirmed | released | messages per claim | updates per claim | latency p50 / p90 / max (steps) | in one round trip | held per node | decisions | wall |\n")
	w("|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|\n")
	for _, x := range r.runs {
		steps := fmt.Sprint(x.Steps)
		if x.Steps == 0 {
			steps = fmt.Sprintf("not within %d", x.MaxSteps)
		}
		settled := fmt.Sprint(x.Settled)
		if x.Settled == 0 {
			settled = "no"
		}
		got := "yes"
		if !x.Satisfied {
			got = fmt.Sprintf("**no**: %d short", len(x.Short))
		}
		two := "never"
		if x.ViolationStep != 0 {
			two = fmt.Sprintf("**step %d**", x.ViolationStep)
		}
		one := 0
		for _, l := range x.Latency {
			if l <= 2 {
				one++
			}
		}
		w("| %d | %d | %s | %s | %s | %s | %d | %d | %d | %.1f | %.0f | %d / %d / %d | %.0f%% | %.0f | %d | %s |\n", x.Nodes, x.Wanted, steps, settled, got, two,
			x.Claims, x.Confirms, x.Releases, perClaim(x.Messages, x.Claims), perClaim(x.Updates, x.Claims),
			blocksim.Quantile(x.Latency, 0.5), blocksim.Quantile(x.Latency, 0.9), blocksim.Quantile(x.Latency, 1),
			100*float64(one)/float64(max(1, len(x.Latency))), x.HeldMean, x.Decisions, x.Wall.Round(10*time.Millisecond))
	}
	w("\n")
	for _, x := range r.runs {
		if x.ViolationStep != 0 {
			w("- %d nodes: **two owners** after step %d: %s.\n", x.Nodes, x.ViolationStep, x.Violation)
		}
		if !x.Satisfied {
			w("- %d nodes: not every node got its blocks, e.g. %s.\n", x.Nodes, strings.Join(x.Short[:min(5, len(x.Short))], ", "))
		}
	}
}

// simGrowth writes how the figures grow from the smallest size to the largest.
func (r *simReport) simGrowth(w func(string, ...any)) {
	first, last := r.runs[0], r.runs[len(r.runs)-1]
	if len(r.runs) > 1 {
		w("**How it grows** from %d to %d nodes (%.0f×): messages per claim %.1f → %.1f (×%.2f); updates per claim %.0f → %.0f\n",
			first.Nodes, last.Nodes, float64(last.Nodes)/float64(first.Nodes), perClaim(first.Messages, first.Claims), perClaim(last.Messages, last.Claims),
			perClaim(last.Messages, last.Claims)/max(perClaim(first.Messages, first.Claims), 1e-9),
			perClaim(first.Updates, first.Claims), perClaim(last.Updates, last.Claims))
		w("(×%.0f); median claim latency %d → %d steps, p90 %d → %d. The messages of a claim go between its claimant and\n",
			perClaim(last.Updates, last.Claims)/max(perClaim(first.Updates, first.Claims), 1e-9),
			blocksim.Quantile(first.Latency, 0.5), blocksim.Quantile(last.Latency, 0.5),
			blocksim.Quantile(first.Latency, 0.9), blocksim.Quantile(last.Latency, 0.9))
		w("the voters, so they stay O(voters) whatever N; what grows with N is the flooding of a full mesh, in which every\n")
		w("node hears every claim and every vote (O(voters × N) updates per claim). The pool is the same at every size, so\n")
		w("it fills as N grows (")
		var fills []string
		for _, x := range r.runs {
			fills = append(fills, fmt.Sprintf("%.0f%% at %d nodes, %d of %d claims lost a race and were released",
				100*float64(x.Wanted)/float64(max(1, x.Blocks)), x.Nodes, x.Releases, x.Claims))
		}
		w("%s): a claim that loses a race to a lower\n", strings.Join(fills, "; "))
		w("address is released and the node claims the next free block, which is what lengthens the latency's tail and\n")
		w("the run at the largest size; and the claims on the cut-off side of the partition wait for the heal.\n\n")
	}
}

// simTime writes where the time goes.
func (r *simReport) simTime(w func(string, ...any)) {
	w("**Where the time goes.** Nearly all of it is in `blockproto.Decide`, which each node runs on its whole table\n")
	w("(every other node's record and claims) whenever a copy it holds changed; a node whose input is the same as at\n")
	w("a decision that changed nothing is not asked again (Decide is pure), and %d decisions run at once. CPU time\n", runtime.GOMAXPROCS(0))
	w("(user + system) per decision, Decide and the simulation around it: ")
	var per []string
	for i, x := range r.runs {
		if i < len(r.cpu) {
			per = append(per, fmt.Sprintf("%.2f ms at %d nodes (%.0f s in all)", float64(r.cpu[i].Microseconds())/1000/float64(max(1, x.Decisions)), x.Nodes, r.cpu[i].Seconds()))
		}
	}
	w("%s. `go test -bench DecideSettled ./blockproto/` times\n", strings.Join(per, ", "))
	w("Decide alone on a settled cluster's table. Go heap obtained from the system at the end: %.1f GiB.\n\n", float64(r.heapSys)/(1<<30))
}
