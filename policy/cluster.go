package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/reefcni/reef/nat/nft"
)

// This file is ClusterNetworkPolicy (sigs.k8s.io/network-policy-api,
// v1beta1): cluster-wide rules in two tiers around NetworkPolicy. A
// connection is decided, in each direction, by the first of
//
//	the Admin tier:    its policies by priority (then name), their rules
//	                   in the order written: Accept, Deny, or Pass (on to
//	                   NetworkPolicy)
//	NetworkPolicy:     for a pod some NetworkPolicy isolates in that
//	                   direction, as today: allowed or dropped
//	the Baseline tier: the same, for pods no NetworkPolicy isolates; Pass
//	                   is the default
//	the default:       allowed
//
// In table inet reef this is: the base chain jumps first to the Admin
// chain (adm-in, adm-eg), one flat list of rules whose Pass is `return`;
// the rule that accepted pods no NetworkPolicy isolates goes instead to
// the Baseline chain (bl-in, bl-eg), whose last rule accepts. With no
// ClusterNetworkPolicy the table is the same as without this file.

// Action is a cluster policy rule's verdict.
type Action string

const (
	Accept Action = "Accept"
	Deny   Action = "Deny"
	Pass   Action = "Pass"
)

// ClusterRule is one rule of a cluster policy in one direction: traffic
// with any of Peers (AnyPeer: every address) on any of Ports (none: every
// port and protocol) gets Action.
type ClusterRule struct {
	Name    string
	Action  Action
	AnyPeer bool
	Peers   []Range
	Ports   []Port
	// key names the rule: direction and index ("in.0").
	key string
	// peers names its peer set (cpeers4.<peers>): a selection's when its
	// peers are one namespace or pod selection ("sel.<hash>", shared by
	// every rule with the same), else the rule's own ("in.0.<policy>").
	peers string
	// peersText says what a shared peer set holds, for its comment.
	peersText string
}

// ClusterCompiled is one ClusterNetworkPolicy as enforced on this node.
type ClusterCompiled struct {
	Name     string
	Tier     cnp.Tier
	Priority int32
	// Selected are this node's pods of its subject, sorted.
	Selected []netip.Addr
	Rules    [2][]ClusterRule
	src      *cnp.ClusterNetworkPolicy
}

// NotEnforced is a part of a cluster policy reef does not enforce as
// written, and what it does instead; the rest of the policy is enforced.
type NotEnforced struct {
	Name   string // the ClusterNetworkPolicy
	Field  string // spec.egress[0].to[1].domainNames
	Reason string
}

func (n NotEnforced) String() string { return n.Name + ": " + n.Field + ": " + n.Reason }

// sortedCluster is the cluster policies in the order they are checked:
// Admin before Baseline, by priority, then (for equal priorities, where
// the API leaves the order to the implementation) by name.
func sortedCluster(in []*cnp.ClusterNetworkPolicy) []*cnp.ClusterNetworkPolicy {
	pols := slices.DeleteFunc(slices.Clone(in), func(p *cnp.ClusterNetworkPolicy) bool { return p == nil })
	slices.SortFunc(pols, func(a, b *cnp.ClusterNetworkPolicy) int {
		return cmp.Or(cmp.Compare(tierRank(a.Spec.Tier), tierRank(b.Spec.Tier)),
			cmp.Compare(a.Spec.Priority, b.Spec.Priority), strings.Compare(a.Name, b.Name))
	})
	return slices.CompactFunc(pols, func(a, b *cnp.ClusterNetworkPolicy) bool { return a.Name == b.Name })
}

func tierRank(t cnp.Tier) int {
	if t == cnp.AdminTier {
		return 0
	}
	return 1
}

// ClusterShape fingerprints the cluster policies as Shape does
// NetworkPolicies: the same ClusterShape, the same chains and sets. An
// object from the API is known by its UID and generation, not its
// resourceVersion: the status conditions the nodes write change that,
// and only the spec (which raises the generation) changes the table.
func ClusterShape(pols []*cnp.ClusterNetworkPolicy) string {
	keys := make([]string, 0, len(pols))
	for _, p := range pols {
		if p != nil {
			v := p.ResourceVersion
			if p.Generation != 0 {
				v = string(p.UID)
			}
			if v == "" {
				v = fmt.Sprintf("%v", p.Spec)
			}
			keys = append(keys, p.Name+"@"+v+"#"+strconv.FormatInt(p.Generation, 10))
		}
	}
	slices.Sort(keys)
	return strings.Join(keys, ",")
}

