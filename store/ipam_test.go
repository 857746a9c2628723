package store

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/blockproto"
)

// netipEqual lets go-cmp compare netip values, whose fields are unexported.
var netipEqual = cmp.Options{
	cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
	cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }),
}

// nodeWithOffset returns a node name whose claim search among n blocks
// starts at block want, so that tests can predict addresses.
func nodeWithOffset(t *testing.T, n, want uint64) string {
	t.Helper()
	for i := range 10000 {
		name := fmt.Sprintf("node-%d", i)
		if uint64(blockproto.Offset(name, int(n))) == want {
			return name
		}
	}
	t.Fatalf("no node name with offset %d of %d", want, n)
	return ""
}

// putForeignBlock records a block owned by another node, as the BGP side
// will once it remembers learned blocks.
func putForeignBlock(t *testing.T, s *Store, pool Pool, cidr, owner string) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		return putBlock(tx.Bucket(bucketBlocks), blockRecord{
			CIDR: netip.MustParsePrefix(cidr), Pool: pool.CIDR, Owner: owner, Claimed: time.Now().UTC(),
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestAllocateRelease(t *testing.T) {
	// 4 blocks of 4 addresses; the node starts its search at the first.
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/28"), BlockSize: 30}
	s := openTest(t, nodeWithOffset(t, 4, 0))

	type step struct {
		op          string // "alloc" or "release"
		handle      string
		wantIP      string // "" when release finds nothing
		wantExisted bool   // alloc
		wantNew     bool   // alloc
	}
	steps := []step{
		{"alloc", "a", "10.244.0.0", false, true},
		{"alloc", "b", "10.244.0.1", false, false},
		{"alloc", "a", "10.244.0.0", true, false}, // a repeated ADD
		{"release", "a", "10.244.0.0", false, false},
		{"release", "a", "", false, false}, // a repeated DEL
		{"alloc", "c", "10.244.0.0", false, false},
		{"alloc", "d", "10.244.0.2", false, false},
		{"alloc", "e", "10.244.0.3", false, false},
		{"alloc", "f", "10.244.0.4", false, true}, // first block full
		{"release", "b", "10.244.0.1", false, false},
		{"alloc", "g", "10.244.0.1", false, false}, // lowest free, own blocks in order
		{"alloc", "h", "10.244.0.5", false, false},
	}
	for i, st := range steps {
		switch st.op {
		case "alloc":
			tmpl := Endpoint{Handle: st.handle, PodName: "pod-" + st.handle}
			got, existed, newBlock, err := allocAuto(s, tmpl, pool)
			if err != nil {
				t.Fatalf("step %d: Allocate(%s): %v", i, st.handle, err)
			}
			if got.IP.String() != st.wantIP || existed != st.wantExisted || newBlock != st.wantNew {
				t.Errorf("step %d: Allocate(%s) = %s existed=%v new=%v, want %s existed=%v new=%v",
					i, st.handle, got.IP, existed, newBlock, st.wantIP, st.wantExisted, st.wantNew)
			}
			if !got.Block.Contains(got.IP) || got.Pool != pool.CIDR || got.State != EndpointPending || got.Created.IsZero() {
				t.Errorf("step %d: Allocate(%s) returned %+v", i, st.handle, got)
			}
			stored, ok, err := s.Endpoint(st.handle)
			if err != nil || !ok {
				t.Fatalf("step %d: Endpoint(%s) = %v, %v", i, st.handle, ok, err)
			}
			if diff := cmp.Diff(got, stored, netipEqual); diff != "" {
				t.Errorf("step %d: stored record differs (-returned +stored):\n%s", i, diff)
			}
		case "release":
			got, found, err := s.Release(st.handle)
			if err != nil {
				t.Fatalf("step %d: Release(%s): %v", i, st.handle, err)
			}
			if found != (st.wantIP != "") || (found && got.IP.String() != st.wantIP) {
				t.Errorf("step %d: Release(%s) = %s found=%v, want %q", i, st.handle, got.IP, found, st.wantIP)
			}
		}
	}

	blocks, err := s.OwnBlocks()
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{CIDR: netip.MustParsePrefix("10.244.0.0/30"), Pool: pool.CIDR, Owner: s.Node(), State: BlockConfirmed, Used: 4, Size: 4},
		{CIDR: netip.MustParsePrefix("10.244.0.4/30"), Pool: pool.CIDR, Owner: s.Node(), State: BlockConfirmed, Used: 2, Size: 4},
	}
	if diff := cmp.Diff(want, blocks, netipEqual, cmpopts.IgnoreFields(Block{}, "Claimed", "OwnerInc")); diff != "" {
		t.Errorf("OwnBlocks (-want +got):\n%s", diff)
	}
}

func TestReleaseKeepsEmptyBlock(t *testing.T) {
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	s := openTest(t, "node-a")
	a, _, _, err := allocAuto(s, Endpoint{Handle: "a"}, pool)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Release("a"); err != nil {
		t.Fatal(err)
	}
	blocks, err := s.OwnBlocks()
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 1 || blocks[0].CIDR != a.Block || blocks[0].Used != 0 || blocks[0].Size != 64 {
		t.Errorf("OwnBlocks after releasing the last address = %+v, want %s kept, empty", blocks, a.Block)
	}
}

func TestPoolExhausted(t *testing.T) {
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/29"), BlockSize: 30}
	s := openTest(t, "node-a")
	ips := map[string]netip.Addr{}
	for i := range 8 {
		ep, _, _, err := allocAuto(s, Endpoint{Handle: fmt.Sprint(i)}, pool)
		if err != nil {
			t.Fatalf("Allocate %d of 8: %v", i, err)
		}
		ips[ep.Handle] = ep.IP
	}
	_, _, _, err := allocAuto(s, Endpoint{Handle: "one-too-many"}, pool)
	if !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("Allocate in a full pool: %v, want ErrPoolExhausted", err)
	}
	if _, ok, _ := s.Endpoint("one-too-many"); ok {
		t.Error("failed Allocate left an endpoint record")
	}

	// A freed address is usable again.
	if _, _, err := s.Release("5"); err != nil {
		t.Fatal(err)
	}
	got, _, newBlock, err := allocAuto(s, Endpoint{Handle: "again"}, pool)
	if err != nil || newBlock || got.IP != ips["5"] {
		t.Errorf("Allocate after Release = %s new=%v %v, want the freed %s", got.IP, newBlock, err, ips["5"])
	}
}

