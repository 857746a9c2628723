package bgp

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// Which routers a node stands in toward for IPv6 blocks: eBGP ones with
// BFD, directly connected, at either family's address, and only when the
// node has an IPv6 address (the sessions carry IPv6 unicast).
func TestStandInPeers6(t *testing.T) {
	bfd := &BFD{MinInterval: 300 * time.Millisecond, Multiplier: 3}
	r1, r2, r3, r4, r6 := netip.MustParseAddr("192.168.77.1"), netip.MustParseAddr("192.168.77.2"), netip.MustParseAddr("192.168.77.3"), netip.MustParseAddr("192.168.77.4"), netip.MustParseAddr("fd77::1")
	cfg := Config{ASN: testASN, Pools: testPools, NodeAddress: nodeA, NodeAddressV6: netip.MustParseAddr("fd77::11"), ExternalPeers: []ExternalPeer{
		{Address: r1, ASN: 65000, BFD: bfd},
		{Address: r2, ASN: 65000},                        // no BFD
		{Address: r3, ASN: testASN, BFD: bfd},            // iBGP
		{Address: r4, ASN: 65000, BFD: bfd, Multihop: 2}, // not directly connected
		{Address: r6, ASN: 65000, BFD: bfd},              // IPv6 router
	}}
	var got []netip.Addr
	for _, p := range StandInPeers6(&cfg) {
		got = append(got, p.Address)
	}
	if want := []netip.Addr{r1, r6}; !slices.Equal(got, want) {
		t.Errorf("StandInPeers6 = %v, want %v", got, want)
	}
	if !cfg.standsIn6() || !cfg.standsIn() {
		t.Errorf("standsIn6 %v, standsIn %v; want both", cfg.standsIn6(), cfg.standsIn())
	}
	noV6 := cfg
	noV6.NodeAddressV6 = netip.Addr{}
	if len(StandInPeers6(&noV6)) != 0 || noV6.standsIn6() {
		t.Errorf("without a node IPv6 address: StandInPeers6 %v, standsIn6 %v; want none", StandInPeers6(&noV6), noV6.standsIn6())
	}
	noPool6 := cfg
	noPool6.Pools = testPools[:2]
	if noPool6.standsIn6() {
		t.Errorf("standsIn6 without an IPv6 pool")
	}

	stmts, sets := standInPolicy6(&cfg)
	var names []string
	for _, s := range sets {
		names = append(names, s.Name+" "+s.DefinedType.String()+" "+s.List[0])
	}
	if want := []string{
		"reef-stand-in6-tag DEFINED_TYPE_LARGE_COMMUNITY ^64512:124:0$",
		"reef-stand-in6-peer-0 DEFINED_TYPE_NEIGHBOR 192.168.77.1/32",
		"reef-stand-in6-peer-1 DEFINED_TYPE_NEIGHBOR fd77::1/128",
	}; !slices.Equal(names, want) {
		t.Errorf("sets:\n%s", cmp.Diff(want, names))
	}
	// To each stand-in router: accept, the AS prepended; to every other
	// peer (the mesh, reflectors, other routers): reject.
	if len(stmts) != 3 || stmts[2].Conditions.NeighborSet != nil || stmts[2].Actions.RouteAction.String() != "ROUTE_ACTION_REJECT" {
		t.Fatalf("statements: %v", stmts)
	}
	for _, s := range stmts[:2] {
		if s.Conditions.RouteType.String() != "ROUTE_TYPE_LOCAL" || s.Conditions.LargeCommunitySet.Name != standInTag || s.Actions.AsPrepend.Asn != testASN || s.Actions.AsPrepend.Repeat != 1 {
			t.Errorf("statement %s: %v", s.Name, s)
		}
	}
}

