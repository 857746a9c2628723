package policy

import (
	"fmt"
	"slices"
	"strings"

	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/nft"
)

// The cluster policies rendered into table inet reef: the tier chains,
// their sets, the input hook's chain, the rules (cluster.go compiles
// the policies).

// Chains of the cluster tiers, per direction.
func adminChain(d Direction) string    { return "adm-" + dirTag(d) }
func baselineChain(d Direction) string { return "bl-" + dirTag(d) }

func clusterSelSet(f family, c *ClusterCompiled) string {
	return limitName("csel" + f.suffix + "." + c.Name)
}
func clusterPeerSet(f family, c *ClusterCompiled, r ClusterRule) string {
	return limitName("cpeers" + f.suffix + "." + r.peers)
}
func clusterNamedSet(f family, c *ClusterCompiled, r ClusterRule, port int) string {
	return limitName(fmt.Sprintf("cnamed%s.%s.%d.%s", f.suffix, r.key, port, c.Name))
}

// ChainHostEgress is the input hook's chain: the cluster tiers' egress
// rules for a pod's traffic to its own node, which the forward hook does
// not see (node peers, networks that hold the node's addresses).
const ChainHostEgress = "host-eg"

// hasTier reports whether some cluster policy of tier t has rules in d.
func hasTier(st State, t cnp.Tier, d Direction) bool {
	return slices.ContainsFunc(st.Cluster, func(c *ClusterCompiled) bool { return c.Tier == t && len(c.Rules[d]) > 0 })
}

// renderCluster adds the cluster policies' sets, and with withChains
// their tier chains, to t; cache (nil: none) keeps their rules.
func renderCluster(st State, t *nft.Table, withChains bool, cache *Renderer) {
	all := func(int) bool { return true }
	t.Sets = append(t.Sets, clusterSets(st, all, func(string) bool { return true })...)
	if !withChains {
		return
	}
	for d := Ingress; d <= Egress; d++ {
		for _, tier := range []cnp.Tier{cnp.AdminTier, cnp.BaselineTier} {
			if !hasTier(st, tier, d) {
				continue
			}
			ch := nft.Chain{Name: adminChain(d)}
			if tier == cnp.BaselineTier {
				ch.Name = baselineChain(d)
			}
			for _, c := range st.Cluster {
				if c.Tier != tier {
					continue
				}
				for i, r := range c.Rules[d] {
					for _, f := range st.families() {
						ch.Rules = append(ch.Rules, cache.clusterRules(f, d, c, i, r)...)
					}
				}
			}
			if tier == cnp.BaselineTier {
				ch.Rules = append(ch.Rules, nft.Rule{Comment: "reef: no Baseline rule decided: allowed",
					Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}})
			}
			t.Chains = append(t.Chains, ch)
		}
	}
	if hasTier(st, cnp.AdminTier, Egress) || hasTier(st, cnp.BaselineTier, Egress) {
		t.Chains = append(t.Chains, hostEgress(st))
	}
}

// clusterSets renders the sets of the cluster policies: own(i), those of
// st.Cluster[i] (its selected pods, its rules' own peers, its named
// ports); shared(name), the shared peer set of the rules whose peers
// are that selection (ClusterRule.peers), once.
func clusterSets(st State, own func(int) bool, shared func(string) bool) []nft.Set {
	var sets []nft.Set
	emitted := map[string]bool{} // shared peer sets, rendered once
	for i, c := range st.Cluster {
		for _, f := range st.families() {
			if own(i) {
				sets = append(sets, addrSet(f, clusterSelSet(f, c), cut("reef: this node's pods ClusterNetworkPolicy "+c.Name+" selects"), false, c.Selected))
			}
			for d := Ingress; d <= Egress; d++ {
				for j, r := range c.Rules[d] {
					isShared := strings.HasPrefix(r.peers, "sel.")
					if r.AnyPeer || isShared && (emitted[clusterPeerSet(f, c, r)] || !shared(r.peers)) || !isShared && !own(i) {
						continue
					}
					sets = append(sets, clusterPeers(f, c, d, j, r))
					emitted[clusterPeerSet(f, c, r)] = isShared
				}
			}
			if own(i) {
				sets = append(sets, clusterNamedSets(f, c)...)
			}
		}
	}
	return sets
}

// clusterPeers is the peer set of rule i of a cluster policy in family f.
func clusterPeers(f family, c *ClusterCompiled, d Direction, i int, r ClusterRule) nft.Set {
	comment := fmt.Sprintf("reef: peers of ClusterNetworkPolicy %s %s[%d]", c.Name, d, i)
	if strings.HasPrefix(r.peers, "sel.") {
		comment = "reef: peers of ClusterNetworkPolicy rules: " + r.peersText
	}
	s := nft.Set{Name: clusterPeerSet(f, c, r), KeyType: f.addr.Name, KeyLen: f.addr.Bytes, Interval: true, Comment: cut(comment)}
	for _, rg := range r.Peers {
		if f.holds(rg.From) {
			s.Elems = append(s.Elems, nft.Elem{From: rg.From, To: rg.To})
		}
	}
	return s
}

