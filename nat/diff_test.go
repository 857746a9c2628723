package nat

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/nat/nft"
)

var (
	pfx  = netip.MustParsePrefix
	addr = netip.MustParseAddr
)

func testPools() []masq.Pool {
	return []masq.Pool{
		{CIDR: pfx("10.244.0.0/16"), NATOutgoing: true},
		{CIDR: pfx("10.245.0.0/24"), NATOutgoing: false},
	}
}

func testPods() []Pod {
	return []Pod{
		{Veth: "reef0123456789a", IPs: []netip.Addr{addr("10.244.0.5")}},
		{Veth: "reefbbbbbbbbbbb", IPs: []netip.Addr{addr("10.244.0.6")}},
	}
}

// dualPools are testPools and two IPv6 pools, one with natOutgoing.
func dualPools() []masq.Pool {
	return append(testPools(), masq.Pool{CIDR: pfx("fd00:10:244::/56"), NATOutgoing: true}, masq.Pool{CIDR: pfx("fd00:10:245::/64")})
}

// TestDesired: the tables, each its package's for the pools and the pods
// passed on; table inet reef-hostport has only the pods with hostPorts,
// and table ip6 reef-ndp is there while a pool is IPv6. What each table
// holds is its package's test. The masquerade tables of earlier versions
// are always retired, the NDP filter without an IPv6 pool.
func TestDesired(t *testing.T) {
	ports := []hostport.Mapping{{Proto: unix.IPPROTO_TCP, Port: 8080, PodPort: 80}}
	pods := append(testPods(),
		Pod{Veth: "", IPs: []netip.Addr{addr("10.244.0.7")}},                              // no veth (taken over by a newer sandbox)
		Pod{Veth: "reefccccccccccc", IPs: []netip.Addr{addr("10.244.0.8")}, Ports: ports}, // with a hostPort
	)
	natID := nft.TableID{Family: nftables.TableFamilyINet, Name: "reef-nat"}
	arpID := nft.TableID{Family: nftables.TableFamilyARP, Name: "reef"}
	hpID := nft.TableID{Family: nftables.TableFamilyINet, Name: "reef-hostport"}
	ndpID := nft.TableID{Family: nftables.TableFamilyIPv6, Name: "reef-ndp"}
	oldIDs := []nft.TableID{{Family: nftables.TableFamilyIPv4, Name: "reef"}, {Family: nftables.TableFamilyIPv6, Name: "reef"}}
	tables := Desired(testPools(), pods)
	if got := IDs(tables); !cmp.Equal(got, []nft.TableID{natID, arpID, hpID}) {
		t.Fatalf("tables %v", got)
	}
	var arp []arpfilter.Pod
	for _, p := range pods {
		arp = append(arp, arpfilter.Pod{Veth: p.Veth, IP: p.IPs[0]})
	}
	want := []nft.Table{masq.Table(testPools()), arpfilter.Table(arp), hostport.Table([]hostport.Pod{{IPs: []netip.Addr{addr("10.244.0.8")}, Ports: ports}})}
	if !reflect.DeepEqual(tables, want) {
		t.Errorf("Desired differs from the tables' own: %+v", nft.Diff(want, tables).Changes)
	}
	if got := Retired(testPools()); !cmp.Equal(got, append(oldIDs, ndpID)) {
		t.Errorf("retired without an IPv6 pool: %v, want the old masquerade tables and the NDP filter", got)
	}
	if got := IDs(Desired(dualPools(), pods)); !cmp.Equal(got, []nft.TableID{natID, arpID, hpID, ndpID}) {
		t.Errorf("tables with an IPv6 pool %v, want the same and table ip6 reef-ndp", got)
	}
	if got := Retired(dualPools()); !cmp.Equal(got, oldIDs) {
		t.Errorf("retired with an IPv6 pool: %v, want the old masquerade tables", got)
	}
	for _, id := range append(append(TableIDs(), oldIDs...), natID) {
		if !Ours(id) {
			t.Errorf("%s is not Ours", id)
		}
	}
	for _, id := range []nft.TableID{{Family: nftables.TableFamilyIPv4, Name: "kube-proxy"}, {Family: nftables.TableFamilyINet, Name: "reef-other"}} {
		if Ours(id) {
			t.Errorf("%s is Ours", id)
		}
	}
}

