package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
	"github.com/reefcni/reef/cniserver"
	"github.com/reefcni/reef/metrics"
	"github.com/reefcni/reef/store"
)

// needTimeout bounds how long an ADD waits for a block before it gives up
// with "try again later", when the caller set no deadline (cniserver sets
// one per ADD, cniserver.BlockWait).
const needTimeout = cniserver.BlockWait

// blockEngine runs the block protocol (blockproto) for the reconcile loop:
// each Step reads the store and the BGP table, lets blockproto.Decide
// decide, writes the decision to the store in one transaction and only then
// announces what it asks for. ADDs that find no free address register a
// need and wait for the blocks to change. Step runs only in the reconcile
// goroutine.
type blockEngine struct {
	blockEngineDeps

	mu      sync.Mutex
	demand  map[netip.Prefix]int   // pool -> ADDs waiting for a block
	failure map[netip.Prefix]error // pool -> why no block could be had so far
	free    map[netip.Prefix]int   // pool -> free addresses in own confirmed blocks, at the last step
	changed chan struct{}          // closed and replaced when blocks change
	stepped chan struct{}          // closed and replaced after every Step
	last    blockproto.Decision    // for reef status
	// announce is off until the first reconcile pass has brought the
	// kernel in line with the store: a node restarted with a wiped state
	// dir must have removed the old pods' veths and routes before its new
	// incarnation makes the cluster free their blocks.
	announce bool
	timer    *time.Timer
	// awaiting6 are the owners of IPv6 blocks whose records the last
	// step had not learned yet (awaitingRecords): the pass routes their
	// IPv6 blocks once it has, and does not report them meanwhile.
	awaiting6 map[netip.Addr]bool
}

// blockEngineDeps are what a blockEngine is made with (newBlockEngine).
type blockEngineDeps struct {
	store   *store.Store
	speaker *bgp.Speaker
	log     *slog.Logger
	name    string
	voters  []netip.Addr // bgp.voters, or this node alone (voterList), as written: addresses
	addr6   netip.Addr   // the node's IPv6 address for its record (nodeAddress6); invalid: none
	v6only  bool         // an IPv6-only node, which its record says (Record.IPv6Only)
	mine    nodeAddrs    // what names this node in voters: its identity and addresses
	// names are the identities learned of voters written as IPv6
	// addresses (resolveVoters), as the store keeps them; Step updates
	// them.
	names map[netip.Addr]netip.Addr
	pools []store.Pool
	// retired are pools gone from the config whose blocks the store still
	// has (retiredPools): the protocol keeps them, nothing claims in them.
	retired []store.Pool
	metrics *metrics.Metrics // nil: off
	trigger func()
}

// slowStep: a Step that takes longer is logged with where its time went
// (a loaded node; GoBGP busy, whose table and sessions are read through
// its own loop).
const slowStep = time.Second

// stepTimes is where a Step's time went, for the log of a slow one.
type stepTimes struct{ table, load, sessions, decide, persist, announce, rest time.Duration }

func (t stepTimes) LogValue() slog.Value {
	r := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	return slog.GroupValue(slog.String("bgpTable", r(t.table)), slog.String("store", r(t.load)), slog.String("sessions", r(t.sessions)),
		slog.String("decide", r(t.decide)), slog.String("persist", r(t.persist)), slog.String("announce", r(t.announce)), slog.String("rest", r(t.rest)))
}

func newBlockEngine(deps blockEngineDeps) *blockEngine {
	deps.log = deps.log.With("component", "blocks")
	deps.voters = blockproto.Voters(deps.voters)
	return &blockEngine{blockEngineDeps: deps, demand: map[netip.Prefix]int{}, failure: map[netip.Prefix]error{}, free: map[netip.Prefix]int{}, changed: make(chan struct{}), stepped: make(chan struct{})}
}

// AllowAnnounce is called once the first reconcile pass is done.
func (e *blockEngine) AllowAnnounce() {
	e.mu.Lock()
	e.announce = true
	e.mu.Unlock()
	e.trigger()
}

// Last returns the last decision.
func (e *blockEngine) Last() blockproto.Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

