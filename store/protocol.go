package store

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/reefcni/reef/blockproto"
)

// This file holds the store's side of the block protocol (blockproto): the
// node's incarnation, its claims, the votes it cast as a voter, the blocks
// of other nodes it remembers, the incarnations it knows and those that
// were forgotten or superseded. LoadProtocol reads it all in one
// transaction, ApplyProtocol writes one decision in one, so that a crash
// never leaves half a decision, and what is announced is always on disk
// first.

// Incarnation returns this store's incarnation: a random number drawn when
// the file was created (or migrated to schema 3), and that moment in Unix
// seconds. A node whose state dir is wiped comes back as a new incarnation.
func (s *Store) Incarnation() (inc, born uint32) { return s.inc, s.born }

func readIncarnation(tx *bolt.Tx) (inc, born uint32, ok bool) {
	v := tx.Bucket(bucketMeta).Get(keyIncarnation)
	if len(v) != 8 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(v[:4]), binary.BigEndian.Uint32(v[4:]), true
}

func createIncarnation(tx *bolt.Tx) error {
	var b [8]byte
	if _, err := rand.Read(b[:4]); err != nil {
		return fmt.Errorf("draw an incarnation: %w", err)
	}
	binary.BigEndian.PutUint32(b[4:], uint32(time.Now().Unix()))
	return tx.Bucket(bucketMeta).Put(keyIncarnation, b[:])
}

// nodeKey is a node incarnation as a key: 4-byte address, 4-byte
// incarnation. Nodes are named by their IPv4 address: the config requires
// one, and bgp.checkNode refuses any other from a peer. (IPv6-only nodes
// will need 16-byte node keys.)
func nodeKey(n blockproto.Node) []byte {
	k := make([]byte, 8)
	copy(k, n.Addr.AsSlice())
	binary.BigEndian.PutUint32(k[4:], n.Inc)
	return k
}

func parseNodeKey(k []byte) (blockproto.Node, error) {
	if len(k) != 8 {
		return blockproto.Node{}, fmt.Errorf("bad node key %x", k)
	}
	return blockproto.Node{Addr: netip.AddrFrom4([4]byte(k[:4])), Inc: binary.BigEndian.Uint32(k[4:])}, nil
}

// goneRecord is why an incarnation no longer counts.
type goneRecord struct {
	Kind string    `json:"kind"` // "forgotten" or "superseded"
	At   time.Time `json:"at"`
}

const (
	goneForgotten  = "forgotten"
	goneSuperseded = "superseded"
)

type knownRecord struct {
	Inc   uint32     `json:"inc"`
	Born  uint32     `json:"born"`
	Addr6 netip.Addr `json:"addr6,omitzero"` // the IPv6 address its record announced (blockproto.Incarnation)
}

// LoadProtocol returns the protocol's state as the store holds it. The
// caller owns the result.
func (s *Store) LoadProtocol() (blockproto.State, error) {
	st, gen, ok := s.cache.cachedProtocol()
	if ok {
		return st, nil
	}
	st = blockproto.State{
		Self: blockproto.Node{Addr: s.addr, Inc: s.inc}, Born: s.born,
		Own: map[netip.Prefix]blockproto.OwnBlock{}, Released: map[netip.Prefix]bool{},
		Grants: map[netip.Prefix]blockproto.Node{}, Remote: map[netip.Prefix]blockproto.RemoteBlock{},
		Forgotten: map[blockproto.Node]bool{}, Superseded: map[blockproto.Node]bool{},
		Known: map[netip.Addr]blockproto.Incarnation{},
	}
	err := s.view(func(tx *bolt.Tx) error {
		for _, load := range []func(*bolt.Tx, *blockproto.State) error{s.loadBlocks, loadReleased, loadGrants, loadGone, loadKnown} {
			if err := load(tx, &st); err != nil {
				return err
			}
		}
		st.Recovered = tx.Bucket(bucketMeta).Get(keyRecovered) != nil
		st.Restricted = tx.Bucket(bucketMeta).Get(keyVoterRestricted) != nil
		return nil
	})
	if err != nil {
		return blockproto.State{}, fmt.Errorf("read the block protocol's state from %s: %w", s.path, err)
	}
	s.cache.keepProtocol(gen, st)
	return st, nil
}

