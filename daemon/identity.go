package daemon

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/reefcni/reef/bgp"
	"github.com/reefcni/reef/blockproto"
)

// How a node is known in the block protocol (docs/design.md, "IPv6-only
// nodes"): by a 32-bit identity, its IPv4 address where it has one, else
// bgp.routerID. The store keeps it (store.ErrIdentityChanged).

// NodeUplink is how a node reaches the others and how they know it.
type NodeUplink struct {
	Uplink Uplink // Address invalid on an IPv6-only node
	// Uplink6 is set here only on an IPv6-only node (its one address);
	// others find theirs with nodeAddress6.
	Uplink6  Uplink6
	Identity netip.Addr // the node in the block protocol, its BGP router ID
	IPv6Only bool
}

// DetectNode chooses the uplink and the identity: the IPv4 uplink and its
// address; or, with bgp.routerID set, nodeAddress not and no usable IPv4
// address, the IPv6 uplink and the router ID. A router ID beside an IPv4
// address that is not it is refused: a node has one identity.
func DetectNode(cfg Config) (NodeUplink, error) {
	up, err := DetectUplink(cfg.Interface, cfg.NodeAddress)
	rid := cfg.BGP.RouterID
	switch {
	case err == nil && rid.IsValid() && rid != up.Address:
		return NodeUplink{}, cfg.KeyError("bgp.routerID", fmt.Sprintf("value %q is not this node's IPv4 address %s (%s): a node with an IPv4 address is known by it; leave bgp.routerID out (it is for nodes with no IPv4 address)",
			rid, up.Address, up.Reason))
	case err == nil:
		return NodeUplink{Uplink: up, Identity: up.Address}, nil
	case !rid.IsValid() || cfg.NodeAddress.IsValid():
		const v6only = " (a node with no IPv4 address, IPv6 only, needs bgp.routerID: a 32-bit ID written as an IPv4 address, unique in the cluster)"
		// The key the file gives that failed, with its line. A given
		// IPv4 nodeAddress the node lacks (file or --node-address) is
		// not an IPv6-only node: the hint is for a node without IPv4 (an
		// interface that has none may be one).
		switch {
		case cfg.NodeAddress.IsValid() && cfg.fileSets("nodeAddress"):
			return NodeUplink{}, cfg.KeyError("nodeAddress", err.Error())
		case cfg.NodeAddress.IsValid():
			return NodeUplink{}, fmt.Errorf("node address: %w", err)
		case cfg.Interface != "" && cfg.fileSets("interface"):
			return NodeUplink{}, cfg.KeyError("interface", err.Error()+v6only)
		}
		return NodeUplink{}, fmt.Errorf("node address: %w"+v6only, err)
	}
	if perr := ipv6OnlyProblems(cfg); perr != nil {
		return NodeUplink{}, perr
	}
	up, up6, err6 := DetectUplinkV6Only(cfg.Interface, cfg.NodeAddressV6)
	if err6 != nil {
		return NodeUplink{}, fmt.Errorf("IPv6-only node (no IPv4 address: %v): %w", err, err6)
	}
	return NodeUplink{Uplink: up, Uplink6: up6, Identity: rid, IPv6Only: true}, nil
}

// nodeAddrs is what names this node in bgp.voters, peers and the rest: its
// identity and its addresses.
type nodeAddrs []netip.Addr

func (n nodeAddrs) has(a netip.Addr) bool { return a.IsValid() && slices.Contains(n, a) }

// resolveVoters names the configured voters by identity (docs/design.md,
// "IPv6-only nodes"): an IPv4 address is the identity of the node that has
// it; an address of this node is this node; an IPv6 address is the
// identity of the record that announces it as its node's address
// (Record.Addr6), learned once and kept (known). A voter no record names
// yet, or that two identities claim, stays unresolved, with why; so does
// one whose identity is another voter's (a bgp.routerID given twice, or
// one that is another node's IPv4 address): two voters of one identity
// would each vote, and be counted, as one (blocks.pml, DUP_IDENTITY).
func resolveVoters(voters []netip.Addr, self netip.Addr, mine nodeAddrs, known map[netip.Addr]netip.Addr, recs []blockproto.Record) (ids []netip.Addr, unresolved []string, learned map[netip.Addr]netip.Addr) {
	learned = known
	changed := false
	byV6 := map[netip.Addr]netip.Addr{} // IPv6 voter -> its identity
	defer func() {
		voterOf := map[netip.Addr][]netip.Addr{} // identity -> the voters named by it
		for _, v := range voters {
			switch id, ok := byV6[v]; {
			case ok:
				voterOf[id] = append(voterOf[id], v)
			case mine.has(v):
				voterOf[self] = append(voterOf[self], v)
			case v.Is4():
				voterOf[v] = append(voterOf[v], v)
			}
		}
		for _, v := range voters {
			id, ok := byV6[v]
			if !ok || len(voterOf[id]) < 2 {
				continue
			}
			ids = slices.DeleteFunc(ids, func(a netip.Addr) bool { return a == id })
			unresolved = append(unresolved, fmt.Sprintf("%s (its identity %s is also that of voter %s: two voters of one identity; each node's bgp.routerID must be unique and no other node's IPv4 address)",
				v, id, addrsString(slices.DeleteFunc(slices.Clone(voterOf[id]), func(a netip.Addr) bool { return a == v }))))
		}
		ids = blockproto.Voters(ids)
	}()
	for _, v := range voters {
		switch {
		case mine.has(v):
			ids = append(ids, self)
			continue
		case v.Is4():
			// An IPv4 address is the identity of the node that has it, and
			// that node is not IPv6-only: a record of that identity that
			// says IPv6-only is a router ID given this value (by mistake,
			// or to name an IPv6-only voter, which must be named by its
			// IPv6 address), and its votes must not count as this voter's.
			if slices.ContainsFunc(recs, func(r blockproto.Record) bool { return r.Node.Addr == v && r.IPv6Only }) {
				unresolved = append(unresolved, fmt.Sprintf("%s (an IPv6-only node announces it as its bgp.routerID: name an IPv6-only voter by its IPv6 address, and give no node another node's IPv4 address as router ID)", v))
				continue
			}
			ids = append(ids, v)
			continue
		}
		var seen []netip.Addr
		for _, r := range recs {
			if r.Addr6 == v && r.Node.IsValid() && !slices.Contains(seen, r.Node.Addr) {
				seen = append(seen, r.Node.Addr)
			}
		}
		slices.SortFunc(seen, netip.Addr.Compare)
		k, ok := known[v]
		switch {
		case ok && slices.ContainsFunc(seen, func(a netip.Addr) bool { return a != k }):
			unresolved = append(unresolved, fmt.Sprintf("%s (known as %s, but %s announce it as their address: two nodes with one address, or a node whose bgp.routerID changed)", v, k, addrsString(seen)))
		case ok:
			ids = append(ids, k)
			byV6[v] = k
		case len(seen) == 0:
			unresolved = append(unresolved, fmt.Sprintf("%s (no record announces it yet: is it up, and in this node's BGP mesh?)", v))
		case len(seen) > 1:
			unresolved = append(unresolved, fmt.Sprintf("%s (%s all announce it as their address)", v, addrsString(seen)))
		default:
			if !changed {
				learned, changed = cloneMap(known), true
			}
			learned[v] = seen[0]
			ids = append(ids, seen[0])
			byV6[v] = seen[0]
		}
	}
	return ids, unresolved, learned
}

