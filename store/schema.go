package store

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"

	bolt "go.etcd.io/bbolt"
)

// schemaVersion is the layout this code creates and migrates older files
// to. Raise it together with a new entry in migrations.
const schemaVersion = 4

// schemaIPv6 is schemaVersion's layout holding IPv6 keys (see below). A
// file is raised to it by its first IPv6 key, not at Open: a reef that
// knows only schema 4, whose keys are all IPv4, refuses the file instead of
// taking a 17-byte block key for damage, while a node without IPv6 pools can
// still go back to such a reef.
const schemaIPv6 = 5

// Bucket layout, schema version 1:
//
//	meta       "schema" -> decimal version ("1")
//	blocks     4-byte address + 1-byte prefix length -> JSON blockRecord
//	addrs      4-byte address -> handle of the endpoint holding it
//	endpoints  handle -> JSON endpointRecord
//
// Schema version 2 adds:
//
//	forgotten  4-byte node address -> RFC 3339 time it was forgotten
//
// and block records gain ownerAddr, state and lastSeen (JSON, so version 1
// records read as confirmed own blocks or remote ones by owner name).
//
// Schema version 3 (the block protocol v2, blockproto) adds:
//
//	meta       "incarnation" -> 4-byte random incarnation + 4-byte Unix seconds
//	released   block key -> nothing: blocks this incarnation claimed and gave up
//	grants     block key -> 8-byte node key (address + incarnation) voted for
//	known      4-byte node address -> JSON {inc, born} of its newest incarnation
//
// and re-keys forgotten to 8-byte node keys -> JSON {kind, at} (kind
// "forgotten" or "superseded"). Remote block records gain ownerInc; the
// block states are pending, confirmed, lost (own) and remote. The
// migration keeps this node's confirmed blocks and their allocations
// (voters grant them again), drops pending claims, remembered blocks of
// other nodes (they are learned again from their owners' claims) and the
// forgets of schema 2, which named no incarnation.
//
// Schema version 4 adds:
//
//	hostports  1-byte IP protocol number (tcp 6, udp 17, sctp 132) +
//	           2-byte host port + host address (no bytes for every
//	           address, else 4 for IPv4 or 16 for IPv6) -> handle of the
//	           endpoint holding it
//
// and endpoint records gain portMappings and bandwidth. hostports is an
// index of the records' portMappings, which are the truth: an entry whose
// endpoint no longer lists it is stale and ClaimPorts drops it. The
// migration creates it empty, since no older record has port mappings.
//
// Schema version 5 (schemaIPv6) is version 4 with IPv6 keys: blocks,
// released and grants keys of 16 address bytes + 1 length byte, addrs keys
// of 16 bytes. Nothing else changes, and nothing migrates: the first write
// of such a key raises the version (raiseToIPv6), and it stays raised.
//
// Keys are big-endian binary so that bbolt's byte order is address order:
// block and address scans are cursor seeks, not full walks.
var (
	bucketMeta      = []byte("meta")
	keySchema       = []byte("schema")
	bucketBlocks    = []byte("blocks")
	bucketAddrs     = []byte("addrs")
	bucketEndpoints = []byte("endpoints")
	bucketForgotten = []byte("forgotten")
	bucketReleased  = []byte("released")
	bucketGrants    = []byte("grants")
	bucketKnown     = []byte("known")
	bucketHostPorts = []byte("hostports")
	keyIncarnation  = []byte("incarnation")
	keyMigrateNode  = []byte("migrating-node")
)

// migration upgrades a file by one schema version, inside the transaction
// of Open, so that a failed upgrade leaves the file as it was.
type migration func(tx *bolt.Tx) error

// migrations[v] upgrades a file at schema version v to v+1. Version 0 is a
// file without a schema key, that is a new one, so creating the first
// layout is simply the first migration.
var migrations = []migration{
	0: createV1,
	1: createV2,
	2: createV3,
	3: createV4,
}

func createV4(tx *bolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketHostPorts); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketHostPorts, err)
	}
	return nil
}

