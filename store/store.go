// Package store keeps reef's node-local state in one bbolt file: pod IPAM
// (pools cut into blocks, the blocks this node owns, one address per handle)
// and the endpoint record of every pod attachment.
//
// Every change that must be atomic is a single bbolt transaction: Allocate
// reads the free addresses of the node's confirmed blocks and writes the
// endpoint in one db.Update (it never claims a block: the block protocol's
// step does, docs/design.md), so parallel callers (bbolt serialises writers)
// can never be given the same address. The package does not log; it
// returns errors that name the object.
package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// defaultTimeout bounds the wait for the file lock when Options.Timeout is
// zero: bbolt itself would wait forever, and a second daemon that hangs
// without a word is worse than one that fails with a clear message.
const defaultTimeout = 5 * time.Second

// Options for Open.
type Options struct {
	// Node is this node's name: the owner recorded on the blocks it claims.
	// It also seeds the block search offset, so nodes spread their claims.
	Node string
	// Address is this node's identity in the block protocol, recorded on
	// the blocks it claims: its IPv4 address, or, on a node with none,
	// bgp.routerID. The store keeps the first one it is opened with
	// (keyNodeIdentity) and refuses another (ErrIdentityChanged).
	Address netip.Addr
	// Timeout is how long to wait for the file lock; 0 means 5s.
	Timeout time.Duration
	// keepIdentity leaves the identity file alone (Recover writes it once
	// the old incarnation is in the new file).
	keepIdentity bool
}

// Store is an open reef state file. Its methods are safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string
	node string
	addr netip.Addr
	inc  uint32 // blockproto incarnation, drawn when the file was created
	born uint32
	// created: this Open made the file (it had no schema yet).
	created bool

	cache       readCache
	identityErr error
	damaged     atomic.Pointer[DamagedError] // found damaged while open: writes refused
	// refused is the last write the file system refused (full, over
	// quota, read-only), until a write is taken again.
	refused atomic.Pointer[StorageError]
}

// IdentityErr is why Open could not write the identity file (IdentityPath),
// or nil.
func (s *Store) IdentityErr() error { return s.identityErr }

// Open opens the state file at path, creating it (mode 0600, parent
// directory 0700) if needed, and brings its schema to the current version.
// A file written by a newer reef is refused with ErrSchemaTooNew; a file
// locked by another process past opts.Timeout is refused with ErrLocked.
func Open(path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("open store: path is empty")
	}
	if opts.Node == "" {
		return nil, fmt.Errorf("open store %s: node name is empty", path)
	}
	db, err := openFile(path, opts)
	if err != nil {
		return nil, err
	}
	up, err := bringUp(db, path, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	st := &Store{db: db, path: path, node: opts.Node, addr: opts.Address, inc: up.inc, born: up.born, created: up.created}
	if !opts.keepIdentity {
		// Not fatal: a store from before identity.json, on a full disk,
		// still opens; IdentityErr says so, and the next Open tries again.
		st.identityErr = writeIdentity(path, Identity{Node: opts.Node, Address: opts.Address, Incarnation: up.inc, Born: up.born})
	}
	st.cache.gen.Store(1)
	return st, nil
}

// openFile opens the bbolt file at path, creating it and its directory,
// and checks it for damage. A file locked past opts.Timeout is ErrLocked;
// one bbolt cannot read, or that fails the check, a DamagedError.
func openFile(path string, opts Options) (*bolt.DB, error) {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = defaultTimeout
	}
	// 0700: the file maps pods to addresses and nothing but root needs it.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, storageError(path, err))
	}
	if err := precheck(path); err != nil {
		return nil, err
	}
	if !opts.keepIdentity {
		if err := refuseLostStore(path); err != nil {
			return nil, err
		}
	}
	var db *bolt.DB
	err := guard(path, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("store %s is %w (is another reef daemon running?)", path, ErrLocked)
	}
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch) {
		return nil, &DamagedError{Path: path, Problem: fmt.Sprintf("bbolt cannot read its meta pages (%v)", err)}
	}
	var damaged *DamagedError
	if errors.As(err, &damaged) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, storageError(path, err))
	}
	if err := check(db, path); err != nil {
		_ = db.Close() // the damage is the error worth reporting
		return nil, err
	}
	return db, nil
}

// bringUp brings a checked file to the current schema in one transaction
// and returns its incarnation. The caller closes db on an error.
func bringUp(db *bolt.DB, path string, opts Options) (up setUpResult, err error) {
	err = guard(path, func() error {
		return db.Update(func(tx *bolt.Tx) (err error) {
			up, err = setUp(tx, path, opts)
			return err
		})
	})
	var damaged *DamagedError
	switch {
	case errors.As(err, &damaged) && damaged.panicked:
		// The check passed: not damage, a reef bug.
		return setUpResult{}, fmt.Errorf("open store %s: reef failed bringing a sound file to schema %d (a reef bug; please report it, and do not run `reef store recover` for it): %s",
			path, schemaVersion, damaged.Problem)
	case errors.As(err, &damaged):
		return setUpResult{}, err
	case errors.Is(err, ErrIdentityChanged):
		return setUpResult{}, fmt.Errorf("store %s: %w", path, err)
	case err != nil:
		// The schema error is the one worth reporting.
		return setUpResult{}, fmt.Errorf("open store %s: %w", path, storageError(path, err))
	}
	return up, nil
}

// setUpResult is what setUp found: the file's incarnation, and whether
// the file was new (no schema yet).
type setUpResult struct {
	inc, born uint32
	created   bool
}

// setUp migrates the file to the current schema, marks a new file as
// such, checks its buckets, reads its incarnation and keeps the node's
// identity.
func setUp(tx *bolt.Tx, path string, opts Options) (setUpResult, error) {
	// The node's name, for the migration of schema 1 block records
	// (owned by name); not kept.
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return setUpResult{}, err
	}
	if err := meta.Put(keyMigrateNode, []byte(opts.Node)); err != nil {
		return setUpResult{}, err
	}
	// No schema yet: the file is new (RunUnder, New).
	created := meta.Get(keySchema) == nil
	if err := migrate(tx, schemaVersion, schemaIPv6, migrations); err != nil {
		return setUpResult{}, err
	}
	if created {
		if err := meta.Put(keyNewStore, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
			return setUpResult{}, err
		}
	}
	if err := meta.Delete(keyMigrateNode); err != nil {
		return setUpResult{}, err
	}
	if err := checkBuckets(tx); err != nil {
		return setUpResult{}, &DamagedError{Path: path, Problem: err.Error()}
	}
	inc, born, ok := readIncarnation(tx)
	if !ok {
		return setUpResult{}, &DamagedError{Path: path, Problem: fmt.Sprintf("no incarnation in bucket %s although schema version is %d", bucketMeta, schemaVersion)}
	}
	return setUpResult{inc: inc, born: born, created: created}, keepIdentity(path, meta, opts.Address)
}

// Close releases the file and its lock. The Store must not be used after.
func (s *Store) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store %s: %w", s.path, err)
	}
	return nil
}

// Created reports whether the file was made by this Open: a first start,
// or a state dir wiped (a new node for the cluster).
func (s *Store) Created() bool { return s.created }

// Path returns the path the Store was opened with.
func (s *Store) Path() string { return s.path }

// Node returns this node's name, the owner of the blocks it claims.
func (s *Store) Node() string { return s.node }
