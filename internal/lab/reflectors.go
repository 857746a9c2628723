package lab

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	reefv1 "github.com/reefcni/reef/proto"
)

// Clusters through route reflectors (docs/bgp.md): the clients peer only
// with the reflectors, which are reef nodes (bgp.routeReflector: true) or
// BIRD (AddBird). Every node lists the same voters, reflectors included.

func addrList(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

// ClientBGP is the bgp: section (for NodeOptions.BGP) of a node that peers
// with the route reflectors rrs instead of the full mesh, with the lab's
// fast timers.
func ClientBGP(rrs, voters []netip.Addr) string {
	return fmt.Sprintf("  keepaliveTime: 1s\n  holdTime: 3s\n  routeReflectors: %s\n  voters: %s\n", addrList(rrs), addrList(voters))
}

// ReflectorBGP is the bgp: section of a reef route reflector: it peers
// with the other reflectors (others) and takes its clients in from the
// underlay.
func ReflectorBGP(others, voters []netip.Addr) string {
	return fmt.Sprintf("  keepaliveTime: 1s\n  holdTime: 3s\n  routeReflector: true\n  peers: %s\n  peerPrefixes: [%s]\n  voters: %s\n",
		addrList(others), Underlay, addrList(voters))
}

// WaitReflected waits until every running node has every BGP session it
// knows of established, at least min of them, and a route to every
// confirmed block of every other running node through that node's address
// (the route reflectors must not touch the next hop).
func WaitReflected(nodes []*Node, min int, timeout time.Duration) error {
	return waitRouted(nodes, timeout, func(owner *Node, st *reefv1.StatusReply) string {
		up := 0
		for _, p := range st.GetPeers() {
			if p.GetState() != "established" {
				return fmt.Sprintf("%s's BGP session to %s is %q", owner.Name, p.GetAddress(), p.GetState())
			}
			up++
		}
		if up < min {
			return fmt.Sprintf("%s has %d BGP sessions, want %d", owner.Name, up, min)
		}
		return ""
	})
}