// mutate returns a copy of tables with f applied to the one of id.
func mutate(tables []nft.Table, id nft.TableID, f func(*nft.Table)) []nft.Table {
	out := make([]nft.Table, 0, len(tables))
	for _, t := range tables {
		c := t
		c.Sets = append([]nft.Set(nil), t.Sets...)
		c.Chains = append([]nft.Chain(nil), t.Chains...)
		for i := range c.Chains {
			c.Chains[i].Rules = append([]nft.Rule(nil), c.Chains[i].Rules...)
		}
		if t.ID == id {
			f(&c)
		}
		out = append(out, c)
	}
	return out
}

func TestDiff(t *testing.T) {
	want := Desired(dualPools(), testPods())
	nat, arp := masq.TableID, arpfilter.TableID
	extraPod := nft.Elem{Iface: "reefdeadbeef000", From: addr("10.244.9.9"), To: addr("10.244.9.9")}
	// read turns rules into what the kernel returns: counters counting,
	// lookups without set IDs.
	read := func(tables []nft.Table) []nft.Table {
		return mutate(mutate(tables, nat, func(t *nft.Table) {
			for i, r := range t.Chains[0].Rules {
				exprs := append([]expr.Any(nil), r.Exprs...)
				exprs[6] = &expr.Counter{Packets: 12, Bytes: 3400}
				t.Chains[0].Rules[i] = nft.Rule{Comment: r.Comment, Exprs: exprs}
			}
		}), arp, func(*nft.Table) {})
	}
	cases := []struct {
		name  string
		have  []nft.Table
		kinds []nft.ChangeKind
		why   string
	}{
		{"in line", read(want), nil, ""},
		{"nothing there", nil, []nft.ChangeKind{nft.CreateTable, nft.CreateTable, nft.CreateTable, nft.CreateTable}, "table inet reef-nat is missing"},
		{"arp table deleted", []nft.Table{want[0], want[2], want[3]}, []nft.ChangeKind{nft.CreateTable}, "table arp reef is missing"},
		{"hostport table deleted", []nft.Table{want[0], want[1], want[3]}, []nft.ChangeKind{nft.CreateTable}, "table inet reef-hostport is missing"},
		{"masquerade table deleted", want[1:], []nft.ChangeKind{nft.CreateTable}, "table inet reef-nat is missing"},
		{"chain flushed", mutate(want, nat, func(t *nft.Table) { t.Chains[0].Rules = nil }),
			[]nft.ChangeKind{nft.ReplaceRules}, "chain inet reef-nat postrouting has 0 rule(s), want 2"},
		{"rule changed: masquerade without fully-random", mutate(want, nat, func(t *nft.Table) {
			exprs := append([]expr.Any(nil), t.Chains[0].Rules[0].Exprs...)
			exprs[7] = &expr.Masq{}
			t.Chains[0].Rules[0] = nft.Rule{Comment: masq.Comment, Exprs: exprs}
		}), []nft.ChangeKind{nft.ReplaceRules}, "rule 1 differs"},
		{"IPv6 rule changed: no exemption for the pools", mutate(want, nat, func(t *nft.Table) {
			exprs := append([]expr.Any(nil), t.Chains[0].Rules[1].Exprs[:4]...)
			exprs = append(exprs, t.Chains[0].Rules[1].Exprs[6:]...)
			t.Chains[0].Rules[1] = nft.Rule{Comment: masq.Comment, Exprs: exprs}
		}), []nft.ChangeKind{nft.ReplaceRules}, "chain inet reef-nat postrouting: rule 2 differs"},
		{"IPv6 rule gone", mutate(want, nat, func(t *nft.Table) { t.Chains[0].Rules = t.Chains[0].Rules[:1] }),
			[]nft.ChangeKind{nft.ReplaceRules}, "chain inet reef-nat postrouting has 1 rule(s), want 2"},
		{"rule comment changed", mutate(want, arp, func(t *nft.Table) {
			t.Chains[0].Rules[0] = nft.Rule{Comment: "hand-edited", Exprs: t.Chains[0].Rules[0].Exprs}
		}), []nft.ChangeKind{nft.ReplaceRules}, "chain arp reef output: rule 1 differs"},
		{"rule added by hand", mutate(want, arp, func(t *nft.Table) {
			t.Chains[0].Rules = append(t.Chains[0].Rules, nft.Rule{Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}})
		}), []nft.ChangeKind{nft.ReplaceRules}, "has 2 rule(s), want 1"},
		{"pod element missing, another extra", mutate(want, arp, func(t *nft.Table) {
			t.Sets[0].Elems = []nft.Elem{t.Sets[0].Elems[1], extraPod}
		}), []nft.ChangeKind{nft.DelElems, nft.AddElems}, `"reefdeadbeef000" . 10.244.9.9`},
		{"pool element missing", mutate(want, nat, func(t *nft.Table) { t.Sets[0].Elems = t.Sets[0].Elems[1:] }),
			[]nft.ChangeKind{nft.AddElems}, "set inet reef-nat all-pools4 lacks 1 element(s): 10.244.0.0/16"},
		{"IPv6 pool element missing", mutate(want, nat, func(t *nft.Table) { t.Sets[1].Elems = t.Sets[1].Elems[1:] }),
			[]nft.ChangeKind{nft.AddElems}, "set inet reef-nat all-pools6 lacks 1 element(s): fd00:10:244::/56"},
		{"IPv6 pool without natOutgoing masqueraded", mutate(want, nat, func(t *nft.Table) {
			t.Sets[3].Elems = append(t.Sets[3].Elems, nft.Elem{From: addr("fd00:10:245::"), To: addr("fd00:10:245::ffff:ffff:ffff:ffff")})
		}), []nft.ChangeKind{nft.DelElems}, "set inet reef-nat masq-pools6 has 1 element(s) reef does not want: fd00:10:245::/64"},
		{"table dormant", mutate(want, nat, func(t *nft.Table) { t.Flags = 1 }), []nft.ChangeKind{nft.RecreateTable}, "flags 0x1, want 0"},
		{"chain priority changed", mutate(want, nat, func(t *nft.Table) { t.Chains[0].Priority = 100 }),
			[]nft.ChangeKind{nft.RecreateTable}, "chain postrouting is type nat hook 4 priority 100"},
		{"chain missing", mutate(want, arp, func(t *nft.Table) { t.Chains = nil }), []nft.ChangeKind{nft.RecreateTable}, "chain output is missing"},
		{"extra chain", mutate(want, nat, func(t *nft.Table) { t.Chains = append(t.Chains, nft.Chain{Name: "mine"}) }),
			[]nft.ChangeKind{nft.RecreateTable}, "chain mine is not reef's"},
		{"set of another type", mutate(want, nat, func(t *nft.Table) { t.Sets[2].KeyType, t.Sets[2].KeyLen = "ipv6_addr", 16 }),
			[]nft.ChangeKind{nft.RecreateTable}, "set masq-pools4 has type ipv6_addr"},
		{"set not an interval set", mutate(want, nat, func(t *nft.Table) { t.Sets[0].Interval = false }),
			[]nft.ChangeKind{nft.RecreateTable}, "set all-pools4 has other flags"},
		{"extra set", mutate(want, arp, func(t *nft.Table) { t.Sets = append(t.Sets, nft.Set{Name: "x"}) }),
			[]nft.ChangeKind{nft.RecreateTable}, "set x is not reef's"},
		{"a kube-proxy table beside ours", append(read(want), nft.Table{ID: nft.TableID{Family: nftables.TableFamilyIPv4, Name: "kube-proxy"},
			Chains: []nft.Chain{{Name: "nat-postrouting", Type: nftables.ChainTypeNAT, Hooked: true, Hook: 4, Priority: 100}}}), nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := nft.Diff(want, c.have)
			var kinds []nft.ChangeKind
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
	want := Desired(dualPools(), testPods())
	have := mutate(want, arpfilter.TableID, func(t *nft.Table) {
		t.Sets[0].Elems = []nft.Elem{{Iface: "reefx", From: addr("10.0.0.1"), To: addr("10.0.0.1")}}
	})
	have = mutate(have, masq.TableID, func(t *nft.Table) { t.Sets[1].Elems = nil; t.Sets[3].Elems = nil; t.Chains[0].Rules = nil })
	p := nft.Diff(want, have)
	for _, ch := range p.Changes {
		have = mutate(have, ch.Table.ID, func(t *nft.Table) {
			switch ch.Kind {
			case nft.ReplaceRules:
				for i := range t.Chains {
					if t.Chains[i].Name == ch.Chain {
						t.Chains[i].Rules = ch.Table.Chains[i].Rules
					}
				}
			case nft.AddElems, nft.DelElems:
				for i := range t.Sets {
					if t.Sets[i].Name != ch.Set {
						continue
					}
					m := map[nft.Elem]bool{}
					for _, e := range t.Sets[i].Elems {
						m[e] = true
					}
					for _, e := range ch.Elems {
						m[e] = ch.Kind == nft.AddElems
					}
					var es []nft.Elem
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
	if p := nft.Diff(want, have); !p.Empty() {
		t.Errorf("after applying, still %+v", p.Changes)
	}
}
