package routes

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/reefcni/reef/internal/netnstest"
	"github.com/vishvananda/netlink"
)

// blockKernel is a BlockKernel that holds a State and records the plans
// it is given.
type blockKernel struct {
	st    State
	plans []Plan
	err   error
}

func (k *blockKernel) Read() (State, error) { return k.st, nil }
func (k *blockKernel) Apply(p Plan) error {
	k.plans = append(k.plans, p)
	return k.err
}

// Sync adds the own blocks' blackholes and the other nodes' routes,
// replaces one of another shape, deletes every route of reef's that is no
// pod's and no block's of the snapshot (a stale blackhole, a lost block),
// and leaves the pods' objects alone; a second Sync on what it wrote has
// nothing to do. A failed Apply is returned with the plan.
func TestBlocksSync(t *testing.T) {
	own, lost := pfx("10.244.1.0/26"), pfx("10.244.3.0/26")
	other := RemoteBlock{Block: pfx("10.244.2.0/26"), Node: netip.MustParseAddr("192.0.2.2"), Dev: "eth0"}
	routed := RemoteBlock{Block: pfx("fd00:10:244::40/122"), Node: netip.MustParseAddr("192.0.2.3"), Dev: "eth0",
		Gateway: netip.MustParseAddr("fd77::1")}
	k := &blockKernel{st: state([]string{"reefa"},
		podRt("10.244.1.5/32", "reefa"),
		hole("10.244.9.0/26"), // an own block no longer confirmed
		hole("10.244.1.7/32"), // a stray blackhole of reef's
		Route{Dst: lost, Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.0.2.4"), OnLink: true},
		Route{Dst: other.Block, Kind: RemoteRoute, Dev: "vxlan.reef", Via: other.Node, OnLink: true}, // the pool's mode changed
	)}
	b := NewBlocks(k)
	have, err := b.Read()
	if err != nil {
		t.Fatal(err)
	}
	s := BlockSnapshot{Own: []netip.Prefix{own}, Remote: []RemoteBlock{other, routed}}
	plan, err := b.Sync(s, have)
	if err != nil {
		t.Fatal(err)
	}
	want := Plan{
		Replace: []Route{hole("10.244.1.0/26"),
			{Dst: other.Block, Kind: RemoteRoute, Dev: "eth0", Via: other.Node, OnLink: true},
			{Dst: routed.Block, Kind: RemoteRoute, Dev: "eth0", Via: routed.Gateway}},
		DeleteRoute: []Route{hole("10.244.1.7/32"),
			{Dst: lost, Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.0.2.4"), OnLink: true},
			hole("10.244.9.0/26")},
	}
	if diff := cmp.Diff(want, plan, stateCmpOpts); diff != "" {
		t.Errorf("Sync's plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Plan{want}, k.plans, stateCmpOpts); diff != "" {
		t.Errorf("plans applied (-want +got):\n%s", diff)
	}

	after := apply(t, have, plan)
	if got := after.Routes[pfx("10.244.1.5/32")]; got != podRt("10.244.1.5/32", "reefa") || !after.Links["reefa"] {
		t.Errorf("Sync touched the pod's objects: %+v", after)
	}
	if plan, err := b.Sync(s, after); err != nil || !plan.Empty() {
		t.Errorf("a second Sync = %+v, %v; want an empty plan", plan, err)
	}

	k.err = errors.New("netlink: no such device")
	if plan, err := b.Sync(BlockSnapshot{}, after); !errors.Is(err, k.err) || len(plan.DeleteRoute) != 3 {
		t.Errorf("Sync with a failing Apply = %+v, %v; want its plan and the error", plan, err)
	}
}

// On the kernel, the owner writes with reef's protocol, deletes its own
// stale blackhole, leaves a pod's /32 and the routes of other protocols
// alone, and reports a foreign route in a block's place (routes/internal/nl/ours.go); the
// next Sync has only that route left to write.
func TestKernelBlocksSync(t *testing.T) {
	node, nodeH, ip := nodeWithUplink(t)
	ip("route", "add", "blackhole", "10.244.9.0/26", "proto", "238") // reef's, stale
	ip("route", "add", "10.244.1.5/32", "dev", "eth0", "scope", "link", "proto", "238")
	ip("route", "add", "10.244.3.0/26", "via", "192.0.2.9", "dev", "eth0", "proto", "static")

	k := netnstest.Open(t, node, NewKernel)
	b := NewBlocks(k)
	s := BlockSnapshot{Own: []netip.Prefix{pfx("10.244.1.0/26")}, Remote: []RemoteBlock{
		{Block: pfx("10.244.2.0/26"), Node: netip.MustParseAddr("192.0.2.2"), Dev: "eth0"},
		{Block: pfx("10.244.3.0/26"), Node: netip.MustParseAddr("192.0.2.3"), Dev: "eth0"},
	}}
	have, err := b.Read()
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Sync(s, have)
	var foreign *ForeignRouteError
	if !errors.As(err, &foreign) || foreign.Dst != pfx("10.244.3.0/26") {
		t.Fatalf("Sync over a static route to a block = %v, want a ForeignRouteError for 10.244.3.0/26", err)
	}
	want := []string{
		"10.244.1.5/32 dev eth0 scope link proto 238",
		"10.244.2.0/26 via 192.0.2.2 dev eth0 proto 238",
		"10.244.3.0/26 via 192.0.2.9 dev eth0 proto 4",
		"192.0.2.0/24 dev eth0 scope link proto 2",
		"blackhole 10.244.1.0/26 proto 238",
	}
	if diff := cmp.Diff(want, routeStrings(t, nodeH, &netlink.Route{}, 0)); diff != "" {
		t.Errorf("routes after Sync (-want +got):\n%s", diff)
	}
	if have, err = b.Read(); err != nil {
		t.Fatal(err)
	}
	plan, err := b.Sync(s, have)
	if !errors.As(err, &foreign) {
		t.Errorf("a second Sync = %v, want the ForeignRouteError again", err)
	}
	if want := []Route{{Dst: pfx("10.244.3.0/26"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.0.2.3"), OnLink: true}}; !cmp.Equal(want, plan.Replace, stateCmpOpts) || len(plan.DeleteRoute) != 0 {
		t.Errorf("a second Sync's plan = %+v, want only the foreign route's place", plan)
	}
}
