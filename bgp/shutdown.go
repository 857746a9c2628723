package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	bgppkt "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// A planned stop (SIGTERM: systemctl stop, a package upgrade) is, to a
// router, the same as a crash unless reef says so first: the daemon exits,
// the router's BFD session times out, or its graceful restart keeps every
// path of the node, the Service CIDRs among them, with their preference
// intact. So before it stops, the speaker marks the Service CIDRs it
// announces to its external peers with RFC 8326's GRACEFUL_SHUTDOWN
// community (65535:0): a router that honours it (docs/bgp.md: BIRD and FRR
// need a line each) gives them local preference 0, and sends the traffic
// to the other nodes that announce the same CIDR, while this node still
// forwards. The paths stay announced, de-preferred, so that a node that is
// the only one left keeps its traffic.
//
// There is no BGP message that tells reef the router has run its decision
// process. What reef can know is that GoBGP has written the marked paths
// to each established peer: its Adj-RIB-Out for the peer holds them
// marked, and its count of UPDATE messages written to the peer's socket
// has moved past the count before the marking. After that it waits
// settle, bounded, for the router to act on them. The blocks have no
// other node to move to: only this node has the pods, which still answer
// while the daemon restarts. The other nodes announce them for it at
// their BFD routers instead (standin.go, PlannedStop).
// BFD AdminDown (RFC 5882 3.2), which would tell the router not to treat
// the silence that follows as a failure, cannot be sent: GoBGP's BFD has
// no AdminDown, and BIRD 2 would take it for a failure all the same
// (bfd.go).

// GracefulShutdownCommunity is RFC 8326's GRACEFUL_SHUTDOWN, 65535:0.
const GracefulShutdownCommunity = uint32(bgppkt.COMMUNITY_PLANNED_SHUT)

// GracefulShutdown marks the announced Service CIDRs with
// GRACEFUL_SHUTDOWN, waits until GoBGP has sent them so to every
// established external peer (or ctx ends), then waits settle for the
// routers to move the traffic. It returns the peers the marked paths
// reached; none and a nil error when there is nothing to drain (no
// Service CIDR, no established external peer).
func (sp *Speaker) GracefulShutdown(ctx context.Context, settle time.Duration) ([]netip.Addr, error) {
	announced := sp.drained()
	if len(announced) == 0 || len(sp.cfg.ExternalPeers) == 0 {
		return nil, nil
	}
	var peers []netip.Addr
	for _, s := range sp.Sessions(ctx) {
		if s.Type == PeerExternal && s.Established {
			peers = append(peers, s.Address)
		}
	}
	if len(peers) == 0 {
		return nil, nil
	}
	before, err := sp.UpdateCounts(ctx)
	if err != nil {
		return nil, err
	}
	var paths []*apiutil.Path
	for _, p := range announced {
		path, err := unicastPath(p, sp.cfg.serviceNextHop(p), nil)
		if err != nil {
			return nil, err
		}
		// The same NLRI from the same (local) source: GoBGP replaces
		// the path, and sends the peers the marked one.
		path.Attrs = append(path.Attrs, bgppkt.NewPathAttributeCommunities([]uint32{GracefulShutdownCommunity}))
		paths = append(paths, path)
	}
	var errs []error
	sp.addPaths(paths, func(i int, err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("mark service CIDR %s with GRACEFUL_SHUTDOWN: %w", announced[i], err))
		}
	})
	if len(errs) > 0 {
		return nil, errs[0]
	}
	sp.log.Info("planned stop: Service CIDRs and addresses marked GRACEFUL_SHUTDOWN (65535:0) for the external peers", "prefixes", announced, "peers", peers)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		missing, err := sp.notSent(ctx, peers, announced, before)
		if err == nil && len(missing) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return peers, fmt.Errorf("GRACEFUL_SHUTDOWN not sent to %v: %w", missing, ctx.Err())
		case <-tick.C:
		}
	}
	sp.log.Info("planned stop: GRACEFUL_SHUTDOWN sent; waiting for the routers to move the traffic", "peers", peers, "settle", settle)
	select {
	case <-ctx.Done():
	case <-time.After(settle):
	}
	return peers, nil
}

