package store

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/blockproto"
)

func TestVoterListKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	if _, ok, err := s.VoterList(); err != nil || ok {
		t.Fatalf("a new store keeps a voter list: ok %v, err %v", ok, err)
	}
	a, b := netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1")
	if err := s.SetVoterList(blockproto.VoterList{Voters: []netip.Addr{a, b}, Alone: true}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openProtoAt(t, path)
	defer s.Close()
	l, ok, err := s.VoterList()
	if err != nil || !ok || !l.Alone || !slices.Equal(l.Voters, []netip.Addr{b, a}) {
		t.Fatalf("after a reopen: %+v ok %v err %v; want [10.0.0.1 10.0.0.2] alone", l, ok, err)
	}
}

// TestNewStoreAndRestriction: a store Open creates is new until it first
// runs under a cluster's list (running alone keeps it new); the
// restriction is kept, read by LoadProtocol, and cleared; a store made
// before the new-store mark existed is not new.
func TestNewStoreAndRestriction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	isNew := func() bool {
		t.Helper()
		ok, err := s.New()
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !isNew() {
		t.Fatal("a store Open created is not new")
	}
	s.Close()
	s = openProtoAt(t, path)
	if !isNew() {
		t.Fatal("not new after a reopen")
	}
	if err := s.RunUnder(blockproto.VoterList{Voters: []netip.Addr{protoSelf}, Alone: true}, false); err != nil {
		t.Fatal(err)
	}
	if !isNew() {
		t.Fatal("running alone ended the store's being new")
	}
	cluster := blockproto.VoterList{Voters: []netip.Addr{protoSelf, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}}
	if err := s.RunUnder(cluster, true); err != nil {
		t.Fatal(err)
	}
	if isNew() {
		t.Fatal("still new after running under a cluster's list")
	}
	if r, err := s.VoterRestricted(); err != nil || !r {
		t.Fatalf("restricted: %v %v", r, err)
	}
	if ps, err := s.LoadProtocol(); err != nil || !ps.Restricted {
		t.Fatalf("LoadProtocol: restricted %v, %v", ps.Restricted, err)
	}
	if l, ok, _ := s.VoterList(); !ok || !slices.Equal(l.Voters, blockproto.Voters(cluster.Voters)) {
		t.Fatalf("voter list %+v %v", l, ok)
	}
	s.Close()
	s = openProtoAt(t, path)
	if ps, _ := s.LoadProtocol(); !ps.Restricted {
		t.Fatal("the restriction did not survive a reopen")
	}
	if err := s.RunUnder(cluster, false); err != nil {
		t.Fatal(err)
	}
	if ps, _ := s.LoadProtocol(); ps.Restricted {
		t.Fatal("the restriction was not cleared")
	}
	// A store of an older reef: no mark, whatever it holds.
	s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyNewStore) })
	s.Close()
	s = openProtoAt(t, path)
	defer s.Close()
	if isNew() {
		t.Fatal("an existing store without the mark is new")
	}
}

func TestInit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "reef.db")
	cluster := blockproto.VoterList{Voters: []netip.Addr{protoSelf, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}}
	inc, err := Init(path, Options{Node: "node-a", Address: protoSelf}, cluster)
	if err != nil || inc == 0 {
		t.Fatalf("Init: %08x %v", inc, err)
	}
	s := openProtoAt(t, path)
	if ok, _ := s.New(); ok {
		t.Error("an initialised store is new")
	}
	if r, _ := s.VoterRestricted(); r {
		t.Error("an initialised store is restricted")
	}
	if l, ok, _ := s.VoterList(); !ok || !slices.Equal(l.Voters, blockproto.Voters(cluster.Voters)) {
		t.Errorf("voter list %+v %v, want %v", l, ok, cluster.Voters)
	}
	if got, _ := s.Incarnation(); got != inc {
		t.Errorf("incarnation %08x, Init said %08x", got, inc)
	}
	s.Close()
	// Once more: a store is there.
	if _, err := Init(path, Options{Node: "node-a", Address: protoSelf}, cluster); err == nil ||
		!strings.Contains(err.Error(), path+" already exists") || !strings.Contains(err.Error(), "only for a node that never ran") {
		t.Fatalf("Init over a store: %v", err)
	}
	// The store gone, its identity file left: the node ran.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := Init(path, Options{Node: "node-a", Address: protoSelf}, cluster); err == nil ||
		!strings.Contains(err.Error(), "identity.json says this node ran as incarnation") {
		t.Fatalf("Init beside an identity file: %v", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("a refused Init left a store")
	}
}
