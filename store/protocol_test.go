package store

import (
	"encoding/json"
	"errors"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
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

// claimConfirmed claims a block of pool and confirms it at once.
func claimConfirmed(t *testing.T, s *Store, pool Pool) netip.Prefix {
	t.Helper()
	p, err := s.Claim(pool, protoT0)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if err := s.ConfirmBlock(p); err != nil {
		t.Fatalf("ConfirmBlock(%s): %v", p, err)
	}
	return p
}

func putRemote(t *testing.T, s *Store, cidr netip.Prefix, owner netip.Addr, st BlockState) {
	t.Helper()
	err := s.PutRemoteBlock(Block{CIDR: cidr, Pool: protoPool.CIDR, OwnerAddr: owner, State: st, Claimed: protoT0, LastSeen: protoT0})
	if err != nil {
		t.Fatalf("PutRemoteBlock(%s of %s): %v", cidr, owner, err)
	}
}

func blockList(t *testing.T, s *Store) []Block {
	t.Helper()
	bs, err := s.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func TestClaimIsPendingUntilConfirmed(t *testing.T) {
	s := openProto(t)
	// Local time with nanoseconds and a monotonic reading: the store keeps
	// what BGP carries, UTC milliseconds.
	now := time.Now()
	p, err := s.Claim(protoPool, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{{CIDR: p, Pool: protoPool.CIDR, Owner: "node-a", OwnerAddr: protoSelf, State: BlockPending,
		Claimed: now.UTC().Truncate(time.Millisecond), Size: 4}}
	if diff := cmp.Diff(want, blockList(t, s), netipEqual); diff != "" {
		t.Errorf("blocks after Claim (-want +got):\n%s", diff)
	}
	if got := blockList(t, s)[0].Claimed; got.Location() != time.UTC || got.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("claim time %v: want UTC with millisecond precision", got)
	}

	if _, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool); !errors.Is(err, ErrNoFreeAddress) {
		t.Fatalf("Allocate from a pending block: err = %v, want ErrNoFreeAddress", err)
	}
	if _, ok, _ := s.Endpoint("net.a"); ok {
		t.Error("a refused Allocate left an endpoint record")
	}
	if err := s.ConfirmBlock(p); err != nil {
		t.Fatal(err)
	}
	ep, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool)
	if err != nil {
		t.Fatalf("Allocate after ConfirmBlock: %v", err)
	}
	if ep.Block != p || ep.IP != p.Addr() {
		t.Errorf("Allocate gave %s in %s, want %s in %s", ep.IP, ep.Block, p.Addr(), p)
	}
	own, err := s.OwnBlocks()
	if err != nil {
		t.Fatal(err)
	}
	if len(own) != 1 || own[0].State != BlockConfirmed || own[0].Used != 1 {
		t.Errorf("OwnBlocks = %+v, want one confirmed block with 1 used", own)
	}
}

func TestConfirmBlockRefusals(t *testing.T) {
	s := openProto(t)
	if err := s.ConfirmBlock(protoBlk0); !errors.Is(err, ErrNotFound) {
		t.Errorf("ConfirmBlock of an unknown block: err = %v, want ErrNotFound", err)
	}
	putRemote(t, s, protoBlk1, protoPeerB, BlockRemotePending)
	if err := s.ConfirmBlock(protoBlk1); err == nil {
		t.Error("ConfirmBlock of another node's block succeeded")
	}
	if got := blockList(t, s); len(got) != 1 || got[0].State != BlockRemotePending {
		t.Errorf("blocks after refused ConfirmBlock = %+v, want the remote-pending block unchanged", got)
	}
}