func TestAllocateRejectsBadInput(t *testing.T) {
	s := openTest(t, "node-a")
	good := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	for _, tc := range []struct {
		name    string
		ep      Endpoint
		pool    Pool
		wantSub string
	}{
		{"empty handle", Endpoint{}, good, "handle is empty"},
		{"ipv6 block too large", Endpoint{Handle: "h"}, Pool{CIDR: netip.MustParsePrefix("fd00::/64"), BlockSize: 112}, "pool fd00::/64: block size /112"},
		{"unmasked pool", Endpoint{Handle: "h"}, Pool{CIDR: netip.MustParsePrefix("10.244.0.1/24"), BlockSize: 26}, "pool 10.244.0.1/24"},
		{"zero pool", Endpoint{Handle: "h"}, Pool{}, "pool has no valid CIDR"},
		{"block larger than pool", Endpoint{Handle: "h"}, Pool{CIDR: good.CIDR, BlockSize: 16}, "pool 10.244.0.0/24"},
		{"block beyond /32", Endpoint{Handle: "h"}, Pool{CIDR: good.CIDR, BlockSize: 33}, "pool 10.244.0.0/24"},
		{"unknown state", Endpoint{Handle: "h", State: "running"}, good, `unknown state "running"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := allocAuto(s, tc.ep, tc.pool)
			if err == nil || !strings.Contains(err.Error(), tc.wantSub) {
				t.Errorf("Allocate error = %v, want one containing %q", err, tc.wantSub)
			}
		})
	}
	if eps, _ := s.Endpoints(); len(eps) != 0 {
		t.Errorf("rejected Allocates left %d endpoints", len(eps))
	}
}

func TestParallelAllocateRelease(t *testing.T) {
	const workers, cycles, keep = 8, 200, 3
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 28}
	s := openTest(t, "node-a")

	var mu sync.Mutex
	live := map[netip.Addr]string{}
	var wg, ready sync.WaitGroup
	ready.Add(workers)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			// Once every worker holds keep addresses, more are live than one
			// block has, so the workers race for claims as well as addresses.
			arrived := sync.OnceFunc(ready.Done)
			defer arrived()
			var mine []Endpoint
			release := func() error {
				ep := mine[0]
				mine = mine[1:]
				// Forget the address before it is freed, so a quick reuse
				// by another worker is not mistaken for a duplicate.
				mu.Lock()
				delete(live, ep.IP)
				mu.Unlock()
				got, found, err := s.Release(ep.Handle)
				if err != nil || !found || got.IP != ep.IP {
					return fmt.Errorf("Release(%s) = %s found=%v %v, want %s", ep.Handle, got.IP, found, err, ep.IP)
				}
				return nil
			}
			for c := range cycles {
				h := fmt.Sprintf("net.w%d-c%d", w, c)
				ep, existed, _, err := allocAuto(s, Endpoint{Handle: h}, pool)
				if err != nil || existed {
					errs <- fmt.Errorf("Allocate(%s): existed=%v %v", h, existed, err)
					return
				}
				mu.Lock()
				other, dup := live[ep.IP]
				live[ep.IP] = h
				mu.Unlock()
				if dup {
					errs <- fmt.Errorf("address %s given to %s while %s holds it", ep.IP, h, other)
					return
				}
				mine = append(mine, ep)
				if len(mine) == keep {
					arrived()
					ready.Wait()
				}
				if len(mine) > keep {
					if err := release(); err != nil {
						errs <- err
						return
					}
				}
			}
			for len(mine) > 0 {
				if err := release(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	eps, err := s.Endpoints()
	if err != nil || len(eps) != 0 {
		t.Errorf("Endpoints after all releases = %d records, %v", len(eps), err)
	}
	blocks, err := s.OwnBlocks()
	if err != nil {
		t.Fatal(err)
	}
	// 24 live addresses need at least two blocks of 16.
	if len(blocks) < 2 {
		t.Errorf("%d blocks claimed, want at least 2", len(blocks))
	}
	for _, b := range blocks {
		if b.Used != 0 {
			t.Errorf("block %s has %d addresses in use after all releases", b.CIDR, b.Used)
		}
	}
	s.db.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketAddrs).Stats().KeyN; n != 0 {
			t.Errorf("addrs bucket holds %d keys after all releases", n)
		}
		return nil
	})
}
