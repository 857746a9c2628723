// Package activity is the log of the CNI operations that write a pod's
// kernel objects and its record (ADD, DEL, GC, a release), which the
// reconcile pass reads instead of locking them out.
//
// A pass takes a Mark before it reads the store, and asks Touched after it
// has read the kernel: every operation in flight at that moment, or ended
// since the mark, may have written objects that the pass's snapshot of the
// store does not explain (an ADD's veth before its record was ready) or
// explains wrongly (a DEL's record that is gone by now). The pass leaves
// what they touched alone, neither pruned nor put back; the next pass,
// whose mark is taken after they ended, sees them in the store.
//
// An operation names what it touches before it writes it: the handle and
// the node-side veth at Begin, the address once it has one (Op.Pod). So a
// pass that finds an object not Touched knows that no operation begun
// before that check writes it; one begun after must take the object's own
// lock (package routes keeps one per veth and per address) before writing
// it, and the pass checks under that lock. Until an operation has named
// them, the records the pass read name them for it (Mark.Know): a DEL
// begins with the handle alone, and its record gives the veth and the
// addresses it is about to remove.
package activity

import (
	"net/netip"
	"slices"
	"sync"
)

// Log is the node's log of CNI operations. The zero value is ready.
type Log struct {
	mu    sync.Mutex
	seq   uint64
	live  map[*Op]struct{}
	ended []ended        // operations ended while a mark was open
	marks map[uint64]int // open marks by sequence number
}

// Op is one operation in flight.
type Op struct {
	log   *Log
	keys  keys
	after []func() // AfterEnd's
}

type keys struct {
	handle, veth string
	ips          []netip.Addr // one, or one of each family
}

type ended struct {
	keys
	seq uint64
}

// Begin records an operation on the attachment handle whose node-side veth
// is veth ("" when not known yet). End it when it returns.
func (l *Log) Begin(handle, veth string) *Op {
	op := &Op{log: l, keys: keys{handle: handle, veth: veth}}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	if l.live == nil {
		l.live = map[*Op]struct{}{}
	}
	l.live[op] = struct{}{}
	return op
}

// Pod records the pod's addresses and veth, before the operation writes
// an object with any of them. An operation touches one pod: a second call
// names the same pod again (a repeated ADD's veth may differ from the
// first).
func (o *Op) Pod(ips []netip.Addr, veth string) {
	o.log.mu.Lock()
	defer o.log.mu.Unlock()
	if len(ips) > 0 {
		o.keys.ips = slices.Clone(ips)
	}
	if veth != "" {
		o.keys.veth = veth
	}
}

// AfterEnd asks for f to run once the operation has ended: a whole pass,
// say, that must see what the operation did (a pass during it leaves it
// alone). Only the operation's own goroutine calls it.
func (o *Op) AfterEnd(f func()) { o.after = append(o.after, f) }

// End records that the operation returned, then runs what AfterEnd asked
// for. It may be called once.
func (o *Op) End() {
	l := o.log
	l.mu.Lock()
	l.seq++
	delete(l.live, o)
	if len(l.marks) > 0 {
		l.ended = append(l.ended, ended{o.keys, l.seq})
	}
	l.mu.Unlock()
	for _, f := range o.after {
		f()
	}
}

// Mark is a point in the log: a pass's start.
type Mark struct {
	log *Log
	seq uint64
	// records are what the store held when the pass read it (Know), and
	// the indexes to them by handle, veth and address.
	records  []keys
	byHandle map[string][]int
	byVeth   map[string][]int
	byAddr   map[netip.Addr][]int
}

// Mark returns the log's present point. Close it when the pass ends.
func (l *Log) Mark() *Mark {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.marks == nil {
		l.marks = map[uint64]int{}
	}
	l.marks[l.seq]++
	return &Mark{log: l, seq: l.seq}
}

// Close releases the mark; the log forgets what no open mark needs.
func (m *Mark) Close() {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.marks[m.seq]--; l.marks[m.seq] == 0 {
		delete(l.marks, m.seq)
	}
	oldest, any := uint64(0), false
	for s := range l.marks {
		if !any || s < oldest {
			oldest, any = s, true
		}
	}
	keep := l.ended[:0]
	for _, e := range l.ended {
		if any && e.seq > oldest {
			keep = append(keep, e)
		}
	}
	clear(l.ended[len(keep):])
	l.ended = keep
}