func TestDropOwnBlock(t *testing.T) {
	s := openProto(t)
	p := claimConfirmed(t, s, protoPool)
	if _, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool); err != nil {
		t.Fatal(err)
	}
	if err := s.DropOwnBlock(p); !errors.Is(err, ErrBlockInUse) {
		t.Fatalf("DropOwnBlock of a block in use: err = %v, want ErrBlockInUse", err)
	}
	if got := blockList(t, s); len(got) != 1 || got[0].CIDR != p {
		t.Fatalf("blocks after refused drop = %+v, want %s kept", got, p)
	}

	if _, found, err := s.Release("net.a"); err != nil || !found {
		t.Fatalf("Release = %v, %v", found, err)
	}
	if err := s.DropOwnBlock(p); err != nil {
		t.Fatalf("DropOwnBlock of an empty block: %v", err)
	}
	if got := blockList(t, s); len(got) != 0 {
		t.Errorf("blocks after drop = %+v, want none", got)
	}
	if err := s.DropOwnBlock(p); err != nil {
		t.Errorf("DropOwnBlock again: %v, want nil (already gone)", err)
	}

	pending, err := s.Claim(protoPool, protoT0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DropOwnBlock(pending); err != nil {
		t.Errorf("DropOwnBlock of a pending claim: %v", err)
	}

	putRemote(t, s, protoBlk2, protoPeerB, BlockRemote)
	if err := s.DropOwnBlock(protoBlk2); err == nil {
		t.Error("DropOwnBlock of another node's block succeeded")
	}
	if got := blockList(t, s); len(got) != 1 || got[0].CIDR != protoBlk2 {
		t.Errorf("blocks = %+v, want only the remote %s", got, protoBlk2)
	}
}

func TestPutRemoteBlock(t *testing.T) {
	s := openProto(t)
	seen := time.Now() // local, with a monotonic reading
	claimed := protoT0.Add(123 * time.Millisecond)
	in := Block{CIDR: protoBlk1, Pool: protoPool.CIDR, Owner: "node-b", OwnerAddr: protoPeerB, State: BlockRemotePending,
		Claimed: claimed, LastSeen: seen, Used: 9, Size: 99}
	if err := s.PutRemoteBlock(in); err != nil {
		t.Fatal(err)
	}
	want := Block{CIDR: protoBlk1, Pool: protoPool.CIDR, Owner: "node-b", OwnerAddr: protoPeerB, State: BlockRemotePending,
		Claimed: claimed, LastSeen: seen.UTC().Round(0), Size: 4}
	if diff := cmp.Diff([]Block{want}, blockList(t, s), netipEqual); diff != "" {
		t.Errorf("remote block (-want +got):\n%s", diff)
	}

	// Learned again without a name (the session's hostname unknown): the
	// name learned earlier stays.
	in = Block{CIDR: protoBlk1, Pool: protoPool.CIDR, OwnerAddr: protoPeerB, State: BlockRemote, Claimed: claimed, LastSeen: seen}
	if err := s.PutRemoteBlock(in); err != nil {
		t.Fatal(err)
	}
	want.State = BlockRemote
	if diff := cmp.Diff([]Block{want}, blockList(t, s), netipEqual); diff != "" {
		t.Errorf("remote block updated without a name (-want +got):\n%s", diff)
	}

	// Another owner: the old name is not its name.
	in = Block{CIDR: protoBlk1, Pool: protoPool.CIDR, OwnerAddr: protoPeerC, State: BlockRemote, Claimed: protoT0, LastSeen: seen}
	if err := s.PutRemoteBlock(in); err != nil {
		t.Fatal(err)
	}
	want.Owner, want.OwnerAddr, want.Claimed = "", protoPeerC, protoT0
	if diff := cmp.Diff([]Block{want}, blockList(t, s), netipEqual); diff != "" {
		t.Errorf("remote block of a new owner (-want +got):\n%s", diff)
	}
}

func TestPutRemoteBlockRefusals(t *testing.T) {
	s := openProto(t)
	own := claimConfirmed(t, s, protoPool)
	free := protoBlk0
	if own == free {
		free = protoBlk1
	}
	for _, tc := range []struct {
		name    string
		b       Block
		wantErr error // nil: any error
	}{
		{"own block", Block{CIDR: own, Pool: protoPool.CIDR, OwnerAddr: protoPeerB, State: BlockRemote}, ErrOwnBlock},
		{"own state", Block{CIDR: free, Pool: protoPool.CIDR, OwnerAddr: protoPeerB, State: BlockConfirmed}, nil},
		{"no state", Block{CIDR: free, Pool: protoPool.CIDR, OwnerAddr: protoPeerB}, nil},
		{"no owner address", Block{CIDR: free, Pool: protoPool.CIDR, Owner: "node-b", State: BlockRemote}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.PutRemoteBlock(tc.b)
			if err == nil {
				t.Fatal("PutRemoteBlock succeeded, want an error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("PutRemoteBlock: err = %v, want %v", err, tc.wantErr)
			}
		})
	}
	want := []Block{{CIDR: own, Pool: protoPool.CIDR, Owner: "node-a", OwnerAddr: protoSelf, State: BlockConfirmed, Claimed: protoT0, Size: 4}}
	if diff := cmp.Diff(want, blockList(t, s), netipEqual); diff != "" {
		t.Errorf("blocks after refusals (-want +got):\n%s", diff)
	}
}

