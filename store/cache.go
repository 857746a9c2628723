package store

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/blockproto"
)

// readCache keeps the last results of the two reads every block protocol
// step makes, LoadProtocol and Blocks, for as long as no write transaction
// has committed since. Both decode every block record, and most steps of a
// node that hears other nodes' claims and votes change nothing here. It
// also keeps the endpoint records Endpoints decoded last (eps), by their
// bytes rather than by gen.
//
// gen counts committed writes. A read notes gen before its transaction and
// files its result under that number: a write that commits in between
// makes the result newer than its number says, never older, so the worst
// a race costs is one read more.
type readCache struct {
	gen atomic.Uint64 // 1 + writes committed; 0 is never a valid entry

	mu        sync.Mutex
	protoGen  uint64
	proto     blockproto.State
	blocksGen uint64
	blocks    []Block

	// eps are the endpoint records as Endpoints last decoded them, by
	// handle, with their bytes: a record whose bytes are the same is not
	// decoded again. Every ADD's NetworkPolicy cover lists the node's
	// endpoints, and it differs from the last list by one record.
	epsMu sync.Mutex
	eps   map[string]decodedEndpoint
}

// decodedEndpoint is a record and the bytes it was decoded from.
type decodedEndpoint struct {
	raw []byte
	ep  Endpoint
}

// update runs fn in a write transaction and invalidates the read cache.
// Every write of the store goes through it.
func (s *Store) update(fn func(*bolt.Tx) error) error {
	if d := s.damaged.Load(); d != nil {
		return d // found damaged while running: no more writes
	}
	err := storageError(s.path, s.guarded(func() error { return s.db.Update(fn) }))
	s.cache.gen.Add(1)
	var refused *StorageError
	switch {
	case err == nil:
		s.refused.Store(nil)
	case errors.As(err, &refused):
		s.refused.Store(refused)
	}
	return err
}

// Writable is nil while the store takes writes, or why it does not: found
// damaged, or its last write refused by the file system. After a refused
// write it tries an empty write transaction, which bbolt commits by
// writing its meta page: a file system gone read-only refuses that too, and
// the answer is nil again as soon as one is taken. A full file system may
// take that page where a write that needs a new one fails: there Writable
// says nil until the next such write fails.
func (s *Store) Writable() error {
	if d := s.damaged.Load(); d != nil {
		return d
	}
	if s.refused.Load() == nil {
		return nil
	}
	return s.update(func(*bolt.Tx) error { return nil })
}

// view is db.View with bbolt's panics on a damaged page turned into a
// DamagedError, as update does for writes.
func (s *Store) view(fn func(*bolt.Tx) error) error {
	return s.guarded(func() error { return s.db.View(fn) })
}

func (c *readCache) cachedProtocol() (blockproto.State, uint64, bool) {
	g := c.gen.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.protoGen == g {
		return c.proto.Clone(), g, true
	}
	return blockproto.State{}, g, false
}

func (c *readCache) keepProtocol(g uint64, st blockproto.State) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g > c.protoGen {
		c.protoGen, c.proto = g, st.Clone()
	}
}

func (c *readCache) cachedBlocks() ([]Block, uint64, bool) {
	g := c.gen.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blocksGen == g {
		return slices.Clone(c.blocks), g, true
	}
	return nil, g, false
}

func (c *readCache) keepBlocks(g uint64, blocks []Block) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g > c.blocksGen {
		c.blocksGen, c.blocks = g, slices.Clone(blocks)
	}
}

// endpoints decodes the records of bucket eps in key order, each one
// whose bytes changed since the last call (or is new), and forgets the
// handles not there any more. The endpoints returned share nothing with
// the cache.
func (c *readCache) endpoints(eps *bolt.Bucket) ([]Endpoint, error) {
	c.epsMu.Lock()
	defer c.epsMu.Unlock()
	var out []Endpoint
	seen := make(map[string]decodedEndpoint, len(c.eps))
	err := eps.ForEach(func(k, v []byte) error {
		d, ok := c.eps[string(k)]
		if !ok || !bytes.Equal(d.raw, v) {
			ep, err := decodeEndpoint(string(k), v)
			if err != nil {
				return err
			}
			d = decodedEndpoint{raw: bytes.Clone(v), ep: ep} // v is the transaction's
		}
		seen[d.ep.Handle] = d
		out = append(out, d.ep.clone())
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.eps = seen
	return out, nil
}
