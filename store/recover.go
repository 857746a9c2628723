package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
)

// RecoveredHandlePrefix starts the handle of an endpoint rebuilt from the
// kernel alone: its container ID is unknown, so DEL finds it by its veth
// name (which the pod's name or container ID determines) instead.
const RecoveredHandlePrefix = "recovered."

// KernelPod is a pod address as the kernel shows it: a reef veth with a
// /32 or /128 route of reef's protocol. A dual-stack pod is two, with one
// veth: Recover makes them one endpoint.
type KernelPod struct {
	Veth string
	IP   netip.Addr
	MTU  int
	// PortMappings are the pod's hostPorts as reef's hostPort table maps
	// them to its address; Bandwidth the limits tc holds on its veth (nil:
	// none). Used when the damaged file's record of the pod is lost.
	PortMappings []PortMapping
	Bandwidth    *Bandwidth
}

// KernelReserved is an address the node's own devices hold (the VXLAN or
// IPIP tunnel address), with the handle it is reserved under.
type KernelReserved struct {
	Handle string
	IP     netip.Addr
}

// RecoverInput is what survives a damaged store: the kernel and the
// identity file. Damaged-file records are read by Recover itself.
type RecoverInput struct {
	Node       string
	Address    netip.Addr
	Pools      []Pool
	Pods       []KernelPod
	Blackholes []netip.Prefix // reef's blackhole routes: this node's blocks
	Reserved   []KernelReserved
	// Identity is the node's incarnation (the identity file, or the
	// operator's flags: IdentityFrom says which); nil: read it from the
	// damaged file. A new one is drawn when nothing of the old
	// incarnation is in use.
	Identity     *Identity
	IdentityFrom string
	Now          time.Time
}

// RecoverReport says what Recover rebuilt, from where, and what it could
// not.
type RecoverReport struct {
	MovedTo string // the damaged file, renamed
	// Recovered: the store is marked recovered (blockproto.State.Recovered);
	// false when nothing of the old incarnation was in use and a new one
	// was drawn.
	Recovered       bool
	Incarnation     uint32
	Born            uint32
	IncarnationFrom string
	Blocks          []RecoveredBlock
	Endpoints       []RecoveredEndpoint
	// Dropped are the addresses of damaged-file records that the rebuilt
	// store does not hold, each with its record and why: they are free
	// again. A record whose pod the kernel still has loses an address only
	// when the kernel routes another address of its family to the pod, or
	// the address lies in no block this node keeps.
	Dropped []string
	// Salvage is why nothing (or not everything) could be read from the
	// damaged file; empty when it was read whole.
	Salvage string
}

// RecoveredBlock is one own block of the rebuilt store.
type RecoveredBlock struct {
	CIDR  netip.Prefix
	From  string     // "blackhole route", "damaged store", "pod address ..."
	State BlockState // confirmed, or lost
}

// RecoveredEndpoint is one endpoint in the rebuilt store: a pod's
// addresses (one, or one of each family), or a reserved one.
type RecoveredEndpoint struct {
	IPs    []netip.Addr
	Veth   string
	Handle string
	// Complete: the damaged file's record of the pod was read, so its
	// container ID, pod name and netns are back. Otherwise only what the
	// kernel shows is: the address, veth, hostPorts and limits.
	Complete  bool
	HostPorts int  // hostPorts kept
	Limited   bool // bandwidth limits kept
}

// ownBlock is a block Recover keeps: where it learned of it, and its
// state.
type ownBlock struct {
	from  string
	state BlockState
}

// recoveredMark is the meta record of a recovered store.
type recoveredMark struct {
	At   time.Time `json:"at"`
	From string    `json:"from"` // the damaged file, as renamed
}

var keyRecovered = []byte("recovered")

// salvaged is what could be read from a damaged file.
type salvaged struct {
	inc, born uint32
	endpoints map[netip.Addr]Endpoint
	own       map[netip.Prefix]blockRecord
	gone      [][2][]byte // raw forgotten-bucket pairs that decode
	known     [][2][]byte // raw known-bucket pairs that decode
	problems  []string
}