// Know tells the mark what the store holds for an attachment, as the pass
// read it: its node-side veth and its addresses. An operation touches all
// of a record that it names by any of them (as Touched.Pod matches), even
// before it has named the rest: a DEL or GC begins with the handle alone
// and learns the veth and addresses from the record, and a pass that asks
// in between must not take the record's objects for orphans. Call it
// before the pass asks anything of the mark.
func (m *Mark) Know(handle, veth string, ips []netip.Addr) {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.byHandle == nil {
		m.byHandle, m.byVeth, m.byAddr = map[string][]int{}, map[string][]int{}, map[netip.Addr][]int{}
	}
	i := len(m.records)
	m.records = append(m.records, keys{handle: handle, veth: veth, ips: slices.Clone(ips)})
	m.byHandle[handle] = append(m.byHandle[handle], i)
	if veth != "" {
		m.byVeth[veth] = append(m.byVeth[veth], i)
	}
	for _, ip := range ips {
		if ip.IsValid() {
			m.byAddr[ip] = append(m.byAddr[ip], i)
		}
	}
}

// Touched is what the operations in flight now, or ended since the mark,
// touched, with all of each record (Know) they name.
func (m *Mark) Touched() Touched {
	t := Touched{handles: map[string]bool{}, veths: map[string]bool{}, ips: map[netip.Addr]bool{}}
	m.each(func(k keys) bool { t.add(k); return false })
	return t
}

// Link and Addr ask the log, at the moment of the call, whether an
// operation in flight or ended since the mark touched a node-side veth or
// an address: the check that package routes makes under the object's own
// lock, just before the pass writes it.
func (m *Mark) Link(name string) bool {
	return m.each(func(k keys) bool { return k.veth == name })
}

func (m *Mark) Addr(ip netip.Addr) bool {
	return m.each(func(k keys) bool { return slices.Contains(k.ips, ip) })
}

// each calls f with the keys of every operation in flight or ended since
// the mark, and with those of every record (Know) an operation names,
// until f returns true; it says whether one did.
func (m *Mark) each(f func(keys) bool) bool {
	l := m.log
	l.mu.Lock()
	defer l.mu.Unlock()
	visit := func(k keys) bool { return f(k) || m.eachRecord(k, f) }
	for op := range l.live {
		if visit(op.keys) {
			return true
		}
	}
	for _, e := range l.ended {
		if e.seq > m.seq && visit(e.keys) {
			return true
		}
	}
	return false
}

// eachRecord calls f with the keys of every record that k names by
// handle, veth or address, until f returns true. The log's lock is held.
func (m *Mark) eachRecord(k keys, f func(keys) bool) bool {
	if len(m.records) == 0 {
		return false
	}
	try := func(idx []int) bool {
		return slices.ContainsFunc(idx, func(i int) bool { return f(m.records[i]) })
	}
	if try(m.byHandle[k.handle]) || k.veth != "" && try(m.byVeth[k.veth]) {
		return true
	}
	return slices.ContainsFunc(k.ips, func(ip netip.Addr) bool { return ip.IsValid() && try(m.byAddr[ip]) })
}

// Touched is a set of attachments, veths and addresses that CNI operations
// touched. The zero value is empty.
type Touched struct {
	handles, veths map[string]bool
	ips            map[netip.Addr]bool
}

func (t Touched) add(k keys) {
	t.handles[k.handle] = true
	if k.veth != "" {
		t.veths[k.veth] = true
	}
	for _, ip := range k.ips {
		if ip.IsValid() {
			t.ips[ip] = true
		}
	}
}

// Handle, Link and Addr say whether an attachment, a node-side veth and an
// address were touched.
func (t Touched) Handle(h string) bool    { return t.handles[h] }
func (t Touched) Link(name string) bool   { return t.veths[name] }
func (t Touched) Addr(ip netip.Addr) bool { return t.ips[ip] }
func (t Touched) Empty() bool             { return len(t.handles) == 0 }
func (t Touched) Pod(handle, veth string, ips ...netip.Addr) bool {
	return t.handles[handle] || veth != "" && t.veths[veth] || slices.ContainsFunc(ips, func(ip netip.Addr) bool { return ip.IsValid() && t.ips[ip] })
}
