package daemon

// The checks of bgp.externalPeers: addresses, timers, BFD.

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/reefcni/reef/bgp"
)

// externalPeerProblems are the checks of bgp.externalPeers.
func (c *Config) externalPeerProblems() []configProblem {
	var ps []configProblem
	b := c.BGP
	seen := map[netip.Addr]int{}
	for i, p := range b.ExternalPeers {
		at := fmt.Sprintf("bgp.externalPeers[%d]", i)
		bad := func(key, format string, args ...any) {
			ps = append(ps, configProblem{at + key, fmt.Sprintf(format, args...)})
		}
		a := p.Address
		switch {
		case !a.IsValid():
			bad(".address", "missing; every external peer needs the router's address, e.g. address: 192.168.10.1")
		case !peerAddr(a) || a.IsLoopback():
			bad(".address", "value %q is not a unicast IPv4 or global IPv6 address", a)
		case a == c.NodeAddress:
			bad(".address", "value %q is this node's own address (nodeAddress%s)", a, c.lineOf("nodeAddress"))
		case a == c.NodeAddressV6:
			bad(".address", "value %q is this node's own address (nodeAddressV6%s)", a, c.lineOf("nodeAddressV6"))
		case slices.Contains(b.Peers, a) || slices.Contains(b.RouteReflectors, a):
			bad(".address", "value %q is also in bgp.peers or bgp.routeReflectors; a cluster node is not an external peer: keep one of them", a)
		default:
			if j, dup := seen[a]; dup {
				bad(".address", "value %q is listed twice (also bgp.externalPeers[%d]%s)", a, j, c.lineOf(fmt.Sprintf("bgp.externalPeers[%d].address", j)))
			}
			seen[a] = i
		}
		if p.ASN == 0 {
			bad(".asn", "missing or 0; give the router's AS number (eBGP when it differs from bgp.asn %d, iBGP when equal)", b.ASN)
		}
		if p.Port < 1 || p.Port > 65535 {
			bad(".port", "value %d is outside 1..65535", p.Port)
		}
		hold := p.timerProblems(b, bad)
		switch {
		case p.Multihop < 0 || p.Multihop > 255:
			bad(".multihop", "value %d is outside 0..255 (the TTL of an eBGP session; 0 for a directly connected router)", p.Multihop)
		case p.Multihop > 0 && p.ASN == b.ASN:
			bad(".multihop", "value %d on an iBGP peer (asn %d is bgp.asn): multihop is for eBGP; iBGP sessions need no TTL", p.Multihop, p.ASN)
		}
		if p.MaxPrefixes == 0 {
			bad(".maxPrefixes", "value 0: every session has a prefix limit; leave the key out for %d, or give the most routes the router may send", defaultMaxPrefixes)
		}
		for j, cm := range p.Communities {
			if _, _, err := bgp.SplitCommunities([]string{cm}); err != nil {
				bad(fmt.Sprintf(".communities[%d]", j), "value %q: %v", cm, err)
			}
		}
		p.bfdProblems(hold, bad)
	}
	return ps
}

// timerProblems checks an external peer's BGP timers, each 0 for the
// bgp section's; it returns the hold time in effect.
func (p ExternalPeerConfig) timerProblems(b BGPConfig, bad func(key, format string, args ...any)) time.Duration {
	hold, keep := p.HoldTime, p.KeepaliveTime
	if hold == 0 {
		hold = b.HoldTime
	}
	if keep == 0 {
		keep = b.KeepaliveTime
	}
	switch {
	case p.HoldTime < 0 || p.HoldTime > 0 && p.HoldTime < 3*time.Second:
		bad(".holdTime", "value %q is below the 3s BGP allows (or 0 for bgp.holdTime)", p.HoldTime)
	case p.HoldTime > maxHoldTime:
		bad(".holdTime", "value %q is above the %s a BGP OPEN message carries (65535 seconds)", p.HoldTime, maxHoldTime)
	case p.HoldTime%time.Second != 0:
		bad(".holdTime", "value %q is not a whole number of seconds (BGP's timers are seconds)", p.HoldTime)
	case p.KeepaliveTime < 0:
		bad(".keepaliveTime", "value %q is negative (or 0 for bgp.keepaliveTime)", p.KeepaliveTime)
	case p.KeepaliveTime%time.Second != 0:
		bad(".keepaliveTime", "value %q is not a whole number of seconds (BGP's timers are seconds)", p.KeepaliveTime)
	case keep >= hold && hold >= 3*time.Second && p.KeepaliveTime != 0:
		bad(".keepaliveTime", "value %q is not below the hold time %q (a third of it is usual)", keep, hold)
	case keep >= hold && hold >= 3*time.Second && p.HoldTime != 0:
		// The peer's keepaliveTime is bgp.keepaliveTime's: the hold time
		// given here is what is too short. (Neither given: the bgp
		// section's own check reports them.)
		bad(".holdTime", "value %q is not above bgp.keepaliveTime %q, the keepalive time this peer takes; give keepaliveTime too (a third of the hold time is usual)", hold, keep)
	}
	return hold
}

// bfdProblems checks an external peer's bfd, against the hold time in
// effect (BFD must find a dead router sooner than BGP would).
func (p ExternalPeerConfig) bfdProblems(hold time.Duration, bad func(key, format string, args ...any)) {
	b := p.BFD
	if !b.on() && b.Multiplier == 0 {
		return
	}
	detect := b.MinInterval * time.Duration(b.multiplier())
	switch {
	case b.MinInterval == 0:
		bad(".bfd.minInterval", "missing; BFD runs with minInterval set, e.g. minInterval: 300ms (or leave bfd out)")
	case b.MinInterval < minBFDInterval || b.MinInterval > maxBFDInterval:
		bad(".bfd.minInterval", "value %q is outside %s..%s", b.MinInterval, minBFDInterval, maxBFDInterval)
	case b.MinInterval%time.Millisecond != 0:
		bad(".bfd.minInterval", "value %q is not a whole number of milliseconds (routers take milliseconds)", b.MinInterval)
	case b.Multiplier < 0 || b.Multiplier > 255:
		bad(".bfd.multiplier", "value %d is outside 1..255 (or 0 for %d)", b.Multiplier, defaultBFDMultiplier)
	case detect >= hold && hold >= 3*time.Second:
		bad(".bfd.minInterval", "value %q × multiplier %d = %s is not below the hold time %q: BFD would find a dead router no sooner than BGP; BFD is for well under a second", b.MinInterval, b.multiplier(), detect, hold)
	case p.Multihop > 0:
		bad(".bfd", "set on a multihop peer (multihop %d): reef's BFD is single-hop only (RFC 5881, UDP port 3784), for a directly connected router", p.Multihop)
	}
}
