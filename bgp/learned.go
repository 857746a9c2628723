package bgp

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// learned mirrors GoBGP's best path of every VPN NLRI (VPN-IPv4 and
// VPN-IPv6) that another speaker announces, decoded, as the best-path
// watcher reports changes: the block protocol's step reads it
// (LearnedTable) without asking GoBGP for its table and converting every
// path again. Through two route
// reflectors a path comes twice, and the best copy says what the other
// says; in a full mesh a path has one copy, from its speaker. (Forgets and
// seen incarnations are the NLRIs several speakers announce, all with the
// same content.)
type learned struct {
	// One map per kind (the kind is the RD's number, part of the NLRI):
	// an entry holds only its own type.
	records map[nlriKey]blockproto.Record
	claims  map[nlriKey]blockproto.Claim
	grants  map[nlriKey]blockproto.Grant
	forgets map[nlriKey]blockproto.Forget
	seen    map[nlriKey]blockproto.Seen
}

// nlriKey is a VPN NLRI less its label and its RD's number (the map it is
// in says the kind).
type nlriKey struct {
	rd     netip.Addr
	prefix netip.Prefix
}

// onBestPath applies a batch of the best-path watcher's changes to the
// mirror and reports whether the mirror changed. A withdrawal, or the
// speaker's own path becoming the best, removes the NLRI; a path the
// import filter drops removes it as well (and is logged once, as
// LearnedTable always did). A new best copy with the content of the one it
// replaces changes nothing: through two reflectors, the copy from the
// lower router ID replaces the other one whenever it comes second.
func (sp *Speaker) onBestPath(paths []*apiutil.Path) (changed bool) {
	asn, pools := sp.cfg.ASN, sp.cfg.Pools
	var lcs []LargeCommunity
	var scratch blockproto.Table
	marks6 := false
	defer func() {
		if marks6 || changed {
			sp.wakeStandIns()
		}
	}()
	for _, p := range paths {
		if p.Withdrawal {
			sp.forgetDropped(p.Nlri)
		}
		afi, ok := vpnAFI(p.Family)
		if !ok {
			continue // unicast: routes come from the protocol's state
		}
		vpn, _ := p.Nlri.(*bgppkt.LabeledVPNIPAddrPrefix)
		if vpn == nil {
			if !p.Withdrawal && !sp.own(p) {
				sp.drop(p.PeerAddress, p.Nlri.String(), fmt.Errorf("%s: not a labelled %s NLRI: %w", p.Nlri, afi, ErrNotReef))
			}
			continue
		}
		rd := rdOf(vpn.RD)
		key := vpnKey{rd.Addr, Kind(rd.Number), vpn.Prefix}
		marks6 = sp.noteMark6(key, p, p.Withdrawal || sp.own(p)) || marks6
		if p.Withdrawal || sp.own(p) {
			sp.lmu.Lock()
			changed = sp.learned.remove(key) || changed
			sp.lmu.Unlock()
			continue
		}
		lcs, _ = pathAttrs(lcs[:0], p.Attrs)
		scratch = blockproto.Table{Records: scratch.Records[:0], Claims: scratch.Claims[:0], Grants: scratch.Grants[:0], Forgets: scratch.Forgets[:0], Seen: scratch.Seen[:0]}
		err := DecodeVPN(asn, pools, afi, rd, vpn.Prefix, lcs, &scratch)
		sp.lmu.Lock()
		if err == nil {
			changed = sp.learned.add(key, scratch) || changed
		} else {
			changed = sp.learned.remove(key) || changed
		}
		sp.lmu.Unlock()
		if err != nil {
			sp.drop(p.PeerAddress, p.Nlri.String(), err)
		}
	}
	return changed
}

// forgetDropped forgets the dropped paths of nlri, which is withdrawn
// (no peer has a path of it any more): sent again, a path of it is logged
// and counted again.
func (sp *Speaker) forgetDropped(nlri bgppkt.NLRI) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if len(sp.badSeen) > 0 {
		delete(sp.badSeen, nlri.String())
	}
}

// remove drops k's entry and reports whether there was one.
func (l *learned) remove(k vpnKey) bool {
	n := nlriKey{k.rd, k.prefix}
	switch k.kind {
	case KindRecord:
		return drop(l.records, n)
	case KindClaim:
		return drop(l.claims, n)
	case KindGrant:
		return drop(l.grants, n)
	case KindForget:
		return drop(l.forgets, n)
	case KindSeen:
		return drop(l.seen, n)
	}
	return false
}