// loadBlocks reads the blocks: this node's into st.Own, other nodes' into
// st.Remote.
func (s *Store) loadBlocks(tx *bolt.Tx, st *blockproto.State) error {
	addrs := tx.Bucket(bucketAddrs)
	return tx.Bucket(bucketBlocks).ForEach(func(k, v []byte) error {
		r, err := decodeBlock(k, v)
		if err != nil {
			return err
		}
		b := s.block(r, addrs)
		switch b.State {
		case BlockPending:
			st.Own[b.CIDR] = blockproto.OwnBlock{Block: b.CIDR, Pool: b.Pool, State: blockproto.OwnPending, Used: b.Used}
		case BlockConfirmed:
			st.Own[b.CIDR] = blockproto.OwnBlock{Block: b.CIDR, Pool: b.Pool, State: blockproto.OwnConfirmed, Used: b.Used}
		case BlockLost:
			st.Own[b.CIDR] = blockproto.OwnBlock{Block: b.CIDR, Pool: b.Pool, State: blockproto.OwnLost, Used: b.Used}
		case BlockRemote:
			st.Remote[b.CIDR] = blockproto.RemoteBlock{Block: b.CIDR, Pool: b.Pool, Owner: blockproto.Node{Addr: b.OwnerAddr, Inc: b.OwnerInc}}
		}
		return nil
	})
}

// loadReleased reads the blocks this node gave up claiming.
func loadReleased(tx *bolt.Tx, st *blockproto.State) error {
	return tx.Bucket(bucketReleased).ForEach(func(k, _ []byte) error {
		p, err := parseBlockKey(k)
		if err != nil {
			return err
		}
		st.Released[p] = true
		return nil
	})
}

// loadGrants reads the votes this node cast as a voter.
func loadGrants(tx *bolt.Tx, st *blockproto.State) error {
	return tx.Bucket(bucketGrants).ForEach(func(k, v []byte) error {
		p, err := parseBlockKey(k)
		if err != nil {
			return err
		}
		n, err := parseNodeKey(v)
		if err != nil {
			return fmt.Errorf("vote for %s: %w", p, err)
		}
		st.Grants[p] = n
		return nil
	})
}

// loadGone reads the forgotten and the superseded incarnations.
func loadGone(tx *bolt.Tx, st *blockproto.State) error {
	return tx.Bucket(bucketForgotten).ForEach(func(k, v []byte) error {
		n, err := parseNodeKey(k)
		if err != nil {
			return err
		}
		var g goneRecord
		if err := json.Unmarshal(v, &g); err != nil {
			return fmt.Errorf("forgotten %s: %w", n, err)
		}
		if g.Kind == goneSuperseded {
			st.Superseded[n] = true
		} else {
			st.Forgotten[n] = true
		}
		return nil
	})
}

// loadKnown reads the incarnations this node knows of the others.
func loadKnown(tx *bolt.Tx, st *blockproto.State) error {
	return tx.Bucket(bucketKnown).ForEach(func(k, v []byte) error {
		a, ok := netip.AddrFromSlice(k)
		if !ok {
			return fmt.Errorf("bad known-node key %x", k)
		}
		var r knownRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("known node %s: %w", a, err)
		}
		st.Known[a] = blockproto.Incarnation{Inc: r.Inc, Born: r.Born, Addr6: r.Addr6}
		return nil
	})
}

// ApplyProtocol writes one decision of the protocol in one transaction: all
// of it or, on any error, none. It refuses what would break the store's
// own rules (a claim of a block the file already has, a confirmation of a
// block that is not a pending claim of this node, a remote block over an
// own one), naming the block.
func (s *Store) ApplyProtocol(c blockproto.Changes) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	err := s.update(func(tx *bolt.Tx) error { return s.applyProtocol(tx, c, now) })
	if err != nil {
		return fmt.Errorf("write the block protocol's decision to %s: %w", s.path, err)
	}
	return nil
}

// applyProtocol writes c in tx, one kind of change after the other.
func (s *Store) applyProtocol(tx *bolt.Tx, c blockproto.Changes, now time.Time) error {
	for _, k := range c.Known {
		v, _ := json.Marshal(knownRecord{Inc: k.Inc, Born: k.Born, Addr6: k.Addr6})
		if err := tx.Bucket(bucketKnown).Put(k.Addr.AsSlice(), v); err != nil {
			return err
		}
	}
	for _, n := range c.Forget {
		if err := putGone(tx, n, goneForgotten, now); err != nil {
			return err
		}
	}
	for _, n := range c.Supersede {
		if err := putGone(tx, n, goneSuperseded, now); err != nil {
			return err
		}
	}
	if err := s.putClaims(tx, c.Claim, now); err != nil {
		return err
	}
	blocks := tx.Bucket(bucketBlocks)
	for _, p := range c.Confirm {
		if err := setOwnState(s, blocks, p, BlockPending, BlockConfirmed); err != nil {
			return err
		}
	}
	for _, p := range c.Lose {
		if err := setOwnState(s, blocks, p, BlockConfirmed, BlockLost); err != nil {
			return err
		}
	}
	if err := releaseClaims(tx, c.Release); err != nil {
		return err
	}
	if err := putGrants(tx, c.Revoke, c.Grant); err != nil {
		return err
	}
	if err := unremember(blocks, c.Unremember); err != nil {
		return err
	}
	return s.remember(blocks, c.Remember, now)
}