// Recover rebuilds the store at path from what survives it and moves the
// damaged file aside (path + ".damaged-<time>"). Every address the kernel
// shows in use stays in use (a pod's /32 route, a tunnel address), and
// every block of this node's stays this node's under the old incarnation:
// confirmed if the kernel blackholes it or the file says so, lost (no new
// address from it) if only a pod's address shows it. The rebuilt store is
// marked recovered: the block protocol then claims no new block and votes
// only for confirmed owners in this incarnation
// (blockproto.State.Recovered), since the blocks it gave up and the votes
// it cast went with the file. When nothing of the old incarnation is in
// use, a new incarnation is drawn instead and it is not marked recovered:
// it is a new store (Store.New), as from an empty state dir, so a voter
// comes up restricted (blockproto.State.Restricted). The store must not
// be open.
func Recover(path string, in RecoverInput) (RecoverReport, error) {
	var rep RecoverReport
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	sv := salvage(path)
	rep.Salvage = strings.Join(sv.problems, "; ")
	if err := recoverIncarnation(path, in, sv, &rep); err != nil {
		return rep, err
	}
	eps := recoverEndpoints(in, sv, recoverBlocks(in, sv), &rep)

	// The damaged file stays locked while the new one is built, so a
	// daemon started meanwhile waits for the lock and then fails.
	if f, err := os.Open(path); err == nil {
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return rep, fmt.Errorf("recover %s: the file is locked by a running reef daemon: stop it first", path)
		}
	}
	return rep, writeRecovered(path, in, sv, eps, &rep)
}

// recoverIncarnation sets the incarnation of the rebuilt store in rep,
// and whether it is marked recovered. Nothing of the old incarnation in
// use here (a reboot wiped the kernel, and the file holds no block of its
// own): a new incarnation, as from an empty state dir, which supersedes
// the old one; it takes part in the protocol in full. Otherwise the old
// one, from in.Identity or the damaged file, which must agree.
func recoverIncarnation(path string, in RecoverInput, sv salvaged, rep *RecoverReport) error {
	nothing := len(in.Pods) == 0 && len(in.Blackholes) == 0 && len(in.Reserved) == 0 && len(sv.own) == 0
	switch {
	case nothing:
		rep.IncarnationFrom = "new: nothing of the old incarnation is in use on this node (as from an empty state dir)"
	case in.Identity != nil && sv.inc != 0 && sv.inc != in.Identity.Incarnation:
		return fmt.Errorf("recover %s: %s says incarnation %08x, the damaged file %08x: move the wrong one away "+
			"(or give --incarnation of the one the other nodes know: `reef ipam show --show-blocks -o json` on one of them)",
			path, in.IdentityFrom, in.Identity.Incarnation, sv.inc)
	case in.Identity != nil:
		rep.Incarnation, rep.Born, rep.IncarnationFrom = in.Identity.Incarnation, in.Identity.Born, in.IdentityFrom
	case sv.inc != 0:
		rep.Incarnation, rep.Born, rep.IncarnationFrom = sv.inc, sv.born, "the damaged file"
	default:
		return fmt.Errorf("recover %s: this node's incarnation is lost with the file and %s is missing, "+
			"but the kernel shows %d pods and %d blocks in use: give it with --incarnation "+
			"(on another node, `reef ipam show --show-blocks -o json` gives this node's blocks' ownerIncarnation), or drain the node and start it with an empty state dir",
			path, IdentityPath(path), len(in.Pods), len(in.Blackholes))
	}
	rep.Recovered = !nothing
	return nil
}

// recoverBlocks are this node's blocks of a configured pool. A blackhole
// is a block confirmed at the last pass; the file, where it can be read,
// has the newest state (lost wins).
func recoverBlocks(in RecoverInput, sv salvaged) map[netip.Prefix]ownBlock {
	blocks := map[netip.Prefix]ownBlock{}
	for _, b := range in.Blackholes {
		if poolOf(in.Pools, b) != nil {
			blocks[b] = ownBlock{"blackhole route", BlockConfirmed}
		}
	}
	for b, r := range sv.own {
		if poolOf(in.Pools, b) == nil {
			continue
		}
		if old, ok := blocks[b]; !ok || r.State == BlockLost {
			from := "damaged store"
			if ok {
				from = old.from + ", lost in the damaged store"
			}
			blocks[b] = ownBlock{from, r.State}
		}
	}
	return blocks
}

