package daemon

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/reefcni/reef/routes"
	"github.com/reefcni/reef/store"
)

// blockState is a state of the block routes' walk: the blocks a step
// leaves (the node's own, confirmed or lost, and other nodes'), as the
// block protocol's step gives them to the pass.
type blockState struct {
	name   string
	blocks []store.Block
}

var (
	ownBlock2  = netip.MustParsePrefix("10.244.0.128/26")
	thirdBlock = netip.MustParsePrefix("10.244.0.192/26")
	staleBlock = netip.MustParsePrefix("10.244.1.0/26")
	ownConfirm = func(b netip.Prefix) store.Block {
		return store.Block{CIDR: b, Pool: statePool, State: store.BlockConfirmed}
	}
	remoteBlock = func(b netip.Prefix, owner netip.Addr) store.Block {
		return store.Block{CIDR: b, Pool: statePool, OwnerAddr: owner, OwnerInc: 1, State: store.BlockRemote}
	}
)

// blockStates are the walk's states: the one newNode's store holds, a
// second own block, a third node's block, the other node's block moved to
// the third node, the own block lost, no other node's block.
var blockStates = []blockState{
	{"own and the other node's", []store.Block{ownConfirm(ownBlock), remoteBlock(otherBlock, otherNode)}},
	{"two own", []store.Block{ownConfirm(ownBlock), ownConfirm(ownBlock2), remoteBlock(otherBlock, otherNode)}},
	{"a third node's", []store.Block{ownConfirm(ownBlock), remoteBlock(otherBlock, otherNode), remoteBlock(thirdBlock, thirdNode)}},
	{"the other's moved", []store.Block{ownConfirm(ownBlock), remoteBlock(otherBlock, thirdNode)}},
	{"own lost", []store.Block{{CIDR: ownBlock, Pool: statePool, State: store.BlockLost}, ownConfirm(ownBlock2), remoteBlock(otherBlock, otherNode)}},
	{"own alone", []store.Block{ownConfirm(ownBlock)}},
}

// blockText is the kernel's text with pods in state bs: nodeText's and
// the pods' lines, with the block routes of bs in place of nodeText's.
func blockText(pods []string, bs blockState) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(wantText(nodeState{pods: pods})), "\n") {
		if !strings.HasPrefix(l, "route ") || strings.HasSuffix(strings.Fields(l)[1], "/32") {
			lines = append(lines, l)
		}
	}
	for _, b := range bs.blocks {
		switch b.State {
		case store.BlockConfirmed:
			lines = append(lines, fmt.Sprintf("route blackhole %s proto reef", b.CIDR))
		case store.BlockRemote:
			lines = append(lines, fmt.Sprintf("route %s via %s dev eth0 onlink proto reef", b.CIDR, b.OwnerAddr))
		}
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n") + "\n"
}

// driftBlocks changes the node's block routes behind reef's back.
func (n *node) driftBlocks(rng *rand.Rand) string {
	k := n.k
	k.mu.Lock()
	defer k.mu.Unlock()
	switch rng.IntN(5) {
	case 0:
		k.routes[staleBlock] = routes.Route{Dst: staleBlock, Kind: routes.Blackhole}
		return "a stale blackhole of reef's"
	case 1:
		delete(k.routes, ownBlock)
		return "the own block's blackhole deleted"
	case 2:
		k.routes[otherBlock] = routes.Route{Dst: otherBlock, Kind: routes.RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.168.10.99"), OnLink: true}
		return "the other node's block via another gateway"
	case 3:
		k.routes[thirdBlock] = routes.Route{Dst: thirdBlock, Kind: routes.Blackhole}
		return "a blackhole in the third node's block's place"
	}
	return "none"
}

// TestReconcileBlockRoutes walks the blocks a step leaves through the
// states above in random orders, each from random drift of the block
// routes, with a pod on the node: after a pass (a whole one, or the
// routes-only pass of a step), the blocks' owner has the own confirmed
// blocks' blackholes and a route to each other node's block on the fake
// kernel, nothing of reef's beside them, and the pod's objects as they
// were; a second pass changes nothing.
func TestReconcileBlockRoutes(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			t.Parallel() // the walks wait on the store's fsyncs, not the CPU
			rng := rand.New(rand.NewPCG(seed, 2838))
			n := newNode(t)
			pods := []string{"web"}
			n.pass() // reef's tables, for the ADD's elements
			n.moveTo(pods)
			for step, i := range rng.Perm(len(blockStates)) {
				bs := blockStates[i]
				var drifts []string
				for range rng.IntN(3) {
					drifts = append(drifts, n.driftBlocks(rng))
				}
				sc, what := routesOnly, "routes-only"
				if rng.IntN(2) == 0 {
					sc, what = wholePass, "whole"
				}
				if err := n.rec.pass(bs.blocks, sc); err != nil {
					t.Fatalf("step %d, %s: %s pass: %v", step, bs.name, what, err)
				}
				if got, want := n.textIn(nodeState{pods: pods}), blockText(pods, bs); got != want {
					t.Fatalf("step %d, blocks %q, after drift %q, a %s pass: kernel (-want +got):\n%s", step, bs.name, drifts, what, textDiff(want, got))
				}
				before := n.text()
				if err := n.rec.pass(bs.blocks, sc); err != nil {
					t.Fatal(err)
				}
				if after := n.text(); after != before {
					t.Fatalf("step %d, blocks %q: a second pass changed the kernel (-before +after):\n%s", step, bs.name, textDiff(before, after))
				}
			}
		})
	}
}

// TestBlockRouteChangedIsNoRepair: a pass that routes another node's
// block otherwise because the block protocol says so (its owner moved, or
// gave another address) logs the change at info, while the kernel has
// what the last pass left; the same route changed by hand is a repair
// (WARN). Before, both were "repairing route", counted in
// reef_reconcile_repairs_total.
func TestBlockRouteChangedIsNoRepair(t *testing.T) {
	n := newNode(t)
	var logs bytes.Buffer
	n.rec.log = slog.New(slog.NewTextHandler(&logs, nil))
	pass := func(bs blockState) {
		t.Helper()
		if err := n.rec.pass(bs.blocks, wholePass); err != nil {
			t.Fatal(err)
		}
	}
	pass(blockStates[0]) // own and the other node's
	pass(blockStates[3]) // the other's moved to the third node
	if s := logs.String(); strings.Contains(s, "repairing route") || !strings.Contains(s, `msg="changing route" route="`+otherBlock.String()+" via "+thirdNode.String()) {
		t.Errorf("the block moved to another owner: want a change at info, no repair:\n%s", s)
	}
	logs.Reset()
	n.k.mu.Lock()
	n.k.routes[otherBlock] = routes.Route{Dst: otherBlock, Kind: routes.RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.168.10.99"), OnLink: true}
	n.k.mu.Unlock()
	pass(blockStates[3])
	if s := logs.String(); !strings.Contains(s, `msg="repairing route" want="`+otherBlock.String()+" via "+thirdNode.String()) {
		t.Errorf("the route changed by hand: want a repair:\n%s", s)
	}
}