// Forget records that the node at addr is gone for good: every incarnation
// of it this node knows. The next pass frees its blocks and votes and
// announces the forget, which every node keeps and announces on.
func (e *blockEngine) Forget(addr netip.Addr) ([]netip.Prefix, []blockproto.Node, error) {
	st, err := e.store.LoadProtocol()
	if err != nil {
		return nil, nil, err
	}
	if addr == st.Self.Addr || e.mine.has(addr) {
		return nil, nil, fmt.Errorf("%s is this node", addr)
	}
	if addr.Is6() {
		// An IPv6-only node is known by its identity (docs/design.md,
		// "IPv6-only nodes"): the one its records or the voter names give
		// its address.
		id, err := e.identityOf(addr)
		if err != nil {
			return nil, nil, err
		}
		addr = id
	}
	var nodes []blockproto.Node
	add := func(n blockproto.Node) {
		if n.Addr == addr && !st.Forgotten[n] && !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	if k, ok := st.Known[addr]; ok {
		add(blockproto.Node{Addr: addr, Inc: k.Inc})
	}
	var freed []netip.Prefix
	for b, r := range st.Remote {
		if r.Owner.Addr == addr {
			add(r.Owner)
			freed = append(freed, b)
		}
	}
	for _, n := range st.Grants {
		add(n)
	}
	if len(nodes) == 0 {
		return nil, nil, fmt.Errorf("no incarnation of node %s is known here (no record, block or vote of it)", addr)
	}
	if err := e.store.ApplyProtocol(blockproto.Changes{Forget: nodes}); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(freed, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	e.log.Warn("node forgotten: its blocks and votes are free; every node will hear of it", "node", addr, "incarnations", len(nodes), "blocks", len(freed))
	e.trigger()
	return freed, nodes, nil
}

// identityOf is the identity of the node whose IPv6 address is addr: from
// the records in the BGP table, else from what was learned of the voters.
func (e *blockEngine) identityOf(addr netip.Addr) (netip.Addr, error) {
	table, err := e.speaker.LearnedTable()
	if err != nil {
		return netip.Addr{}, err
	}
	var ids []netip.Addr
	for _, r := range table.Records {
		if r.Addr6 == addr && !slices.Contains(ids, r.Node.Addr) {
			ids = append(ids, r.Node.Addr)
		}
	}
	if id, ok := e.names[addr]; ok && !slices.Contains(ids, id) {
		ids = append(ids, id)
	}
	switch len(ids) {
	case 1:
		return ids[0], nil
	case 0:
		return netip.Addr{}, fmt.Errorf("no node with IPv6 address %s is known here (no record announces it); give its identity (bgp.routerID) instead", addr)
	}
	return netip.Addr{}, fmt.Errorf("IPv6 address %s is announced by several nodes (%s); give the identity (bgp.routerID) to forget", addr, addrsString(ids))
}

// need is, per pool, whether this node wants a new block now: an ADD waits
// and no confirmed block has room, or fewer than a quarter of a block's
// addresses are free (claiming ahead, so that ADDs rarely wait).
func (e *blockEngine) need(st blockproto.State) map[netip.Prefix]bool {
	out := map[netip.Prefix]bool{}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, pool := range e.pools {
		owned, free := false, 0
		size := 1 << (pool.CIDR.Addr().BitLen() - pool.BlockSize) // a block's addresses: at most 2^32 (IPv4), 4096 (IPv6)
		for _, o := range st.Own {
			if o.Pool == pool.CIDR && o.State == blockproto.OwnConfirmed {
				owned = true
				free += size - o.Used
			}
		}
		waiting := e.demand[pool.CIDR] > 0 && free == 0
		low := owned && free < max(1, size/4)
		out[pool.CIDR] = waiting || low
		e.free[pool.CIDR] = free
	}
	return out
}

// Step runs the protocol once. It returns the blocks as they stand after,
// for the kernel's desired state, and whether ADDs that waited for a block
// were told to look again.
func (e *blockEngine) Step(ctx context.Context) (blocks []store.Block, woke bool, err error) {
	var tm stepTimes
	began := time.Now()
	t0 := began
	mark := func(d *time.Duration) { now := time.Now(); *d, t0 = now.Sub(t0), now }
	defer func() {
		if took := time.Since(began); took >= slowStep {
			e.log.Info("slow block protocol step", "took", took.Round(time.Millisecond), "in", tm)
		}
	}()
	table, err := e.speaker.LearnedTable()
	mark(&tm.table)
	if err != nil {
		return nil, false, err
	}
	st, err := e.store.LoadProtocol()
	if err != nil {
		return nil, false, err
	}
	mark(&tm.load)
	var pools []blockproto.Pool
	for _, p := range append(slices.Clone(e.pools), e.retired...) {
		pools = append(pools, blockproto.Pool{CIDR: p.CIDR, BlockSize: p.BlockSize})
	}
	peers := e.speaker.Sessions(ctx)
	mark(&tm.sessions)
	ids, unresolved, names := resolveVoters(e.voters, st.Self.Addr, e.mine, e.names, table.Records)
	if !maps.Equal(names, e.names) {
		if err := e.store.SetVoterIdentities(names); err != nil {
			return nil, false, err
		}
		e.log.Info("voters named by their records", "voters", e.voters, "identities", ids)
		e.names = names
	}
	byAddr := voterIdentity(e.voters, st.Self.Addr, e.mine, names)
	d := blockproto.Decide(blockproto.Input{State: st, Table: table, Voters: ids, Pools: pools, Need: e.need(st), Name: e.name,
		Unreachable: unreachableIDs(e.voters, e.mine, byAddr, peers), Addr6: e.addr6, IPv6Only: e.v6only, Unresolved: unresolved,
		VoterAddr6: voterAddrs6(byAddr, st.Self.Addr)})
	e.logListsChange(d)
	mark(&tm.decide)
	var errs []error
	if !d.Changes.Empty() {
		// Persist before anything is announced: a vote, a claim or a
		// confirmation on the wire is always on disk first.
		if err := e.store.ApplyProtocol(d.Changes); err != nil {
			return nil, false, err
		}
		e.logChanges(d)
	}
	mark(&tm.persist)
	e.mu.Lock()
	e.last = d
	announce := e.announce
	for _, p := range e.pools {
		e.failure[p.CIDR] = blockedError(d.Status, p.CIDR)
	}
	// Waiting ADDs look at the failures: an exhausted pool fails them at once.
	close(e.stepped)
	e.stepped = make(chan struct{})
	e.mu.Unlock()
	if announce {
		if err := e.announceDecision(d); err != nil {
			errs = append(errs, err)
		}
	}
	mark(&tm.announce)
	if blocks, err = e.blocksWithAddrs6(table); err != nil {
		return nil, false, err
	}
	e.nameOwners(peers, d.State, blocks)
	mark(&tm.rest)
	if !d.Changes.Empty() {
		woke = e.wake()
	}
	e.schedule(d)
	return blocks, woke, errors.Join(errs...)
}

// logListsChange logs when the voter lists start or stop disagreeing.
func (e *blockEngine) logListsChange(d blockproto.Decision) {
	was, now := e.last.Status.ListsDisagree(), d.Status.ListsDisagree()
	switch {
	case now == was:
	case now != "":
		e.log.Error("voter lists disagree: no block is claimed here until they agree", "detail", now)
	case was != "":
		e.log.Info("voter lists agree again: claims may go on", "voters", e.voters)
	}
}

// announceDecision announces what the decision asks for, and the node's
// confirmed blocks in IPv4 unicast.
func (e *blockEngine) announceDecision(d blockproto.Decision) error {
	var confirmed []bgp.UnicastBlock
	for b, o := range d.State.Own {
		// A forgotten or superseded node routes nothing to itself: its
		// blocks may be someone else's by now.
		if o.State != blockproto.OwnPending && d.Status.Gone == "" {
			confirmed = append(confirmed, bgp.UnicastBlock{Block: b, Owner: d.State.Self})
		}
	}
	return e.speaker.AnnounceTable(d.Announce, confirmed)
}

// unreachable are the voters no established session leads to: a voter that
// is a BGP peer of this node is reached through its own session; one that
// is not (route reflectors carry its announcements) through any session.
func unreachable(voters []netip.Addr, mine nodeAddrs, peers []bgp.PeerStatus) map[netip.Addr]bool {
	direct := map[netip.Addr]bool{}
	anyUp := false
	for _, p := range peers {
		if p.Type == bgp.PeerExternal {
			continue // a router carries no block protocol
		}
		direct[p.Address] = p.Established
		anyUp = anyUp || p.Established
	}
	out := map[netip.Addr]bool{}
	for _, v := range voters {
		if mine.has(v) {
			continue
		}
		if up, ok := direct[v]; ok && !up || !ok && !anyUp {
			out[v] = true
		}
	}
	return out
}

// exhausted is a pool with no free block, as errors.Is(store.ErrPoolExhausted).
type exhausted string

func (e exhausted) Error() string { return string(e) }
func (e exhausted) Unwrap() error { return store.ErrPoolExhausted }

// unavailable is why this node hands out no address, whatever it waits
// for (cniserver.Deps.Unavailable, CNI STATUS and /readyz): the cluster
// forgot it, or a newer incarnation of its address took over; "" else.
func (e *blockEngine) unavailable() string {
	if g := e.Last().Status.Gone; g != "" {
		return goneError(g).Error()
	}
	return ""
}

// goneError is the failure of a node the cluster forgot, gone saying why.
func goneError(gone string) error { return fmt.Errorf("%s; %w", gone, errGone) }

// errGone marks the failure of a node the cluster forgot: no wait helps.
var errGone = errors.New("no address is handed out here")

// errRecovered marks the failure of a node whose store was recovered: it
// claims no block in this incarnation, so no wait helps.
var errRecovered = errors.New("no free address is left in this node's blocks")

// blockedError is why an ADD waiting for a block of pool gets none yet.
func blockedError(s blockproto.Status, pool netip.Prefix) error {
	if s.Gone != "" {
		return goneError(s.Gone)
	}
	if s.Recovered != "" {
		return fmt.Errorf("%w, and %s", errRecovered, s.Recovered)
	}
	if why, ok := s.Blocked[pool]; ok {
		if s.CanClaim() == nil {
			return exhausted(why)
		}
		return errors.New(why)
	}
	for _, p := range s.Pending {
		if !pool.Contains(p.Block.Addr()) {
			continue
		}
		var missing []string
		for _, v := range s.Voters {
			if !slices.Contains(p.Grants, v) {
				missing = append(missing, v.String())
			}
		}
		restricted := ""
		if s.Restricted != "" {
			restricted = " (this node votes for no pending claim, its own included, while its store is new: see `reef status`)"
		}
		return fmt.Errorf("the claim of block %s has %d of the %d votes it needs from the voters %v; no vote yet from %v%s",
			p.Block, len(p.Grants), s.Majority, s.Voters, missing, restricted)
	}
	return nil
}

// poolOf is the CIDR of the pool block is in, for the metrics' label.
func (e *blockEngine) poolOf(block netip.Prefix) string {
	for _, p := range e.pools {
		if p.CIDR.Contains(block.Addr()) {
			return p.CIDR.String()
		}
	}
	return "none"
}

func (e *blockEngine) logChanges(d blockproto.Decision) {
	for _, b := range d.Claim {
		e.log.Info("claimed a block; waiting for the voters", "block", b.Block, "pool", b.Pool)
		e.metrics.Claim(b.Pool.String(), "made")
	}
	for _, b := range d.Confirm {
		e.log.Info("block claim confirmed by a majority of the voters", "block", b)
		e.metrics.Claim(e.poolOf(b), "won")
	}
	for _, b := range d.Release {
		e.log.Info("gave up a pending claim: another node has the block or a better claim to it", "block", b)
		e.metrics.Claim(e.poolOf(b), "given-up")
	}
	for _, b := range d.Lose {
		e.log.Error("block conflict: no more addresses are handed out from this block", "block", b, "detail", d.Status.Conflicts, "gone", d.Status.Gone)
		e.metrics.Claim(e.poolOf(b), "lost")
	}
	for _, n := range d.Forget {
		e.log.Warn("learned that a node was forgotten; its blocks and votes are free", "node", n)
	}
	for _, n := range d.Supersede {
		e.log.Warn("a node came back with an empty state dir; its old incarnation's blocks and votes are free", "node", n)
	}
	for _, g := range d.Grant {
		e.log.Debug("voted", "block", g.Block, "for", g.To)
	}
	for _, b := range d.Revoke {
		e.log.Debug("vote withdrawn", "block", b)
	}
	if len(d.Remember) > 0 || len(d.Unremember) > 0 {
		e.log.Info("other nodes' blocks changed", "learned", len(d.Remember), "freed", len(d.Unremember))
	}
}

// nameOwners records the hostnames BGP sessions announced for the owners
// of remembered blocks, for `reef ipam show` and `reef node forget NAME`.
func (e *blockEngine) nameOwners(peers []bgp.PeerStatus, st blockproto.State, blocks []store.Block) {
	owners := map[netip.Addr]bool{}
	for _, r := range st.Remote {
		owners[r.Owner.Addr] = true
	}
	named := map[netip.Addr]string{}
	for _, b := range blocks {
		if !b.Own() {
			named[b.OwnerAddr] = b.Owner
		}
	}
	names := map[netip.Addr]string{}
	for _, p := range peers {
		if p.Hostname != "" && owners[p.Address] && named[p.Address] != p.Hostname {
			names[p.Address] = p.Hostname
		}
	}
	if err := e.store.SetBlockOwnerNames(names); err != nil {
		e.log.Warn("record block owners' names", "error", err)
	}
}

// schedule asks for another pass in a second while a claim or an ADD
// waits: updates arrive as BGP events anyway, this only bounds how long a
// missed one can delay a claim. No decision depends on the timer.
func (e *blockEngine) schedule(d blockproto.Decision) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	if len(d.Status.Pending) > 0 || len(e.demand) > 0 {
		e.timer = time.AfterFunc(time.Second, e.trigger)
	}
}

// voterStart is the voter list this node runs under, as voterList checked
// and recorded it at start, and whether the node is restricted.
type voterStart struct {
	blockproto.VoterList
	// Restricted: the store is marked restricted (blockproto.State
	// Restricted: in effect while the node is one of several voters).
	Restricted bool
	// Lifted: a restriction ended at this start (the node is back in the
	// list after a start without it).
	Lifted bool
	// Voter: the node is one of several voters of the list.
	Voter bool
	// Released are the pending claims given up because the list changed.
	Released []netip.Prefix
}

// voterList is the voter list this node runs under: bgp.voters, or itself
// alone when it has no other node to talk to. It is checked against the
// list the store last ran under (blockproto.CheckListChange) and recorded,
// with whether the node is restricted:
//
//   - a new store (store.New: made by this start or an earlier one that
//     never ran under a cluster's list, from an empty state dir or by `reef
//     store recover` drawing a new incarnation) that first runs under a
//     cluster's list with this node one of its voters is restricted: the
//     votes an earlier incarnation of this address cast are lost with its
//     state (raft's rule: a member that lost its disk is a new member).
//     `reef store init` on a founding voter records the list beforehand, so
//     that a new cluster's voters start unrestricted;
//   - the restriction ends only when the node starts under a list with
//     its address after it ran under one without it: it was taken out of
//     bgp.voters and added back, one voter each way (docs/ipam.md,
//     "Changing the voter list").
//
// A store of an older reef (no voter list kept and not new) is never
// restricted.
func voterList(cfg Config, mine nodeAddrs, st *store.Store) (voterStart, error) {
	l := blockproto.VoterList{Voters: blockproto.Voters(cfg.BGP.Voters)}
	if len(l.Voters) == 0 {
		l = blockproto.VoterList{Voters: []netip.Addr{mine[0]}, Alone: true}
	}
	in := func(vs []netip.Addr) bool { return slices.ContainsFunc(vs, mine.has) }
	out := voterStart{VoterList: l, Voter: !l.Alone && len(l.Voters) > 1 && in(l.Voters)}
	prev, ok, err := st.VoterList()
	if err != nil {
		return out, err
	}
	if ok {
		ps, err := st.LoadProtocol()
		if err != nil {
			return out, err
		}
		if err := blockproto.CheckListChange(prev, l, ps.Holds()); err != nil {
			return out, cfg.KeyError("bgp.voters", fmt.Sprintf("value %v: %v", l.Voters, err))
		}
	}
	if ok && !slices.Equal(prev.Voters, l.Voters) {
		// A claim is made, voted for, counted and confirmed under one
		// list: a claim pending across a change could count, under a list
		// it returns to, a vote of a voter that was wiped in between
		// (blocks/model/voters.pml, SWITCH_KEEPS_PENDING). Given up here,
		// and made again under the new list when it is needed.
		ps, err := st.LoadProtocol()
		if err != nil {
			return out, err
		}
		if out.Released = ps.PendingBlocks(); len(out.Released) > 0 {
			if err := st.ApplyProtocol(blockproto.Changes{Release: out.Released}); err != nil {
				return out, err
			}
		}
	}
	isNew, err := st.New()
	if err != nil {
		return out, err
	}
	was, err := st.VoterRestricted()
	if err != nil {
		return out, err
	}
	out.Restricted = was
	switch {
	case isNew && !l.Alone:
		out.Restricted = out.Voter
	case was && ok && !l.Alone && in(l.Voters) && !in(prev.Voters):
		out.Restricted, out.Lifted = false, true
	}
	if !ok || !slices.Equal(prev.Voters, l.Voters) || prev.Alone != l.Alone || out.Restricted != was || (isNew && !l.Alone) {
		if err := st.RunUnder(l, out.Restricted); err != nil {
			return out, err
		}
	}
	return out, nil
}
