package routes

import "net/netip"

// Blocks is the one owner of the node's block routes: a blackhole for
// each of the node's own confirmed blocks, and a route to each other
// node's confirmed block (onlink to the owner on the uplink, vxlan.reef or
// tunl0, or through the gateway of the node's route to an owner in
// another subnet), of either family. No CNI operation writes them: the
// reconcile pass reads the kernel through it (Read), gives it the blocks
// of its snapshot (Sync), and it computes what they want, diffs them
// against what the kernel had and applies the difference. It writes with
// reef's protocol number, adding exclusively and replacing only a route
// of reef's own (routes/internal/nl/ours.go: a foreign route in the way is a
// ForeignRouteError); it takes no lock, since nothing else writes these
// routes.
//
// The pass's one read of the kernel is the Blocks' Read: the same State
// goes to the pods' owner (Pods.Sync), which keeps the rest of it
// (State.PodObjects).
type Blocks struct {
	k BlockKernel
}

// BlockKernel is the kernel as the blocks' owner reads and writes it
// (*Kernel).
type BlockKernel interface {
	// Read returns reef's routes of both families (by protocol number)
	// and its veths with their MTUs.
	Read() (State, error)
	// Apply carries out a plan; one of block routes takes no lock.
	Apply(p Plan) error
}

// NewBlocks returns the owner of the block routes in k.
func NewBlocks(k BlockKernel) *Blocks { return &Blocks{k: k} }

// BlockSnapshot is what the block routes are computed from: the node's
// own confirmed blocks, and the other nodes' confirmed blocks each with
// the device and next hop that reach it.
type BlockSnapshot struct {
	Own    []netip.Prefix
	Remote []RemoteBlock
}

// Read reads what the kernel has of reef's: its routes and veths. A pass
// reads once, gives the State to Sync and to the pods' owner.
func (b *Blocks) Read() (State, error) { return b.k.Read() }

// Want is the block routes s wants, as Desired computes them.
func (s BlockSnapshot) Want() State { return Desired(nil, s.Own, s.Remote, nil) }

// Sync brings the block routes of have, a Read of this pass, in line with
// s: the routes s wants are added or replaced, and every route of reef's
// that is neither one of them nor a pod's /32 or /128 (a stale blackhole,
// a block another node lost, a route of a pool gone from the config) is
// deleted. It returns the plan it applied, whatever Apply's errors (it
// goes on after each and returns them all).
func (b *Blocks) Sync(s BlockSnapshot, have State) (Plan, error) {
	plan := Diff(s.Want(), have.BlockRoutes())
	return plan, b.k.Apply(plan)
}

// BlockRoutes is the rest of s's routes, which the blocks' owner keeps:
// the own blocks' blackholes, the other nodes' blocks, and any route of
// reef's that is no pod's /32 or /128.
func (s State) BlockRoutes() State {
	out := State{Routes: map[netip.Prefix]Route{}, Links: map[string]bool{}, MTUs: map[string]PodMTU{}}
	for dst, r := range s.Routes {
		if !isPodObject(r) {
			out.Routes[dst] = r
		}
	}
	return out
}

var _ BlockKernel = (*Kernel)(nil)
