package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
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
