package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
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
