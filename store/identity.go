package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// Identity is this node's identity in the block protocol, kept in a small
// file next to the store (IdentityPath) as well as in it: a damaged store
// loses its pages, not this file, and `reef store recover` needs the
// incarnation to keep the node's blocks (a new incarnation would set them
// free for every other node while pods still hold their addresses).
type Identity struct {
	Node        string     `json:"node"`
	Address     netip.Addr `json:"address,omitzero"`
	Incarnation uint32     `json:"incarnation"`
	Born        uint32     `json:"born"`
}

// IdentityPath is where the identity of the store at path is kept.
func IdentityPath(path string) string { return filepath.Join(filepath.Dir(path), "identity.json") }

// ReadIdentity reads the identity file of the store at path; ok is false
// when there is none.
func ReadIdentity(path string) (id Identity, ok bool, err error) {
	file := IdentityPath(path)
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return Identity{}, false, nil
	}
	if err != nil {
		return Identity{}, false, fmt.Errorf("read identity %s: %w", file, err)
	}
	if err := json.Unmarshal(data, &id); err != nil {
		return Identity{}, false, fmt.Errorf("read identity %s: %w", file, err)
	}
	if id.Incarnation == 0 || id.Born == 0 {
		return Identity{}, false, fmt.Errorf("read identity %s: no incarnation in it", file)
	}
	return id, true, nil
}

// writeIdentity writes id next to the store at path, atomically, unless
// the file says so already (so a node with a full disk still starts).
func writeIdentity(path string, id Identity) error {
	if old, ok, err := ReadIdentity(path); err == nil && ok && old == id {
		return nil
	}
	file := IdentityPath(path)
	data, err := json.Marshal(id)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".identity-*")
	if err != nil {
		return fmt.Errorf("write identity %s: %w", file, err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write identity %s: %w", file, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write identity %s: %w", file, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write identity %s: %w", file, err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return fmt.Errorf("write identity %s: %w", file, err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write identity %s: %w", file, err)
	}
	return syncDir(filepath.Dir(file))
}

// syncDir makes renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

// refuseLostStore refuses to create a new store where identity.json says
// one was: the file was lost (deleted, or a recovery cut short), and a new
// store would be a new incarnation whose first pass removes every pod's
// veth while the cluster frees the old one's blocks.
func refuseLostStore(path string) error {
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	id, ok, err := ReadIdentity(path)
	if err != nil || !ok {
		return nil // no identity to keep: a new node
	}
	return &DamagedError{Path: path, Problem: fmt.Sprintf("the file is missing, but %s says this node is incarnation %08x "+
		"(to start as a new node instead, on a drained node, move the state dir away)", IdentityPath(path), id.Incarnation)}
}

// keyNodeIdentity holds the node's identity in the block protocol (4
// bytes, an IPv4 address or bgp.routerID), kept beside the incarnation
// from the first Open that names one. A store made before it was kept has
// none: its identity was the node's IPv4 address, the one Open is given.
var keyNodeIdentity = []byte("node-identity")

// ErrIdentityChanged: the store was made by a node known by another
// identity. Its incarnation, votes and blocks are that identity's: under
// another one they would be a second node's, which the cluster's votes
// would count twice.
var ErrIdentityChanged = errors.New("this store belongs to another node identity")

// keepIdentity records id as the store's identity if it has none, and
// refuses another one. An invalid id (a tool that does not know the node)
// is not checked.
func keepIdentity(path string, meta *bolt.Bucket, id netip.Addr) error {
	if !id.IsValid() {
		return nil
	}
	if !id.Is4() {
		return fmt.Errorf("node identity %s is not 32 bits (an IPv4 address or bgp.routerID)", id)
	}
	v := meta.Get(keyNodeIdentity)
	if v == nil {
		b := id.As4()
		return meta.Put(keyNodeIdentity, b[:])
	}
	old, ok := netip.AddrFromSlice(v)
	if !ok || !old.Is4() {
		return &DamagedError{Path: path, Problem: fmt.Sprintf("node identity %x in bucket %s is not 4 bytes", v, bucketMeta)}
	}
	if old != id {
		return fmt.Errorf("%w: the store is of %s, this node is now %s (nodeAddress, the detected address or bgp.routerID changed); "+
			"a node keeps its identity for the life of its store: put it back, or, on a drained node, move the state dir away to start as a new node", ErrIdentityChanged, old, id)
	}
	return nil
}

// NodeIdentity returns the identity the store keeps; ok is false for a
// store that keeps none yet.
func (s *Store) NodeIdentity() (id netip.Addr, ok bool, err error) {
	err = s.view(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyNodeIdentity); v != nil {
			id, ok = netip.AddrFromSlice(v)
		}
		return nil
	})
	return id, ok, err
}

// keyVoterIdentities holds what this node learned of the voters written
// as IPv6 addresses in bgp.voters: address -> identity (JSON), each from
// that voter's own record. Kept so that a voter that is down when this
// node starts is still named, and a later record that says otherwise is
// seen as the conflict it is.
var keyVoterIdentities = []byte("voter-identities")

// VoterIdentities returns the identities learned of voter addresses.
func (s *Store) VoterIdentities() (map[netip.Addr]netip.Addr, error) {
	out := map[netip.Addr]netip.Addr{}
	err := s.view(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get(keyVoterIdentities)
		if v == nil {
			return nil
		}
		return json.Unmarshal(v, &out)
	})
	if err != nil {
		return nil, fmt.Errorf("read the voter identities of %s: %w", s.path, err)
	}
	return out, nil
}

// SetVoterIdentities replaces the identities learned of voter addresses.
func (s *Store) SetVoterIdentities(m map[netip.Addr]netip.Addr) error {
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyVoterIdentities, v) }); err != nil {
		return fmt.Errorf("record the voter identities in %s: %w", s.path, err)
	}
	return nil
}
