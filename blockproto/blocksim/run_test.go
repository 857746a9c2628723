package blocksim

import (
	"os"
	"strconv"
	"testing"
)

// TestRunReportScenario runs the report's scenario (reef-lab bench-sim) at
// a size the unit tests can afford: every node gets its blocks, no block
// ever has two owners, and a claim costs a bounded number of messages.
// REEF_SIM_NODES runs it at another size, with the figures logged.
func TestRunReportScenario(t *testing.T) {
	nodes := 50
	if v := os.Getenv("REEF_SIM_NODES"); v != "" {
		nodes, _ = strconv.Atoi(v)
	}
	r := Run(Scenario{Nodes: nodes, Voters: 3, Wants: []int{3, 4}, Pool: Pool, Loss: 0.1,
		PartitionAt: 3, PartitionSteps: 10, PartitionShare: 0.3, MaxSteps: 400, Seed: 1})
	t.Logf("%d nodes: %d steps (settled %d), %d claims, %d confirms, %d releases, %d messages (%.1f per claim), %d updates (%.1f per claim), %d decisions, latency p50 %d max %d, held mean %.0f max %d, %s",
		nodes, r.Steps, r.Settled, r.Claims, r.Confirms, r.Releases, r.Messages, float64(r.Messages)/float64(r.Claims),
		r.Updates, float64(r.Updates)/float64(r.Claims), r.Decisions, Quantile(r.Latency, 0.5), Quantile(r.Latency, 1), r.HeldMean, r.HeldMax, r.Wall)
	if r.ViolationStep != 0 {
		t.Fatalf("step %d: %s", r.ViolationStep, r.Violation)
	}
	if !r.Satisfied {
		t.Fatalf("not every node got its blocks: %v", r.Short)
	}
	if r.Settled == 0 {
		t.Fatal("never settled")
	}
}
