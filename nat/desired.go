// Package nat is reef's tables other than NetworkPolicy's, put together
// for the daemon: the masquerade of pod traffic that leaves every pool
// (natOutgoing, table inet reef-nat, both families: package masq), the
// filters that keep the node from answering a pod's ARP or neighbour
// solicitation for the pod's own address (table arp reef: package
// arpfilter; table ip6 reef-ndp: package ndpfilter; each of one family by
// nature), and the pods' hostPorts (table inet reef-hostport, both
// families: package hostport), all on the nftables engine (package nft).
// reef keeps them in tables of its own, next to whatever else has tables
// on the node (kube-proxy, a firewall); it reads and writes only those.
//
// Desired computes the tables from the pools and the pods, purely; the
// engine diffs them against the kernel and applies the difference. The
// pools' sets and the pods' sets change by element, never by rewriting a
// rule. CNI ADD and DEL add and remove one pod's elements on their own
// (Kernel.AddPod, Kernel.DelPod).
package nat

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/reefcni/reef/nat/arpfilter"
	"github.com/reefcni/reef/nat/hostport"
	"github.com/reefcni/reef/nat/masq"
	"github.com/reefcni/reef/nat/ndpfilter"
	"github.com/reefcni/reef/nat/nft"
)

// Ours reports whether a table is one of package nat's: table inet
// reef-nat, table arp reef, table inet reef-hostport or table ip6
// reef-ndp, or one named nft.TableName in another family (table ip reef
// and table ip6 reef, the masquerade of earlier versions). NetworkPolicy's
// table inet reef has the name too, and is package policy's to write.
func Ours(id nft.TableID) bool {
	return id.Name == nft.TableName || id == masq.TableID || id == hostport.TableID || id == ndpfilter.TableID
}

// Pod is one pod as reef's tables see it: its node-side veth and
// addresses (one, or one of each family; the IPv4 one has an ARP-filter
// element) and its hostPorts.
type Pod struct {
	Veth  string
	IPs   []netip.Addr
	Ports []hostport.Mapping
}

// ip4 is the pod's IPv4 address, zero if it has none.
func (p Pod) ip4() netip.Addr {
	for _, ip := range p.IPs {
		if ip.Is4() {
			return ip
		}
	}
	return netip.Addr{}
}

// ip6 is the pod's IPv6 address, zero if it has none.
func (p Pod) ip6() netip.Addr {
	for _, ip := range p.IPs {
		if ip.Is6() {
			return ip
		}
	}
	return netip.Addr{}
}

func (p Pod) arp() arpfilter.Pod { return arpfilter.Pod{Veth: p.Veth, IP: p.ip4()} }

func (p Pod) ndp() ndpfilter.Pod { return ndpfilter.Pod{Veth: p.Veth, IP: p.ip6()} }

// check says why the pod can have no elements: a veth name an interface
// can have, and one or two addresses, at most one of each family, none
// IPv4-mapped.
func (p Pod) check() error {
	v4, v6 := 0, 0
	for _, ip := range p.IPs {
		switch {
		case ip.Is4():
			v4++
		case ip.Is6() && !ip.Is4In6():
			v6++
		default:
			v4 = 2 // refused below
		}
	}
	if p.Veth == "" || len(p.Veth) >= nft.IfNameSize || v4+v6 == 0 || v4 > 1 || v6 > 1 {
		return fmt.Errorf("pod %q . %v: want a veth name of 1-15 characters and an IPv4 or IPv6 address, or one of each", p.Veth, p.IPs)
	}
	return nil
}

func (p Pod) hostPorts() hostport.Pod { return hostport.Pod{IPs: p.IPs, Ports: p.Ports} }

// Desired returns reef's tables for the pools and pods: the masquerade
// table (table inet reef-nat, both families), the ARP filter (the pods'
// IPv4 addresses), table inet reef-hostport (both families) and, while a
// pool is IPv6, the NDP filter (the pods' IPv6 addresses). Pods without
// a veth are left out of the filters.
func Desired(pools []masq.Pool, pods []Pod) []nft.Table {
	arp := make([]arpfilter.Pod, 0, len(pods))
	var hp []hostport.Pod
	for _, p := range pods {
		arp = append(arp, p.arp())
		if len(p.Ports) > 0 {
			hp = append(hp, p.hostPorts())
		}
	}
	tables := []nft.Table{masq.Table(pools), arpfilter.Table(arp), hostport.Table(hp)}
	if hasIPv6(pools) {
		ndp := make([]ndpfilter.Pod, 0, len(pods))
		for _, p := range pods {
			ndp = append(ndp, p.ndp())
		}
		tables = append(tables, ndpfilter.Table(ndp))
	}
	return tables
}

// Retired returns the tables of package nat that the pools do not want
// and a pass deletes where it finds them, in the batch that brings the
// others in line: the masquerade tables of earlier versions (table ip
// reef, table ip6 reef: masq.OldTableIDs), replaced by table inet
// reef-nat, so that a node never has no masquerade table nor two; and the
// NDP filter once no pool is IPv6.
func Retired(pools []masq.Pool) []nft.TableID {
	out := slices.Clone(masq.OldTableIDs)
	if !hasIPv6(pools) {
		out = append(out, ndpfilter.TableID)
	}
	return out
}

// TableIDs are every table package nat writes, whatever the pools: what
// `reef diagnose` lists.
func TableIDs() []nft.TableID {
	return []nft.TableID{masq.TableID, arpfilter.TableID, hostport.TableID, ndpfilter.TableID}
}

func hasIPv6(pools []masq.Pool) bool {
	return slices.ContainsFunc(pools, func(p masq.Pool) bool { return p.CIDR.Addr().Is6() })
}

// IDs returns the IDs of tables.
func IDs(tables []nft.Table) []nft.TableID {
	ids := make([]nft.TableID, len(tables))
	for i, t := range tables {
		ids[i] = t.ID
	}
	return ids
}