// recoverEndpoints rebuilds the endpoints, the pods' and the reserved
// addresses, and reports them in rep with the blocks and the addresses
// dropped. A pod address in none of blocks is in a block that was lost
// (lost blocks have no blackhole): it joins blocks as lost, its pods keep
// their addresses, and no new one is handed out from it.
func recoverEndpoints(in RecoverInput, sv salvaged, blocks map[netip.Prefix]ownBlock, rep *RecoverReport) []Endpoint {
	blockOf := func(ip netip.Addr) (netip.Prefix, *Pool) {
		for b := range blocks {
			if b.Contains(ip) {
				return b, poolOf(in.Pools, b)
			}
		}
		p := poolOfAddr(in.Pools, ip)
		if p == nil {
			return netip.Prefix{}, nil
		}
		b, _ := ip.Prefix(p.BlockSize)
		blocks[b] = ownBlock{"pod address, no blackhole: lost", BlockLost}
		return b, p
	}
	used := map[netip.Addr]bool{}
	eps, reps := recoverPods(in, sv, blockOf, used)
	rep.Endpoints = append(rep.Endpoints, reps...)
	for _, r := range in.Reserved {
		b, p := blockOf(r.IP)
		if p == nil || used[r.IP] {
			continue
		}
		used[r.IP] = true
		eps = append(eps, Endpoint{Handle: r.Handle, IP: r.IP, Block: b, Pool: p.CIDR, State: EndpointReserved, Created: in.Now.UTC().Round(0)})
		rep.Endpoints = append(rep.Endpoints, RecoveredEndpoint{IPs: []netip.Addr{r.IP}, Handle: r.Handle, Complete: true})
	}
	// Kept blocks are known now: a pod's recorded address the kernel
	// showed no route to stays with it where it can (its route may be all
	// that was lost; the pod may still have it on eth0).
	keepRecorded(in, sv, eps, blocks, used)
	for i := range eps { // rep.Endpoints is still in eps' order
		rep.Endpoints[i].IPs = eps[i].Addrs()
	}
	rep.Dropped = droppedAddrs(sv, eps, used)
	for b, ob := range blocks {
		rep.Blocks = append(rep.Blocks, RecoveredBlock{CIDR: b, From: ob.from, State: ob.state})
	}
	slices.SortFunc(rep.Blocks, func(a, b RecoveredBlock) int { return cmpPrefix(a.CIDR, b.CIDR) })
	slices.SortFunc(rep.Endpoints, func(a, b RecoveredEndpoint) int { return a.IPs[0].Compare(b.IPs[0]) })
	return eps
}