func addrsString(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

func cloneMap(m map[netip.Addr]netip.Addr) map[netip.Addr]netip.Addr {
	out := make(map[netip.Addr]netip.Addr, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// voterIdentity maps each resolved voter address to its identity, for
// the sessions (unreachable) that are keyed by address.
func voterIdentity(voters []netip.Addr, self netip.Addr, mine nodeAddrs, learned map[netip.Addr]netip.Addr) map[netip.Addr]netip.Addr {
	out := map[netip.Addr]netip.Addr{}
	for _, v := range voters {
		switch {
		case mine.has(v):
			out[v] = self
		case v.Is4():
			out[v] = v
		default:
			if id, ok := learned[v]; ok {
				out[v] = id
			}
		}
	}
	return out
}

// voterAddrs6 maps the identity of each other voter written as an IPv6
// address to that address (blockproto.Input.VoterAddr6): its votes count
// only from the node that announces it. byAddr is voterIdentity's.
func voterAddrs6(byAddr map[netip.Addr]netip.Addr, self netip.Addr) map[netip.Addr]netip.Addr {
	var out map[netip.Addr]netip.Addr
	for a, id := range byAddr {
		if a.Is6() && id != self {
			if out == nil {
				out = map[netip.Addr]netip.Addr{}
			}
			out[id] = a
		}
	}
	return out
}

// unreachableIDs is unreachable for voters written as addresses, keyed
// by identity as the protocol wants it.
func unreachableIDs(voters []netip.Addr, mine nodeAddrs, ids map[netip.Addr]netip.Addr, peers []bgp.PeerStatus) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for a := range unreachable(voters, mine, peers) {
		if id, ok := ids[a]; ok {
			out[id] = true
		}
	}
	return out
}

// checkPeerFamilies refuses neighbours of a family the node has no address
// of: a session's local address is the node's address of the peer's
// family (bgp.Config.local).
func checkPeerFamilies(cfg Config, up Uplink, up6 Uplink6) error {
	b := cfg.BGP
	lists := []struct {
		key   string
		addrs []netip.Addr
	}{{"bgp.peers", b.Peers}, {"bgp.routeReflectors", b.RouteReflectors}}
	for _, p := range b.PeerPrefixes {
		lists = append(lists, struct {
			key   string
			addrs []netip.Addr
		}{"bgp.peerPrefixes", []netip.Addr{p.Addr()}})
	}
	for _, l := range lists {
		for _, a := range l.addrs {
			switch {
			case a.Is4() && !up.Address.IsValid():
				return cfg.KeyError(l.key, fmt.Sprintf("has IPv4 address %s, but this node has no IPv4 address (an IPv6-only node): its sessions are IPv6; name the nodes by their IPv6 addresses", a))
			case a.Is6() && !up6.Address.IsValid():
				return cfg.KeyError(l.key, fmt.Sprintf("has IPv6 address %s, but this node has no IPv6 address for the session (nodeAddressV6, detected only beside an IPv6 pool)", a))
			}
		}
	}
	for i, p := range b.ExternalPeers {
		key, a := fmt.Sprintf("bgp.externalPeers[%d].address", i), p.Address
		switch {
		case a.Is4() && !up.Address.IsValid():
			return cfg.KeyError(key, fmt.Sprintf("value %q is an IPv4 address, but this node has no IPv4 address (an IPv6-only node): give the router's IPv6 address", a))
		case a.Is6() && !up6.Address.IsValid():
			return cfg.KeyError(key, fmt.Sprintf("value %q is an IPv6 address, but this node has no IPv6 address for the session (nodeAddressV6, detected only beside an IPv6 pool): give the router's IPv4 address", a))
		}
	}
	return nil
}