// add keeps the one entry t holds (DecodeVPN decodes a path to one) as
// k's, and reports whether that changed k's entry.
func (l *learned) add(k vpnKey, t blockproto.Table) bool {
	n := nlriKey{k.rd, k.prefix}
	switch {
	case len(t.Records) == 1:
		return put(&l.records, n, t.Records[0], blockproto.Record.Equal)
	case len(t.Claims) == 1:
		return put(&l.claims, n, t.Claims[0], func(a, b blockproto.Claim) bool { return a == b })
	case len(t.Grants) == 1:
		return put(&l.grants, n, t.Grants[0], func(a, b blockproto.Grant) bool { return a == b })
	case len(t.Forgets) == 1:
		return put(&l.forgets, n, t.Forgets[0], func(a, b blockproto.Forget) bool { return a == b })
	case len(t.Seen) == 1:
		return put(&l.seen, n, t.Seen[0], func(a, b blockproto.Seen) bool { return a == b })
	}
	return false
}

func put[V any](m *map[nlriKey]V, k nlriKey, v V, same func(a, b V) bool) bool {
	if *m == nil {
		*m = map[nlriKey]V{}
	}
	old, ok := (*m)[k]
	(*m)[k] = v
	return !ok || !same(old, v)
}

func drop[V any](m map[nlriKey]V, k nlriKey) bool {
	_, ok := m[k]
	delete(m, k)
	return ok
}

func values[V any](m map[nlriKey]V) []V {
	if len(m) == 0 {
		return nil // empty kinds as nil, as a Table built by hand has them
	}
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// LearnedTable returns what the other speakers announce in VPN-IPv4 and
// VPN-IPv6: the best path of every NLRI that is not the speaker's own
// (stale ones over a graceful restart included, until GoBGP drops them),
// less those that fail DecodeVPN, which are dropped and logged once per
// peer and NLRI while the NLRI is in the table (forgetDropped). It is kept from the best-path watcher's events as they
// come, so the call asks nothing of GoBGP. The table is in no particular
// order.
//
// From the moment a session that was established goes down, for the
// restart time (Config.RestartTime: reef's own, which reef peers give too)
// and a hold time (copiesUntil), it is every copy of every path instead,
// from GoBGP's table, which the block protocol merges (the later state of
// a claim wins): the copies through a reflector that is restarting are
// stale and, coming from the lower router ID, may stay the best ones
// while the other reflector's copies move on. Neither way decides safety:
// a copy seen late only delays what the node learns.
func (sp *Speaker) LearnedTable() (blockproto.Table, error) {
	if sp.readsAllCopies() {
		return sp.allTable()
	}
	sp.lmu.Lock()
	defer sp.lmu.Unlock()
	l := &sp.learned
	return blockproto.Table{Records: values(l.records), Claims: values(l.claims), Grants: values(l.grants), Forgets: values(l.forgets), Seen: values(l.seen)}, nil
}

// readsAllCopies reports whether LearnedTable reads every copy of every
// path now (copiesUntil).
func (sp *Speaker) readsAllCopies() bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return time.Now().Before(sp.copiesUntil)
}

// allTable is every copy of every VPN path another speaker announces
// that passes the import filter, from GoBGP's table.
func (sp *Speaker) allTable() (blockproto.Table, error) {
	var t blockproto.Table
	if _, err := sp.walk(&t); err != nil {
		return blockproto.Table{}, err
	}
	t.Records, t.Claims, t.Grants, t.Forgets, t.Seen = nilIfEmpty(t.Records), nilIfEmpty(t.Claims), nilIfEmpty(t.Grants), nilIfEmpty(t.Forgets), nilIfEmpty(t.Seen)
	return t, nil
}

// watchBestPath is the best-path watcher's callback: the mirror first,
// then the wake-up, so that the step it wakes reads the change. A batch
// that leaves the mirror as it was wakes nothing: unicast is not the
// protocol's (the routes come from its state), and a copy of the same
// content tells it nothing new. While LearnedTable reads every copy
// (copiesUntil), every batch wakes the step.
func (sp *Speaker) watchBestPath(onChange func()) func([]*apiutil.Path, time.Time) {
	return func(paths []*apiutil.Path, _ time.Time) {
		if changed := sp.onBestPath(paths); changed || sp.readsAllCopies() {
			onChange()
		}
	}
}
