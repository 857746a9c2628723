package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/nftables"
)

// Reading reef's tables back from the kernel, in the form Desired builds.

// readSpares is how many sockets Read opens beyond one per table, for
// reading sets at once.
const readSpares = 3

// Read returns what the kernel has of the tables named by ids, in the form
// Desired builds; a table the kernel does not have is left out. Nothing of
// another table is returned.
func (k *Kernel) Read(ids []TableID) ([]Table, error) {
	// Each table on a socket of its own, at once, and spare sockets for
	// the sets (see readElements). They are opened here, on the caller's
	// thread: a socket belongs to the network namespace it is opened in,
	// and a test's Kernel is that of its thread's.
	conns := make([]*nftables.Conn, 0, len(ids)+readSpares)
	defer func() {
		for _, c := range conns {
			c.CloseLasting()
		}
	}()
	for range len(ids) + readSpares {
		c, err := k.conn(true)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
	}
	spare := make(chan *nftables.Conn, readSpares)
	for _, c := range conns[len(ids):] {
		spare <- c
	}
	tables := make([]Table, len(ids))
	found := make([]bool, len(ids))
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var err error
			if tables[i], found[i], err = readTable(conns[i], id, spare); err != nil {
				errs[i] = fmt.Errorf("read nftables table %s: %w", id, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out []Table
	for i := range ids {
		if found[i] {
			out = append(out, tables[i])
		}
	}
	return out, nil
}

func readTable(c *nftables.Conn, id TableID, spare chan *nftables.Conn) (Table, bool, error) {
	tables, err := c.ListTablesOfFamily(id.Family)
	if err != nil {
		return Table{}, false, err
	}
	var nt *nftables.Table
	for _, t := range tables {
		if t.Name == id.Name {
			nt = t
		}
	}
	if nt == nil {
		return Table{}, false, nil
	}
	// nftables v0.3.0 decodes NFTA_TABLE_FLAGS in host byte order; the
	// kernel sends it big-endian.
	flags := binary.BigEndian.Uint32(binary.NativeEndian.AppendUint32(nil, nt.Flags))
	t := Table{ID: id, Flags: flags}
	chains, err := c.ListChainsOfTableFamily(id.Family)
	if err != nil {
		return t, true, err
	}
	for _, nc := range chains {
		if nc.Table == nil || nc.Table.Name != id.Name {
			continue
		}
		ch := Chain{Name: nc.Name, Type: nc.Type}
		if nc.Hooknum != nil && nc.Priority != nil {
			ch.Hooked, ch.Hook, ch.Priority = true, *nc.Hooknum, *nc.Priority
			if nc.Policy != nil {
				ch.Policy = *nc.Policy
			}
		}
		if ch.Rules, err = readRules(c, nt, nc); err != nil {
			return t, true, err
		}
		t.Chains = append(t.Chains, ch)
	}
	slices.SortFunc(t.Chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	sets, err := c.GetSets(nt)
	if err != nil {
		return t, true, err
	}
	for _, ns := range sets {
		if ns.Anonymous {
			continue // part of a rule; goes with it
		}
		s := Set{Name: ns.Name, KeyType: ns.KeyType.Name, KeyLen: ns.KeyType.Bytes, Interval: ns.Interval, Concat: ns.Concatenation,
			Foreign: ns.Constant || ns.HasTimeout || ns.Dynamic || ns.IsMap && ns.DataType.Name == ""}
		if ns.IsMap {
			s.DataType, s.DataLen = ns.DataType.Name, ns.DataType.Bytes
		}
		t.Sets = append(t.Sets, s)
	}
	if err := readElements(c, sets, t.Sets, spare); err != nil {
		return t, true, err
	}
	slices.SortFunc(t.Sets, func(a, b Set) int { return strings.Compare(a.Name, b.Name) })
	return t, true, nil
}

// readRules are the rules of chain nc, in order, with their handles.
func readRules(c *nftables.Conn, nt *nftables.Table, nc *nftables.Chain) ([]Rule, error) {
	rules, err := c.GetRules(nt, nc)
	if err != nil {
		return nil, fmt.Errorf("chain %s: %w", nc.Name, err)
	}
	out := make([]Rule, 0, len(rules))
	for _, r := range rules {
		out = append(out, Rule{Comment: commentOf(r.UserData), Exprs: r.Exprs, Handle: r.Handle})
	}
	return out, nil
}

// readElements fills the elements of sets (the table's, in the order of
// ns without the anonymous ones). A set's elements come in a dump of many
// messages, each a round trip through the netpoller: sets are read at
// once on the sockets of spare, when it has one free, so that their waits
// overlap. A drift check of three tables with thousands of elements is
// bound by those waits, not by the CPU.
func readElements(c *nftables.Conn, ns []*nftables.Set, sets []Set, spare chan *nftables.Conn) error {
	var wg sync.WaitGroup
	errs := make([]error, len(sets))
	read := func(i int, n *nftables.Set, conn *nftables.Conn) {
		raw, err := conn.GetSetElements(n)
		if err != nil {
			errs[i] = fmt.Errorf("set %s: %w", n.Name, err)
			return
		}
		sets[i].Elems = decodeElems(n, raw)
	}
	i := 0
	for _, n := range ns {
		if n.Anonymous {
			continue
		}
		select {
		case sc := <-spare:
			wg.Add(1)
			go func(i int, n *nftables.Set) {
				defer wg.Done()
				read(i, n, sc)
				spare <- sc
			}(i, n)
		default:
			read(i, n, c)
		}
		i++
	}
	wg.Wait()
	return errors.Join(errs...)
}
