package bgp

import (
	"fmt"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// learned mirrors GoBGP's best path of every IPv4 VPN NLRI that another
// speaker announces, decoded, as the best-path watcher reports changes: the
// block protocol's step reads it (LearnedTable) without asking GoBGP for
// its table and converting every path again. Through two route
// reflectors a path comes twice, and the best copy says what the other
// says; in a full mesh a path has one copy, from its speaker. (A forget
// is the one NLRI several speakers announce, all with the same content.)
type learned struct {
	paths map[vpnKey]learnedPath
	// n counts the entries of each kind (records, claims, grants,
	// forgets), to size LearnedTable's slices.
	n [4]int
}

// learnedPath is the entry one best path decodes to.
type learnedPath struct {
	kind   Kind
	record blockproto.Record
	claim  blockproto.Claim
	grant  blockproto.Grant
	forget blockproto.Forget
}

// onBestPath applies a batch of the best-path watcher's changes to the
// mirror. A withdrawal, or the speaker's own path becoming the best,
// removes the NLRI; a path the import filter drops removes it as well
// (and is logged once, as LearnedTable always did).
func (sp *Speaker) onBestPath(paths []*apiutil.Path) {
	asn, pools := sp.cfg.ASN, sp.cfg.Pools
	var lcs []LargeCommunity
	var scratch blockproto.Table
	for _, p := range paths {
		if p.Family != bgppkt.RF_IPv4_VPN {
			continue // IPv4 unicast: routes come from the protocol's state
		}
		vpn, _ := p.Nlri.(*bgppkt.LabeledVPNIPAddrPrefix)
		if vpn == nil {
			if !p.Withdrawal && !sp.own(p) {
				sp.drop(p.PeerAddress, p.Nlri.String(), fmt.Errorf("%s: not a labelled VPN-IPv4 NLRI: %w", p.Nlri, ErrNotReef))
			}
			continue
		}
		rd := rdOf(vpn.RD)
		key := vpnKey{rd.Addr, Kind(rd.Number), vpn.Prefix}
		if p.Withdrawal || sp.own(p) {
			sp.lmu.Lock()
			sp.learned.remove(key)
			sp.lmu.Unlock()
			continue
		}
		lcs, _ = pathAttrs(lcs[:0], p.Attrs)
		scratch = blockproto.Table{Records: scratch.Records[:0], Claims: scratch.Claims[:0], Grants: scratch.Grants[:0], Forgets: scratch.Forgets[:0]}
		err := DecodeVPN(asn, pools, rd, vpn.Prefix, lcs, &scratch)
		sp.lmu.Lock()
		sp.learned.remove(key)
		if err == nil {
			sp.learned.add(key, scratch)
		}
		sp.lmu.Unlock()
		if err != nil {
			sp.drop(p.PeerAddress, p.Nlri.String(), err)
		}
	}
}

func (l *learned) remove(k vpnKey) {
	if old, ok := l.paths[k]; ok {
		l.n[old.kind-KindRecord]--
		delete(l.paths, k)
	}
}

// add keeps the one entry t holds (DecodeVPN decodes a path to one).
func (l *learned) add(k vpnKey, t blockproto.Table) {
	var e learnedPath
	switch {
	case len(t.Records) == 1:
		e.kind, e.record = KindRecord, t.Records[0]
	case len(t.Claims) == 1:
		e.kind, e.claim = KindClaim, t.Claims[0]
	case len(t.Grants) == 1:
		e.kind, e.grant = KindGrant, t.Grants[0]
	case len(t.Forgets) == 1:
		e.kind, e.forget = KindForget, t.Forgets[0]
	default:
		return
	}
	if l.paths == nil {
		l.paths = map[vpnKey]learnedPath{}
	}
	l.paths[k] = e
	l.n[e.kind-KindRecord]++
}

// LearnedTable returns what the other speakers announce in IPv4 VPN: the
// best path of every NLRI that is not the speaker's own (stale ones over a
// graceful restart included, until GoBGP drops them), less those that fail
// DecodeVPN, which are dropped and logged once per peer and NLRI. It is
// kept from the best-path watcher's events as they come, so the call asks
// nothing of GoBGP. The table is in no particular order.
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
	sp.mu.Lock()
	all := time.Now().Before(sp.copiesUntil)
	sp.mu.Unlock()
	if all {
		return sp.allTable()
	}
	sp.lmu.Lock()
	defer sp.lmu.Unlock()
	l := &sp.learned
	t := blockproto.Table{
		Records: make([]blockproto.Record, 0, l.n[0]),
		Claims:  make([]blockproto.Claim, 0, l.n[1]),
		Grants:  make([]blockproto.Grant, 0, l.n[2]),
		Forgets: make([]blockproto.Forget, 0, l.n[3]),
	}
	for _, e := range l.paths {
		switch e.kind {
		case KindRecord:
			t.Records = append(t.Records, e.record)
		case KindClaim:
			t.Claims = append(t.Claims, e.claim)
		case KindGrant:
			t.Grants = append(t.Grants, e.grant)
		case KindForget:
			t.Forgets = append(t.Forgets, e.forget)
		}
	}
	// Empty kinds as nil, as a Table built by hand has them.
	t.Records, t.Claims, t.Grants, t.Forgets = nilIfEmpty(t.Records), nilIfEmpty(t.Claims), nilIfEmpty(t.Grants), nilIfEmpty(t.Forgets)
	return t, nil
}

// allTable is every copy of every IPv4 VPN path another speaker announces
// that passes the import filter, from GoBGP's table.
func (sp *Speaker) allTable() (blockproto.Table, error) {
	var t blockproto.Table
	if _, err := sp.walk(&t); err != nil {
		return blockproto.Table{}, err
	}
	t.Records, t.Claims, t.Grants, t.Forgets = nilIfEmpty(t.Records), nilIfEmpty(t.Claims), nilIfEmpty(t.Grants), nilIfEmpty(t.Forgets)
	return t, nil
}

// watchBestPath is the best-path watcher's callback: the mirror first,
// then the wake-up, so that the step it wakes reads the change.
func (sp *Speaker) watchBestPath(onChange func()) func([]*apiutil.Path, time.Time) {
	return func(paths []*apiutil.Path, _ time.Time) {
		sp.onBestPath(paths)
		onChange()
	}
}
