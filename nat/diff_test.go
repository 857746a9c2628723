package nat

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
	// addrs lets go-cmp compare netip.Addr, whose fields are unexported.
	addrs = cmp.Options{cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
		cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })}
)

func testPools() []Pool {
	return []Pool{
		{CIDR: pfx("10.244.0.0/16"), NATOutgoing: true},
		{CIDR: pfx("10.245.0.0/24"), NATOutgoing: false},
	}
}

func testPods() []Pod {
	return []Pod{
		{Veth: "reef0123456789a", IP: addr("10.244.0.5")},
		{Veth: "reefbbbbbbbbbbb", IP: addr("10.244.0.6")},
	}
}

func findSet(t Table, name string) Set {
	for _, s := range t.Sets {
		if s.Name == name {
			return s
		}
	}
	return Set{}
}

func TestDesired(t *testing.T) {
	pods := append(testPods(),
		Pod{Veth: "", IP: addr("10.244.0.7")},                 // no veth (taken over by a newer sandbox)
		Pod{Veth: "reef0123456789a", IP: addr("10.244.0.5")},  // twice
		Pod{Veth: "reefcccccccccccc", IP: addr("10.244.0.8")}, // 16 characters: no interface has such a name
	)
	pools := append(testPools(),
		Pool{CIDR: pfx("10.244.3.0/24"), NATOutgoing: true}, // inside the first
		Pool{CIDR: pfx("10.246.0.7/16"), NATOutgoing: true}, // not masked
	)
	tables := Desired(IPv4, pools, pods)
	if got := IDs(tables); !cmp.Equal(got, []TableID{{nftables.TableFamilyIPv4, "reef"}, {nftables.TableFamilyARP, "reef"}, {nftables.TableFamilyINet, "reef-hostport"}}) {
		t.Fatalf("tables %v", got)
	}
	r := func(from, to string) Elem { return Elem{From: addr(from), To: addr(to)} }
	if diff := cmp.Diff([]Elem{r("10.244.0.0", "10.244.255.255"), r("10.245.0.0", "10.245.0.255"), r("10.246.0.0", "10.246.255.255")},
		findSet(tables[0], SetAllPools).Elems, addrs); diff != "" {
		t.Errorf("all-pools (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Elem{r("10.244.0.0", "10.244.255.255"), r("10.246.0.0", "10.246.255.255")},
		findSet(tables[0], SetMasqPools).Elems, addrs); diff != "" {
		t.Errorf("masq-pools (-want +got):\n%s", diff)
	}
	want := []Elem{
		{Iface: "reef0123456789a", From: addr("10.244.0.5"), To: addr("10.244.0.5")},
		{Iface: "reefbbbbbbbbbbb", From: addr("10.244.0.6"), To: addr("10.244.0.6")},
	}
	if diff := cmp.Diff(want, findSet(tables[1], SetPodAddrs).Elems, addrs); diff != "" {
		t.Errorf("pod-addrs (-want +got):\n%s", diff)
	}
	if c := tables[0].Chains[0]; c.Priority != 110 || c.Hook != *nftables.ChainHookPostrouting || c.Type != nftables.ChainTypeNAT {
		t.Errorf("postrouting chain %+v, want nat hook postrouting priority srcnat+10", c)
	}
	if c := tables[1].Chains[0]; c.Hook != 1 || c.Type != nftables.ChainTypeFilter {
		t.Errorf("arp chain %+v, want filter hook output (NF_ARP_OUT = 1)", c)
	}
	// An IPv6 pool has no place in table ip reef.
	v6 := NATTable(IPv4, []Pool{{CIDR: pfx("fd00::/64"), NATOutgoing: true}})
	if n := len(findSet(v6, SetAllPools).Elems); n != 0 {
		t.Errorf("IPv6 pool in the IPv4 table: %d elements", n)
	}
}

func TestElemString(t *testing.T) {
	for _, c := range []struct {
		e    Elem
		want string
	}{
		{Elem{From: addr("10.244.0.0"), To: addr("10.244.255.255")}, "10.244.0.0/16"},
		{Elem{From: addr("10.0.0.1"), To: addr("10.0.0.1")}, "10.0.0.1"},
		{Elem{From: addr("10.0.0.1"), To: addr("10.0.0.5")}, "10.0.0.1-10.0.0.5"},
		{Elem{From: addr("0.0.0.0"), To: addr("255.255.255.255")}, "0.0.0.0/0"},
		{Elem{Iface: "reef1", From: addr("10.0.0.1"), To: addr("10.0.0.1")}, `"reef1" . 10.0.0.1`},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("%#v: %q, want %q", c.e, got, c.want)
		}
	}
}