// putClaims writes new pending claims of this node, refusing a block the
// store has, or gave up.
func (s *Store) putClaims(tx *bolt.Tx, claims []blockproto.OwnBlock, now time.Time) error {
	blocks := tx.Bucket(bucketBlocks)
	for _, b := range claims {
		if blockTaken(blocks, b.Block) || tx.Bucket(bucketReleased).Get(blockKey(b.Block)) != nil {
			return fmt.Errorf("claim %s: the store already has it", b.Block)
		}
		if err := putBlock(blocks, blockRecord{CIDR: b.Block, Pool: b.Pool, Owner: s.node, OwnerAddr: s.addr, OwnerInc: s.inc,
			State: BlockPending, Claimed: now}); err != nil {
			return err
		}
	}
	return nil
}

// releaseClaims gives up pending claims of this node with no address in
// use, and records them as released: the node never claims them again.
func releaseClaims(tx *bolt.Tx, release []netip.Prefix) error {
	blocks := tx.Bucket(bucketBlocks)
	for _, p := range release {
		r, ok, err := getBlock(blocks, p)
		if err != nil {
			return err
		}
		switch {
		case ok && r.State == BlockPending:
			if n := usedIn(tx.Bucket(bucketAddrs), p); n > 0 {
				return fmt.Errorf("release %s: block %w (%d)", p, ErrBlockInUse, n)
			}
			if err := blocks.Delete(blockKey(p)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("release %s: not a pending claim of this node", p)
		}
		if err := putKeyed(tx.Bucket(bucketReleased), p.Addr(), blockKey(p), nil); err != nil {
			return err
		}
	}
	return nil
}

// putGrants withdraws the votes of revoke, then writes those of grant.
func putGrants(tx *bolt.Tx, revoke []netip.Prefix, grant []blockproto.Grant) error {
	grants := tx.Bucket(bucketGrants)
	for _, p := range revoke {
		if err := grants.Delete(blockKey(p)); err != nil {
			return err
		}
	}
	for _, g := range grant {
		if err := putKeyed(grants, g.Block.Addr(), blockKey(g.Block), nodeKey(g.To)); err != nil {
			return fmt.Errorf("vote for %s: %w", g.Block, err)
		}
	}
	return nil
}

// unremember deletes the remote blocks of ps; an own block, or none, is
// left as it is.
func unremember(blocks *bolt.Bucket, ps []netip.Prefix) error {
	for _, p := range ps {
		r, ok, err := getBlock(blocks, p)
		if err != nil {
			return err
		}
		if ok && r.State == BlockRemote {
			if err := blocks.Delete(blockKey(p)); err != nil {
				return err
			}
		}
	}
	return nil
}

// remember writes other nodes' blocks, refusing one of this node's. An
// owner's name learned earlier is kept, and so is what its incarnation's
// record said of its IPv6 side.
func (s *Store) remember(blocks *bolt.Bucket, remote []blockproto.RemoteBlock, now time.Time) error {
	for _, b := range remote {
		r, ok, err := getBlock(blocks, b.Block)
		if err != nil {
			return err
		}
		if ok && s.own(r) {
			return fmt.Errorf("remember %s as %s's: block %w", b.Block, b.Owner, ErrOwnBlock)
		}
		name, addr6, only6 := "", netip.Addr{}, false
		if ok && r.OwnerAddr == b.Owner.Addr {
			name = r.Owner // keep a name learned earlier
		}
		if ok && r.OwnerAddr == b.Owner.Addr && r.OwnerInc == b.Owner.Inc {
			addr6, only6 = r.OwnerAddr6, r.OwnerV6Only // and the incarnation's IPv6 address
		}
		if err := putBlock(blocks, blockRecord{CIDR: b.Block, Pool: b.Pool, Owner: name, OwnerAddr: b.Owner.Addr, OwnerInc: b.Owner.Inc,
			OwnerAddr6: addr6, OwnerV6Only: only6, State: BlockRemote, Claimed: now}); err != nil {
			return err
		}
	}
	return nil
}

func putGone(tx *bolt.Tx, n blockproto.Node, kind string, at time.Time) error {
	b := tx.Bucket(bucketForgotten)
	if b.Get(nodeKey(n)) != nil && kind == goneSuperseded {
		return nil // a forget says more than a supersede
	}
	v, _ := json.Marshal(goneRecord{Kind: kind, At: at})
	if err := b.Put(nodeKey(n), v); err != nil {
		return fmt.Errorf("record %s as %s: %w", n, kind, err)
	}
	return nil
}

func getBlock(blocks *bolt.Bucket, p netip.Prefix) (blockRecord, bool, error) {
	v := blocks.Get(blockKey(p))
	if v == nil {
		return blockRecord{}, false, nil
	}
	r, err := decodeBlock(blockKey(p), v)
	return r, err == nil, err
}

func setOwnState(s *Store, blocks *bolt.Bucket, p netip.Prefix, from, to BlockState) error {
	r, ok, err := getBlock(blocks, p)
	if err != nil {
		return err
	}
	if !ok || !s.own(r) || s.block(r, nil).State != from {
		return fmt.Errorf("block %s: not a %s block of this node, cannot make it %s", p, from, to)
	}
	r.State = to
	return putBlock(blocks, r)
}

// SetBlockOwnerNames records the names BGP sessions gave for the owners
// of remote blocks (owner address -> name), in one transaction: reef ipam
// show prints them.
func (s *Store) SetBlockOwnerNames(names map[netip.Addr]string) error {
	if len(names) == 0 {
		return nil
	}
	err := s.updateRemoteBlocks(func(r *blockRecord) bool {
		name, ok := names[r.OwnerAddr]
		if !ok || r.Owner == name {
			return false
		}
		r.Owner = name
		return true
	})
	if err != nil {
		return fmt.Errorf("name the owners of remote blocks in %s: %w", s.path, err)
	}
	return nil
}

// Gone lists the incarnations recorded as forgotten or superseded, with
// why and when, for `reef status`.
func (s *Store) Gone() (map[blockproto.Node]string, error) {
	out := map[blockproto.Node]string{}
	err := s.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketForgotten).ForEach(func(k, v []byte) error {
			n, err := parseNodeKey(k)
			if err != nil {
				return err
			}
			var g goneRecord
			if err := json.Unmarshal(v, &g); err != nil {
				return err
			}
			out[n] = g.Kind + " " + g.At.Format(time.RFC3339)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read forgotten nodes in %s: %w", s.path, err)
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
	err := s.update(func(tx *bolt.Tx) error {
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
	err := s.view(func(tx *bolt.Tx) error {
		on = tx.Bucket(bucketMeta).Get([]byte("flag."+name)) != nil
		return nil
	})
	return on, err
}

// Owner6 is what an owner's record says of its IPv6 side: its IPv6
// address, and whether it has no IPv4 address (an IPv6 underlay).
type Owner6 struct {
	Addr     netip.Addr
	IPv6Only bool
}

// SetBlockOwnerAddrs6 records the IPv6 addresses the owners of remote
// blocks gave in their records, and whether they are IPv6-only (owner
// incarnation -> what its record says; invalid address: none), in one
// transaction: their IPv6 blocks are routed through them, also after a
// restart, before the records are learned again.
func (s *Store) SetBlockOwnerAddrs6(addrs map[blockproto.Node]Owner6) error {
	if len(addrs) == 0 {
		return nil
	}
	err := s.updateRemoteBlocks(func(r *blockRecord) bool {
		a, ok := addrs[blockproto.Node{Addr: r.OwnerAddr, Inc: r.OwnerInc}]
		if !ok || r.OwnerAddr6 == a.Addr && r.OwnerV6Only == a.IPv6Only {
			return false
		}
		r.OwnerAddr6, r.OwnerV6Only = a.Addr, a.IPv6Only
		return true
	})
	if err != nil {
		return fmt.Errorf("record the IPv6 addresses of the owners of remote blocks in %s: %w", s.path, err)
	}
	return nil
}

// updateRemoteBlocks rewrites, in one transaction, every block of another
// node that change changes (it returns true when it did).
func (s *Store) updateRemoteBlocks(change func(r *blockRecord) bool) error {
	return s.update(func(tx *bolt.Tx) error {
		blocks := tx.Bucket(bucketBlocks)
		var recs []blockRecord
		err := blocks.ForEach(func(k, v []byte) error {
			r, err := decodeBlock(k, v)
			if err != nil {
				return err
			}
			if !s.own(r) && change(&r) {
				recs = append(recs, r)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := putBlock(blocks, r); err != nil {
				return err
			}
		}
		return nil
	})
}