// writeRecovered builds the new file beside the old one, then swaps
// them: the damaged file is linked aside (rep.MovedTo) and the new one
// renamed over it, so path always names one or the other.
func writeRecovered(path string, in RecoverInput, sv salvaged, eps []Endpoint, rep *RecoverReport) error {
	building := path + ".recovering"
	if err := os.Remove(building); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("recover %s: %w", path, err)
	}
	// The identity file is written once the incarnation is in the file.
	st, err := Open(building, Options{Node: in.Node, Address: in.Address, keepIdentity: true})
	if err != nil {
		return fmt.Errorf("recover %s: %w", path, err)
	}
	if rep.Incarnation == 0 {
		rep.Incarnation, rep.Born = st.inc, st.born
	}
	rep.MovedTo = fmt.Sprintf("%s.damaged-%s", path, in.Now.UTC().Format("20060102T150405Z"))
	err = st.update(func(tx *bolt.Tx) error {
		if err := putRecoveredMeta(tx, in, sv, rep); err != nil {
			return err
		}
		if err := putRecoveredBlocks(tx, in, sv, rep.Blocks, rep.Incarnation); err != nil {
			return err
		}
		return putRecoveredEndpoints(tx, eps)
	})
	st.inc, st.born = rep.Incarnation, rep.Born
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("recover %s: write %s: %w", path, building, err)
	}
	if err := writeIdentity(building, Identity{Node: in.Node, Address: in.Address, Incarnation: rep.Incarnation, Born: rep.Born}); err != nil {
		return fmt.Errorf("recover %s: %w", path, err)
	}
	// A second recovery in the same second (of the file the first one
	// rebuilt) keeps its damaged file beside the first's.
	for i := 2; ; i++ {
		err := os.Link(path, rep.MovedTo)
		if errors.Is(err, os.ErrExist) {
			rep.MovedTo = fmt.Sprintf("%s.damaged-%s-%d", path, in.Now.UTC().Format("20060102T150405Z"), i)
			continue
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("recover %s: keep the damaged file as %s: %w", path, rep.MovedTo, err)
		}
		break
	}
	if err := os.Rename(building, path); err != nil {
		return fmt.Errorf("recover %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// putRecoveredMeta writes the rebuilt store's incarnation and, when it is
// the old one, the recovered mark and what the damaged file knew of other
// nodes' incarnations.
func putRecoveredMeta(tx *bolt.Tx, in RecoverInput, sv salvaged, rep *RecoverReport) error {
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], rep.Incarnation)
	binary.BigEndian.PutUint32(b[4:], rep.Born)
	meta := tx.Bucket(bucketMeta)
	if err := meta.Put(keyIncarnation, b[:]); err != nil {
		return err
	}
	if !rep.Recovered {
		return nil
	}
	mark, err := json.Marshal(recoveredMark{At: in.Now.UTC().Round(0), From: rep.MovedTo})
	if err != nil {
		return err
	}
	if err := meta.Put(keyRecovered, mark); err != nil {
		return err
	}
	// The same incarnation, not a new store: Recovered, not Restricted,
	// covers its lost votes. (A new incarnation keeps Open's new-store
	// mark and no voter list: the daemon then takes it for a wiped state
	// dir, and a voter comes up restricted.)
	if err := meta.Delete(keyNewStore); err != nil {
		return err
	}
	// What the node learned of others' incarnations is true whatever
	// became of the file: above all a forget of this node, which must
	// keep it from allocating.
	for _, kv := range sv.gone {
		if err := tx.Bucket(bucketForgotten).Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	for _, kv := range sv.known {
		if err := tx.Bucket(bucketKnown).Put(kv[0], kv[1]); err != nil {
			return err
		}
	}
	return nil
}

// putRecoveredBlocks writes the kept blocks as this node's, of
// incarnation inc, claimed when the damaged file says (else now).
func putRecoveredBlocks(tx *bolt.Tx, in RecoverInput, sv salvaged, blocks []RecoveredBlock, inc uint32) error {
	for _, rb := range blocks {
		r := blockRecord{CIDR: rb.CIDR, Pool: poolOf(in.Pools, rb.CIDR).CIDR, Owner: in.Node, OwnerAddr: in.Address,
			OwnerInc: inc, State: rb.State, Claimed: in.Now.UTC().Round(0)}
		if old, ok := sv.own[rb.CIDR]; ok && !old.Claimed.IsZero() {
			r.Claimed = old.Claimed
		}
		if err := putBlock(tx.Bucket(bucketBlocks), r); err != nil {
			return err
		}
	}
	return nil
}

// putRecoveredEndpoints writes the endpoints with their addresses and
// hostPorts.
func putRecoveredEndpoints(tx *bolt.Tx, eps []Endpoint) error {
	for _, ep := range eps {
		for _, ip := range ep.Addrs() {
			if err := putKeyed(tx.Bucket(bucketAddrs), ip, addrKey(ip), []byte(ep.Handle)); err != nil {
				return fmt.Errorf("write address %s: %w", ip, err)
			}
		}
		pms := ep.PortMappings
		ep.PortMappings = nil
		if len(pms) > 0 {
			if err := claimPorts(tx, &ep, pms); err != nil {
				return err
			}
			continue
		}
		if err := putEndpoint(tx.Bucket(bucketEndpoints), ep); err != nil {
			return err
		}
	}
	return nil
}

// salvage reads what it can of a damaged file, bucket by bucket and record
// by record, each under guard: a damaged page loses what is on it, not the
// rest.
func salvage(path string) salvaged {
	sv := salvaged{endpoints: map[netip.Addr]Endpoint{}, own: map[netip.Prefix]blockRecord{}}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		sv.problems = append(sv.problems, "nothing to read: the file is missing or empty")
		return sv
	}
	var db *bolt.DB
	err := guard(path, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
		return err
	})
	if err != nil {
		sv.problems = append(sv.problems, fmt.Sprintf("bbolt cannot open it: %v", err))
		return sv
	}
	defer db.Close()
	read := func(what string, fn func(tx *bolt.Tx) error) {
		err := guard(path, func() error { return db.View(fn) })
		if err != nil {
			sv.problems = append(sv.problems, fmt.Sprintf("%s: %v", what, err))
		}
	}
	read("incarnation", sv.readIncarnation)
	read("blocks", sv.readBlocks)
	read("forgotten and superseded nodes", sv.readGone)
	read("known nodes", sv.readKnown)
	read("endpoints", sv.readEndpoints)
	return sv
}