// TestElemsRoundTrip encodes elements as Apply sends them and decodes them
// as Read does, including ranges that touch and one that runs to the top.
func TestElemsRoundTrip(t *testing.T) {
	ivs := intervals([]netip.Prefix{pfx("10.244.0.0/16"), pfx("10.245.0.0/16"), pfx("255.255.255.0/24"), pfx("0.0.0.0/32")})
	s := NATTable(IPv4, nil).Sets[0]
	raw := encodeElems(s, ivs)
	// The kernel lists them in its own order, with nft's leading end marker.
	raw = append([]nftables.SetElement{{Key: []byte{0, 0, 0, 0}, IntervalEnd: true}}, raw...)
	for i, j := 0, len(raw)-1; i < j; i, j = i+1, j-1 {
		raw[i], raw[j] = raw[j], raw[i]
	}
	got := decodeElems(&nftables.Set{Interval: true, KeyType: nftables.TypeIPAddr}, raw)
	if diff := cmp.Diff(ivs, got, addrs); diff != "" {
		t.Errorf("intervals (-want +got):\n%s", diff)
	}

	ps := ARPTable(testPods()).Sets[0]
	got = decodeElems(&nftables.Set{Concatenation: true, KeyType: podKeyType}, encodeElems(ps, ps.Elems))
	if diff := cmp.Diff(ps.Elems, got, addrs); diff != "" {
		t.Errorf("pod elements (-want +got):\n%s", diff)
	}
	if k := encodeElems(ps, ps.Elems[:1])[0].Key; len(k) != 20 || string(k[:16]) != "reef0123456789a\x00" {
		t.Errorf("pod key %q, want 16 bytes of NUL-padded name then 4 of address", k)
	}
}

// mutate returns a copy of tables with f applied to the one of id.
func mutate(tables []Table, id TableID, f func(*Table)) []Table {
	out := make([]Table, 0, len(tables))
	for _, t := range tables {
		c := t
		c.Sets = append([]Set(nil), t.Sets...)
		c.Chains = append([]Chain(nil), t.Chains...)
		for i := range c.Chains {
			c.Chains[i].Rules = append([]Rule(nil), c.Chains[i].Rules...)
		}
		if t.ID == id {
			f(&c)
		}
		out = append(out, c)
	}
	return out
}