// compileCluster compiles one cluster policy; what it cannot enforce is
// returned, with the API's fail-closed reading applied: a rule reef
// cannot express matches nothing if it accepts, and everything (denied)
// if it denies or passes. An error is a policy that cannot be enforced
// at all (an unknown tier, a selector that does not parse): skipped.
func compileCluster(ix *index, p *cnp.ClusterNetworkPolicy) (*ClusterCompiled, []NotEnforced, error) {
	c := &ClusterCompiled{Name: p.Name, Tier: p.Spec.Tier, Priority: p.Spec.Priority, src: p}
	if p.Spec.Tier != cnp.AdminTier && p.Spec.Tier != cnp.BaselineTier {
		return nil, nil, fmt.Errorf("spec.tier: unknown tier %q", p.Spec.Tier)
	}
	subj, err := subjectPods(ix, p.Spec.Subject)
	if err != nil {
		return nil, nil, fmt.Errorf("spec.subject: %w", err)
	}
	// The subject's pods here: the destinations of an ingress rule, whose
	// containerPorts its named ports refer to.
	var local []podInfo
	for _, pi := range subj {
		if pi.local {
			local = append(local, pi)
			c.Selected = append(c.Selected, pi.addrs...)
		}
	}
	slices.SortFunc(c.Selected, netip.Addr.Compare)
	c.Selected = slices.Compact(c.Selected)
	var notes []NotEnforced
	for i, r := range p.Spec.Ingress {
		peers := make([]cnp.ClusterNetworkPolicyEgressPeer, len(r.From))
		for j, f := range r.From {
			peers[j] = cnp.ClusterNetworkPolicyEgressPeer{Namespaces: f.Namespaces, Pods: f.Pods}
		}
		where := "spec.ingress[" + strconv.Itoa(i) + "]"
		rule, n, err := compileClusterRule(ix, where, Ingress, r.Name, r.Action, peers, r.Protocols, local)
		if err != nil {
			return nil, nil, err
		}
		notes = append(notes, n...)
		if rule != nil {
			rule.key = "in." + strconv.Itoa(i)
			rule.peers = cmp.Or(rule.peers, rule.key+"."+p.Name)
			c.Rules[Ingress] = append(c.Rules[Ingress], *rule)
		}
	}
	for i, r := range p.Spec.Egress {
		where := "spec.egress[" + strconv.Itoa(i) + "]"
		rule, n, err := compileClusterRule(ix, where, Egress, r.Name, r.Action, r.To, r.Protocols, nil)
		if err != nil {
			return nil, nil, err
		}
		notes = append(notes, n...)
		if rule != nil {
			rule.key = "eg." + strconv.Itoa(i)
			rule.peers = cmp.Or(rule.peers, rule.key+"."+p.Name)
			c.Rules[Egress] = append(c.Rules[Egress], *rule)
		}
	}
	for i := range notes {
		notes[i].Name = p.Name
	}
	return c, notes, nil
}

// subjectPods are the pods of a subject, on any node.
func subjectPods(ix *index, s cnp.ClusterNetworkPolicySubject) ([]podInfo, error) {
	var sel selection
	var err error
	switch {
	case s.Namespaces != nil && s.Pods == nil:
		sel, err = ix.selection(s.Namespaces, nil)
	case s.Pods != nil && s.Namespaces == nil:
		sel, err = ix.selection(&s.Pods.NamespaceSelector, &s.Pods.PodSelector)
	default:
		return nil, fmt.Errorf("want exactly one of namespaces and pods")
	}
	return sel.pods, err
}

// compileClusterRule compiles one rule (ingress peers come as egress
// peers with only namespaces and pods). dst are the pods a named port is
// looked up on for an ingress rule (the subject's, here); for an egress
// rule they are the peers' pods. A nil rule matches nothing.
func compileClusterRule(ix *index, where string, d Direction, name string, action cnp.ClusterNetworkPolicyRuleAction,
	peers []cnp.ClusterNetworkPolicyEgressPeer, protos []cnp.ClusterNetworkPolicyProtocol, dst []podInfo) (*ClusterRule, []NotEnforced, error) {
	r := &ClusterRule{Name: name, Action: Action(action)}
	switch r.Action {
	case Accept, Deny, Pass:
	default:
		return nil, nil, fmt.Errorf("%s.action: unknown action %q", where, action)
	}
	named := slices.ContainsFunc(protos, func(p cnp.ClusterNetworkPolicyProtocol) bool { return p.DestinationNamedPort != "" })
	rp, err := clusterRulePeers(ix, where, d, peers, named && d == Egress)
	if err != nil {
		return nil, nil, err
	}
	if rp.unknown != "" {
		return r.failClosed(rp.unknown, rp.what)
	}
	r.setPeers(rp.ranges, rp.parts, rp.shared)
	if d == Egress {
		dst = rp.pods
	}
	return r.compilePorts(where, protos, dst, rp.nodeField)
}

