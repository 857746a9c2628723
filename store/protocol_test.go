package store

import (
	"encoding/json"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/blockproto"
)

// The block protocol's side of the store. Pool: 4 blocks of 4 addresses.
var (
	protoPool  = Pool{CIDR: netip.MustParsePrefix("10.244.0.0/28"), BlockSize: 30}
	protoBlk0  = netip.MustParsePrefix("10.244.0.0/30")
	protoBlk1  = netip.MustParsePrefix("10.244.0.4/30")
	protoBlk2  = netip.MustParsePrefix("10.244.0.8/30")
	protoBlk3  = netip.MustParsePrefix("10.244.0.12/30")
	protoSelf  = netip.MustParseAddr("192.168.10.2")
	protoPeerB = netip.MustParseAddr("192.168.10.3")
	protoPeerC = netip.MustParseAddr("192.168.10.4")
	protoT0    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	nodeB      = blockproto.Node{Addr: protoPeerB, Inc: 0xb}
	nodeC      = blockproto.Node{Addr: protoPeerC, Inc: 0xc}
)

// openProtoAt opens the store at path as node-a at protoSelf; the caller
// closes it.
func openProtoAt(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path, Options{Node: "node-a", Address: protoSelf})
	if err != nil {
		t.Fatalf("Open %s: %v", path, err)
	}
	return s
}

// openProto opens a fresh store as node-a, closed when the test ends.
func openProto(t *testing.T) *Store {
	t.Helper()
	s := openProtoAt(t, filepath.Join(t.TempDir(), "reef.db"))
	t.Cleanup(func() { s.Close() })
	return s
}

func apply(t *testing.T, s *Store, c blockproto.Changes) {
	t.Helper()
	if err := s.ApplyProtocol(c); err != nil {
		t.Fatalf("ApplyProtocol(%+v): %v", c, err)
	}
}

// claimConfirmed claims a block of pool and confirms it at once.
func claimConfirmed(t *testing.T, s *Store, pool Pool) netip.Prefix {
	t.Helper()
	p, err := claimFree(s, pool)
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	apply(t, s, blockproto.Changes{Confirm: []netip.Prefix{p}})
	return p
}

func blockList(t *testing.T, s *Store) []Block {
	t.Helper()
	bs, err := s.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	for i := range bs {
		bs[i].Claimed = time.Time{}
	}
	return bs
}

// TestProtocolRoundTrip: every kind of change written by ApplyProtocol is
// what LoadProtocol reads back, also after a reopen.
func TestProtocolRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	inc, born := s.Incarnation()
	if born == 0 {
		t.Fatal("no incarnation birth time")
	}
	self := blockproto.Node{Addr: protoSelf, Inc: inc}
	apply(t, s, blockproto.Changes{
		Claim:    []blockproto.OwnBlock{{Block: protoBlk0, Pool: protoPool.CIDR}, {Block: protoBlk1, Pool: protoPool.CIDR}},
		Grant:    []blockproto.Grant{{Block: protoBlk0, To: self}, {Block: protoBlk2, To: nodeB}},
		Remember: []blockproto.RemoteBlock{{Block: protoBlk2, Pool: protoPool.CIDR, Owner: nodeB}, {Block: protoBlk3, Pool: protoPool.CIDR, Owner: nodeC}},
		Known:    []blockproto.KnownIncarnation{{Addr: protoPeerB, Incarnation: blockproto.Incarnation{Inc: 0xb, Born: 7}}},
	})
	apply(t, s, blockproto.Changes{Confirm: []netip.Prefix{protoBlk0}, Release: []netip.Prefix{protoBlk1},
		Forget: []blockproto.Node{nodeC}, Supersede: []blockproto.Node{{Addr: protoPeerB, Inc: 1}}, Unremember: []netip.Prefix{protoBlk3}})
	if _, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool); err != nil {
		t.Fatal(err)
	}
	want := blockproto.State{
		Self: self, Born: born,
		Own:       map[netip.Prefix]blockproto.OwnBlock{protoBlk0: {Block: protoBlk0, Pool: protoPool.CIDR, State: blockproto.OwnConfirmed, Used: 1}},
		Released:  map[netip.Prefix]bool{protoBlk1: true},
		Grants:    map[netip.Prefix]blockproto.Node{protoBlk0: self, protoBlk2: nodeB},
		Remote:    map[netip.Prefix]blockproto.RemoteBlock{protoBlk2: {Block: protoBlk2, Pool: protoPool.CIDR, Owner: nodeB}},
		Forgotten: map[blockproto.Node]bool{nodeC: true}, Superseded: map[blockproto.Node]bool{{Addr: protoPeerB, Inc: 1}: true},
		Known: map[netip.Addr]blockproto.Incarnation{protoPeerB: {Inc: 0xb, Born: 7}},
	}
	for _, reopen := range []bool{false, true} {
		if reopen {
			s.Close()
			s = openProtoAt(t, path)
			if i2, b2 := s.Incarnation(); i2 != inc || b2 != born {
				t.Fatalf("incarnation changed on reopen: %x/%d, was %x/%d", i2, b2, inc, born)
			}
		}
		got, err := s.LoadProtocol()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, netipEqual); diff != "" {
			t.Errorf("reopen=%v: state (-want +got):\n%s", reopen, diff)
		}
	}
	s.Close()
}

