package activity

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
)

var ip1 = netip.MustParseAddr("10.244.0.5")

// TestTouched walks the cases a pass meets: an operation ended before the
// mark is not touched; one in flight, or ended after the mark, is.
func TestTouched(t *testing.T) {
	var l Log
	before := l.Begin("h-before", "reefbefore")
	before.End()
	inFlightAtMark := l.Begin("h-flight", "reefflight")
	m := l.Mark()
	defer m.Close()
	after := l.Begin("h-after", "")
	after.Pod([]netip.Addr{ip1}, "reefafter")
	endedSince := l.Begin("h-ended", "reefended")
	endedSince.End()

	tc := m.Touched()
	for _, c := range []struct {
		handle, veth string
		want         bool
	}{
		{"h-before", "reefbefore", false},
		{"h-flight", "reefflight", true},
		{"h-after", "reefafter", true},
		{"h-ended", "reefended", true},
	} {
		if got := tc.Handle(c.handle); got != c.want {
			t.Errorf("Touched.Handle(%s) = %v, want %v", c.handle, got, c.want)
		}
		if got := tc.Link(c.veth); got != c.want {
			t.Errorf("Touched.Link(%s) = %v, want %v", c.veth, got, c.want)
		}
		if got := m.Link(c.veth); got != c.want {
			t.Errorf("Mark.Link(%s) = %v, want %v", c.veth, got, c.want)
		}
	}
	if !tc.Addr(ip1) || !m.Addr(ip1) {
		t.Errorf("the address an operation recorded after Begin is not touched")
	}
	if !tc.Pod("", "", ip1) || tc.Pod("h-before", "reefbefore", netip.Addr{}) {
		t.Errorf("Touched.Pod does not match by any of handle, veth, address")
	}
	inFlightAtMark.End()
	after.End()
	if !m.Link("reefflight") {
		t.Errorf("an operation in flight at the mark and ended since is no longer touched")
	}
}

// TestForgets checks that the log keeps ended operations only while a mark
// that needs them is open.
func TestForgets(t *testing.T) {
	var l Log
	l.Begin("a", "").End()
	if len(l.ended) != 0 {
		t.Fatalf("an operation that ended with no mark open is kept")
	}
	m1 := l.Mark()
	l.Begin("b", "").End()
	m2 := l.Mark()
	l.Begin("c", "").End()
	m1.Close()
	if len(l.ended) != 1 || l.ended[0].handle != "c" {
		t.Errorf("after the older mark closed the log keeps %v, want only c", l.ended)
	}
	if !m2.Touched().Handle("c") || m2.Touched().Handle("b") {
		t.Errorf("the younger mark sees the wrong operations")
	}
	m2.Close()
	if len(l.ended) != 0 || len(l.marks) != 0 {
		t.Errorf("with every mark closed the log keeps %d operations and %d marks", len(l.ended), len(l.marks))
	}
}

// TestConcurrent runs operations against marks, for the race detector, and
// checks the one claim a pass rests on: an operation that began before a
// Touched call and has not been seen ending before the mark is touched.
func TestConcurrent(t *testing.T) {
	var l Log
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				op := l.Begin(fmt.Sprintf("h%d-%d", i, j), "")
				op.Pod([]netip.Addr{ip1}, fmt.Sprintf("reef%d", i))
				op.End()
			}
		}()
	}
	for range 200 {
		m := l.Mark()
		op := l.Begin("mine", "reefmine")
		if !m.Touched().Handle("mine") || !m.Link("reefmine") {
			t.Fatal("an operation begun after the mark is not touched")
		}
		op.End()
		if !m.Touched().Handle("mine") {
			t.Fatal("an operation ended after the mark is not touched")
		}
		m.Close()
	}
	wg.Wait()
}

// What an operation asks to run after it ends runs after it is no longer
// touched for a mark taken then.
func TestAfterEnd(t *testing.T) {
	var l Log
	op := l.Begin("h", "reefh")
	ran := false
	op.AfterEnd(func() {
		m := l.Mark()
		defer m.Close()
		ran = !m.Touched().Handle("h")
	})
	op.End()
	if !ran {
		t.Error("AfterEnd's function did not run, or ran while the operation was still in flight")
	}
}

// TestKnownRecords: a DEL begins with the handle alone and learns the veth
// and address from the record; a pass that read the record (Know) counts
// them touched from the DEL's Begin on, and a record that an operation
// names by its veth or its address alone is touched whole. Without Know
// (a pass that skipped it) the veth and address are not touched: the
// window the race test once hit.
func TestKnownRecords(t *testing.T) {
	ip2, ip3 := netip.MustParseAddr("10.244.0.6"), netip.MustParseAddr("10.244.0.7")
	var l Log
	bare := l.Mark()
	defer bare.Close()
	m := l.Mark()
	defer m.Close()
	m.Know("h-del", "reefdel", []netip.Addr{ip1})
	m.Know("h-old", "reefsame", []netip.Addr{ip2})
	m.Know("h-idle", "reefidle", []netip.Addr{ip3})
	del := l.Begin("h-del", "")
	defer del.End()
	renew := l.Begin("h-new", "reefsame") // a new sandbox, the old one's veth name
	defer renew.End()

	if bare.Link("reefdel") || bare.Addr(ip1) {
		t.Errorf("a mark that knows no record counts a DEL's veth or address touched before the DEL names them")
	}
	tc := m.Touched()
	if !m.Link("reefdel") || !m.Addr(ip1) || !tc.Link("reefdel") || !tc.Addr(ip1) {
		t.Errorf("a DEL that has named only its handle does not touch its record's veth and address")
	}
	if !m.Addr(ip2) || !tc.Addr(ip2) || !tc.Handle("h-old") {
		t.Errorf("an ADD that takes over a record's veth name does not touch the record's address")
	}
	if m.Link("reefidle") || m.Addr(ip3) || tc.Pod("h-idle", "reefidle", ip3) {
		t.Errorf("a record no operation names is touched")
	}
}
