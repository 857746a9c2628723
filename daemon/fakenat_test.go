package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat"
	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/ndpfilter"
	"github.com/reefcni/reef/nat/nft"
)

// The fake kernel's nftables (fakekernel_test.go has the rest of it): the
// tables as natKernel reads and applies them, and the per-pod elements
// that ADD and DEL write.

// natKernel

func (k *fakeKernel) NATRead(ids []nft.TableID) ([]nft.Table, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []nft.Table
	for _, id := range ids {
		if t, ok := k.tables[id]; ok {
			out = append(out, cloneTable(t))
		}
	}
	return out, nil
}

func cloneTable(t nft.Table) nft.Table {
	t.Sets = slices.Clone(t.Sets)
	for i := range t.Sets {
		t.Sets[i].Elems = slices.Clone(t.Sets[i].Elems)
	}
	t.Chains = slices.Clone(t.Chains)
	return t
}

// NATApply carries out a plan: whole tables, elements, and the in-place
// changes of table inet reef's shape (nft.DiffInPlace: sets and chains
// added and deleted, a chain's rules replaced).
func (k *fakeKernel) NATApply(p nft.Plan) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, ch := range p.Changes {
		id := ch.Table.ID
		switch ch.Kind {
		case nft.CreateTable, nft.RecreateTable:
			k.tables[id] = cloneTable(ch.Table)
			continue
		case nft.DeleteTable:
			delete(k.tables, id)
			continue
		}
		t, ok := k.tables[id]
		if !ok {
			return fmt.Errorf("%s %s: %w", ch.Kind, id, unix.ENOENT)
		}
		switch ch.Kind {
		case nft.AddElems, nft.DelElems:
			t.Sets = editSet(t.Sets, ch.Set, ch.Elems, ch.Kind == nft.AddElems)
		case nft.AddSet:
			i := slices.IndexFunc(ch.Table.Sets, func(s nft.Set) bool { return s.Name == ch.Set })
			t.Sets = append(slices.Clone(t.Sets), cloneTable(nft.Table{Sets: ch.Table.Sets[i : i+1]}).Sets[0])
		case nft.DelSet:
			t.Sets = slices.DeleteFunc(slices.Clone(t.Sets), func(s nft.Set) bool { return s.Name == ch.Set })
		case nft.AddChain:
			i := slices.IndexFunc(ch.Table.Chains, func(c nft.Chain) bool { return c.Name == ch.Chain })
			c := ch.Table.Chains[i]
			c.Rules = nil // they come with a ReplaceRules
			t.Chains = append(slices.Clone(t.Chains), c)
		case nft.ReplaceRules:
			i := slices.IndexFunc(ch.Table.Chains, func(c nft.Chain) bool { return c.Name == ch.Chain })
			j := slices.IndexFunc(t.Chains, func(c nft.Chain) bool { return c.Name == ch.Chain })
			if j < 0 {
				return fmt.Errorf("%s %s chain %s: %w", ch.Kind, id, ch.Chain, unix.ENOENT)
			}
			t.Chains = slices.Clone(t.Chains)
			t.Chains[j].Rules = slices.Clone(ch.Table.Chains[i].Rules)
		case nft.DelChain:
			t.Chains = slices.DeleteFunc(slices.Clone(t.Chains), func(c nft.Chain) bool { return c.Name == ch.Chain })
		default:
			return fmt.Errorf("the fake kernel does not do %s", ch.Kind)
		}
		k.tables[id] = t
	}
	return nil
}

// editSet adds es to, or deletes them from, set name of sets, by key as
// the kernel does.
func editSet(sets []nft.Set, name string, es []nft.Elem, add bool) []nft.Set {
	sets = slices.Clone(sets)
	for i, s := range sets {
		if s.Name != name {
			continue
		}
		keyOf := func(e nft.Elem) nft.Elem { e.Value = netip.AddrPort{}; return e }
		drop := map[nft.Elem]bool{}
		for _, e := range es {
			drop[keyOf(e)] = true
		}
		var out []nft.Elem
		for _, e := range s.Elems {
			if !drop[keyOf(e)] {
				out = append(out, e)
			}
		}
		if add {
			out = append(out, es...)
		}
		slices.SortFunc(out, func(a, b nft.Elem) int { return strings.Compare(a.String(), b.String()) })
		s.Elems = out
		sets[i] = s
	}
	return sets
}

// podElems are the elements a pod has in reef's tables, by table and set.
func podElems(p nat.Pod) map[nft.TableID]map[string][]nft.Elem {
	out := map[nft.TableID]map[string][]nft.Elem{}
	for _, ip := range p.IPs {
		if ip.Is4() {
			out[arpfilter.TableID] = map[string][]nft.Elem{arpfilter.SetPodAddrs: {{Iface: p.Veth, From: ip, To: ip}}}
		} else {
			out[ndpfilter.TableID] = map[string][]nft.Elem{ndpfilter.SetPodAddrs: {{Iface: p.Veth, From: ip, To: ip}}}
		}
	}
	if len(p.Ports) > 0 {
		out[hostport.TableID] = hostport.Elems(hostport.Pod{IPs: p.IPs, Ports: p.Ports})
	}
	return out
}

// podBatch adds or deletes a pod's elements as nat.Kernel does: an ADD's
// in one batch, none of them if a table is missing; a DEL's table by
// table, a missing table no failure.
func (k *fakeKernel) podBatch(p nat.Pod, add bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	elems := podElems(p)
	for id := range elems {
		if _, ok := k.tables[id]; !ok && add {
			return fmt.Errorf("add elements to %s: %w: %w", id, unix.ENOENT, nat.ErrNoTable)
		}
	}
	for id, sets := range elems {
		t, ok := k.tables[id]
		if !ok {
			continue
		}
		for name, es := range sets {
			t.Sets = editSet(t.Sets, name, es, add)
		}
		k.tables[id] = t
	}
	return nil
}

// fakeNAT is the fake kernel as natKernel (its Read and Apply are the
// routes kernel's names).
type fakeNAT struct{ *fakeKernel }

func (n fakeNAT) Read(ids []nft.TableID) ([]nft.Table, error) { return n.NATRead(ids) }
func (n fakeNAT) Apply(p nft.Plan) error                      { return n.NATApply(p) }

// Mark and Unchanged: the fake follows no generation; the pass reads it
// every time.
func (n fakeNAT) Mark() nft.Mark          { return nft.Mark{} }
func (n fakeNAT) Unchanged(nft.Mark) bool { return false }
func (n fakeNAT) AddPod(p nat.Pod) error  { return n.podBatch(p, true) }
func (n fakeNAT) DelPod(p nat.Pod) error  { return n.podBatch(p, false) }
