package routes

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math/rand"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/reefcni/reef/routes/linkname"
	"github.com/reefcni/reef/routes/tunnel"
)

var stateCmpOpts = cmp.Options{
	cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{}),
	cmpopts.EquateEmpty(),
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func podRt(dst, dev string) Route { return Route{Dst: pfx(dst), Kind: PodRoute, Dev: dev} }

func hole(dst string) Route { return Route{Dst: pfx(dst), Kind: Blackhole} }

func state(links []string, routes ...Route) State {
	st := State{Routes: map[netip.Prefix]Route{}, Links: map[string]bool{}}
	for _, r := range routes {
		st.Routes[r.Dst] = r
	}
	for _, l := range links {
		st.Links[l] = true
	}
	return st
}

// ep is an endpoint with veth and one address, or one of each family
// ("10.244.1.5,fd00:10:244::5").
func ep(ips, veth string) Endpoint {
	return Endpoint{IPs: addrs(strings.Split(ips, ",")...), HostVeth: veth}
}

func addrs(ips ...string) []netip.Addr {
	var out []netip.Addr
	for _, ip := range ips {
		out = append(out, netip.MustParseAddr(ip))
	}
	return out
}

// withMTU is st with veth's MTU: the kernel's (netns "") or the wanted
// one, with the pod's end in netns as eth0.
func withMTU(st State, veth, netns string, mtu int) State {
	if st.MTUs == nil {
		st.MTUs = map[string]PodMTU{}
	}
	m := PodMTU{HostVeth: veth, MTU: mtu}
	if netns != "" {
		m.Netns, m.IfName = netns, "eth0"
	}
	st.MTUs[veth] = m
	return st
}

// epMTU is an endpoint whose veth pair wants mtu, its pod in netns.
func epMTU(ip, veth, netns string, mtu int) Endpoint {
	e := ep(ip, veth)
	e.Netns, e.IfName, e.MTU = netns, "eth0", mtu
	return e
}

