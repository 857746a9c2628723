package bgp

import (
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// Three speakers of a full mesh announce claims and grants of IPv6 blocks
// and an IPv4 claim at once: each learns exactly what the other two
// announce, the IPv6 blocks' paths as VPN-IPv6 (label 0, next hop the
// announcer's router ID IPv4-mapped, no route target) and everything else
// as VPN-IPv4; a claim confirmed replaces the pending one, and withdrawals
// go through in both families.
func TestMeshIPv6Blocks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	ipA, ipB, ipC := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	ctx, _, start := testSpeakers(t, ipA, ipB, ipC)
	mesh := []netip.Addr{ipA, ipB, ipC}
	a, b, c := start(ipA, Config{Peers: mesh}), start(ipB, Config{Peers: mesh}), start(ipC, Config{Peers: mesh})
	for _, sp := range []*Speaker{a, b, c} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}

	recA, recB := testRecord(), testRecord()
	recB.Node = blockproto.Node{Addr: nodeB, Inc: 8}
	recC := recB
	recC.Node = blockproto.Node{Addr: nodeC, Inc: 9}
	grantC6 := testGrant6()
	grantC6.Voter = recC.Node
	otherBlock6 := netip.MustParsePrefix("fd00:10:250::10/124") // of the second IPv6 pool
	claimC6 := blockproto.Claim{Block: otherBlock6, Owner: recC.Node, State: blockproto.Confirmed, VoterHash: 0x01020304}
	// A claims an IPv6 block and an IPv4 one; B and C grant A the IPv6
	// one, B the IPv4 one; C holds a block of the second IPv6 pool and a
	// forget.
	tA := blockproto.Table{Records: []blockproto.Record{recA}, Claims: []blockproto.Claim{testClaim6(), testClaim()}}
	tB := blockproto.Table{Records: []blockproto.Record{recB}, Grants: []blockproto.Grant{testGrant6(), testGrant()}}
	tC := blockproto.Table{Records: []blockproto.Record{recC}, Grants: []blockproto.Grant{grantC6}, Claims: []blockproto.Claim{claimC6}, Forgets: []blockproto.Forget{testForget()}}
	for _, x := range []struct {
		sp *Speaker
		t  blockproto.Table
	}{{a, tA}, {b, tB}, {c, tC}} {
		if err := x.sp.AnnounceTable(x.t, nil); err != nil {
			t.Fatal(err)
		}
	}
	learnsAll := func(what string, tA, tB, tC blockproto.Table) {
		t.Helper()
		learnsExactly(t, what+": A", a, union(tB, tC))
		learnsExactly(t, what+": B", b, union(tA, tC))
		learnsExactly(t, what+": C", c, union(tA, tB))
	}
	learnsAll("claims and grants of both families", tA, tB, tC)

	// B's tables by family: the IPv6 blocks' claims and grants in VPN-IPv6
	// (A's claim, C's grant and claim), the rest in VPN-IPv4.
	got := map[AFI][]string{}
	for _, f := range vpnFamilies {
		err := b.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f.rf}, func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
			vpn := nlri.(*bgppkt.LabeledVPNIPAddrPrefix)
			if !slices.Equal(vpn.Labels.Labels, []uint32{0}) {
				t.Errorf("%s: labels %v, want [0]", nlri, vpn.Labels.Labels)
			}
			for _, p := range paths {
				if b.own(p) {
					continue
				}
				if p.Family != f.rf {
					t.Errorf("%s: family %s in the table of %s", nlri, p.Family, f.rf)
				}
				_, nh := pathAttrs(nil, p.Attrs)
				if want := p.PeerAddress; f.afi == AFIIPv6 && nh != mapped(want) || f.afi == AFIIPv4 && nh != want {
					t.Errorf("%s in %s: next hop %s, want the router ID of %s", nlri, f.afi, nh, want)
				}
				for _, at := range p.Attrs {
					if ec, ok := at.(*bgppkt.PathAttributeExtendedCommunities); ok {
						t.Errorf("%s: extended communities %v, want none (no route target)", nlri, ec.Value)
					}
				}
				got[f.afi] = append(got[f.afi], p.PeerAddress.String()+" "+nlri.String())
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, ps := range got {
		slices.Sort(ps)
	}
	want := map[AFI][]string{
		AFIIPv6: {"127.0.0.1 192.168.77.11:2:fd00:10:244::40/122", "127.0.0.3 192.168.77.13:2:fd00:10:250::10/124", "127.0.0.3 192.168.77.13:3:fd00:10:244::40/122"},
		AFIIPv4: {"127.0.0.1 192.168.77.11:1:192.168.77.11/32", "127.0.0.1 192.168.77.11:2:10.244.3.64/26", "127.0.0.3 192.168.77.13:1:192.168.77.13/32", "127.0.0.3 192.168.77.13:4:192.168.77.13/32"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("B's VPN tables, peer and NLRI (-want +got):\n%s", d)
	}
	counts, err := b.CountPaths()
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[netip.Addr]PeerCounts{ipA: {VPN: PathCounts{Received: 3, Accepted: 3}}, ipC: {VPN: PathCounts{Received: 4, Accepted: 4}}}, counts.Peers, cmpOpts...); d != "" {
		t.Errorf("B's counts, both VPN families (-want +got):\n%s", d)
	}

	// A's IPv6 claim confirmed (the same NLRI: it replaces the pending
	// one), its IPv4 claim and C's IPv6 grant withdrawn.
	confirmed := testClaim6()
	confirmed.State = blockproto.Confirmed
	tA = blockproto.Table{Records: tA.Records, Claims: []blockproto.Claim{confirmed}}
	tC.Grants = nil
	if err := a.AnnounceTable(tA, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.AnnounceTable(tC, nil); err != nil {
		t.Fatal(err)
	}
	learnsAll("IPv6 claim confirmed, IPv4 claim and an IPv6 grant withdrawn", tA, tB, tC)

	// Every session has a prefix limit on each of its families.
	lim := PrefixLimits(testPools)
	for _, sp := range []*Speaker{a, b, c} {
		checkLimits(t, ctx, sp, func(netip.Addr) map[string]uint32 {
			return map[string]uint32{"IPv4 unicast": lim.Unicast, "IPv4 VPN": lim.VPN, "IPv6 VPN": lim.VPNv6}
		})
	}
}

// A node with an IPv6 address (A) and one without (C), both peering with
// a router (a plain GoBGP server in another AS that offers IPv4 and IPv6
// unicast): the router learns exactly the confirmed IPv6 block of A, in
// IPv6 unicast with A's IPv6 address as next hop, reef's and the peer's
// communities, and the confirmed IPv4 blocks of both in IPv4 unicast; not
// A's pending IPv6 claim, not C's IPv6 block (C has no address to route it
// to, and says so once in its log and in its status). A installs none of
// the IPv6 routes the router sends and counts them by reason; a block A
// stops owning is withdrawn at the router.
func TestExternalPeerIPv6(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three BGP speakers")
	}
	addrA, addrC, addrR := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3")
	ctx, logs, start := testSpeakers(t, addrA, addrC, addrR)
	const routerASN = 65000
	v6A := netip.MustParseAddr("2001:db8:77::11")
	external := func(communities ...string) []ExternalPeer {
		return []ExternalPeer{{Address: addrR, ASN: routerASN, Keepalive: 3 * time.Second, Hold: 10 * time.Second, MaxPrefixes: 100, Communities: communities}}
	}
	a := start(addrA, Config{Peers: []netip.Addr{addrC}, NodeAddressV6: v6A, ExternalPeers: external("65000:100", "65000:7:8")})
	c := start(addrC, Config{Peers: []netip.Addr{addrA}, ExternalPeers: external()})
	a.cfg.ExternalPeers[0].Port, c.cfg.ExternalPeers[0].Port = a.cfg.Port, c.cfg.Port
	unicast := func(afi api.Family_Afi) *api.AfiSafi {
		f := &api.Family{Afi: afi, Safi: api.Family_SAFI_UNICAST}
		return &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f, Enabled: true}}
	}
	router := newGoBGP(t, ctx, addrR, a.cfg.Port, routerASN, nil)
	for _, n := range []netip.Addr{addrA, addrC} {
		addGoBGPPeer(t, ctx, router, addrR, a.cfg.Port, n, []*api.AfiSafi{unicast(api.Family_AFI_IP), unicast(api.Family_AFI_IP6)})
	}
	for _, sp := range []*Speaker{a, c} {
		if err := sp.connect(ctx); err != nil {
			t.Fatal(err)
		}
	}

	ownA4, ownA6 := netip.MustParsePrefix("10.244.7.0/26"), netip.MustParsePrefix("fd00:10:244::80/122")
	ownC4, ownC6 := netip.MustParsePrefix("10.244.8.0/26"), netip.MustParsePrefix("fd00:10:244::c0/122")
	ownerA, ownerC := blockproto.Node{Addr: nodeA, Inc: 1}, blockproto.Node{Addr: nodeC, Inc: 2}
	pendingA6 := blockproto.Table{Claims: []blockproto.Claim{{Block: netip.MustParsePrefix("fd00:10:244::100/122"), Owner: ownerA, State: blockproto.Pending}}}
	if err := a.AnnounceTable(pendingA6, []UnicastBlock{{Block: ownA4, Owner: ownerA}, {Block: ownA6, Owner: ownerA}}); err != nil {
		t.Fatal(err)
	}
	if err := c.AnnounceTable(blockproto.Table{}, []UnicastBlock{{Block: ownC4, Owner: ownerC}, {Block: ownC6, Owner: ownerC}}); err != nil {
		t.Fatalf("C, without an IPv6 address, refused its IPv6 block: %v", err)
	}
	// The router announces what a router may, in IPv6: one route for
	// each reason reef has to refuse it.
	hostile := map[string]string{
		"::/0": DropDefault, "fd00:10:244::/56": DropPoolAggregate, "fd00:10:244::c0/122": DropBlock,
		"fd00:10:244::85/128": DropInsideBlock, v6A.String() + "/128": DropNodeAddress, "2001:db8:99::/64": DropOther,
	}
	for h := range hostile {
		p, err := unicastPath(netip.MustParsePrefix(h), netip.MustParseAddr("2001:db8:77::1"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := router.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}}); err != nil {
			t.Fatal(err)
		}
	}

	routerHas := func(rf bgppkt.Family) map[netip.Prefix]string { return routerLearned(router, rf) }
	reef := func(owner netip.Addr) []LargeCommunity { return mustEncodeUnicast(t, owner) }
	withPeer := func(lcs []LargeCommunity) []LargeCommunity { return append(lcs, LargeCommunity{65000, 7, 8}) }
	incOf := func(lcs []LargeCommunity, inc uint32) []LargeCommunity {
		for i := range lcs {
			if lcs[i].Data1 == lcInc {
				lcs[i].Data2 = inc
			}
		}
		return lcs
	}
	want6 := map[netip.Prefix]string{ownA6: learnedLine(addrA, v6A, []uint32{65000<<16 | 100}, withPeer(reef(nodeA)))}
	want4 := map[netip.Prefix]string{
		ownA4: learnedLine(addrA, nodeA, []uint32{65000<<16 | 100}, withPeer(reef(nodeA))),
		ownC4: learnedLine(addrC, nodeC, nil, incOf(reef(nodeC), 2)),
	}
	eventually(t, "the router learns the confirmed blocks, IPv6 ones only from the node with an IPv6 address", func() string {
		d6, d4 := cmp.Diff(want6, routerHas(bgppkt.RF_IPv6_UC)), cmp.Diff(want4, routerHas(bgppkt.RF_IPv4_UC))
		if d6 == "" && d4 == "" {
			return ""
		}
		return "IPv6 unicast (-want +got):\n" + d6 + "\nIPv4 unicast (-want +got):\n" + d4
	})

	// A takes none of the router's routes, and counts them; it exports
	// two blocks and withholds none.
	wantDropped := map[string]uint64{}
	for _, r := range hostile {
		wantDropped[r]++
	}
	importsNothing(t, ctx, a, addrR, 2, wantDropped)
	if st := a.ExternalStatus(ctx); len(st) != 1 || st[0].Withheld != "" {
		t.Errorf("A's external status: %+v, want nothing withheld", st)
	}
	var inRIB []netip.Prefix
	if err := a.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv6_UC}, func(n bgppkt.NLRI, ps []*apiutil.Path) {
		for _, p := range ps {
			if !a.own(p) {
				inRIB = append(inRIB, n.(*bgppkt.IPAddrPrefix).Prefix)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(inRIB) != 0 {
		t.Errorf("A's IPv6 unicast table holds routes of others: %v", inRIB)
	}

	// C says why its IPv6 block is not exported: in its status, and once
	// in its log.
	if st := c.ExternalStatus(ctx); len(st) != 1 || !strings.Contains(st[0].Withheld, "nodeAddressV6") || st[0].Sent != 1 {
		t.Errorf("C's external status: %+v, want 1 block sent and the IPv6 ones withheld for want of nodeAddressV6", st)
	}
	var said []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "IPv6 blocks are not exported to external peers") {
			said = append(said, l)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], "speaker="+addrC.String()) {
		t.Errorf("the logs say that IPv6 blocks are not exported in %q, want once, by C", said)
	}

	// Each external session has a prefix limit on each family: A's on
	// IPv4 and IPv6 unicast, C's on IPv4 unicast only.
	lim := PrefixLimits(testPools)
	mesh := map[string]uint32{"IPv4 unicast": lim.Unicast, "IPv4 VPN": lim.VPN, "IPv6 VPN": lim.VPNv6}
	checkLimits(t, ctx, a, func(p netip.Addr) map[string]uint32 {
		if p == addrR {
			return map[string]uint32{"IPv4 unicast": 100, "IPv6 unicast": 100}
		}
		return mesh
	})
	checkLimits(t, ctx, c, func(p netip.Addr) map[string]uint32 {
		if p == addrR {
			return map[string]uint32{"IPv4 unicast": 100}
		}
		return mesh
	})

	// A loses its IPv6 block: the router hears the withdrawal, and keeps
	// the IPv4 ones.
	if err := a.AnnounceTable(pendingA6, []UnicastBlock{{Block: ownA4, Owner: ownerA}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the router drops A's IPv6 block", func() string {
		d6, d4 := cmp.Diff(map[netip.Prefix]string{}, routerHas(bgppkt.RF_IPv6_UC)), cmp.Diff(want4, routerHas(bgppkt.RF_IPv4_UC))
		if d6 == "" && d4 == "" {
			return ""
		}
		return "IPv6 unicast (-want +got):\n" + d6 + "\nIPv4 unicast (-want +got):\n" + d4
	})
}