// failClosed is the API's reading of what an implementation cannot
// match: an Accept matches nothing, a Deny or Pass denies everything.
// field is what is not enforced, what says what it is.
func (r *ClusterRule) failClosed(field, what string) (*ClusterRule, []NotEnforced, error) {
	if r.Action == Accept {
		return nil, []NotEnforced{{Field: field, Reason: what + " not enforced by reef: this Accept rule matches nothing"}}, nil
	}
	return &ClusterRule{Name: r.Name, Action: Deny, AnyPeer: true},
		[]NotEnforced{{Field: field, Reason: what + " not enforced by reef: this " + string(r.Action) + " rule denies all traffic (fail closed)"}}, nil
}

// rulePeers are a cluster rule's peers resolved: the ranges of its node
// and network peers; the merged ranges of its namespace and pod peers
// (parts), shared with every rule of the compile that names the same
// pods (index.selection): most rules have one, kept as it is, and shared
// is its selection; the peers' pods, when an egress rule's named ports
// look them up; the first node peer's field, for the note on named ports.
// unknown is the field of a peer reef cannot enforce (what says why): the
// rule fails closed.
type rulePeers struct {
	ranges        []Range
	parts         [][]Range
	shared        selection
	pods          []podInfo
	nodeField     string
	unknown, what string
}

// clusterRulePeers resolves a cluster rule's peers; withPods: collect the
// peers' pods (an egress rule with a named port). Field names are made
// only for what is reported: an ADD compiles every cluster policy whose
// peers the pod is among.
func clusterRulePeers(ix *index, where string, d Direction, peers []cnp.ClusterNetworkPolicyEgressPeer, withPods bool) (rulePeers, error) {
	var rp rulePeers
	field := func(j int) string {
		if d == Egress {
			return where + ".to[" + strconv.Itoa(j) + "]"
		}
		return where + ".from[" + strconv.Itoa(j) + "]"
	}
	for j, peer := range peers {
		switch {
		case peer.Nodes != nil:
			s, err := ix.selector(peer.Nodes)
			if err != nil {
				return rp, fmt.Errorf("%s.nodes: %w", field(j), err)
			}
			for _, n := range ix.nodes {
				if n != nil && s.Matches(labels.Set(n.Labels)) {
					for _, a := range NodeAddrs(n) {
						rp.ranges = append(rp.ranges, Range{a, a})
					}
				}
			}
			if rp.nodeField == "" {
				rp.nodeField = field(j) + ".nodes"
			}
		case len(peer.DomainNames) > 0:
			rp.unknown, rp.what = field(j)+".domainNames", "domain name peers are"
			return rp, nil
		case peer.Namespaces != nil || peer.Pods != nil:
			sel, err := peerSelection(ix, peer)
			if err != nil {
				return rp, fmt.Errorf("%s.%w", field(j), err)
			}
			rp.parts, rp.shared = append(rp.parts, sel.ranges), sel
			if withPods {
				rp.pods = append(rp.pods, sel.pods...)
			}
		case len(peer.Networks) > 0:
			rs, err := networkRanges(peer.Networks)
			if err != nil {
				return rp, fmt.Errorf("%s.%w", field(j), err)
			}
			rp.ranges = append(rp.ranges, rs...)
			if withPods {
				for _, pi := range ix.pods {
					if slices.ContainsFunc(pi.addrs, func(a netip.Addr) bool { return inRanges(rs, a) }) {
						rp.pods = append(rp.pods, pi)
					}
				}
			}
		default:
			rp.unknown, rp.what = field(j), "a peer with no field reef knows (a newer CRD?) is"
			return rp, nil
		}
	}
	return rp, nil
}

// peerSelection is what a namespaces or pods peer selects.
func peerSelection(ix *index, peer cnp.ClusterNetworkPolicyEgressPeer) (selection, error) {
	if peer.Namespaces != nil {
		sel, err := ix.selection(peer.Namespaces, nil)
		if err != nil {
			return sel, fmt.Errorf("namespaces: %w", err)
		}
		return sel, nil
	}
	sel, err := ix.selection(&peer.Pods.NamespaceSelector, &peer.Pods.PodSelector)
	if err != nil {
		return sel, fmt.Errorf("pods: %w", err)
	}
	return sel, nil
}

