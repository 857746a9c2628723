package bgp

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
)

// Service addresses (bgp.serviceExternalIPs, bgp.serviceLoadBalancerIPs)
// are single addresses of Services, /32 or /128, that the daemon decides
// from the Kubernetes API (package services) and hands to
// SetServiceAddresses whenever its plan may have changed. Like the
// service CIDRs (services.go) they go to the external peers only, next
// hop the node: they are in the same prefix sets, with every length from
// the CIDR's down to a single address, so the export statements that keep
// the service CIDRs from the mesh and reflectors keep them too, and the
// import policy drops anything inside them that a peer sends.

// serviceAddrs are the Service addresses the speaker originates.
type serviceAddrs struct {
	mu    sync.Mutex // serialises SetServiceAddresses; guards paths
	paths map[netip.Addr]*apiutil.Path
}

// ErrNoExternalPeers is SetServiceAddresses's answer on a speaker without
// external peers: it has no export policy to keep the addresses from the
// cluster's sessions, so it announces none. (The config check refuses the
// lists without bgp.externalPeers.)
var ErrNoExternalPeers = errors.New("no external peers to announce Service addresses to")

// SetServiceAddresses makes the Service addresses the speaker originates
// exactly want: the new ones are added, those no longer wanted withdrawn,
// the rest left alone, so a call with what is already announced sends
// nothing. An address outside Config.ServiceAddressCIDRs is refused (the
// daemon's plan never has one) and an IPv6 one without the node's IPv6
// address to be its next hop is withheld; both are left out and, with
// each add or withdrawal GoBGP refused, named in the error. What failed is
// tried again at the next call.
func (sp *Speaker) SetServiceAddresses(want []netip.Addr) (withheld []netip.Addr, err error) {
	// refused: GoBGP refused an add or a withdrawal, which the next call
	// tries again; the call does not count (restart.go).
	refused := false
	defer func() { // after the unlock
		if !refused {
			sp.addrsIn()
		}
	}()
	if len(sp.cfg.ExternalPeers) == 0 {
		return nil, ErrNoExternalPeers
	}
	a := &sp.addrs
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.paths == nil {
		a.paths = map[netip.Addr]*apiutil.Path{}
	}
	var errs []error
	wanted := make(map[netip.Addr]bool, len(want))
	var adds []*apiutil.Path
	var addAddrs []netip.Addr
	for _, addr := range want {
		p := netip.PrefixFrom(addr, addr.BitLen())
		switch {
		case !addr.IsValid() || addr.Is4In6() || addr.Zone() != "":
			errs = append(errs, fmt.Errorf("announce Service address %s: not an IPv4 or IPv6 address", addr))
			continue
		case !slices.ContainsFunc(sp.cfg.ServiceAddressCIDRs, func(c netip.Prefix) bool { return c.Contains(addr) }):
			errs = append(errs, fmt.Errorf("announce Service address %s: outside the CIDRs of Service addresses %v", addr, sp.cfg.ServiceAddressCIDRs))
			continue
		case wanted[addr]:
			continue
		}
		nh := sp.cfg.serviceNextHop(p)
		if !nh.IsValid() {
			withheld = append(withheld, addr)
			continue
		}
		wanted[addr] = true
		if _, ok := a.paths[addr]; ok {
			continue
		}
		path, err := unicastPath(p, nh, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("announce Service address %s: %w", addr, err))
			delete(wanted, addr)
			continue
		}
		adds, addAddrs = append(adds, path), append(addAddrs, addr)
	}
	sp.addPaths(adds, func(i int, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("announce Service address %s: %w", addAddrs[i], err))
			refused = true
			return
		}
		a.paths[addAddrs[i]] = adds[i]
	})
	var dels []*apiutil.Path
	var delAddrs []netip.Addr
	for addr, path := range a.paths {
		if !wanted[addr] {
			dels, delAddrs = append(dels, path), append(delAddrs, addr)
		}
	}
	sp.deletePaths(dels, func(i int, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("withdraw Service address %s: %w", delAddrs[i], err))
			refused = true
			return
		}
		delete(a.paths, delAddrs[i])
	})
	if len(addAddrs) > 0 || len(delAddrs) > 0 {
		sp.log.Debug("Service addresses changed", "added", addAddrs, "withdrawn", delAddrs)
	}
	return withheld, errors.Join(errs...)
}

// ServiceAddresses are the Service addresses in the speaker's table for
// its external peers, sorted.
func (sp *Speaker) ServiceAddresses() []netip.Addr {
	a := &sp.addrs
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]netip.Addr, 0, len(a.paths))
	for addr := range a.paths {
		out = append(out, addr)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
