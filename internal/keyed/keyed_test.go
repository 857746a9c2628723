package keyed

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// deadlock bounds waits that only a bug makes long; it is a failure, never
// a pause that a passing run depends on.
const deadlock = 10 * time.Second

// waiters reports how many lock holders and waiters key has.
func (k *Mutex) waiters(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.m[key]; e != nil {
		return e.refs
	}
	return 0
}

// waitFor spins until cond holds, failing the test if it never does.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadlock)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
		runtime.Gosched()
	}
}

func TestSameKeySerialises(t *testing.T) {
	var k Mutex
	unlockA := k.Lock("c1")

	acquired := make(chan func())
	go func() { acquired <- k.Lock("c1") }()

	// The second caller is queued on the key's lock, not yet through.
	waitFor(t, "the second lock of c1 is queued", func() bool { return k.waiters("c1") == 2 })
	select {
	case <-acquired:
		t.Fatal("second lock of c1 was granted while the first is held")
	default:
	}

	unlockA()
	var unlockB func()
	select {
	case unlockB = <-acquired:
	case <-time.After(deadlock):
		t.Fatal("second lock of c1 not granted after the first was released")
	}
	if n := k.waiters("c1"); n != 1 {
		t.Errorf("refs of c1 = %d with one holder, want 1", n)
	}
	unlockB()
	if len(k.m) != 0 {
		t.Errorf("map keeps %d entries after every unlock, want 0", len(k.m))
	}
}

func TestDifferentKeysInParallel(t *testing.T) {
	var k Mutex
	unlockA := k.Lock("c1")
	defer unlockA()

	done := make(chan struct{})
	go func() {
		unlock := k.Lock("c2")
		unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(deadlock):
		t.Fatal("lock of c2 blocked while only c1 was held")
	}
}

func TestExclusion(t *testing.T) {
	var k Mutex
	var wg sync.WaitGroup
	var inside [2]atomic.Int32
	counters := [2]int{} // unsynchronised on purpose: the race detector checks the lock
	keys := [2]string{"a", "b"}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := i % 2
			unlock := k.Lock(keys[n])
			defer unlock()
			if c := inside[n].Add(1); c != 1 {
				t.Errorf("%d holders of key %s at once", c, keys[n])
			}
			counters[n]++
			inside[n].Add(-1)
		}()
	}
	wg.Wait()
	if counters != [2]int{100, 100} {
		t.Errorf("counters = %v, want [100 100]", counters)
	}
	if len(k.m) != 0 {
		t.Errorf("map keeps %d entries after every unlock, want 0", len(k.m))
	}
}

func TestTryLock(t *testing.T) {
	var k Mutex
	unlock, ok := k.TryLock("c1")
	if !ok {
		t.Fatal("TryLock of a free key failed")
	}
	if _, ok := k.TryLock("c1"); ok {
		t.Fatal("TryLock of a held key succeeded")
	}
	if u, ok := k.TryLock("c2"); !ok {
		t.Fatal("TryLock of another key failed")
	} else {
		u()
	}
	acquired := make(chan func())
	go func() { acquired <- k.Lock("c1") }()
	unlock()
	u := <-acquired
	if _, ok := k.TryLock("c1"); ok {
		t.Fatal("TryLock of a key Lock holds succeeded")
	}
	u()
	if k.Len() != 0 {
		t.Errorf("%d keys left after every unlock", k.Len())
	}
}
