package store

import (
	"net/netip"
	"path/filepath"
	"slices"
	"testing"

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
