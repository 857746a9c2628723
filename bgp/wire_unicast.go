package bgp

import (
	"fmt"
	"net/netip"

	"github.com/reefcni/reef/blockproto"
)

// The confirmed blocks as unicast routes: to external peers (ToRs), next
// hop the owner, and their decoding where reef reads them back.

// UnicastBlock is a confirmed block as unicast carries it: the block,
// routed to its owner. An IPv4 block's next hop is the owner's address; an
// IPv6 block's, the owner's IPv6 address (Config.NodeAddressV6: only a
// node's own blocks go out in IPv6 unicast).
type UnicastBlock struct {
	Block netip.Prefix
	Owner blockproto.Node
}

// EncodeUnicast returns the large communities of a confirmed block's
// unicast path, of either family: the reef community and the owner's
// incarnation.
func EncodeUnicast(asn uint32, b UnicastBlock) []LargeCommunity {
	return []LargeCommunity{{asn, lcMarker, 0}, {asn, lcInc, b.Owner.Inc}}
}

// DecodeUnicast validates a learned IPv4 unicast path and turns it into a
// confirmed block. It accepts only an IPv4 block of a configured pool with
// exactly that pool's block length, the reef community of this AS, the
// owner's incarnation and nothing else of reef's, and a next hop (the
// owner) that is a unicast IPv4 address outside every pool. The error,
// wrapping ErrNotReef, says why a path was dropped. (IPv6 blocks go in
// IPv6 unicast to external peers only, which reef never learns from: see
// checkUnicast6.)
func DecodeUnicast(asn uint32, pools []Pool, prefix netip.Prefix, nextHop netip.Addr, lcs []LargeCommunity) (UnicastBlock, error) {
	b, err := decodeUnicast(asn, pools, prefix, nextHop, lcs)
	if err != nil {
		return UnicastBlock{}, fmt.Errorf("%s: %w", prefix, err)
	}
	return b, nil
}

func decodeUnicast(asn uint32, pools []Pool, prefix netip.Prefix, nextHop netip.Addr, lcs []LargeCommunity) (UnicastBlock, error) {
	if !prefix.Addr().Is4() {
		return UnicastBlock{}, fmt.Errorf("not IPv4: IPv4 unicast carries IPv4 blocks only: %w", ErrNotReef)
	}
	if err := checkBlock(pools, prefix); err != nil {
		return UnicastBlock{}, err
	}
	owner, err := unicastOwner(asn, lcs)
	if err != nil {
		return UnicastBlock{}, err
	}
	if err := checkNode(pools, nextHop, "next hop (owner)"); err != nil {
		return UnicastBlock{}, err
	}
	owner.Addr = nextHop
	return UnicastBlock{Block: prefix, Owner: owner}, nil
}

// unicastOwner reads the communities of a unicast path: the reef community
// of this AS and the owner's incarnation, nothing else of reef's.
func unicastOwner(asn uint32, lcs []LargeCommunity) (blockproto.Node, error) {
	var s lcSet
	if err := s.gather(asn, lcs, allowedUC); err != nil {
		return blockproto.Node{}, err
	}
	if err := s.require(asn, lcInc); err != nil {
		return blockproto.Node{}, err
	}
	return blockproto.Node{Inc: s.get(lcInc)}, nil
}

// checkUnicast6 is what a node checks of its own IPv6 unicast path before
// it announces it to its external peers, as DecodeUnicast is for IPv4: an
// IPv6 block of a configured pool, reef's communities, and a next hop (the
// node's IPv6 address) that is a global unicast IPv6 address outside every
// pool. No peer decodes these paths: the mesh does not carry IPv6 unicast,
// and nothing is imported from external peers.
func checkUnicast6(asn uint32, pools []Pool, prefix netip.Prefix, nextHop netip.Addr, lcs []LargeCommunity) error {
	if !prefix.Addr().Is6() {
		return fmt.Errorf("%s: not IPv6: IPv6 unicast carries IPv6 blocks only: %w", prefix, ErrNotReef)
	}
	if err := checkBlock(pools, prefix); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	if _, err := unicastOwner(asn, lcs); err != nil {
		return fmt.Errorf("%s: %w", prefix, err)
	}
	if err := checkAddr6(pools, nextHop, "next hop (node's IPv6 address)"); err != nil {
		return fmt.Errorf("%s: %w: %w", prefix, err, ErrNotReef)
	}
	return nil
}
