package store

import (
	"errors"
	"net/netip"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestNodeIdentityKept: the first Open that names an identity records it
// beside the incarnation; a store made before identities were kept (no
// key) takes the address it is opened with, the node's IPv4 address, and
// goes on as before; an Open with another identity is refused, naming
// both, and changes nothing.
func TestNodeIdentityKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	inc, _ := s.Incarnation()
	if id, ok, err := s.NodeIdentity(); err != nil || !ok || id != protoSelf {
		t.Fatalf("NodeIdentity of a new store = %s, %v, %v; want %s", id, ok, err, protoSelf)
	}
	// As a store of an older reef: no identity key.
	if err := s.update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyNodeIdentity) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openProtoAt(t, path)
	if id, ok, err := s.NodeIdentity(); err != nil || !ok || id != protoSelf {
		t.Errorf("NodeIdentity of an older store reopened = %s, %v, %v; want %s", id, ok, err, protoSelf)
	}
	if i, _ := s.Incarnation(); i != inc {
		t.Errorf("incarnation %08x after the reopen, want %08x", i, inc)
	}
	s.Close()

	other := netip.MustParseAddr("10.255.0.7")
	_, err := Open(path, Options{Node: "node-a", Address: other})
	if !errors.Is(err, ErrIdentityChanged) {
		t.Fatalf("Open as %s = %v, want ErrIdentityChanged", other, err)
	}
	t.Logf("the error: %v", err)
	s = openProtoAt(t, path)
	defer s.Close()
	if id, _, _ := s.NodeIdentity(); id != protoSelf {
		t.Errorf("NodeIdentity after the refused Open = %s, want %s", id, protoSelf)
	}
	if _, err := Open(filepath.Join(t.TempDir(), "reef.db"), Options{Node: "node-b", Address: netip.MustParseAddr("fd00::1")}); err == nil {
		t.Error("Open with an IPv6 identity succeeded, want an error (identities are 32 bits)")
	}
}