// drained are the prefixes a planned stop marks: the Service prefixes the
// speaker announces to its external peers, which other nodes announce too:
// the Service CIDRs, and the Service addresses as /32 and /128 (with
// externalTrafficPolicy Local, the other nodes with an endpoint). The
// daemon's announcer has stopped by then (its context ends with the
// daemon's), so no unmarked path of an address comes back.
func (sp *Speaker) drained() []netip.Prefix {
	announced, _ := sp.ServiceCIDRs()
	for _, a := range sp.ServiceAddresses() {
		announced = append(announced, netip.PrefixFrom(a, a.BitLen()))
	}
	return announced
}

// notSent are the peers that are still established and have not been
// sent cidrs with GRACEFUL_SHUTDOWN: their Adj-RIB-Out lacks one of them
// marked, or GoBGP has written no UPDATE to them since before.
func (sp *Speaker) notSent(ctx context.Context, peers []netip.Addr, cidrs []netip.Prefix, before map[netip.Addr]Updates) ([]netip.Addr, error) {
	return sp.unsentPeers(ctx, peers, before, func(peer netip.Addr) bool {
		marked := map[netip.Prefix]bool{}
		fams := sp.cfg.externalFamilies(peer)
		// Only the prefixes of the session's families reach the peer: an
		// IPv4 Service CIDR is not sent to a router at an IPv6 address.
		want := slices.DeleteFunc(slices.Clone(cidrs), func(c netip.Prefix) bool {
			return !slices.Contains(fams, unicastFamily(c))
		})
		for _, rf := range fams {
			_ = sp.s.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: peer.String(), Family: rf},
				func(nlri bgppkt.NLRI, paths []*apiutil.Path) {
					uc, ok := nlri.(*bgppkt.IPAddrPrefix)
					if !ok || !slices.Contains(cidrs, uc.Prefix) {
						return
					}
					for _, p := range paths {
						if !p.Withdrawal && hasCommunity(p.Attrs, GracefulShutdownCommunity) {
							marked[uc.Prefix] = true
						}
					}
				})
		}
		return len(marked) >= len(want)
	})
}

// unsentPeers are the peers of peers, still established, to which GoBGP
// has written no UPDATE since before, or whose Adj-RIB-Out lacks what
// sent looks for: those a stop still waits for (notSent, notSentTo).
func (sp *Speaker) unsentPeers(ctx context.Context, peers []netip.Addr, before map[netip.Addr]Updates, sent func(peer netip.Addr) bool) ([]netip.Addr, error) {
	counts, err := sp.UpdateCounts(ctx)
	if err != nil {
		return nil, err
	}
	up := map[netip.Addr]bool{}
	for _, s := range sp.snapshot() {
		up[s.Address] = s.Established
	}
	var out []netip.Addr
	for _, peer := range peers {
		if !up[peer] {
			continue // gone meanwhile: nothing more to tell it
		}
		if counts[peer].Sent <= before[peer].Sent || !sent(peer) {
			out = append(out, peer)
		}
	}
	return out, nil
}

func hasCommunity(attrs []bgppkt.PathAttributeInterface, c uint32) bool {
	for _, a := range attrs {
		if cs, ok := a.(*bgppkt.PathAttributeCommunities); ok && slices.Contains(cs.Value, c) {
			return true
		}
	}
	return false
}

// unicastFamily is the unicast family of a prefix.
func unicastFamily(p netip.Prefix) bgppkt.Family {
	if p.Addr().Is6() {
		return bgppkt.RF_IPv6_UC
	}
	return bgppkt.RF_IPv4_UC
}
