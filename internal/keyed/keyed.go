// Package keyed is a mutex per key: operations on one key (a container, a
// link) are serialised while those on different keys run in parallel. An
// entry lives only while someone holds or waits for it.
package keyed

import "sync"

// Mutex is a set of mutexes by key. The zero value is ready to use.
type Mutex struct {
	mu sync.Mutex
	m  map[string]*entry
}

type entry struct {
	sync.Mutex
	refs int
}

// Lock locks key and returns its unlock.
func (k *Mutex) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*entry{}
	}
	e := k.m[key]
	if e == nil {
		e = &entry{}
		k.m[key] = e
	}
	e.refs++
	k.mu.Unlock()
	e.Lock()
	return k.unlocker(key, e)
}

// unlocker is the unlock of key's entry e: the entry goes with its last
// holder or waiter.
func (k *Mutex) unlocker(key string, e *entry) func() {
	return func() {
		e.Unlock()
		k.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}

// TryLock locks key if nobody holds or waits for it, and says whether it
// did.
func (k *Mutex) TryLock(key string) (unlock func(), ok bool) {
	k.mu.Lock()
	if k.m == nil {
		k.m = map[string]*entry{}
	}
	if k.m[key] != nil {
		k.mu.Unlock()
		return nil, false
	}
	e := &entry{refs: 1}
	e.Lock()
	k.m[key] = e
	k.mu.Unlock()
	return k.unlocker(key, e), true
}

// Len is how many keys are held or waited for (tests).
func (k *Mutex) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}