func linkSet(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func TestDesired(t *testing.T) {
	tests := []struct {
		name      string
		endpoints []Endpoint
		blocks    []netip.Prefix
		remote    []RemoteBlock
		existing  map[string]bool
		want      State
	}{
		{
			name: "nothing",
			want: state(nil),
		},
		{
			name:   "own blocks are blackholed",
			blocks: []netip.Prefix{pfx("10.244.1.0/26"), pfx("10.244.1.64/26")},
			want:   state(nil, hole("10.244.1.0/26"), hole("10.244.1.64/26")),
		},
		{
			name:      "endpoint with its veth gets a route",
			endpoints: []Endpoint{ep("10.244.1.5", "reefaaaaaaaaaaa")},
			blocks:    []netip.Prefix{pfx("10.244.1.0/26")},
			existing:  linkSet("reefaaaaaaaaaaa"),
			want: state([]string{"reefaaaaaaaaaaa"},
				hole("10.244.1.0/26"), podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
		},
		{
			name:      "endpoint whose veth is gone keeps the veth but gets no route",
			endpoints: []Endpoint{ep("10.244.1.5", "reefaaaaaaaaaaa")},
			existing:  linkSet("reefbbbbbbbbbbb"),
			want:      state([]string{"reefaaaaaaaaaaa"}),
		},
		{
			name:      "endpoint without veth gets neither",
			endpoints: []Endpoint{ep("10.244.1.5", "")},
			existing:  linkSet(""),
			want:      state(nil),
		},
		{
			name:      "an endpoint's MTU is wanted on its veth pair, while the veth exists",
			endpoints: []Endpoint{epMTU("10.244.1.5", "reefaaaaaaaaaaa", "/run/netns/a", 1400), epMTU("10.244.1.6", "reefbbbbbbbbbbb", "/run/netns/b", 1400)},
			existing:  linkSet("reefaaaaaaaaaaa"),
			want: withMTU(state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"}, podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
				"reefaaaaaaaaaaa", "/run/netns/a", 1400),
		},
		{
			name:      "an endpoint without an MTU leaves its veth's",
			endpoints: []Endpoint{epMTU("10.244.1.5", "reefaaaaaaaaaaa", "/run/netns/a", 0)},
			existing:  linkSet("reefaaaaaaaaaaa"),
			want:      state([]string{"reefaaaaaaaaaaa"}, podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
		},
		{
			name: "mixed",
			endpoints: []Endpoint{
				ep("10.244.1.5", "reefaaaaaaaaaaa"),
				ep("10.244.1.6", ""),
				ep("10.244.1.7", "reefccccccccccc"),
			},
			blocks:   []netip.Prefix{pfx("10.244.1.0/26")},
			existing: linkSet("reefaaaaaaaaaaa", "reefstray000000"),
			want: state([]string{"reefaaaaaaaaaaa", "reefccccccccccc"},
				hole("10.244.1.0/26"), podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
		},
		{
			name:      "an IPv6 endpoint gets a /128, an IPv6 block a blackhole",
			endpoints: []Endpoint{ep("fd00:10:244::5", "reefaaaaaaaaaaa")},
			blocks:    []netip.Prefix{pfx("fd00:10:244::/122")},
			existing:  linkSet("reefaaaaaaaaaaa"),
			want: state([]string{"reefaaaaaaaaaaa"},
				hole("fd00:10:244::/122"), podRt("fd00:10:244::5/128", "reefaaaaaaaaaaa")),
		},
		{
			name: "a dual-stack endpoint gets a /32 and a /128 on its one veth, and keeps neither without it",
			endpoints: []Endpoint{epMTU("10.244.1.5,fd00:10:244::5", "reefaaaaaaaaaaa", "/run/netns/a", 1400),
				ep("fd00:10:244::6,10.244.1.6", "reefbbbbbbbbbbb")},
			blocks:   []netip.Prefix{pfx("10.244.1.0/26"), pfx("fd00:10:244::/122")},
			existing: linkSet("reefaaaaaaaaaaa"),
			want: withMTU(state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"},
				hole("10.244.1.0/26"), hole("fd00:10:244::/122"),
				podRt("10.244.1.5/32", "reefaaaaaaaaaaa"), podRt("fd00:10:244::5/128", "reefaaaaaaaaaaa")),
				"reefaaaaaaaaaaa", "/run/netns/a", 1400),
		},
		{
			name: "IPv6 blocks of other nodes: onlink to the owner on the uplink or vxlan.reef, or through a router",
			remote: []RemoteBlock{
				{Block: pfx("fd00:10:244::40/122"), Node: netip.MustParseAddr("2001:db8:77::12"), Dev: "eth0"},
				{Block: pfx("fd00:10:244::80/122"), Node: netip.MustParseAddr("2001:db8:78::11"), Dev: tunnel.VXLANDevice},
				{Block: pfx("fd00:10:244::c0/122"), Node: netip.MustParseAddr("2001:db8:78::12"), Dev: "eth0", Gateway: netip.MustParseAddr("fe80::1")},
				{Block: pfx("10.244.2.0/26"), Node: netip.MustParseAddr("192.168.77.12"), Dev: "eth0"},
			},
			want: state(nil,
				Route{Dst: pfx("fd00:10:244::40/122"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("2001:db8:77::12"), OnLink: true},
				Route{Dst: pfx("fd00:10:244::80/122"), Kind: RemoteRoute, Dev: tunnel.VXLANDevice, Via: netip.MustParseAddr("2001:db8:78::11"), OnLink: true},
				Route{Dst: pfx("fd00:10:244::c0/122"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("fe80::1")},
				Route{Dst: pfx("10.244.2.0/26"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.168.77.12"), OnLink: true}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Desired(tt.endpoints, tt.blocks, tt.remote, tt.existing)
			if diff := cmp.Diff(tt.want, got, stateCmpOpts); diff != "" {
				t.Errorf("Desired (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name       string
		want, have State
		plan       Plan
	}{
		{
			name: "equal states need nothing",
			want: state([]string{"reefaaaaaaaaaaa"}, hole("10.244.1.0/26"), podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
			have: state([]string{"reefaaaaaaaaaaa"}, hole("10.244.1.0/26"), podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
		},
		{
			name: "both empty",
			want: state(nil),
			have: state(nil),
		},
		{
			name: "missing routes are added",
			want: state([]string{"reefaaaaaaaaaaa"}, hole("10.244.1.0/26"), podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
			have: state([]string{"reefaaaaaaaaaaa"}),
			plan: Plan{Replace: []Route{hole("10.244.1.0/26"), podRt("10.244.1.5/32", "reefaaaaaaaaaaa")}},
		},
		{
			name: "route on the wrong device is replaced",
			want: state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"}, podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
			have: state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"}, podRt("10.244.1.5/32", "reefbbbbbbbbbbb")),
			plan: Plan{Replace: []Route{podRt("10.244.1.5/32", "reefaaaaaaaaaaa")}},
		},
		{
			name: "route of an unknown shape is replaced",
			want: state([]string{"reefaaaaaaaaaaa"}, podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
			have: state([]string{"reefaaaaaaaaaaa"}, podRt("10.244.1.5/32", "?reefaaaaaaaaaaa")),
			plan: Plan{Replace: []Route{podRt("10.244.1.5/32", "reefaaaaaaaaaaa")}},
		},
		{
			name: "pod route where a blackhole belongs is replaced",
			want: state(nil, hole("10.244.1.0/26")),
			have: state([]string{"reefaaaaaaaaaaa"}, podRt("10.244.1.0/26", "reefaaaaaaaaaaa")),
			plan: Plan{Replace: []Route{hole("10.244.1.0/26")}, DeleteLink: []string{"reefaaaaaaaaaaa"}},
		},
		{
			name: "blackhole where a pod route belongs is replaced",
			want: state([]string{"reefaaaaaaaaaaa"}, podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
			have: state([]string{"reefaaaaaaaaaaa"}, hole("10.244.1.5/32")),
			plan: Plan{Replace: []Route{podRt("10.244.1.5/32", "reefaaaaaaaaaaa")}},
		},
		{
			name: "routes not desired are deleted",
			want: state([]string{"reefaaaaaaaaaaa"}),
			have: state([]string{"reefaaaaaaaaaaa"}, hole("10.244.2.0/26"), podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
			plan: Plan{DeleteRoute: []Route{podRt("10.244.1.5/32", "reefaaaaaaaaaaa"), hole("10.244.2.0/26")}},
		},
		{
			name: "stray veths are deleted, endpoints' veths kept",
			want: state([]string{"reefaaaaaaaaaaa", "reefccccccccccc"}),
			have: state([]string{"reefzzzzzzzzzzz", "reefaaaaaaaaaaa", "reefbbbbbbbbbbb"}),
			plan: Plan{DeleteLink: []string{"reefbbbbbbbbbbb", "reefzzzzzzzzzzz"}},
		},
		{
			name: "a veth pair of another MTU gets the wanted one",
			want: withMTU(withMTU(state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"}), "reefbbbbbbbbbbb", "/run/netns/b", 1400), "reefaaaaaaaaaaa", "/run/netns/a", 1400),
			have: withMTU(withMTU(state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"}), "reefaaaaaaaaaaa", "", 1500), "reefbbbbbbbbbbb", "", 9000),
			plan: Plan{SetMTU: []PodMTU{{HostVeth: "reefaaaaaaaaaaa", Netns: "/run/netns/a", IfName: "eth0", MTU: 1400},
				{HostVeth: "reefbbbbbbbbbbb", Netns: "/run/netns/b", IfName: "eth0", MTU: 1400}}},
		},
		{
			name: "a veth pair at the wanted MTU needs nothing",
			want: withMTU(state([]string{"reefaaaaaaaaaaa"}), "reefaaaaaaaaaaa", "/run/netns/a", 1400),
			have: withMTU(state([]string{"reefaaaaaaaaaaa"}), "reefaaaaaaaaaaa", "", 1400),
		},
		{
			name: "no MTU for a veth the kernel does not have",
			want: withMTU(state([]string{"reefaaaaaaaaaaa"}), "reefaaaaaaaaaaa", "/run/netns/a", 1400),
			have: state(nil),
		},
		{
			name: "IPv6: a missing /128 and blackhole are added, a stale /128 deleted, a /128 on the wrong veth replaced",
			want: state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"}, hole("fd00:10:244::/122"),
				podRt("fd00:10:244::5/128", "reefaaaaaaaaaaa"), podRt("fd00:10:244::6/128", "reefbbbbbbbbbbb")),
			have: state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"},
				podRt("fd00:10:244::6/128", "reefaaaaaaaaaaa"), podRt("fd00:10:244::7/128", "reefbbbbbbbbbbb")),
			plan: Plan{
				Replace:     []Route{hole("fd00:10:244::/122"), podRt("fd00:10:244::5/128", "reefaaaaaaaaaaa"), podRt("fd00:10:244::6/128", "reefbbbbbbbbbbb")},
				DeleteRoute: []Route{podRt("fd00:10:244::7/128", "reefbbbbbbbbbbb")},
			},
		},
		{
			name: "dual-stack: each family's routes on their own, IPv4 sorted first",
			want: state([]string{"reefaaaaaaaaaaa"}, hole("fd00:10:244::/122"), hole("10.244.1.0/26"),
				podRt("fd00:10:244::5/128", "reefaaaaaaaaaaa"), podRt("10.244.1.5/32", "reefaaaaaaaaaaa")),
			have: state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"}, hole("10.244.1.0/26"), hole("fd00:10:244::40/122"),
				podRt("10.244.1.5/32", "reefaaaaaaaaaaa"), podRt("fd00:10:244::5/128", "?reefaaaaaaaaaaa")),
			plan: Plan{
				Replace:     []Route{hole("fd00:10:244::/122"), podRt("fd00:10:244::5/128", "reefaaaaaaaaaaa")},
				DeleteRoute: []Route{hole("fd00:10:244::40/122")},
				DeleteLink:  []string{"reefbbbbbbbbbbb"},
			},
		},
		{
			name: "an IPv6 remote block whose owner moved to vxlan.reef is replaced",
			want: state(nil, Route{Dst: pfx("fd00:10:244::40/122"), Kind: RemoteRoute, Dev: tunnel.VXLANDevice, Via: netip.MustParseAddr("2001:db8:78::11"), OnLink: true}),
			have: state(nil, Route{Dst: pfx("fd00:10:244::40/122"), Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("2001:db8:78::11"), OnLink: true}),
			plan: Plan{Replace: []Route{{Dst: pfx("fd00:10:244::40/122"), Kind: RemoteRoute, Dev: tunnel.VXLANDevice, Via: netip.MustParseAddr("2001:db8:78::11"), OnLink: true}}},
		},
		{
			name: "everything at once, sorted",
			want: state([]string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb"},
				hole("10.244.1.64/26"), hole("10.244.1.0/26"),
				podRt("10.244.1.9/32", "reefaaaaaaaaaaa"), podRt("10.244.1.10/32", "reefbbbbbbbbbbb"),
				podRt("10.244.1.2/32", "reefbbbbbbbbbbb")),
			have: state([]string{"reefbbbbbbbbbbb", "reefyyyyyyyyyyy", "reefxxxxxxxxxxx"},
				hole("10.244.1.0/26"), podRt("10.244.1.2/32", "reefbbbbbbbbbbb"),
				podRt("10.244.3.1/32", "reefyyyyyyyyyyy"), hole("10.244.0.0/26"), hole("10.244.0.0/24"),
				podRt("10.244.1.10/32", "reefyyyyyyyyyyy")),
			plan: Plan{
				Replace: []Route{
					podRt("10.244.1.9/32", "reefaaaaaaaaaaa"), podRt("10.244.1.10/32", "reefbbbbbbbbbbb"),
					hole("10.244.1.64/26"),
				},
				DeleteRoute: []Route{hole("10.244.0.0/24"), hole("10.244.0.0/26"), podRt("10.244.3.1/32", "reefyyyyyyyyyyy")},
				DeleteLink:  []string{"reefxxxxxxxxxxx", "reefyyyyyyyyyyy"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Diff(tt.want, tt.have)
			if diff := cmp.Diff(tt.plan, got, stateCmpOpts); diff != "" {
				t.Errorf("Diff (-want +got):\n%s", diff)
			}
			if got.Empty() != (len(tt.plan.Replace)+len(tt.plan.DeleteRoute)+len(tt.plan.SetMTU)+len(tt.plan.DeleteLink) == 0) {
				t.Errorf("Empty() = %v for %+v", got.Empty(), got)
			}
		})
	}
}

// apply carries a plan out on a State the way Kernel.Apply does on the
// kernel: a route or an MTU needs its device, and deleting a link takes
// its routes and MTU.
func apply(t *testing.T, have State, p Plan) State {
	t.Helper()
	out := state(nil)
	out.MTUs = map[string]PodMTU{}
	for d, r := range have.Routes {
		out.Routes[d] = r
	}
	for l := range have.Links {
		out.Links[l] = true
		out.MTUs[l] = have.MTUs[l]
	}
	for _, r := range p.Replace {
		if r.Kind == PodRoute && !out.Links[r.Dev] {
			t.Fatalf("plan replaces %s, but device %s does not exist", r, r.Dev)
		}
		out.Routes[r.Dst] = r
	}
	for _, r := range p.DeleteRoute {
		delete(out.Routes, r.Dst)
	}
	for _, m := range p.SetMTU {
		if !out.Links[m.HostVeth] {
			t.Fatalf("plan sets MTU %d on %s, which does not exist", m.MTU, m.HostVeth)
		}
		out.MTUs[m.HostVeth] = PodMTU{HostVeth: m.HostVeth, MTU: m.MTU}
	}
	for _, l := range p.DeleteLink {
		delete(out.Links, l)
		delete(out.MTUs, l)
		for d, r := range out.Routes {
			if r.Kind == PodRoute && r.Dev == l {
				delete(out.Routes, d)
			}
		}
	}
	return out
}

func plansSorted(p Plan) bool {
	less := func(a, b Route) bool {
		if c := a.Dst.Addr().Compare(b.Dst.Addr()); c != 0 {
			return c < 0
		}
		return a.Dst.Bits() < b.Dst.Bits()
	}
	return sort.SliceIsSorted(p.Replace, func(i, j int) bool { return less(p.Replace[i], p.Replace[j]) }) &&
		sort.SliceIsSorted(p.DeleteRoute, func(i, j int) bool { return less(p.DeleteRoute[i], p.DeleteRoute[j]) }) &&
		sort.SliceIsSorted(p.SetMTU, func(i, j int) bool { return p.SetMTU[i].HostVeth < p.SetMTU[j].HostVeth }) &&
		sort.StringsAreSorted(p.DeleteLink)
}

// TestDiffConverges replays random sequences of desired states against a
// fake kernel: after each plan the fake holds exactly the desired routes
// and MTUs, keeps only desired veths (links are made by ADD, never by a
// plan), and a second Diff finds nothing to do.
func TestDiffConverges(t *testing.T) {
	veths := []string{"reefaaaaaaaaaaa", "reefbbbbbbbbbbb", "reefccccccccccc", "reefddddddddddd", "reefeeeeeeeeeee"}
	blocks := []netip.Prefix{pfx("10.244.1.0/26"), pfx("10.244.1.64/26"), pfx("10.244.2.0/26"), pfx("10.244.1.5/32"),
		pfx("fd00:10:244::/122"), pfx("fd00:10:244::40/122"), pfx("fd00:10:244::5/128")}
	// addr is the i-th address of a family: 10.244.1.i or fd00:10:244::i.
	addr := func(v6 bool, i int) netip.Addr {
		if v6 {
			return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x44, 15: byte(i)})
		}
		return netip.AddrFrom4([4]byte{10, 244, 1, byte(i)})
	}

	for seed := int64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewSource(seed))
			// Start from a kernel with random reef leftovers, some of
			// shapes Read reports with an impossible device.
			have := state(nil)
			have.MTUs = map[string]PodMTU{}
			addVeth := func(v string) {
				if !have.Links[v] {
					have.Links[v] = true
					have.MTUs[v] = PodMTU{HostVeth: v, MTU: []int{1400, 1450, 1500}[rnd.Intn(3)]}
				}
			}
			for _, v := range veths {
				if rnd.Intn(2) == 0 {
					addVeth(v)
				}
			}
			for i := range 12 {
				a := addr(i >= 6, rnd.Intn(12))
				dst := netip.PrefixFrom(a, a.BitLen())
				switch i % 3 {
				case 0:
					have.Routes[dst] = Route{Dst: dst, Kind: Blackhole}
				case 1:
					have.Routes[dst] = Route{Dst: dst, Kind: PodRoute, Dev: "?" + veths[rnd.Intn(len(veths))]}
				default:
					if v := veths[rnd.Intn(len(veths))]; have.Links[v] {
						have.Routes[dst] = Route{Dst: dst, Kind: PodRoute, Dev: v}
					}
				}
			}
			for step := range 15 {
				// ADDs happened since the last pass: some veths appear.
				for _, v := range veths {
					if rnd.Intn(4) == 0 {
						addVeth(v)
					}
				}
				mtu := []int{0, 1400, 1450, 1500}[rnd.Intn(4)] // the pods' MTU of this pass; 0: none
				var eps []Endpoint
				for i := range rnd.Intn(8) {
					veth := ""
					if rnd.Intn(5) != 0 {
						veth = veths[rnd.Intn(len(veths))]
					}
					// IPv4, IPv6 or dual-stack.
					var ips []netip.Addr
					switch n := i + rnd.Intn(10); rnd.Intn(3) {
					case 0:
						ips = []netip.Addr{addr(false, n)}
					case 1:
						ips = []netip.Addr{addr(true, n)}
					default:
						ips = []netip.Addr{addr(true, n), addr(false, n)}
					}
					eps = append(eps, Endpoint{IPs: ips, HostVeth: veth, Netns: "/run/netns/" + veth, IfName: "eth0", MTU: mtu})
				}
				var own []netip.Prefix
				for _, b := range blocks {
					if rnd.Intn(2) == 0 {
						own = append(own, b)
					}
				}
				want := Desired(eps, own, nil, have.Links)
				plan := Diff(want, have)
				if !plansSorted(plan) {
					t.Fatalf("step %d: plan not sorted: %+v", step, plan)
				}
				got := apply(t, have, plan)

				wantLinks := map[string]bool{}
				for l := range have.Links {
					if want.Links[l] {
						wantLinks[l] = true
					}
				}
				if diff := cmp.Diff(want.Routes, got.Routes, stateCmpOpts); diff != "" {
					t.Fatalf("step %d: routes after plan %+v (-want +got):\n%s", step, plan, diff)
				}
				if diff := cmp.Diff(wantLinks, got.Links, stateCmpOpts); diff != "" {
					t.Fatalf("step %d: links after plan %+v (-want +got):\n%s", step, plan, diff)
				}
				for l, m := range want.MTUs {
					if got.MTUs[l].MTU != m.MTU {
						t.Fatalf("step %d: %s has MTU %d after plan %+v, want %d", step, l, got.MTUs[l].MTU, plan, m.MTU)
					}
				}
				if again := Diff(want, got); !again.Empty() {
					t.Fatalf("step %d: second Diff not empty: %+v", step, again)
				}
				have = got
			}
		})
	}
}

func TestHostVethName(t *testing.T) {
	hash := func(s string) string {
		sum := sha1.Sum([]byte(s))
		return hex.EncodeToString(sum[:])
	}
	tests := []struct {
		ns, pod, id string
		want        string
	}{
		{"default", "web-1", "3f1c0a9e2b7d", "reef" + hash("default.web-1")[:11]},
		{"kube-system", "coredns-abc", "", "reef" + hash("kube-system.coredns-abc")[:11]},
		{"", "", "3f1c0a9e2b7d", "reef" + hash("3f1c0a9e2b7d")[:11]},
		{"default", "", "3f1c0a9e2b7d", "reef" + hash("3f1c0a9e2b7d")[:11]},
		// Fixed value, so that a change of scheme (which would orphan every
		// veth on upgrade) cannot pass by changing both sides.
		{"default", "web-1", "", "reef" + "0761ccbeace"},
	}
	for _, tt := range tests {
		got := HostVethName(tt.ns, tt.pod, tt.id)
		if got != tt.want {
			t.Errorf("HostVethName(%q, %q, %q) = %q, want %q", tt.ns, tt.pod, tt.id, got, tt.want)
		}
		if len(got) != 15 || !strings.HasPrefix(got, HostVethPrefix) || !linkname.Ours(got) {
			t.Errorf("HostVethName(%q, %q, %q) = %q: want 15 characters starting with %q", tt.ns, tt.pod, tt.id, got, HostVethPrefix)
		}
	}
	if a, b := HostVethName("default", "web-1", "x"), HostVethName("default", "web-2", "x"); a == b {
		t.Errorf("pods web-1 and web-2 share veth name %s", a)
	}
	if a, b := HostVethName("default", "web-1", "x"), HostVethName("default", "web-1", "y"); a != b {
		t.Errorf("one pod gets two veth names across sandboxes: %s, %s", a, b)
	}
}

func TestCompare(t *testing.T) {
	pod := netip.MustParsePrefix("10.244.1.5/32")
	block := netip.MustParsePrefix("10.244.1.0/26")
	remote := netip.MustParsePrefix("10.244.2.0/26")
	stale := netip.MustParsePrefix("10.244.3.0/26")
	pod6 := netip.MustParsePrefix("fd00:10:244::5/128")
	block6 := netip.MustParsePrefix("fd00:10:244::/122")
	remote6 := netip.MustParsePrefix("fd00:10:244::40/122")
	want := State{Routes: map[netip.Prefix]Route{
		pod:     {Dst: pod, Kind: PodRoute, Dev: "reefaaaaaaaaaaa"},
		block:   {Dst: block, Kind: Blackhole},
		remote:  {Dst: remote, Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.168.77.12"), OnLink: true},
		pod6:    {Dst: pod6, Kind: PodRoute, Dev: "reefaaaaaaaaaaa"},
		block6:  {Dst: block6, Kind: Blackhole},
		remote6: {Dst: remote6, Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("2001:db8:77::12"), OnLink: true},
	}, Links: map[string]bool{"reefaaaaaaaaaaa": true, "reefbbbbbbbbbbb": true}}
	have := State{Routes: map[netip.Prefix]Route{
		block:   {Dst: block, Kind: Blackhole},
		remote:  {Dst: remote, Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("192.168.77.13"), OnLink: true},
		stale:   {Dst: stale, Kind: Blackhole},
		pod6:    {Dst: pod6, Kind: PodRoute, Dev: "reefaaaaaaaaaaa"},
		remote6: {Dst: remote6, Kind: RemoteRoute, Dev: "eth0", Via: netip.MustParseAddr("2001:db8:77::13"), OnLink: true},
	}, Links: map[string]bool{"reefaaaaaaaaaaa": true, "reefccccccccccc": true}}
	var got []string
	for _, e := range Compare(want, have) {
		got = append(got, fmt.Sprintf("%s %s %s: want %q have %q", e.Kind, e.Object, e.State, e.Want, e.Have))
	}
	wantEntries := []string{
		`route 10.244.1.0/26 in-sync: want "blackhole 10.244.1.0/26 proto reef" have "blackhole 10.244.1.0/26 proto reef"`,
		`route 10.244.1.5/32 missing: want "10.244.1.5/32 dev reefaaaaaaaaaaa scope link proto reef" have ""`,
		`route 10.244.2.0/26 differs: want "10.244.2.0/26 via 192.168.77.12 dev eth0 onlink proto reef" have "10.244.2.0/26 via 192.168.77.13 dev eth0 onlink proto reef"`,
		`route 10.244.3.0/26 extra: want "" have "blackhole 10.244.3.0/26 proto reef"`,
		`route fd00:10:244::/122 missing: want "blackhole fd00:10:244::/122 proto reef" have ""`,
		`route fd00:10:244::5/128 in-sync: want "fd00:10:244::5/128 dev reefaaaaaaaaaaa proto reef" have "fd00:10:244::5/128 dev reefaaaaaaaaaaa proto reef"`,
		`route fd00:10:244::40/122 differs: want "fd00:10:244::40/122 via 2001:db8:77::12 dev eth0 onlink proto reef" have "fd00:10:244::40/122 via 2001:db8:77::13 dev eth0 onlink proto reef"`,
		`link reefaaaaaaaaaaa in-sync: want "reefaaaaaaaaaaa" have "reefaaaaaaaaaaa"`,
		`link reefbbbbbbbbbbb missing: want "reefbbbbbbbbbbb" have ""`,
		`link reefccccccccccc extra: want "" have "reefccccccccccc"`,
	}
	if diff := cmp.Diff(wantEntries, got); diff != "" {
		t.Errorf("Compare (-want +got):\n%s", diff)
	}
}

// TestDesiredRemoteDevices: routes to other nodes' blocks go on the device
// the encapsulation picked, tunl0 included (the IPIP dataplane cannot be
// tried on this kernel; its desired state is what is tested).
func TestDesiredRemoteDevices(t *testing.T) {
	remote := []RemoteBlock{
		{Block: netip.MustParsePrefix("10.244.1.0/26"), Node: netip.MustParseAddr("192.168.77.12"), Dev: "eth0"},
		{Block: netip.MustParsePrefix("10.244.2.0/26"), Node: netip.MustParseAddr("192.168.78.11"), Dev: tunnel.VXLANDevice},
		{Block: netip.MustParsePrefix("10.244.3.0/26"), Node: netip.MustParseAddr("192.168.78.12"), Dev: tunnel.IPIPDevice},
	}
	got := Desired(nil, nil, remote, nil)
	for _, r := range remote {
		want := Route{Dst: r.Block, Kind: RemoteRoute, Dev: r.Dev, Via: r.Node, OnLink: true}
		if got.Routes[r.Block] != want {
			t.Errorf("route to %s = %+v, want %+v (%s)", r.Block, got.Routes[r.Block], want, want)
		}
	}
	if s := got.Routes[remote[2].Block].String(); s != "10.244.3.0/26 via 192.168.78.12 dev tunl0 onlink proto reef" {
		t.Errorf("IPIP route renders as %q", s)
	}
}
