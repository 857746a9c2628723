package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// The rules of a ClusterNetworkPolicy compiled (cluster.go compiles the
// policy): their peers resolved to ranges and selections, their ports
// and named ports.

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