// A peer that speaks only IPv4 unicast and VPN-IPv4, as reef did before
// VPN-IPv6 (here a plain GoBGP server with an older reef's families and
// limits), still gets a session with a node and exchanges everything about
// IPv4 blocks with it; the node's IPv6 claims do not reach it, and nothing
// else changes.
func TestVPNv4OnlyPeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two BGP speakers")
	}
	addrN, addrOld := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	ctx, _, start := testSpeakers(t, addrN, addrOld)
	n := start(addrN, Config{Peers: []netip.Addr{addrOld}})
	// The older reef's GoBGP: its families, its sessions' families and
	// limits.
	old := newGoBGP(t, ctx, addrOld, n.cfg.Port, testASN, []uint32{
		uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
		uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_L3VPN_IPV4_UNICAST]),
	})
	lim := PrefixLimits(testPools)
	addGoBGPPeer(t, ctx, old, addrOld, n.cfg.Port, addrN, []*api.AfiSafi{
		afiSafi(api.Family_AFI_IP, api.Family_SAFI_UNICAST, lim.Unicast), afiSafi(api.Family_AFI_IP, api.Family_SAFI_MPLS_VPN, lim.VPN),
	})
	if err := n.connect(ctx); err != nil {
		t.Fatal(err)
	}

	// The node claims an IPv4 and an IPv6 block and owns another IPv4 one;
	// the older reef grants it the IPv4 claim.
	ownN := UnicastBlock{Block: netip.MustParsePrefix("10.244.7.0/26"), Owner: blockproto.Node{Addr: nodeA, Inc: 7}}
	if err := n.AnnounceTable(blockproto.Table{Records: []blockproto.Record{testRecord()}, Claims: []blockproto.Claim{testClaim(), testClaim6()}}, []UnicastBlock{ownN}); err != nil {
		t.Fatal(err)
	}
	oldRec := testRecord()
	oldRec.Node = blockproto.Node{Addr: nodeB, Inc: 8}
	fromOld := blockproto.Table{Records: []blockproto.Record{oldRec}, Grants: []blockproto.Grant{testGrant()}}
	nh, err := bgppkt.NewPathAttributeNextHop(addrOld)
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range []VPNRoute{must(EncodeRecord(testASN, oldRec)), must(EncodeGrant(testASN, testGrant()))} {
		p, err := vpnPath(rt, nh)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{p}}); err != nil {
			t.Fatal(err)
		}
	}

	learnsExactly(t, "the node learns the older reef's paths", n, fromOld)
	// The older reef has the node's IPv4 paths, each as the node sent it,
	// and the node's block; the IPv6 claim never reached it.
	eventually(t, "the older reef learns the node's IPv4 paths", func() string {
		var tbl blockproto.Table
		var blocks []UnicastBlock
		var errs []string
		err := old.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_VPN}, func(nlri bgppkt.NLRI, ps []*apiutil.Path) {
			vpn := nlri.(*bgppkt.LabeledVPNIPAddrPrefix)
			for _, p := range ps {
				if p.PeerAddress != addrN {
					continue
				}
				lcs, _ := pathAttrs(nil, p.Attrs)
				if err := DecodeVPN(testASN, testPools, AFIIPv4, rdOf(vpn.RD), vpn.Prefix, lcs, &tbl); err != nil {
					errs = append(errs, err.Error())
				}
			}
		})
		if err != nil {
			return err.Error()
		}
		err = old.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC}, func(nlri bgppkt.NLRI, ps []*apiutil.Path) {
			for _, p := range ps {
				if p.PeerAddress != addrN {
					continue
				}
				lcs, nh := pathAttrs(nil, p.Attrs)
				b, err := DecodeUnicast(testASN, testPools, nlri.(*bgppkt.IPAddrPrefix).Prefix, nh, lcs)
				if err != nil {
					errs = append(errs, err.Error())
				}
				blocks = append(blocks, b)
			}
		})
		if err != nil {
			return err.Error()
		}
		tbl.Sort()
		want := blockproto.Table{Records: []blockproto.Record{testRecord()}, Claims: []blockproto.Claim{testClaim()}}
		if d, db := cmp.Diff(want, tbl, cmpOpts...), cmp.Diff([]UnicastBlock{ownN}, blocks, cmpOpts...); d != "" || db != "" || len(errs) > 0 {
			return fmt.Sprintf("VPN-IPv4 (-want +got):\n%s\nIPv4 unicast (-want +got):\n%s\ndropped: %v", d, db, errs)
		}
		return ""
	})
	var st PeerStatus
	for _, s := range n.Status(ctx) {
		if s.Address == addrOld {
			st = s
		}
	}
	if !st.Established || st.Received != 2 || st.Accepted != 2 {
		t.Errorf("the node's status of the older reef: %+v, want established, 2 paths received and accepted", st)
	}
	if n.Dropped() != 0 {
		t.Errorf("the node dropped %d paths of the older reef's", n.Dropped())
	}
}

