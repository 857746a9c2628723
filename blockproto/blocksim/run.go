package blocksim

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/reefcni/reef/blockproto"
)

// Scenario is one run of the simulation report (reef-lab bench-sim):
// Nodes nodes, of which the first Voters vote, node i wanting
// Wants[i % len(Wants)] blocks of Pool, over a network that loses each
// delivery with probability Loss and is split once into two sides.
type Scenario struct {
	Nodes, Voters int
	Wants         []int
	Pool          blockproto.Pool
	Loss          float64
	// The partition: from step PartitionAt, for PartitionSteps steps, the
	// first voter and the share PartitionShare of the other nodes (the
	// last ones) are on a side of their own; either side keeps the last
	// copies it got of the other's announcements, as BGP does until the
	// hold time runs out. PartitionSteps 0: none.
	PartitionAt, PartitionSteps int
	PartitionShare              float64
	// MaxSteps bounds the run; Seed makes it repeatable.
	MaxSteps int
	Seed     uint64
	// Progress, if set, is told after every step how far the run is; the
	// run stops (Stopped) when it returns false.
	Progress func(step, decisions int, satisfied bool) bool
}

// Result is what one scenario gave.
type Result struct {
	Scenario
	Blocks int // in the pool
	Wanted int
	// Steps until every node had its blocks (0: never, within MaxSteps);
	// Settled, the steps until nothing was left to deliver and no node
	// changed its announcements (0: not within MaxSteps).
	Steps, Settled int
	// Wanted is the blocks all nodes want. Satisfied: every node got its
	// blocks; Short lists the nodes
	// that did not, with how many they got.
	Satisfied bool
	Short     []string
	// Violation is the first step after which some block had two owners
	// handing out addresses, and what; 0 and "" when none ever did (the
	// check runs after every step).
	ViolationStep int
	Violation     string
	Owned         int // confirmed blocks at the end, over all nodes
	Claims        int
	Confirms      int
	Releases      int
	Messages      int
	Updates       int
	Decisions     int
	Latency       []int // steps, per confirmation, sorted
	// Held is what a node holds of the others' announcements once
	// settled: the mean, and the most any node holds.
	HeldMean float64
	HeldMax  int
	Wall     time.Duration
	Stopped  bool // by Progress
}

// Run runs one scenario.
func Run(sc Scenario) Result {
	t0 := time.Now()
	r := Result{Scenario: sc, Blocks: sc.Pool.NumBlocks()}
	c := New(sc.Nodes, sc.Voters, []blockproto.Pool{sc.Pool}, sc.Seed)
	c.Loss = sc.Loss
	for i, n := range c.Nodes {
		n.Want = 1
		if len(sc.Wants) > 0 {
			n.Want = sc.Wants[i%len(sc.Wants)]
		}
		r.Wanted += n.Want
	}
	for step := 1; step <= sc.MaxSteps; step++ {
		sc.partition(c, step)
		before := make([]*output, len(c.Nodes))
		for i, n := range c.Nodes {
			before[i] = n.out
		}
		c.Step()
		if r.ViolationStep == 0 {
			if b, os, bad := c.Violation(); bad {
				r.ViolationStep, r.Violation = step, fmt.Sprintf("block %s confirmed by %v", b, os)
			}
		}
		if r.Steps == 0 && c.Satisfied() {
			r.Steps = step
		}
		if sc.Progress != nil && !sc.Progress(step, c.Decisions, r.Steps > 0) {
			r.Stopped = true
			break
		}
		partitioned := sc.PartitionSteps > 0 && step < sc.PartitionAt+sc.PartitionSteps
		if r.Steps > 0 && !partitioned && c.Current() {
			same := true
			for i, n := range c.Nodes {
				same = same && before[i] == n.out
			}
			if same {
				r.Settled = step
				break
			}
		}
	}
	r.tally(c)
	r.Wall = time.Since(t0)
	return r
}

// partition cuts the minority off at sc.PartitionAt and heals the cut
// sc.PartitionSteps later. The minority is the first voter and the last
// sc.PartitionShare of the nodes that are not voters.
func (sc Scenario) partition(c *Cluster, step int) {
	if sc.PartitionSteps == 0 {
		return
	}
	minority := func(i int) bool {
		if i == 0 {
			return true
		}
		if i < sc.Voters {
			return false
		}
		others := sc.Nodes - sc.Voters
		return i >= sc.Nodes-int(float64(others)*sc.PartitionShare+0.5)
	}
	switch step {
	case sc.PartitionAt:
		for i, n := range c.Nodes {
			if minority(i) {
				n.Side = 1
			}
		}
	case sc.PartitionAt + sc.PartitionSteps:
		for _, n := range c.Nodes {
			n.Side = 0
		}
	}
}

// tally fills r with the cluster's outcome once the run has ended.
func (r *Result) tally(c *Cluster) {
	sc := r.Scenario
	r.Satisfied = c.Satisfied()
	for _, n := range c.Nodes {
		got := n.Confirmed(sc.Pool.CIDR)
		r.Owned += got
		if got < n.Want {
			r.Short = append(r.Short, fmt.Sprintf("%s %d of %d", n.Name, got, n.Want))
		}
	}
	total := 0
	for i := range c.Nodes {
		h := c.Held(i)
		total += h
		r.HeldMax = max(r.HeldMax, h)
	}
	r.HeldMean = float64(total) / float64(len(c.Nodes))
	r.Claims, r.Confirms, r.Releases = c.Claims, c.Confirms, c.Releases
	r.Messages, r.Updates, r.Decisions = c.Messages, c.Updates, c.Decisions
	r.Latency = slices.Clone(c.Latency)
	slices.Sort(r.Latency)
}

// Pool is the report's pool: a /14 of /26 blocks, 4,096 blocks.
var Pool = blockproto.Pool{CIDR: netip.MustParsePrefix("10.64.0.0/14"), BlockSize: 26}

// Quantile is the nearest-rank quantile q of sorted values.
func Quantile(sorted []int, q float64) int {
	if len(sorted) == 0 {
		return 0
	}
	k := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}
