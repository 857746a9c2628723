package nft

import (
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// Writing reef's tables: the model turned into nftables objects, a plan
// applied in one batch, a CNI operation's elements.

func nftTable(id TableID) *nftables.Table {
	return &nftables.Table{Name: id.Name, Family: id.Family}
}

func nftSet(t *nftables.Table, s Set) *nftables.Set {
	kt, ok := keyTypes[s.KeyType]
	if !ok {
		kt = nftables.TypeIPAddr
	}
	ns := &nftables.Set{Table: t, Name: s.Name, KeyType: kt, Interval: s.Interval, Concatenation: s.Concat, Comment: s.Comment}
	if s.DataType != "" {
		ns.IsMap, ns.DataType = true, keyTypes[s.DataType]
	}
	return ns
}

func nftChain(t *nftables.Table, c Chain) *nftables.Chain {
	nc := &nftables.Chain{Table: t, Name: c.Name, Type: c.Type}
	if c.Hooked {
		nc.Hooknum = nftables.ChainHookRef(c.Hook)
		nc.Priority = nftables.ChainPriorityRef(c.Priority)
		policy := c.Policy
		nc.Policy = &policy
	}
	return nc
}

// addRules queues a chain's rules; setIDs names the sets created in the
// same batch, whose lookups must carry the batch's set ID.
func addRules(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain, rules []Rule, setIDs map[string]uint32) {
	for _, r := range rules {
		c.AddRule(nftRule(t, ch, r, setIDs))
	}
}

func nftRule(t *nftables.Table, ch *nftables.Chain, r Rule, setIDs map[string]uint32) *nftables.Rule {
	exprs := make([]expr.Any, len(r.Exprs))
	for i, e := range r.Exprs {
		if l, ok := e.(*expr.Lookup); ok {
			cp := *l
			cp.SetID = setIDs[l.SetName]
			e = &cp
		}
		exprs[i] = e
	}
	return &nftables.Rule{Table: t, Chain: ch, Exprs: exprs, UserData: r.userData()}
}

// replaceRules queues what makes chain ch's rules want: an edit of the
// kernel's rules (have, read before the batch) where editRules finds one,
// else a flush and all of want.
func replaceRules(c *nftables.Conn, t *nftables.Table, ch *nftables.Chain, want, have []Rule, read bool, setIDs map[string]uint32) error {
	e, ok := editRules(t.Family, want, have)
	if !read || !ok {
		c.FlushChain(ch)
		addRules(c, t, ch, want, setIDs)
		return nil
	}
	for _, h := range e.del {
		if err := c.DelRule(&nftables.Rule{Table: t, Chain: ch, Handle: h}); err != nil {
			return err
		}
	}
	for _, in := range e.ins {
		r := nftRule(t, ch, in.rule, setIDs)
		if in.before == 0 {
			c.AddRule(r)
		} else {
			r.Position = in.before
			c.InsertRule(r)
		}
	}
	return nil
}

// chainRef names a chain of a table.
type chainRef struct {
	table TableID
	chain string
}

// chainsToEdit reads, before a batch, the kernel's rules of the chains
// whose rules p replaces and that are there before it (not in a table it
// creates, not a chain it adds). A chain that cannot be read is left out:
// its rules are replaced whole.
func (k *Kernel) chainsToEdit(p Plan) map[chainRef][]Rule {
	fresh := map[chainRef]bool{}
	whole := map[TableID]bool{}
	var edit []chainRef
	for _, ch := range p.Changes {
		switch ch.Kind {
		case CreateTable, RecreateTable:
			whole[ch.Table.ID] = true
		case AddChain:
			fresh[chainRef{ch.Table.ID, ch.Chain}] = true
		case ReplaceRules:
			edit = append(edit, chainRef{ch.Table.ID, ch.Chain})
		}
	}
	out := map[chainRef][]Rule{}
	var c *nftables.Conn
	for _, r := range edit {
		if whole[r.table] || fresh[r] {
			continue
		}
		if c == nil {
			var err error
			if c, err = k.conn(false); err != nil {
				return out
			}
		}
		nt := nftTable(r.table)
		if rules, err := readRules(c, nt, &nftables.Chain{Table: nt, Name: r.chain}); err == nil {
			out[r] = rules
		}
	}
	return out
}

// queueTable queues the whole of t: table, sets with elements, chains,
// then rules, which may jump to any of the chains.
func queueTable(c *nftables.Conn, t Table) error {
	nt := c.AddTable(nftTable(t.ID))
	ids := map[string]uint32{}
	for _, s := range t.Sets {
		ns := nftSet(nt, s)
		if err := c.AddSet(ns, encodeElems(s, s.Elems)); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
		ids[s.Name] = ns.ID
	}
	chains := make([]*nftables.Chain, len(t.Chains))
	for i, ch := range t.Chains {
		chains[i] = c.AddChain(nftChain(nt, ch))
	}
	for i, ch := range t.Chains {
		addRules(c, nt, chains[i], ch.Rules, ids)
	}
	return nil
}

// Apply carries out a plan in one batch: the kernel takes all of it or
// none of it.
func (k *Kernel) Apply(p Plan) error {
	if p.Empty() {
		return nil
	}
	// A kept socket, as AddPod's: NetworkPolicy's ADD applies a batch of
	// elements on every pod, and a socket opened and closed per batch
	// costs the ADD its close.
	c, err := k.podConn()
	if err != nil {
		return err
	}
	ok := false
	defer func() { k.putPodConn(c, ok) }()
	ids := map[string]uint32{} // sets added in this batch, for the rules that look them up
	edits := k.chainsToEdit(p)
	for _, ch := range p.Changes {
		nt := nftTable(ch.Table.ID)
		switch ch.Kind {
		case CreateTable:
			err = queueTable(c, ch.Table)
		case RecreateTable:
			c.DelTable(nt)
			err = queueTable(c, ch.Table)
		case AddSet:
			for _, s := range ch.Table.Sets {
				if s.Name == ch.Set {
					ns := nftSet(nt, s)
					err = c.AddSet(ns, nil) // its elements: the AddElems after
					ids[s.Name] = ns.ID
				}
			}
		case AddChain:
			for _, wc := range ch.Table.Chains {
				if wc.Name == ch.Chain {
					c.AddChain(nftChain(nt, wc))
				}
			}
		case ReplaceRules:
			for _, wc := range ch.Table.Chains {
				if wc.Name == ch.Chain {
					have, read := edits[chainRef{ch.Table.ID, wc.Name}]
					err = replaceRules(c, nt, nftChain(nt, wc), wc.Rules, have, read, ids)
				}
			}
		case DelChain:
			c.DelChain(&nftables.Chain{Table: nt, Name: ch.Chain})
		case DelSet:
			c.DelSet(&nftables.Set{Table: nt, Name: ch.Set})
		case DeleteTable:
			c.DelTable(nt)
		case AddElems, DelElems:
			for _, s := range ch.Table.Sets {
				if s.Name != ch.Set {
					continue
				}
				if ch.Kind == AddElems {
					err = c.SetAddElements(nftSet(nt, s), encodeElems(s, ch.Elems))
				} else {
					err = c.SetDeleteElements(nftSet(nt, s), encodeElems(s, ch.Elems))
				}
			}
		}
		if err != nil {
			return fmt.Errorf("%s %s: %w", ch.Kind, ch.Table.ID, err)
		}
	}
	if err := k.flush(c); err != nil {
		return fmt.Errorf("apply nftables batch of %d change(s): %w", len(p.Changes), err)
	}
	ok = true
	return nil
}

// ElemEdit is elements to add to, or delete from, one set of a table.
type ElemEdit struct {
	Table TableID
	Set   Set // its shape, as the table's builder gives it
	Elems []Elem
}

// EditElems adds (or deletes) elements, in a batch of its own, on a kept
// socket: a CNI operation's elements. Adding elements that are there
// already succeeds; deleting one that is not fails with ENOENT, as does a
// missing table or set.
func (k *Kernel) EditElems(edits []ElemEdit, add bool) error {
	c, err := k.podConn()
	if err != nil {
		return err
	}
	verb := "add"
	if !add {
		verb = "delete"
	}
	for _, e := range edits {
		apply := c.SetAddElements
		if !add {
			apply = c.SetDeleteElements
		}
		if err := apply(nftSet(nftTable(e.Table), e.Set), encodeElems(e.Set, e.Elems)); err != nil {
			k.putPodConn(c, false)
			return fmt.Errorf("%s %s in set %s %s: %w", verb, elemList(e.Elems), e.Table, e.Set.Name, err)
		}
	}
	err = k.flush(c)
	k.putPodConn(c, err == nil)
	if err != nil {
		var what []string
		for _, e := range edits {
			what = append(what, fmt.Sprintf("%s in set %s %s", elemList(e.Elems), e.Table, e.Set.Name))
		}
		return fmt.Errorf("%s %s: %w", verb, strings.Join(what, "; "), err)
	}
	return nil
}