func TestDiff(t *testing.T) {
	want := Desired(IPv4, testPools(), testPods())
	nat, arp := NATTableID(IPv4), ARPTableID
	extraPod := Elem{Iface: "reefdeadbeef000", From: addr("10.244.9.9"), To: addr("10.244.9.9")}
	// read turns rules into what the kernel returns: counters counting,
	// lookups without set IDs.
	read := func(tables []Table) []Table {
		return mutate(mutate(tables, nat, func(t *Table) {
			r := t.Chains[0].Rules[0]
			exprs := append([]expr.Any(nil), r.Exprs...)
			exprs[4] = &expr.Counter{Packets: 12, Bytes: 3400}
			t.Chains[0].Rules[0] = Rule{Comment: r.Comment, Exprs: exprs}
		}), arp, func(*Table) {})
	}
	cases := []struct {
		name  string
		have  []Table
		kinds []ChangeKind
		why   string
	}{
		{"in line", read(want), nil, ""},
		{"nothing there", nil, []ChangeKind{CreateTable, CreateTable, CreateTable}, "table ip reef is missing"},
		{"arp table deleted", []Table{want[0], want[2]}, []ChangeKind{CreateTable}, "table arp reef is missing"},
		{"hostport table deleted", want[:2], []ChangeKind{CreateTable}, "table inet reef-hostport is missing"},
		{"chain flushed", mutate(want, nat, func(t *Table) { t.Chains[0].Rules = nil }),
			[]ChangeKind{ReplaceRules}, "chain ip reef postrouting has 0 rule(s), want 1"},
		{"rule changed: masquerade without fully-random", mutate(want, nat, func(t *Table) {
			exprs := append([]expr.Any(nil), t.Chains[0].Rules[0].Exprs...)
			exprs[5] = &expr.Masq{}
			t.Chains[0].Rules[0] = Rule{Comment: MasqComment, Exprs: exprs}
		}), []ChangeKind{ReplaceRules}, "rule 1 differs"},
		{"rule comment changed", mutate(want, arp, func(t *Table) {
			t.Chains[0].Rules[0] = Rule{Comment: "hand-edited", Exprs: t.Chains[0].Rules[0].Exprs}
		}), []ChangeKind{ReplaceRules}, "chain arp reef output: rule 1 differs"},
		{"rule added by hand", mutate(want, arp, func(t *Table) {
			t.Chains[0].Rules = append(t.Chains[0].Rules, Rule{Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}})
		}), []ChangeKind{ReplaceRules}, "has 2 rule(s), want 1"},
		{"pod element missing, another extra", mutate(want, arp, func(t *Table) {
			t.Sets[0].Elems = []Elem{t.Sets[0].Elems[1], extraPod}
		}), []ChangeKind{DelElems, AddElems}, `"reefdeadbeef000" . 10.244.9.9`},
		{"pool element missing", mutate(want, nat, func(t *Table) { t.Sets[0].Elems = t.Sets[0].Elems[1:] }),
			[]ChangeKind{AddElems}, "set ip reef all-pools lacks 1 element(s): 10.244.0.0/16"},
		{"table dormant", mutate(want, nat, func(t *Table) { t.Flags = 1 }), []ChangeKind{RecreateTable}, "flags 0x1, want 0"},
		{"chain priority changed", mutate(want, nat, func(t *Table) { t.Chains[0].Priority = 100 }),
			[]ChangeKind{RecreateTable}, "chain postrouting is type nat hook 4 priority 100"},
		{"chain missing", mutate(want, arp, func(t *Table) { t.Chains = nil }), []ChangeKind{RecreateTable}, "chain output is missing"},
		{"extra chain", mutate(want, nat, func(t *Table) { t.Chains = append(t.Chains, Chain{Name: "mine"}) }),
			[]ChangeKind{RecreateTable}, "chain mine is not reef's"},
		{"set of another type", mutate(want, nat, func(t *Table) { t.Sets[1].KeyType, t.Sets[1].KeyLen = "ipv6_addr", 16 }),
			[]ChangeKind{RecreateTable}, "set masq-pools has type ipv6_addr"},
		{"set not an interval set", mutate(want, nat, func(t *Table) { t.Sets[0].Interval = false }),
			[]ChangeKind{RecreateTable}, "set all-pools has other flags"},
		{"extra set", mutate(want, arp, func(t *Table) { t.Sets = append(t.Sets, Set{Name: "x"}) }),
			[]ChangeKind{RecreateTable}, "set x is not reef's"},
		{"a kube-proxy table beside ours", append(read(want), Table{ID: TableID{nftables.TableFamilyIPv4, "kube-proxy"},
			Chains: []Chain{{Name: "nat-postrouting", Type: nftables.ChainTypeNAT, Hooked: true, Hook: 4, Priority: 100}}}), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := Diff(want, c.have)
			var kinds []ChangeKind
			var whys []string
			for _, ch := range p.Changes {
				kinds = append(kinds, ch.Kind)
				whys = append(whys, ch.Why)
				if !Ours(ch.Table.ID) {
					t.Errorf("change to a table not reef's: %+v", ch)
				}
			}
			if !cmp.Equal(kinds, c.kinds) {
				t.Fatalf("kinds %v, want %v (why: %q)", kinds, c.kinds, whys)
			}
			if !strings.Contains(strings.Join(whys, "\n"), c.why) {
				t.Errorf("why %q does not mention %q", whys, c.why)
			}
		})
	}
}

// TestDiffConverges applies a plan to the "kernel" the way the kernel
// would and checks that nothing is left to do.
func TestDiffConverges(t *testing.T) {
	want := Desired(IPv4, testPools(), testPods())
	have := mutate(want, ARPTableID, func(t *Table) {
		t.Sets[0].Elems = []Elem{{Iface: "reefx", From: addr("10.0.0.1"), To: addr("10.0.0.1")}}
	})
	have = mutate(have, NATTableID(IPv4), func(t *Table) { t.Sets[1].Elems = nil; t.Chains[0].Rules = nil })
	p := Diff(want, have)
	for _, ch := range p.Changes {
		have = mutate(have, ch.Table.ID, func(t *Table) {
			switch ch.Kind {
			case ReplaceRules:
				for i := range t.Chains {
					if t.Chains[i].Name == ch.Chain {
						t.Chains[i].Rules = ch.Table.Chains[i].Rules
					}
				}
			case AddElems, DelElems:
				for i := range t.Sets {
					if t.Sets[i].Name != ch.Set {
						continue
					}
					m := map[Elem]bool{}
					for _, e := range t.Sets[i].Elems {
						m[e] = true
					}
					for _, e := range ch.Elems {
						m[e] = ch.Kind == AddElems
					}
					var es []Elem
					for e, ok := range m {
						if ok {
							es = append(es, e)
						}
					}
					t.Sets[i].Elems = es
				}
			}
		})
	}
	if p := Diff(want, have); !p.Empty() {
		t.Errorf("after applying, still %+v", p.Changes)
	}
}
