package bgp

import (
	"fmt"
	"net/netip"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"

	"github.com/reefcni/reef/blockproto"
)

// The paths in GoBGP's tables read back: CountPaths and walk, which
// count, check and decode the other speakers' paths, and the helpers that
// read a path's attributes.

// PathCounts are the paths of one family one pass of CountPaths saw:
// received, and of them accepted by the import filter or dropped.
type PathCounts struct{ Received, Accepted, Dropped uint64 }

func (c *PathCounts) add(o PathCounts) {
	c.Received += o.Received
	c.Accepted += o.Accepted
	c.Dropped += o.Dropped
}

// PeerCounts are one peer's paths in one pass of CountPaths.
type PeerCounts struct{ Unicast, VPN PathCounts }

// Counts are the paths of other speakers one pass of CountPaths saw: in
// all and by the peer each came from (through a route reflector, the
// reflector). VPN counts both VPN families, the block protocol's paths;
// Unicast is IPv4 unicast, the only unicast family the cluster's sessions
// carry.
type Counts struct {
	Unicast, VPN PathCounts
	Peers        map[netip.Addr]PeerCounts
}

// CountPaths walks the VPN-IPv4, VPN-IPv6 and IPv4 unicast tables (every
// path GoBGP keeps: one per peer per NLRI, stale ones over a graceful
// restart included), runs each path of another speaker through the import
// filter (DecodeVPN, DecodeUnicast) and counts them by the peer each came
// from.
// A path that fails is logged once per peer and NLRI while the NLRI is in
// the table (forgetDropped). It is what `reef
// status` and the metrics show, and costs a pass over the tables: the
// block protocol reads LearnedTable instead. Counts.Peers is the caller's.
func (sp *Speaker) CountPaths() (Counts, error) { return sp.walk(nil) }

// walk is CountPaths, and with t set it also appends every accepted VPN
// path to t: every copy, from every peer (allTable).
func (sp *Speaker) walk(t *blockproto.Table) (Counts, error) {
	peers := map[netip.Addr]PeerCounts{}
	asn, pools := sp.cfg.ASN, sp.cfg.Pools
	var lcs []LargeCommunity     // reused from path to path
	var scratch blockproto.Table // what a pass that only counts decodes into

	for _, f := range vpnFamilies {
		err := sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f.rf},
			func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
				vpn, _ := nlri.(*bgppkt.LabeledVPNIPAddrPrefix)
				for _, p := range paths {
					if sp.own(p) {
						continue
					}
					c := peers[p.PeerAddress]
					c.VPN.Received++
					var err error
					if vpn == nil {
						err = fmt.Errorf("%s: not a labelled %s NLRI: %w", nlri, f.afi, ErrNotReef)
					} else {
						lcs, _ = pathAttrs(lcs[:0], p.Attrs)
						into := t
						if into == nil {
							scratch = blockproto.Table{Records: scratch.Records[:0], Claims: scratch.Claims[:0], Grants: scratch.Grants[:0], Forgets: scratch.Forgets[:0], Seen: scratch.Seen[:0]}
							into = &scratch
						}
						err = DecodeVPN(asn, pools, f.afi, rdOf(vpn.RD), vpn.Prefix, lcs, into)
					}
					if err != nil {
						c.VPN.Dropped++
						sp.drop(p.PeerAddress, nlri.String(), err)
					} else {
						c.VPN.Accepted++
					}
					peers[p.PeerAddress] = c
				}
			})
		if err != nil {
			return Counts{}, fmt.Errorf("list BGP paths (%s): %w", f.afi, err)
		}
	}
	var err error
	if !sp.cfg.IPv6Only { // no IPv4 unicast table on an IPv6-only node
		err = sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: bgppkt.RF_IPv4_UC},
			func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
				uc, _ := nlri.(*bgppkt.IPAddrPrefix)
				for _, p := range paths {
					if sp.own(p) {
						continue
					}
					c := peers[p.PeerAddress]
					c.Unicast.Received++
					var err error
					if uc == nil {
						err = fmt.Errorf("%s: not an IPv4 prefix: %w", nlri, ErrNotReef)
					} else {
						var nh netip.Addr
						lcs, nh = pathAttrs(lcs[:0], p.Attrs)
						_, err = DecodeUnicast(asn, pools, uc.Prefix, nh, lcs)
					}
					if err != nil {
						c.Unicast.Dropped++
						sp.drop(p.PeerAddress, nlri.String(), err)
					} else {
						c.Unicast.Accepted++
					}
					peers[p.PeerAddress] = c
				}
			})
	}
	if err != nil {
		return Counts{}, fmt.Errorf("list BGP paths (IPv4 unicast): %w", err)
	}
	counts := Counts{Peers: peers}
	for _, c := range peers {
		counts.Unicast.add(c.Unicast)
		counts.VPN.add(c.VPN)
	}
	return counts, nil
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// own reports whether p is one of the speaker's own paths.
func (sp *Speaker) own(p *apiutil.Path) bool {
	return !p.PeerAddress.IsValid() || p.PeerAddress.IsUnspecified() || sp.cfg.self(p.PeerAddress)
}

// pathAttrs appends the large communities of attrs to lcs and returns
// them with the next hop.
func pathAttrs(lcs []LargeCommunity, attrs []bgppkt.PathAttributeInterface) ([]LargeCommunity, netip.Addr) {
	var nh netip.Addr
	for _, a := range attrs {
		switch a := a.(type) {
		case *bgppkt.PathAttributeNextHop:
			nh = a.Value
		case *bgppkt.PathAttributeMpReachNLRI:
			nh = a.Nexthop
		case *bgppkt.PathAttributeLargeCommunities:
			for _, v := range a.Values {
				lcs = append(lcs, LargeCommunity{v.ASN, v.LocalData1, v.LocalData2})
			}
		}
	}
	return lcs, nh
}

// rdOf is a GoBGP route distinguisher as reef reads it.
func rdOf(rd bgppkt.RouteDistinguisherInterface) RD {
	switch rd := rd.(type) {
	case *bgppkt.RouteDistinguisherIPAddressAS:
		return RD{Type: rd.Type, Addr: rd.Admin, Number: rd.Assigned}
	case *bgppkt.RouteDistinguisherTwoOctetAS:
		return RD{Type: rd.Type}
	case *bgppkt.RouteDistinguisherFourOctetAS:
		return RD{Type: rd.Type}
	case *bgppkt.RouteDistinguisherUnknown:
		return RD{Type: rd.Type}
	}
	return RD{Type: 0xffff}
}