// clusterNamedSets are the address . port sets of a cluster policy's
// named ports in family f.
func clusterNamedSets(f family, c *ClusterCompiled) []nft.Set {
	var sets []nft.Set
	for d := Ingress; d <= Egress; d++ {
		for i, r := range c.Rules[d] {
			for j, p := range r.Ports {
				if p.Name == "" {
					continue
				}
				s := nft.Set{Name: clusterNamedSet(f, c, r, j), KeyType: f.addrPort.Name, KeyLen: f.addrPort.Bytes, Concat: true,
					Comment: cut(fmt.Sprintf("reef: ClusterNetworkPolicy %s %s[%d] port %s: address . port", c.Name, d, i, p))}
				for _, ap := range p.Named {
					if f.holds(ap.Addr) {
						s.Elems = append(s.Elems, nft.Elem{From: ap.Addr, To: ap.Addr, Port: ap.Port})
					}
				}
				sets = append(sets, s)
			}
		}
	}
	return sets
}

// hostEgress is the input hook's chain for the cluster tiers' egress: as
// the forward hook's egress chain, but a pod some NetworkPolicy isolates
// for egress is allowed after the Admin tier (NetworkPolicy does not
// filter a pod's traffic with its own node), and IPv6 neighbour discovery
// with the node always is.
func hostEgress(st State) nft.Chain {
	ch := nft.Chain{Name: ChainHostEgress, Type: nftables.ChainTypeFilter, Hooked: true, Hook: *nftables.ChainHookInput,
		Priority: EgressPriority, Policy: nftables.ChainPolicyAccept}
	ch.Rules = append(ch.Rules, established(), nft.Rule{Comment: "reef: IPv6 neighbour discovery with the node",
		Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_ICMPV6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
			&expr.Cmp{Op: expr.CmpOpGte, Register: 1, Data: []byte{133}},
			&expr.Cmp{Op: expr.CmpOpLte, Register: 1, Data: []byte{137}},
			&expr.Verdict{Kind: expr.VerdictAccept},
		}})
	if hasTier(st, cnp.AdminTier, Egress) {
		ch.Rules = append(ch.Rules, nft.Rule{Comment: "reef: ClusterNetworkPolicy Admin tier; Pass returns here",
			Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: adminChain(Egress)}}})
	}
	if hasTier(st, cnp.BaselineTier, Egress) {
		for _, f := range st.families() {
			ch.Rules = append(ch.Rules, nft.Rule{Comment: "reef: pods no policy isolates for egress: ClusterNetworkPolicy Baseline tier",
				Exprs: append(match(f, f.offset(Egress, false), isolatedSet(f, Egress), true), &expr.Verdict{Kind: expr.VerdictGoto, Chain: baselineChain(Egress)})})
		}
	}
	return ch
}

// clusterRules is clusterRules, reusing the rules rendered before for
// the same policy, rule and spec, with their keys: the tier chains hold
// every cluster policy's rules, and a change of one compared all of them
// again, each encoded on both sides (nft.Rule.key). A nil Renderer
// renders.
func (cache *Renderer) clusterRules(f family, d Direction, c *ClusterCompiled, i int, r ClusterRule) []nft.Rule {
	if cache == nil {
		return clusterRules(f, d, c, i, r)
	}
	// What clusterRules reads: not the peers, not the named ports'
	// addresses (set elements).
	var b strings.Builder
	fmt.Fprintf(&b, "cluster %s %s %d %s %v %d %s %q %t %s %s", f.suffix, c.Name, c.Priority, c.Tier, d, i, r.Action, r.Name, r.AnyPeer, r.key, r.peers)
	for _, p := range r.Ports {
		fmt.Fprintf(&b, " %d %t %d %d %q", p.Proto, p.Any, p.From, p.To, p.Name)
	}
	key := b.String()
	cache.used[key] = true
	if hit, ok := cache.rules[key]; ok {
		return hit.rules
	}
	rules := clusterRules(f, d, c, i, r)
	for j := range rules {
		rules[j] = rules[j].WithKey(TableID.Family)
	}
	cache.rules[key] = cachedRules{rules: rules}
	return rules
}

// clusterRules renders rule i of a cluster policy in family f: one rule
// per port entry (one when it has none), each with the rule's verdict.
func clusterRules(f family, d Direction, c *ClusterCompiled, i int, r ClusterRule) []nft.Rule {
	ex := match(f, f.offset(d, false), clusterSelSet(f, c), false)
	if !r.AnyPeer {
		ex = append(ex,
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: f.offset(d, true), Len: f.addr.Bytes},
			&expr.Lookup{SourceRegister: 1, SetName: clusterPeerSet(f, c, r)})
	}
	v := &expr.Verdict{Kind: expr.VerdictAccept}
	switch {
	case r.Action == Deny:
		v = &expr.Verdict{Kind: expr.VerdictDrop}
	case r.Action == Pass && c.Tier == cnp.AdminTier:
		v = &expr.Verdict{Kind: expr.VerdictReturn} // on to NetworkPolicy, in the base chain
	}
	comment := fmt.Sprintf("reef: ClusterNetworkPolicy %s (%s %d) %s[%d] %s", c.Name, c.Tier, c.Priority, d, i, r.Action)
	if r.Name != "" {
		comment += " " + r.Name
	}
	if len(r.Ports) == 0 {
		return []nft.Rule{{Comment: cut(comment), Exprs: append(ex, &expr.Counter{}, v)}}
	}
	var rules []nft.Rule
	for j, p := range r.Ports {
		e := append(slices.Clone(ex), l4proto(p.Proto)...)
		switch {
		case p.Any:
		case p.Name != "":
			e = append(e, namedMatch(f, clusterNamedSet(f, c, r, j))...)
		default:
			e = append(e, dportIn(p.From, p.To)...)
		}
		e = append(e, &expr.Counter{}, v)
		rules = append(rules, nft.Rule{Comment: cut(fmt.Sprintf("%s port %s", comment, p)), Exprs: e})
	}
	return rules
}