// Which IPv6 blocks a node stands in for: another node's confirmed claim
// marked 65535:0 whose owner's record of the same incarnation names its
// IPv6 address.
func TestWantStandIns6(t *testing.T) {
	b1, b2 := netip.MustParsePrefix("fd00:10:244::40/122"), netip.MustParsePrefix("fd00:10:244::80/122")
	v6B, v6C := netip.MustParseAddr("fd77::12"), netip.MustParseAddr("fd77::13")
	key := func(owner netip.Addr, b netip.Prefix) nlriKey { return nlriKey{owner, b} }
	rec := func(a netip.Addr, inc uint32, v6 netip.Addr) (nlriKey, blockproto.Record) {
		return nlriKey{a, netip.PrefixFrom(a, 32)}, blockproto.Record{Node: blockproto.Node{Addr: a, Inc: inc}, Addr6: v6}
	}
	claim := func(owner netip.Addr, inc uint32, b netip.Prefix, st blockproto.ClaimState) blockproto.Claim {
		return blockproto.Claim{Block: b, Owner: blockproto.Node{Addr: owner, Inc: inc}, State: st}
	}
	records := map[nlriKey]blockproto.Record{}
	for _, r := range []struct {
		a   netip.Addr
		inc uint32
		v6  netip.Addr
	}{{nodeA, 1, netip.MustParseAddr("fd77::11")}, {nodeB, 2, v6B}, {nodeC, 3, v6C}} {
		k, v := rec(r.a, r.inc, r.v6)
		records[k] = v
	}
	for _, c := range []struct {
		name    string
		marked  []nlriKey
		claims  []blockproto.Claim
		records map[nlriKey]blockproto.Record
		want    map[netip.Prefix]standIn6
	}{
		{name: "nothing marked", claims: []blockproto.Claim{claim(nodeB, 2, b1, blockproto.Confirmed)}, records: records, want: map[netip.Prefix]standIn6{}},
		{name: "B marked", marked: []nlriKey{key(nodeB, b1)}, claims: []blockproto.Claim{claim(nodeB, 2, b1, blockproto.Confirmed), claim(nodeC, 3, b2, blockproto.Confirmed)}, records: records,
			want: map[netip.Prefix]standIn6{b1: {Owner6: v6B, Owner: blockproto.Node{Addr: nodeB, Inc: 2}}}},
		{name: "pending claim", marked: []nlriKey{key(nodeB, b1)}, claims: []blockproto.Claim{claim(nodeB, 2, b1, blockproto.Pending)}, records: records, want: map[netip.Prefix]standIn6{}},
		{name: "its own block", marked: []nlriKey{key(nodeA, b1)}, claims: []blockproto.Claim{claim(nodeA, 1, b1, blockproto.Confirmed)}, records: records, want: map[netip.Prefix]standIn6{}},
		{name: "claim gone, mark left", marked: []nlriKey{key(nodeB, b1)}, records: records, want: map[netip.Prefix]standIn6{}},
		{name: "owner's record of another incarnation", marked: []nlriKey{key(nodeB, b1)}, claims: []blockproto.Claim{claim(nodeB, 5, b1, blockproto.Confirmed)}, records: records, want: map[netip.Prefix]standIn6{}},
		{name: "owner without an IPv6 address", marked: []nlriKey{key(nodeB, b1)}, claims: []blockproto.Claim{claim(nodeB, 2, b1, blockproto.Confirmed)},
			records: func() map[nlriKey]blockproto.Record {
				k, v := rec(nodeB, 2, netip.Addr{})
				return map[nlriKey]blockproto.Record{k: v}
			}(), want: map[netip.Prefix]standIn6{}},
		{name: "an IPv4 claim", marked: []nlriKey{key(nodeB, block)}, claims: []blockproto.Claim{claim(nodeB, 2, block, blockproto.Confirmed)}, records: records, want: map[netip.Prefix]standIn6{}},
		{name: "two owners: the lower", marked: []nlriKey{key(nodeC, b1), key(nodeB, b1)}, claims: []blockproto.Claim{claim(nodeC, 3, b1, blockproto.Confirmed), claim(nodeB, 2, b1, blockproto.Confirmed)}, records: records,
			want: map[netip.Prefix]standIn6{b1: {Owner6: v6B, Owner: blockproto.Node{Addr: nodeB, Inc: 2}}}},
	} {
		marked := map[nlriKey]bool{}
		for _, k := range c.marked {
			marked[k] = true
		}
		claims := map[nlriKey]blockproto.Claim{}
		for _, cl := range c.claims {
			claims[key(cl.Owner.Addr, cl.Block)] = cl
		}
		got := wantStandIns6(nodeA, marked, claims, c.records)
		if d := cmp.Diff(c.want, got, cmpOpts...); d != "" {
			t.Errorf("%s: wantStandIns6 (-want +got):\n%s", c.name, d)
		}
	}
}

// applyStandIns6 makes GoBGP's table hold exactly the stand-ins it is
// given: the same set again changes nothing, a new owner address replaces
// the path, an empty set withdraws it.
func TestApplyStandIns6(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a BGP speaker")
	}
	addrA := netip.MustParseAddr("127.0.0.1")
	_, _, start := testSpeakers(t, addrA)
	a := start(addrA, Config{NodeAddressV6: netip.MustParseAddr("fd77::11")})
	b1 := netip.MustParsePrefix("fd00:10:244::40/122")
	owner := blockproto.Node{Addr: nodeB, Inc: 2}
	table := func() map[netip.Prefix]string {
		out := map[netip.Prefix]string{}
		_ = a.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv6_UC}, func(n bgppkt.NLRI, ps []*apiutil.Path) {
			for _, p := range ps {
				lcs, nh := pathAttrs(nil, p.Attrs)
				out[n.(*bgppkt.IPAddrPrefix).Prefix] = fmt.Sprintf("via %s %v", nh, lcs)
			}
		})
		return out
	}
	for _, step := range []struct {
		want map[netip.Prefix]standIn6
		rib  map[netip.Prefix]string
	}{
		{map[netip.Prefix]standIn6{b1: {Owner6: netip.MustParseAddr("fd77::12"), Owner: owner}}, map[netip.Prefix]string{b1: "via fd77::12 [{64512 100 0} {64512 111 2} {64512 124 0}]"}},
		{map[netip.Prefix]standIn6{b1: {Owner6: netip.MustParseAddr("fd77::12"), Owner: owner}}, map[netip.Prefix]string{b1: "via fd77::12 [{64512 100 0} {64512 111 2} {64512 124 0}]"}},
		{map[netip.Prefix]standIn6{b1: {Owner6: netip.MustParseAddr("fd77::13"), Owner: owner}}, map[netip.Prefix]string{b1: "via fd77::13 [{64512 100 0} {64512 111 2} {64512 124 0}]"}},
		{map[netip.Prefix]standIn6{}, map[netip.Prefix]string{}},
		{map[netip.Prefix]standIn6{}, map[netip.Prefix]string{}},
	} {
		if err := a.applyStandIns6(step.want); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(step.rib, table()); d != "" {
			t.Errorf("after applyStandIns6(%v), GoBGP's IPv6 unicast (-want +got):\n%s", step.want, d)
		}
		if len(a.standIns6) != len(step.want) {
			t.Errorf("after applyStandIns6(%v): %d stand-ins recorded", step.want, len(a.standIns6))
		}
	}
}