func TestClaimSkipsRemoteBlocks(t *testing.T) {
	for _, free := range []netip.Prefix{protoBlk0, protoBlk1, protoBlk2, protoBlk3} {
		t.Run(free.String(), func(t *testing.T) {
			s := openProto(t)
			for i, b := range []netip.Prefix{protoBlk0, protoBlk1, protoBlk2, protoBlk3} {
				if b == free {
					continue
				}
				st := BlockRemote
				if i%2 == 0 {
					st = BlockRemotePending // taken as well: a claim is a claim
				}
				putRemote(t, s, b, protoPeerB, st)
			}
			// Remote blocks never give addresses, whatever the file says.
			if _, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool); !errors.Is(err, ErrNoFreeAddress) {
				t.Fatalf("Allocate with only remote blocks: err = %v, want ErrNoFreeAddress", err)
			}
			got, err := s.Claim(protoPool, protoT0)
			if err != nil {
				t.Fatal(err)
			}
			if got != free {
				t.Errorf("Claim = %s, want the only free block %s", got, free)
			}
			if _, err := s.Claim(protoPool, protoT0); !errors.Is(err, ErrPoolExhausted) {
				t.Errorf("second Claim: err = %v, want ErrPoolExhausted", err)
			}
		})
	}
}

func TestDeleteRemoteBlock(t *testing.T) {
	s := openProto(t)
	own := claimConfirmed(t, s, protoPool)
	var remote netip.Prefix
	for _, b := range []netip.Prefix{protoBlk0, protoBlk1} {
		if b != own {
			remote = b
			break
		}
	}
	putRemote(t, s, remote, protoPeerB, BlockRemote)
	if err := s.DeleteRemoteBlock(own); !errors.Is(err, ErrOwnBlock) {
		t.Errorf("DeleteRemoteBlock of an own block: err = %v, want ErrOwnBlock", err)
	}
	if err := s.DeleteRemoteBlock(remote); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRemoteBlock(remote); err != nil {
		t.Errorf("DeleteRemoteBlock again: %v, want nil", err)
	}
	if got := blockList(t, s); len(got) != 1 || got[0].CIDR != own {
		t.Errorf("blocks = %+v, want only the own %s", got, own)
	}
}

