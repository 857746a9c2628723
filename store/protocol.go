package store

import (
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"
)

// This file holds the store's side of the block protocol: claims, their
// confirmation or loss, the blocks of other nodes remembered across
// restarts, and the owners an operator forgot.

// Claim records a new block of pool as this node's, pending, and returns
// it. The caller announces the claim and confirms it (ConfirmBlock) or
// gives it up (DropOwnBlock). ErrPoolExhausted, wrapped, when every block
// of the pool is owned.
func (s *Store) Claim(pool Pool, now time.Time) (netip.Prefix, error) {
	if err := pool.Validate(); err != nil {
		return netip.Prefix{}, fmt.Errorf("claim a block: %w", err)
	}
	var got netip.Prefix
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		got, err = s.claim(tx.Bucket(bucketBlocks), pool, now)
		return err
	})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("claim a block: %w", err)
	}
	return got, nil
}

// ConfirmBlock turns this node's pending claim of p into ownership.
func (s *Store) ConfirmBlock(p netip.Prefix) error {
	return s.updateBlock(p, func(r *blockRecord) error {
		if !s.own(*r) {
			return fmt.Errorf("block %s is not this node's", p)
		}
		r.State = BlockConfirmed
		return nil
	})
}

// DropOwnBlock gives up this node's block p: a claim that lost a conflict.
// A block with allocated addresses is refused with ErrBlockInUse: its
// addresses are in pods, and only the operator can decide what to do.
func (s *Store) DropOwnBlock(p netip.Prefix) error {
	err := s.deleteBlock(p, func(tx *bolt.Tx, r blockRecord) error {
		if !s.own(r) {
			return fmt.Errorf("block %s is not this node's", p)
		}
		if n := usedIn(tx.Bucket(bucketAddrs), p); n > 0 {
			return fmt.Errorf("block %s %w (%d)", p, ErrBlockInUse, n)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("drop block %s: %w", p, err)
	}
	return nil
}

// deleteBlock deletes the record of block p if allow accepts it, in one
// transaction; a block not there is success.
func (s *Store) deleteBlock(p netip.Prefix, allow func(*bolt.Tx, blockRecord) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		blocks := tx.Bucket(bucketBlocks)
		v := blocks.Get(blockKey(p))
		if v == nil {
			return nil
		}
		r, err := decodeBlock(blockKey(p), v)
		if err != nil {
			return err
		}
		if err := allow(tx, r); err != nil {
			return err
		}
		return blocks.Delete(blockKey(p))
	})
}

// PutRemoteBlock remembers (or updates) another node's block b: its pool,
// owner, claim time, state (BlockRemote or BlockRemotePending) and when it
// was last seen. A block this node owns is refused with ErrOwnBlock.
func (s *Store) PutRemoteBlock(b Block) error {
	errs, err := s.PutRemoteBlocks([]Block{b})
	if err != nil {
		return err
	}
	return errs[0]
}