// The speaker refuses, before it starts, a node IPv6 address that cannot be
// the next hop of the node's IPv6 blocks.
func TestNodeAddressV6Refused(t *testing.T) {
	for a, want := range map[string]string{
		"192.168.77.11":        "node IPv6 address 192.168.77.11 is not a global unicast IPv6 address",
		"::ffff:192.168.77.11": "is not a global unicast IPv6 address",
		"::":                   "is not a global unicast IPv6 address",
		"::1":                  "is not a global unicast IPv6 address",
		"fe80::1":              "is not a global unicast IPv6 address",
		"ff02::1":              "is not a global unicast IPv6 address",
		"fd00:10:244::9":       "node IPv6 address fd00:10:244::9 is a pod address (pool fd00:10:244::/56)",
	} {
		cfg := Config{ASN: testASN, RouterID: nodeA, NodeAddressV6: netip.MustParseAddr(a), Pools: testPools}
		if _, err := listen(t.Context(), cfg, slog.New(slog.DiscardHandler), func() {}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("node IPv6 address %s: %v, want an error mentioning %q", a, err, want)
		}
	}
}

// learnsExactly waits until sp's learned table is want.
func learnsExactly(t *testing.T, what string, sp *Speaker, want blockproto.Table) {
	t.Helper()
	want.Sort()
	eventually(t, what, func() string {
		got, err := sp.LearnedTable()
		if err != nil {
			t.Fatal(err)
		}
		got.Sort()
		return cmp.Diff(want, got, cmpOpts...)
	})
}

// union is every entry of the tables.
func union(ts ...blockproto.Table) blockproto.Table {
	var out blockproto.Table
	for _, t := range ts {
		out.Records = append(out.Records, t.Records...)
		out.Claims = append(out.Claims, t.Claims...)
		out.Grants = append(out.Grants, t.Grants...)
		out.Forgets = append(out.Forgets, t.Forgets...)
		out.Seen = append(out.Seen, t.Seen...)
	}
	return out
}