func TestForget(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	defer func() { s.Close() }()
	own := claimConfirmed(t, s, protoPool)
	var others []netip.Prefix
	for _, b := range []netip.Prefix{protoBlk0, protoBlk1, protoBlk2, protoBlk3} {
		if b != own {
			others = append(others, b)
		}
	}
	// Two blocks of B (put out of order), one of C.
	putRemote(t, s, others[2], protoPeerB, BlockRemote)
	putRemote(t, s, others[0], protoPeerB, BlockRemotePending)
	putRemote(t, s, others[1], protoPeerC, BlockRemote)

	at := time.Now() // local, monotonic: comes back as UTC
	freed, err := s.Forget(protoPeerB, at)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]netip.Prefix{others[0], others[2]}, freed, netipEqual); diff != "" {
		t.Errorf("Forget freed (-want +got):\n%s", diff)
	}
	var left []string
	for _, b := range blockList(t, s) {
		left = append(left, b.CIDR.String()+" "+string(b.State))
	}
	wantLeft := []string{own.String() + " confirmed", others[1].String() + " remote"}
	if others[1].Addr().Less(own.Addr()) {
		wantLeft[0], wantLeft[1] = wantLeft[1], wantLeft[0]
	}
	if diff := cmp.Diff(wantLeft, left); diff != "" {
		t.Errorf("blocks after Forget (-want +got):\n%s", diff)
	}
	wantForgotten := map[netip.Addr]time.Time{protoPeerB: at}
	checkForgotten := func(when string) {
		t.Helper()
		got, err := s.Forgotten()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantForgotten, got, netipEqual); diff != "" {
			t.Errorf("Forgotten %s (-want +got):\n%s", when, diff)
		}
		for a, tm := range got {
			if tm.Location() != time.UTC {
				t.Errorf("Forgotten[%s] = %v, want UTC", a, tm)
			}
		}
	}
	checkForgotten("after Forget")

	// Forget again with nothing left: no blocks, and an older time does
	// not move the record back.
	freed, err = s.Forget(protoPeerB, at.Add(-time.Hour))
	if err != nil || len(freed) != 0 {
		t.Errorf("second Forget = %v, %v; want nothing freed", freed, err)
	}
	checkForgotten("after an older Forget")

	if err := s.RecordForgotten(protoPeerB, at.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	checkForgotten("after recording an older forget")
	if err := s.RecordForgotten(protoPeerB, at); err != nil {
		t.Fatal(err)
	}
	checkForgotten("after recording the same forget")
	if err := s.RecordForgotten(protoPeerB, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	wantForgotten[protoPeerB] = at.Add(time.Minute)
	checkForgotten("after recording a later forget")
	if err := s.RecordForgotten(protoPeerC, protoT0); err != nil {
		t.Fatal(err)
	}
	wantForgotten[protoPeerC] = protoT0
	checkForgotten("after recording another node")
	// RecordForgotten records, it does not free: C's block stays.
	if got := blockList(t, s); len(got) != 2 {
		t.Errorf("RecordForgotten changed the blocks: %+v", got)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openProtoAt(t, path)
	checkForgotten("after reopen")
}

func TestFreeAddresses(t *testing.T) {
	s := openProto(t)
	other := Pool{CIDR: netip.MustParsePrefix("10.245.0.0/28"), BlockSize: 29}
	free := func(pool Pool) int {
		t.Helper()
		n, err := s.FreeAddresses(pool)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := free(protoPool); n != 0 {
		t.Errorf("FreeAddresses of an empty store = %d, want 0", n)
	}
	claimConfirmed(t, s, protoPool)
	if _, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool); err != nil {
		t.Fatal(err)
	}
	if n := free(protoPool); n != 3 {
		t.Errorf("FreeAddresses with one confirmed block, one address used = %d, want 3", n)
	}
	if _, err := s.Claim(protoPool, protoT0); err != nil {
		t.Fatal(err)
	}
	if n := free(protoPool); n != 3 {
		t.Errorf("FreeAddresses counts a pending block: %d, want 3", n)
	}
	for _, b := range []netip.Prefix{protoBlk0, protoBlk1, protoBlk2, protoBlk3} {
		if err := s.PutRemoteBlock(Block{CIDR: b, Pool: protoPool.CIDR, OwnerAddr: protoPeerB, State: BlockRemote, Claimed: protoT0}); err != nil && !errors.Is(err, ErrOwnBlock) {
			t.Fatal(err)
		}
	}
	if n := free(protoPool); n != 3 {
		t.Errorf("FreeAddresses counts remote blocks: %d, want 3", n)
	}
	claimConfirmed(t, s, other)
	if n := free(protoPool); n != 3 {
		t.Errorf("FreeAddresses counts another pool's block: %d, want 3", n)
	}
	if n := free(other); n != 8 {
		t.Errorf("FreeAddresses of the other pool = %d, want 8", n)
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

// schema1Block is a block record as schema 1 wrote it: no owner address,
// state or last-seen time.
type schema1Block struct {
	CIDR    netip.Prefix `json:"cidr"`
	Pool    netip.Prefix `json:"pool"`
	Owner   string       `json:"owner"`
	Claimed time.Time    `json:"claimed"`
}

func TestOpenMigratesSchema1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	own := claimConfirmed(t, s, protoPool)
	a, _, err := s.Allocate(Endpoint{Handle: "net.a"}, protoPool)
	if err != nil {
		t.Fatal(err)
	}
	var foreign netip.Prefix
	for _, b := range []netip.Prefix{protoBlk0, protoBlk1} {
		if b != own {
			foreign = b
			break
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Make it a schema 1 file: version "1", no forgotten bucket, block
	// records in the old form, and a block of another node known by name.
	withRaw(t, path, func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(keySchema, []byte("1")); err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketForgotten); err != nil {
			return err
		}
		blocks := tx.Bucket(bucketBlocks)
		for _, r := range []schema1Block{
			{CIDR: own, Pool: protoPool.CIDR, Owner: "node-a", Claimed: protoT0},
			{CIDR: foreign, Pool: protoPool.CIDR, Owner: "node-b", Claimed: protoT0},
		} {
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := blocks.Put(blockKey(r.CIDR), v); err != nil {
				return err
			}
		}
		return nil
	})

	s = openProtoAt(t, path)
	defer s.Close()
	var schema string
	s.db.View(func(tx *bolt.Tx) error {
		schema = string(tx.Bucket(bucketMeta).Get(keySchema))
		return nil
	})
	if schema != "2" {
		t.Errorf("schema after Open = %q, want \"2\"", schema)
	}
	if f, err := s.Forgotten(); err != nil || len(f) != 0 {
		t.Errorf("Forgotten after migration = %v, %v; want empty", f, err)
	}

	want := []Block{
		{CIDR: own, Pool: protoPool.CIDR, Owner: "node-a", State: BlockConfirmed, Claimed: protoT0, Used: 1, Size: 4},
		{CIDR: foreign, Pool: protoPool.CIDR, Owner: "node-b", State: BlockRemote, Claimed: protoT0, Size: 4},
	}
	if foreign.Addr().Less(own.Addr()) {
		want[0], want[1] = want[1], want[0]
	}
	if diff := cmp.Diff(want, blockList(t, s), netipEqual); diff != "" {
		t.Errorf("blocks after migration (-want +got):\n%s", diff)
	}

	// The old own block still gives addresses and counts as free space;
	// the old foreign one is nobody's to give.
	if n, err := s.FreeAddresses(protoPool); err != nil || n != 3 {
		t.Errorf("FreeAddresses = %d, %v; want 3", n, err)
	}
	b, _, err := s.Allocate(Endpoint{Handle: "net.b"}, protoPool)
	if err != nil {
		t.Fatal(err)
	}
	if b.Block != own || b.IP != a.IP.Next() {
		t.Errorf("Allocate after migration gave %s in %s, want %s in %s", b.IP, b.Block, a.IP.Next(), own)
	}
	if err := s.PutRemoteBlock(Block{CIDR: own, Pool: protoPool.CIDR, OwnerAddr: protoPeerB, State: BlockRemote}); !errors.Is(err, ErrOwnBlock) {
		t.Errorf("PutRemoteBlock over an old own block: err = %v, want ErrOwnBlock", err)
	}
	if err := s.DeleteRemoteBlock(foreign); err != nil {
		t.Errorf("DeleteRemoteBlock of an old foreign block: %v", err)
	}
}

// TestPutRemoteBlocksBatch: many blocks in one transaction, with a per-block
// answer: an own block is refused without failing the others.
func TestPutRemoteBlocksBatch(t *testing.T) {
	s := openTest(t, "node-a")
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	own, err := s.Claim(pool, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	owner := netip.MustParseAddr("192.168.10.2")
	var bs []Block
	for i := 0; i < 4; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, 0, byte(64 * i)}), 26)
		bs = append(bs, Block{CIDR: p, Pool: pool.CIDR, OwnerAddr: owner, State: BlockRemote, Claimed: time.Unix(100, 0), LastSeen: time.Now()})
	}
	errs, err := s.PutRemoteBlocks(bs)
	if err != nil {
		t.Fatal(err)
	}
	remembered := 0
	for i, b := range bs {
		switch {
		case b.CIDR == own && !errors.Is(errs[i], ErrOwnBlock):
			t.Errorf("own block %s: %v, want ErrOwnBlock", b.CIDR, errs[i])
		case b.CIDR != own && errs[i] != nil:
			t.Errorf("block %s: %v", b.CIDR, errs[i])
		case b.CIDR != own:
			remembered++
		}
	}
	all, err := s.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, b := range all {
		if b.State == BlockRemote && b.OwnerAddr == owner {
			got++
		}
	}
	if got != remembered || got != 3 {
		t.Errorf("%d remote blocks stored, want 3", got)
	}
}