// networkRanges are the ranges of a networks peer's CIDRs.
func networkRanges(networks []cnp.CIDR) ([]Range, error) {
	var rs []Range
	for k, n := range networks {
		pfx, err := netip.ParsePrefix(string(n))
		if err != nil {
			return nil, fmt.Errorf("networks[%d]: %w", k, err)
		}
		br, err := blockRanges(&networkingv1.IPBlock{CIDR: pfx.Masked().String()})
		if err != nil {
			return nil, fmt.Errorf("networks[%d]: %w", k, err)
		}
		rs = append(rs, br...)
	}
	return rs, nil
}

// compilePorts sets the rule's ports from its protocols: named ports
// looked up on dst (with a note when the rule has node peers, nodeField,
// which named ports are not looked up on).
func (r *ClusterRule) compilePorts(where string, protos []cnp.ClusterNetworkPolicyProtocol, dst []podInfo, nodeField string) (*ClusterRule, []NotEnforced, error) {
	var notes []NotEnforced
	for j, pr := range protos {
		field := func() string { return where + ".protocols[" + strconv.Itoa(j) + "]" }
		var proto corev1.Protocol
		var dp *cnp.Port
		switch {
		case pr.DestinationNamedPort != "":
			r.Ports = append(r.Ports, clusterNamedPorts(dst, pr.DestinationNamedPort)...)
			if nodeField != "" {
				notes = append(notes, NotEnforced{Field: field() + ".destinationNamedPort",
					Reason: fmt.Sprintf("named port %q is looked up on pods only, not on the nodes of %s: this rule matches no traffic to those nodes on it", pr.DestinationNamedPort, nodeField)})
			}
			continue
		case pr.TCP != nil:
			proto, dp = corev1.ProtocolTCP, pr.TCP.DestinationPort
		case pr.UDP != nil:
			proto, dp = corev1.ProtocolUDP, pr.UDP.DestinationPort
		case pr.SCTP != nil:
			proto, dp = corev1.ProtocolSCTP, pr.SCTP.DestinationPort
		default:
			rule, more, err := r.failClosed(field(), "a protocol with no field reef knows is")
			return rule, append(notes, more...), err
		}
		np := networkingv1.NetworkPolicyPort{Protocol: &proto}
		switch {
		case dp == nil:
		case dp.Range != nil:
			from, end := intstr.FromInt32(dp.Range.Start), dp.Range.End
			np.Port, np.EndPort = &from, &end
		default:
			n := intstr.FromInt32(dp.Number)
			np.Port = &n
		}
		port, err := compilePort(np, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", field(), err)
		}
		r.Ports = append(r.Ports, port)
	}
	return r, notes, nil
}

// setPeers sets a rule's peers from the ranges of its network and node
// peers and the merged ranges of its selections (parts): a rule whose
// peers are one selection (shared) has that selection's ranges and set.
func (r *ClusterRule) setPeers(ranges []Range, parts [][]Range, shared selection) {
	if len(ranges) == 0 && len(parts) == 1 {
		r.Peers = parts[0] // merged already; never changed in place
		r.peers, r.peersText = "sel."+shared.name, shared.what
		return
	}
	for _, p := range parts {
		ranges = append(ranges, p...)
	}
	r.Peers = mergeRanges(ranges)
}

// clusterNamedPorts resolves a destinationNamedPort on pods: one Port per
// protocol, each with the pods' addresses and numbers of the name with
// that protocol (a cluster policy's named port has no protocol of its
// own; the containerPort's is meant). All three always: the rules depend
// on the spec only, and a pod changes set elements, never a rule.
func clusterNamedPorts(pods []podInfo, name string) []Port {
	var out []Port
	for _, proto := range []uint8{protoTCP, protoUDP, protoSCTP} {
		out = append(out, Port{Proto: proto, Name: name, Named: namedPorts(pods, name, proto)})
	}
	return out
}

// NodeAddrs are the addresses of a Node that node peers stand for: its
// status.addresses of type InternalIP and ExternalIP, of both families.
func NodeAddrs(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

func appendPodRanges(rs []Range, pods []podInfo) []Range {
	for _, pi := range pods {
		for _, a := range pi.addrs {
			rs = append(rs, Range{a, a})
		}
	}
	return rs
}

// compileClusters compiles the cluster policies into st.
func compileClusters(ix *index, pols []*cnp.ClusterNetworkPolicy, st *State) {
	for _, p := range sortedCluster(pols) {
		c, notes, err := compileCluster(ix, p)
		if err != nil {
			st.Skipped = append(st.Skipped, Skipped{Name: p.Name, Cluster: true, Reason: err.Error()})
			continue
		}
		st.Cluster = append(st.Cluster, c)
		st.NotEnforced = append(st.NotEnforced, notes...)
	}
}

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
					for _, f := range families {
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
		for _, f := range families {
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
		for _, f := range families {
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