// PutRemoteBlocks is PutRemoteBlock for many blocks in one transaction (one
// sync to disk, not one per block: a node learning thousands of blocks at
// once). It returns one error per block (nil, ErrOwnBlock or invalid
// input), and err if the transaction itself failed.
func (s *Store) PutRemoteBlocks(bs []Block) (errs []error, err error) {
	errs = make([]error, len(bs))
	err = s.db.Update(func(tx *bolt.Tx) error {
		blocks := tx.Bucket(bucketBlocks)
		for i, b := range bs {
			errs[i] = s.putRemote(blocks, b)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("remember %d blocks: %w", len(bs), err)
	}
	return errs, nil
}

func (s *Store) putRemote(blocks *bolt.Bucket, b Block) error {
	if b.State != BlockRemote && b.State != BlockRemotePending {
		return fmt.Errorf("remember block %s: state %q is not a remote state", b.CIDR, b.State)
	}
	if !b.OwnerAddr.IsValid() {
		return fmt.Errorf("remember block %s: no owner address", b.CIDR)
	}
	if v := blocks.Get(blockKey(b.CIDR)); v != nil {
		r, err := decodeBlock(blockKey(b.CIDR), v)
		if err != nil {
			return fmt.Errorf("remember block %s of %s: %w", b.CIDR, b.OwnerAddr, err)
		}
		if s.own(r) {
			return fmt.Errorf("remember block %s of %s: block %s %w", b.CIDR, b.OwnerAddr, b.CIDR, ErrOwnBlock)
		}
		if b.Owner == "" && r.OwnerAddr == b.OwnerAddr {
			b.Owner = r.Owner // keep a name learned earlier
		}
	}
	err := putBlock(blocks, blockRecord{CIDR: b.CIDR, Pool: b.Pool, Owner: b.Owner, OwnerAddr: b.OwnerAddr,
		State: b.State, Claimed: b.Claimed.UTC().Round(0), LastSeen: b.LastSeen.UTC().Round(0)})
	if err != nil {
		return fmt.Errorf("remember block %s of %s: %w", b.CIDR, b.OwnerAddr, err)
	}
	return nil
}

// DeleteRemoteBlock forgets another node's block p; own blocks are left.
func (s *Store) DeleteRemoteBlock(p netip.Prefix) error {
	err := s.deleteBlock(p, func(_ *bolt.Tx, r blockRecord) error {
		if s.own(r) {
			return fmt.Errorf("block %s %w", p, ErrOwnBlock)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget block %s: %w", p, err)
	}
	return nil
}

// Forget records that the node at owner is gone for good since at, and
// deletes the blocks remembered as its, so that they can be claimed again.
// It returns the blocks freed.
func (s *Store) Forget(owner netip.Addr, at time.Time) ([]netip.Prefix, error) {
	var freed []netip.Prefix
	err := s.db.Update(func(tx *bolt.Tx) error {
		if err := putForgotten(tx, owner, at); err != nil {
			return err
		}
		blocks := tx.Bucket(bucketBlocks)
		var keys [][]byte
		err := blocks.ForEach(func(k, v []byte) error {
			r, err := decodeBlock(k, v)
			if err != nil {
				return err
			}
			if !s.own(r) && r.OwnerAddr == owner {
				keys = append(keys, append([]byte(nil), k...))
				freed = append(freed, r.CIDR)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := blocks.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("forget node %s: %w", owner, err)
	}
	return freed, nil
}

// RecordForgotten notes a forget learned from another node (a tombstone),
// keeping the later time if one is known.
func (s *Store) RecordForgotten(owner netip.Addr, at time.Time) error {
	err := s.db.Update(func(tx *bolt.Tx) error { return putForgotten(tx, owner, at) })
	if err != nil {
		return fmt.Errorf("record forgotten node %s: %w", owner, err)
	}
	return nil
}

func putForgotten(tx *bolt.Tx, owner netip.Addr, at time.Time) error {
	b := tx.Bucket(bucketForgotten)
	key := owner.AsSlice()
	if old := b.Get(key); old != nil {
		var t time.Time
		if t.UnmarshalText(old) == nil && !at.After(t) {
			return nil
		}
	}
	v, err := at.UTC().Round(0).MarshalText()
	if err != nil {
		return err
	}
	return b.Put(key, v)
}

// Forgotten returns every forgotten owner with the time it was forgotten.
func (s *Store) Forgotten() (map[netip.Addr]time.Time, error) {
	out := map[netip.Addr]time.Time{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketForgotten).ForEach(func(k, v []byte) error {
			a, ok := netip.AddrFromSlice(k)
			if !ok {
				return fmt.Errorf("bad forgotten key %x", k)
			}
			var t time.Time
			if err := t.UnmarshalText(v); err != nil {
				return fmt.Errorf("forgotten %s: %w", a, err)
			}
			out[a] = t
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read forgotten nodes: %w", err)
	}
	return out, nil
}

// FreeAddresses counts the unallocated addresses of this node's confirmed
// blocks of pool: when it runs low, the node claims ahead of need.
func (s *Store) FreeAddresses(pool Pool) (int, error) {
	blocks, err := s.OwnBlocks()
	if err != nil {
		return 0, err
	}
	free := 0
	for _, b := range blocks {
		if b.Pool == pool.CIDR && b.State == BlockConfirmed {
			free += b.Size - b.Used
		}
	}
	return free, nil
}

// SetFlag sets or clears a named flag in the meta bucket, such as the mark
// of a planned restart.
func (s *Store) SetFlag(name string, on bool) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		key := []byte("flag." + name)
		if !on {
			return meta.Delete(key)
		}
		return meta.Put(key, []byte("1"))
	})
	if err != nil {
		return fmt.Errorf("set flag %s in %s: %w", name, s.path, err)
	}
	return nil
}

// Flag reports whether a named flag is set.
func (s *Store) Flag(name string) (bool, error) {
	on := false
	err := s.db.View(func(tx *bolt.Tx) error {
		on = tx.Bucket(bucketMeta).Get([]byte("flag."+name)) != nil
		return nil
	})
	return on, err
}

func (s *Store) updateBlock(p netip.Prefix, f func(*blockRecord) error) error {
	err := s.db.Update(func(tx *bolt.Tx) error {
		blocks := tx.Bucket(bucketBlocks)
		v := blocks.Get(blockKey(p))
		if v == nil {
			return fmt.Errorf("block %s %w", p, ErrNotFound)
		}
		r, err := decodeBlock(blockKey(p), v)
		if err != nil {
			return err
		}
		if err := f(&r); err != nil {
			return err
		}
		return putBlock(blocks, r)
	})
	if err != nil {
		return fmt.Errorf("update block %s: %w", p, err)
	}
	return nil
}