func (sv *salvaged) readIncarnation(tx *bolt.Tx) error {
	if tx.Bucket(bucketMeta) == nil {
		return errors.New("no meta bucket")
	}
	inc, born, ok := readIncarnation(tx)
	if !ok {
		return errors.New("no incarnation in it")
	}
	sv.inc, sv.born = inc, born
	return nil
}

// readBlocks keeps the blocks the file says are this node's: confirmed
// or lost.
func (sv *salvaged) readBlocks(tx *bolt.Tx) error {
	b := tx.Bucket(bucketBlocks)
	if b == nil {
		return errors.New("no blocks bucket")
	}
	return b.ForEach(func(k, v []byte) error {
		if r, err := decodeBlock(k, v); err == nil && (r.State == BlockConfirmed || r.State == BlockLost) {
			sv.own[r.CIDR] = r
		}
		return nil
	})
}

// readGone keeps the forgotten and superseded incarnations that decode.
func (sv *salvaged) readGone(tx *bolt.Tx) error {
	b := tx.Bucket(bucketForgotten)
	if b == nil {
		return errors.New("no forgotten bucket")
	}
	return b.ForEach(func(k, v []byte) error {
		var g goneRecord
		if _, err := parseNodeKey(k); err == nil && json.Unmarshal(v, &g) == nil && (g.Kind == goneForgotten || g.Kind == goneSuperseded) {
			sv.gone = append(sv.gone, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		}
		return nil
	})
}

// readKnown keeps the known incarnations of other nodes that decode.
func (sv *salvaged) readKnown(tx *bolt.Tx) error {
	b := tx.Bucket(bucketKnown)
	if b == nil {
		return errors.New("no known bucket")
	}
	return b.ForEach(func(k, v []byte) error {
		var r knownRecord
		if len(k) == 4 && json.Unmarshal(v, &r) == nil {
			sv.known = append(sv.known, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		}
		return nil
	})
}

// readEndpoints keeps the endpoints that decode, by each of their
// addresses.
func (sv *salvaged) readEndpoints(tx *bolt.Tx) error {
	b := tx.Bucket(bucketEndpoints)
	if b == nil {
		return errors.New("no endpoints bucket")
	}
	return b.ForEach(func(k, v []byte) error {
		if ep, err := decodeEndpoint(string(k), v); err == nil {
			for _, ip := range ep.Addrs() {
				sv.endpoints[ip] = ep
			}
		}
		return nil
	})
}

func poolOf(pools []Pool, b netip.Prefix) *Pool {
	for i, p := range pools {
		if p.CIDR.Contains(b.Addr()) && b.Bits() == p.BlockSize {
			return &pools[i]
		}
	}
	return nil
}

func poolOfAddr(pools []Pool, ip netip.Addr) *Pool {
	for i, p := range pools {
		if p.CIDR.Contains(ip) {
			return &pools[i]
		}
	}
	return nil
}

func cmpPrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
