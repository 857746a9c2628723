package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// IfNameSize is IFNAMSIZ: an interface name in a set key takes 16 bytes,
// NUL-padded.
const IfNameSize = 16

// Kernel reads and writes reef's tables in one network namespace. It is
// safe for concurrent use: every operation has a netlink socket of its
// own, so parallel CNI ADDs and DELs each send their own batch.
type Kernel struct {
	opts []nftables.ConnOption
	// podConns keeps the sockets of EditElems open between calls:
	// closing an nftables socket right after a batch that deleted set
	// elements blocks for milliseconds in the kernel, on every DEL.
	podConns chan *nftables.Conn
	// gens, when set, accounts for every batch this Kernel commits
	// (Generations): set before the Kernel's first use.
	gens *Generations
}

// podConnsKept bounds the sockets kept open: about the CNI operations in
// flight at once.
const podConnsKept = 8

// NewKernel returns a Kernel for the caller's network namespace (the
// daemon's, the node's), or for another given by
// nftables.WithNetNSFd (tests).
func NewKernel(opts ...nftables.ConnOption) *Kernel {
	return &Kernel{opts: opts, podConns: make(chan *nftables.Conn, podConnsKept)}
}

// Follow makes the Kernel account for its commits in gens, which the
// Kernels of the other writers of reef's tables in the namespace share,
// and returns it. Called before the Kernel's first use.
func (k *Kernel) Follow(gens *Generations) *Kernel {
	k.gens = gens
	return k
}

// Mark is gens' Mark (a Kernel that follows none: a Mark that never
// holds): taken before a Read that a check of drift then trusts.
func (k *Kernel) Mark() Mark { return k.gens.Mark() }

// Unchanged is gens' Unchanged: no writer but reef's Kernels that follow
// the same Generations committed since m.
func (k *Kernel) Unchanged(m Mark) bool { return k.gens.Unchanged(m) }

// flush commits c's batch, accounted for in the Generations followed.
func (k *Kernel) flush(c *nftables.Conn) error {
	if k.gens == nil {
		return c.Flush()
	}
	return k.gens.commit(c.Flush)
}

// podConn takes a kept socket, or opens one.
func (k *Kernel) podConn() (*nftables.Conn, error) {
	select {
	case c := <-k.podConns:
		return c, nil
	default:
		return k.conn(true)
	}
}

// putPodConn keeps a socket for the next call. A socket whose batch failed
// is closed instead: its state is unknown.
func (k *Kernel) putPodConn(c *nftables.Conn, ok bool) {
	if ok {
		select {
		case k.podConns <- c:
			return
		default:
		}
	}
	c.CloseLasting()
}

// batchBuffer is the socket buffer of a batch's netlink socket. The
// kernel refuses a message longer than the send buffer (EMSGSIZE), and a
// batch is one message: table inet reef with a hundred policies is more
// than the default 208 KiB. nft sets SO_SNDBUFFORCE to the batch's size
// for the same reason; reef, root like nft, forces a size no table of its
// reaches. The memory is the kernel's only while a batch is in flight.
const batchBuffer = 64 << 20

func bigBuffers(c *netlink.Conn) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = errors.Join(unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, batchBuffer),
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, batchBuffer/4))
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("nftables socket buffers (SO_SNDBUFFORCE needs CAP_NET_ADMIN): %w", serr)
	}
	return nil
}

func (k *Kernel) conn(lasting bool) (*nftables.Conn, error) {
	opts := append(slices.Clone(k.opts), nftables.WithSockOptions(bigBuffers))
	if lasting {
		opts = append(opts, nftables.AsLasting())
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables netlink socket: %w", err)
	}
	return c, nil
}

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
	slices.SortFunc(t.Chains, func(a, b Chain) int { return compareStrings(a.Name, b.Name) })
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
	slices.SortFunc(t.Sets, func(a, b Set) int { return compareStrings(a.Name, b.Name) })
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

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

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

// Tables lists the kernel's tables, in every family, that ours picks.
func (k *Kernel) Tables(ours func(TableID) bool) ([]TableID, error) {
	c, err := k.conn(false)
	if err != nil {
		return nil, err
	}
	tables, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	var out []TableID
	for _, t := range tables {
		if id := (TableID{Family: t.Family, Name: t.Name}); ours(id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// DeleteTables deletes the given tables in one batch.
func (k *Kernel) DeleteTables(ids []TableID) error {
	if len(ids) == 0 {
		return nil
	}
	c, err := k.conn(false)
	if err != nil {
		return err
	}
	for _, id := range ids {
		c.DelTable(nftTable(id))
	}
	if err := k.flush(c); err != nil {
		return fmt.Errorf("delete nftables tables %v: %w", ids, err)
	}
	return nil
}
