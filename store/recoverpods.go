package store

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// recoverPods rebuilds the pods' endpoints from the kernel's pod routes,
// one per veth with its address of each family, and marks their addresses
// used. A record of the damaged file whose veth and first address match
// is taken back whole; the addresses are the kernel's.
func recoverPods(in RecoverInput, sv salvaged, blockOf func(netip.Addr) (netip.Prefix, *Pool), used map[netip.Addr]bool) ([]Endpoint, []RecoveredEndpoint) {
	byVeth := map[string][]KernelPod{}
	var veths []string
	for _, kp := range in.Pods {
		if _, ok := byVeth[kp.Veth]; !ok {
			veths = append(veths, kp.Veth)
		}
		byVeth[kp.Veth] = append(byVeth[kp.Veth], kp)
	}
	slices.Sort(veths)
	var eps []Endpoint
	var reps []RecoveredEndpoint
	for _, veth := range veths {
		kps := byVeth[veth]
		slices.SortFunc(kps, func(a, b KernelPod) int { return a.IP.Compare(b.IP) }) // IPv4 first
		var as []Assignment
		var pms []PortMapping
		for _, kp := range kps {
			b, p := blockOf(kp.IP)
			if p == nil || used[kp.IP] || slices.ContainsFunc(as, func(a Assignment) bool { return a.IP.Is4() == kp.IP.Is4() }) {
				continue // not a pool address (not ours to keep), or a second of its family
			}
			used[kp.IP] = true
			as = append(as, Assignment{IP: kp.IP, Block: b, Pool: p.CIDR})
			pms = append(pms, kp.PortMappings...)
		}
		if len(as) == 0 {
			continue
		}
		// A hostPort on every address shows once per family.
		slices.SortFunc(pms, comparePortMappings)
		pms = slices.Compact(pms)
		ep, complete := sv.endpoints[as[0].IP]
		complete = complete && ep.HostVeth == veth && ep.State != EndpointReserved
		if !complete {
			ep = Endpoint{Handle: RecoveredHandlePrefix + veth, HostVeth: veth, MTU: kps[0].MTU, Created: in.Now.UTC().Round(0),
				PortMappings: pms, Bandwidth: kps[0].Bandwidth}
		}
		ep.IP, ep.Block, ep.Pool, ep.Second, ep.State = as[0].IP, as[0].Block, as[0].Pool, Assignment{}, EndpointReady
		if len(as) > 1 {
			ep.Second = as[1]
		}
		eps = append(eps, ep)
		reps = append(reps, RecoveredEndpoint{IPs: ep.Addrs(), Veth: veth, Handle: ep.Handle, Complete: complete,
			HostPorts: len(ep.PortMappings), Limited: ep.Bandwidth != nil})
	}
	return eps, reps
}

// keepRecorded gives each pod endpoint rebuilt from its record the
// recorded addresses the kernel showed no route to, when the endpoint has
// no address of that family, the address lies in a block kept in blocks
// and no other endpoint holds it; their blocks are those of the record.
func keepRecorded(in RecoverInput, sv salvaged, eps []Endpoint, blocks map[netip.Prefix]ownBlock, used map[netip.Addr]bool) {
	for i := range eps {
		ep := &eps[i]
		rec, ok := sv.endpoints[ep.IP]
		if ep.State == EndpointReserved || !ok || rec.Handle != ep.Handle {
			continue // reserved, or rebuilt from the kernel alone
		}
		for _, a := range rec.Assignments() {
			_, kept := blocks[a.Block]
			p := poolOf(in.Pools, a.Block)
			if used[a.IP] || !kept || p == nil || !a.Block.Contains(a.IP) ||
				slices.ContainsFunc(ep.Addrs(), func(b netip.Addr) bool { return b.Is4() == a.IP.Is4() }) {
				continue
			}
			used[a.IP] = true
			a.Pool = p.CIDR
			if ep.IP.Compare(a.IP) < 0 {
				ep.Second = a
			} else {
				ep.Second = Assignment{IP: ep.IP, Block: ep.Block, Pool: ep.Pool}
				ep.IP, ep.Block, ep.Pool = a.IP, a.Block, a.Pool
			}
		}
	}
}

// droppedAddrs lists the addresses of the damaged file's pod records that
// the rebuilt store (eps, whose addresses are used) does not hold, each
// with why, once per record (sv.endpoints has a record under each of its
// addresses).
func droppedAddrs(sv salvaged, eps []Endpoint, used map[netip.Addr]bool) []string {
	rebuilt := map[string]Endpoint{}
	for _, ep := range eps {
		rebuilt[ep.Handle] = ep
	}
	var out []string
	for ip, rec := range sv.endpoints {
		if rec.State == EndpointReserved || ip != rec.IP {
			continue
		}
		var free []netip.Addr
		for _, a := range rec.Addrs() {
			if !used[a] {
				free = append(free, a)
			}
		}
		ep, ok := rebuilt[rec.Handle]
		switch {
		case len(free) == 0:
		case !ok && len(free) == len(rec.Addrs()):
			out = append(out, fmt.Sprintf("%s (%s, veth %s): its pod is gone from the kernel", rec.AddrsString(), rec.Handle, rec.HostVeth))
		default:
			for _, a := range free {
				why := "no route to it in the kernel"
				switch i := slices.IndexFunc(ep.Addrs(), func(b netip.Addr) bool { return b.Is4() == a.Is4() }); {
				case !ok:
				case i >= 0:
					why += fmt.Sprintf(", which routes %s to the pod instead", ep.Addrs()[i])
				default:
					why += ", and it lies in no block this node keeps"
				}
				out = append(out, fmt.Sprintf("%s of %s (%s, veth %s): %s", a, rec.AddrsString(), rec.Handle, rec.HostVeth, why))
			}
		}
	}
	slices.Sort(out)
	return out
}

// comparePortMappings orders port mappings for a sort: by protocol, host
// port, host address and container port.
func comparePortMappings(a, b PortMapping) int {
	return cmp.Or(strings.Compare(a.Protocol, b.Protocol), cmp.Compare(a.HostPort, b.HostPort),
		a.HostIP.Compare(b.HostIP), cmp.Compare(a.ContainerPort, b.ContainerPort))
}