// TestProtocolRefusals: a decision that breaks the store's rules is
// refused as a whole, naming the block, and changes nothing.
func TestProtocolRefusals(t *testing.T) {
	s := openProto(t)
	apply(t, s, blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: protoBlk0, Pool: protoPool.CIDR}}})
	apply(t, s, blockproto.Changes{Remember: []blockproto.RemoteBlock{{Block: protoBlk2, Pool: protoPool.CIDR, Owner: nodeB}}})
	apply(t, s, blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: protoBlk3, Pool: protoPool.CIDR}}})
	apply(t, s, blockproto.Changes{Release: []netip.Prefix{protoBlk3}})
	before := blockList(t, s)
	for _, tc := range []struct {
		name string
		c    blockproto.Changes
		want string
	}{
		{"claim an own block", blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: protoBlk0, Pool: protoPool.CIDR}}}, "claim 10.244.0.0/30: the store already has it"},
		{"claim a remote block", blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: protoBlk2, Pool: protoPool.CIDR}}}, "claim 10.244.0.8/30"},
		{"claim a released block", blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: protoBlk3, Pool: protoPool.CIDR}}}, "claim 10.244.0.12/30"},
		{"confirm a remote block", blockproto.Changes{Confirm: []netip.Prefix{protoBlk2}}, "block 10.244.0.8/30: not a pending block"},
		{"lose a pending block", blockproto.Changes{Lose: []netip.Prefix{protoBlk0}}, "block 10.244.0.0/30: not a confirmed block"},
		{"release an unknown block", blockproto.Changes{Release: []netip.Prefix{protoBlk1}}, "release 10.244.0.4/30: not a pending claim"},
		{"remember over an own block", blockproto.Changes{Remember: []blockproto.RemoteBlock{{Block: protoBlk0, Pool: protoPool.CIDR, Owner: nodeB}}}, "is this node's"},
		{"good then bad", blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: protoBlk1, Pool: protoPool.CIDR}}, Confirm: []netip.Prefix{protoBlk2}}, "not a pending block"},
	} {
		err := s.ApplyProtocol(tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if diff := cmp.Diff(before, blockList(t, s), netipEqual); diff != "" {
		t.Errorf("a refused decision changed the blocks (-before +after):\n%s", diff)
	}
	// Unremember leaves own blocks alone.
	apply(t, s, blockproto.Changes{Unremember: []netip.Prefix{protoBlk0}})
	if bs := blockList(t, s); len(bs) != 2 {
		t.Errorf("blocks after unremembering an own one: %+v", bs)
	}
}

// TestAllocateOnlyFromConfirmed: pending and lost blocks give no address.
func TestAllocateOnlyFromConfirmed(t *testing.T) {
	s := openProto(t)
	apply(t, s, blockproto.Changes{Claim: []blockproto.OwnBlock{{Block: protoBlk0, Pool: protoPool.CIDR}, {Block: protoBlk1, Pool: protoPool.CIDR}}})
	if _, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool); !errors.Is(err, ErrNoFreeAddress) {
		t.Fatalf("Allocate from a pending block: %v, want ErrNoFreeAddress", err)
	}
	apply(t, s, blockproto.Changes{Confirm: []netip.Prefix{protoBlk0, protoBlk1}})
	apply(t, s, blockproto.Changes{Lose: []netip.Prefix{protoBlk0}})
	ep, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool)
	if err != nil || ep.Block != protoBlk1 {
		t.Fatalf("Allocate = %s in %s, %v; want an address of %s, not of the lost %s", ep.IP, ep.Block, err, protoBlk1, protoBlk0)
	}
	if n, _ := s.FreeAddresses(protoPool); n != 3 {
		t.Errorf("FreeAddresses counts the lost block: %d, want 3", n)
	}
}

func TestFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	defer func() { s.Close() }()
	check := func(when string, want map[string]bool) {
		t.Helper()
		for name, w := range want {
			got, err := s.Flag(name)
			if err != nil {
				t.Fatal(err)
			}
			if got != w {
				t.Errorf("%s: Flag(%q) = %v, want %v", when, name, got, w)
			}
		}
	}
	reopen := func() {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openProtoAt(t, path)
	}
	check("new store", map[string]bool{"planned-restart": false})
	if err := s.SetFlag("planned-restart", true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetFlag("other", false); err != nil {
		t.Errorf("clearing a flag never set: %v", err)
	}
	check("after set", map[string]bool{"planned-restart": true, "other": false})
	reopen()
	check("after reopen", map[string]bool{"planned-restart": true, "other": false})
	if err := s.SetFlag("planned-restart", false); err != nil {
		t.Fatal(err)
	}
	check("after clear", map[string]bool{"planned-restart": false})
	reopen()
	check("after clear and reopen", map[string]bool{"planned-restart": false})
}

// schema2Block is a block record as schema 2 wrote it.
type schema2Block struct {
	CIDR      netip.Prefix `json:"cidr"`
	Pool      netip.Prefix `json:"pool"`
	Owner     string       `json:"owner"`
	OwnerAddr netip.Addr   `json:"ownerAddr,omitzero"`
	State     string       `json:"state,omitempty"`
	Claimed   time.Time    `json:"claimed"`
}

// TestOpenMigratesSchema2: own confirmed blocks and their addresses stay;
// pending claims, other nodes' blocks and the old forgets go; an
// incarnation is drawn.
func TestOpenMigratesSchema2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	own := claimConfirmed(t, s, protoPool)
	a, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	var others []netip.Prefix
	for _, b := range []netip.Prefix{protoBlk0, protoBlk1, protoBlk2, protoBlk3} {
		if b != own {
			others = append(others, b)
		}
	}
	withRaw(t, path, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keySchema, []byte("2")); err != nil {
			return err
		}
		if err := meta.Delete(keyIncarnation); err != nil {
			return err
		}
		for _, b := range [][]byte{bucketReleased, bucketGrants, bucketKnown} {
			if err := tx.DeleteBucket(b); err != nil {
				return err
			}
		}
		if err := tx.Bucket(bucketForgotten).Put(protoPeerC.AsSlice(), []byte("2026-01-01T00:00:00Z")); err != nil {
			return err
		}
		blocks := tx.Bucket(bucketBlocks)
		for _, r := range []schema2Block{
			{CIDR: own, Pool: protoPool.CIDR, Owner: "node-a", OwnerAddr: protoSelf, State: "confirmed", Claimed: protoT0},
			{CIDR: others[0], Pool: protoPool.CIDR, Owner: "node-a", OwnerAddr: protoSelf, State: "pending", Claimed: protoT0},
			{CIDR: others[1], Pool: protoPool.CIDR, Owner: "node-b", OwnerAddr: protoPeerB, State: "remote", Claimed: protoT0},
			{CIDR: others[2], Pool: protoPool.CIDR, Owner: "node-c", OwnerAddr: protoPeerC, State: "remote-pending", Claimed: protoT0},
		} {
			v, _ := json.Marshal(r)
			if err := blocks.Put(blockKey(r.CIDR), v); err != nil {
				return err
			}
		}
		return nil
	})
	s = openProtoAt(t, path)
	defer s.Close()
	if inc, born := s.Incarnation(); inc == 0 && born == 0 {
		t.Error("no incarnation after migration")
	}
	want := []Block{{CIDR: own, Pool: protoPool.CIDR, Owner: "node-a", OwnerAddr: protoSelf, State: BlockConfirmed, Used: 1, Size: 4}}
	if diff := cmp.Diff(want, blockList(t, s), netipEqual); diff != "" {
		t.Errorf("blocks after migration (-want +got):\n%s", diff)
	}
	st, err := s.LoadProtocol()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Forgotten)+len(st.Superseded)+len(st.Grants)+len(st.Released) != 0 {
		t.Errorf("state after migration: %+v", st)
	}
	b, _, err := s.Allocate(Endpoint{Handle: "net.b"}, protoPool)
	if err != nil || b.IP != a.IP.Next() {
		t.Errorf("Allocate after migration gave %s, %v; want %s", b.IP, err, a.IP.Next())
	}
}