func createV3(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketReleased, bucketGrants, bucketKnown} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	// Forgets of schema 2 name no incarnation: a clean break.
	if err := tx.DeleteBucket(bucketForgotten); err != nil {
		return fmt.Errorf("drop bucket %s of schema 2: %w", bucketForgotten, err)
	}
	if _, err := tx.CreateBucket(bucketForgotten); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketForgotten, err)
	}
	meta := tx.Bucket(bucketMeta)
	node := string(meta.Get(keyMigrateNode))
	blocks := tx.Bucket(bucketBlocks)
	var drop [][]byte
	var keep []blockRecord
	err := blocks.ForEach(func(k, v []byte) error {
		var r blockRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode block %x: %w", k, err)
		}
		switch {
		case r.State == BlockConfirmed || (r.State == "" && node != "" && r.Owner == node):
			r.State = BlockConfirmed
			keep = append(keep, r)
		default:
			drop = append(drop, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range drop {
		if err := blocks.Delete(k); err != nil {
			return err
		}
	}
	for _, r := range keep {
		if err := putBlock(blocks, r); err != nil {
			return err
		}
	}
	if _, _, ok := readIncarnation(tx); !ok {
		return createIncarnation(tx)
	}
	return nil
}

func createV2(tx *bolt.Tx) error {
	if _, err := tx.CreateBucketIfNotExists(bucketForgotten); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketForgotten, err)
	}
	return nil
}

func createV1(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketBlocks, bucketAddrs, bucketEndpoints} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return nil
}

// migrate brings the file to version target by running steps in order, all
// in tx; a file at a version above target, up to newest, is left as it is
// (schemaIPv6 above schemaVersion). It is separate from Open so that tests
// can drive it with versions and steps of their own.
func migrate(tx *bolt.Tx, target, newest int, steps []migration) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucketMeta, err)
	}
	v := 0
	if raw := meta.Get(keySchema); raw != nil {
		v, err = strconv.Atoi(string(raw))
		if err != nil || v < 0 {
			return fmt.Errorf("schema version %q in bucket %s is not a version number", raw, bucketMeta)
		}
	}
	if v > max(target, newest) {
		return fmt.Errorf("schema version %d is %w (it knows up to %d); run a newer reef or restore the file from a backup", v, ErrSchemaTooNew, max(target, newest))
	}
	if v >= target {
		return nil
	}
	for ; v < target; v++ {
		if v >= len(steps) || steps[v] == nil {
			return fmt.Errorf("no migration from schema version %d to %d", v, v+1)
		}
		if err := steps[v](tx); err != nil {
			return fmt.Errorf("migrate schema version %d to %d: %w", v, v+1, err)
		}
	}
	if err := meta.Put(keySchema, []byte(strconv.Itoa(target))); err != nil {
		return fmt.Errorf("write schema version %d: %w", target, err)
	}
	return nil
}

// checkBuckets makes a damaged file fail at Open with a clear message
// instead of a nil bucket panic in the first Allocate.
func checkBuckets(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketBlocks, bucketAddrs, bucketEndpoints, bucketForgotten, bucketReleased, bucketGrants, bucketKnown, bucketHostPorts} {
		if tx.Bucket(name) == nil {
			return fmt.Errorf("bucket %s is missing although schema version is %d", name, schemaVersion)
		}
	}
	return nil
}

// putKeyed writes k -> v in b, k being a's key (addrKey) or the key of a
// block at a (blockKey): the first IPv6 key raises the file to schemaIPv6.
func putKeyed(b *bolt.Bucket, a netip.Addr, k, v []byte) error {
	if a.Is6() {
		if err := raiseToIPv6(b.Tx()); err != nil {
			return err
		}
	}
	return b.Put(k, v)
}

// raiseToIPv6 marks the file as holding IPv6 keys (schemaIPv6).
func raiseToIPv6(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if string(meta.Get(keySchema)) == strconv.Itoa(schemaIPv6) {
		return nil
	}
	if err := meta.Put(keySchema, []byte(strconv.Itoa(schemaIPv6))); err != nil {
		return fmt.Errorf("write schema version %d: %w", schemaIPv6, err)
	}
	return nil
}
