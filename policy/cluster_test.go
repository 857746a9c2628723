package policy

import (
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/reefcni/reef/internal/netnstest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

func clusterPolicy(name string, tier cnp.Tier, prio int32, subject cnp.ClusterNetworkPolicySubject) *cnp.ClusterNetworkPolicy {
	return &cnp.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: cnp.ClusterNetworkPolicySpec{Tier: tier, Priority: prio, Subject: subject}}
}

func nsSubject(kv ...string) cnp.ClusterNetworkPolicySubject {
	return cnp.ClusterNetworkPolicySubject{Namespaces: sel(kv...)}
}

func tcpProto(n int32) cnp.ClusterNetworkPolicyProtocol {
	return cnp.ClusterNetworkPolicyProtocol{TCP: &cnp.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnp.Port{Number: n}}}
}

func fromNS(kv ...string) []cnp.ClusterNetworkPolicyIngressPeer {
	return []cnp.ClusterNetworkPolicyIngressPeer{{Namespaces: sel(kv...)}}
}

// withNodes gives sampleInput two Nodes: n1 (a control plane, IPv4
// only) and n2 (a worker, dual-stack, with an ExternalIP and a hostname
// that node peers do not stand for).
func withNodes(in *Input) {
	node := func(name string, lbl []string, addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelMap(lbl)}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	in.Nodes = []*corev1.Node{
		node("n1", []string{"role", "control-plane"}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.10.1"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::1"}),
		node("n2", []string{"role", "worker"}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.168.10.2"},
			corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "fd00::2"}, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.2"},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n2"}, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: "10.9.9.9"}),
	}
}

// cRuleView is a compiled rule as the truth tables write it.
type cRuleView struct {
	Action Action
	Peers  string // "any", or the ranges
	Ports  string
}

func viewRules(rs []ClusterRule) []cRuleView {
	var out []cRuleView
	for _, r := range rs {
		v := cRuleView{Action: r.Action, Peers: "any"}
		if !r.AnyPeer {
			var ps []string
			for _, p := range r.Peers {
				ps = append(ps, p.From.String()+"-"+p.To.String())
			}
			v.Peers = strings.Join(ps, ",")
		}
		var ports []string
		for _, p := range r.Ports {
			s := p.String()
			if p.Name != "" {
				var at []string
				for _, ap := range p.Named {
					at = append(at, netip.AddrPortFrom(ap.Addr, ap.Port).String())
				}
				s += "[" + strings.Join(at, " ") + "]"
			}
			ports = append(ports, s)
		}
		v.Ports = strings.Join(ports, ",")
		out = append(out, v)
	}
	return out
}

// TestCompileClusterTruthTable: each row one ClusterNetworkPolicy over
// sampleInput (x/a 10.0.0.1 and x/b 10.0.0.2 local, y/a and y/b remote):
// what it selects here, its rules in each direction, and what of it is
// not enforced (and how it fails closed).
func TestCompileClusterTruthTable(t *testing.T) {
	for _, tc := range []struct {
		name     string
		input    func(in *Input)
		edit     func(p *cnp.ClusterNetworkPolicy)
		subject  cnp.ClusterNetworkPolicySubject
		selected string
		ingress  []cRuleView
		egress   []cRuleView
		notes    []string
		skipped  string
	}{{
		name:    "admin deny from namespace y on TCP 80",
		subject: nsSubject("ns", "x"),
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Deny", From: fromNS("ns", "y"), Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(80)}}}
		},
		selected: "10.0.0.1,10.0.0.2",
		ingress:  []cRuleView{{Deny, "10.0.1.1-10.0.1.2", "TCP/80"}},
	}, {
		name:    "pods subject: namespace AND pod selector",
		subject: cnp.ClusterNetworkPolicySubject{Pods: &cnp.NamespacedPod{NamespaceSelector: *sel("ns", "x"), PodSelector: *sel("pod", "b")}},
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Pass",
				To: []cnp.ClusterNetworkPolicyEgressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: *sel(), PodSelector: *sel("pod", "a")}}}}}
		},
		selected: "10.0.0.2",
		egress:   []cRuleView{{Pass, "10.0.0.1-10.0.0.1,10.0.1.1-10.0.1.1", ""}},
	}, {
		name:    "rules keep their written order; networks, ranges, UDP and any port",
		subject: nsSubject("ns", "x"),
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{
				{Action: "Accept", To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"192.0.2.0/24", "2001:db8::/64"}}},
					Protocols: []cnp.ClusterNetworkPolicyProtocol{{UDP: &cnp.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnp.Port{Range: &cnp.PortRange{Start: 5000, End: 5010}}}},
						{SCTP: &cnp.ClusterNetworkPolicyProtocolSCTP{}}}},
				{Action: "Deny", To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"0.0.0.0/0"}}}},
			}
		},
		selected: "10.0.0.1,10.0.0.2",
		egress: []cRuleView{{Accept, "192.0.2.0-192.0.2.255,2001:db8::-2001:db8::ffff:ffff:ffff:ffff", "UDP/5000-5010,SCTP"},
			{Deny, "0.0.0.0-255.255.255.255", ""}},
	}, {
		name:    "node peers: the selected Nodes' InternalIP and ExternalIP addresses, both families",
		subject: nsSubject("ns", "x"),
		input:   withNodes,
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{
				{Action: "Accept", To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role", "worker")}}, Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(10250)}},
				{Action: "Deny", To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: sel()}}},
			}
		},
		selected: "10.0.0.1,10.0.0.2",
		egress: []cRuleView{{Accept, "192.168.10.2-192.168.10.2,203.0.113.2-203.0.113.2,fd00::2-fd00::2", "TCP/10250"},
			{Deny, "192.168.10.1-192.168.10.2,203.0.113.2-203.0.113.2,fd00::1-fd00::2", ""}},
	}, {
		name:    "node peers selecting no node match nothing",
		subject: nsSubject("ns", "x"),
		input:   withNodes,
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Deny", To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role", "gpu")}}}}
		},
		selected: "10.0.0.1,10.0.0.2",
		egress:   []cRuleView{{Deny, "", ""}},
	}, {
		name:    "named port, ingress: looked up on the subject's pods here",
		subject: nsSubject("ns", "x"),
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Accept", From: fromNS("ns", "y"), Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "http"}}}}
		},
		selected: "10.0.0.1,10.0.0.2",
		ingress:  []cRuleView{{Accept, "10.0.1.1-10.0.1.2", "TCP/http[10.0.0.1:8080],UDP/http[],SCTP/http[]"}},
	}, {
		name:    "named port, egress: looked up on the peers' pods, one entry per protocol the name has",
		subject: nsSubject("ns", "x"),
		input: func(in *Input) {
			in.Pods[2] = pod("y", "a", "10.0.1.1", []string{"pod", "a"}, onNode("n2"), withPort("dns", corev1.ProtocolUDP, 53), withPort("dns", corev1.ProtocolTCP, 53))
			in.Pods[3] = pod("y", "b", "10.0.1.2", []string{"pod", "b"}, onNode("n2"), withPort("dns", corev1.ProtocolUDP, 5353))
		},
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{
				{Action: "Deny", To: []cnp.ClusterNetworkPolicyEgressPeer{{Pods: &cnp.NamespacedPod{NamespaceSelector: *sel("ns", "y"), PodSelector: *sel("pod", "b")}}},
					Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "dns"}}},
				{Action: "Accept", To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"10.0.1.0/24"}}},
					Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "dns"}, tcpProto(80)}},
			}
		},
		selected: "10.0.0.1,10.0.0.2",
		egress: []cRuleView{{Deny, "10.0.1.2-10.0.1.2", "TCP/dns[],UDP/dns[10.0.1.2:5353],SCTP/dns[]"},
			{Accept, "10.0.1.0-10.0.1.255", "TCP/dns[10.0.1.1:53],UDP/dns[10.0.1.1:53 10.0.1.2:5353],SCTP/dns[],TCP/80"}},
	}, {
		name:    "named port with node peers: not looked up on the nodes, said",
		subject: nsSubject("ns", "x"),
		input:   withNodes,
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Accept", To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role", "worker")}},
				Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "kubelet"}}}}
		},
		selected: "10.0.0.1,10.0.0.2",
		egress:   []cRuleView{{Accept, "192.168.10.2-192.168.10.2,203.0.113.2-203.0.113.2,fd00::2-fd00::2", "TCP/kubelet[],UDP/kubelet[],SCTP/kubelet[]"}},
		notes:    []string{`p: spec.egress[0].protocols[0].destinationNamedPort: named port "kubelet" is looked up on pods only, not on the nodes of spec.egress[0].to[0].nodes: this rule matches no traffic to those nodes on it`},
	}, {
		name:    "domain names in an Accept: matches nothing, said",
		subject: nsSubject("ns", "x"),
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Accept", To: []cnp.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnp.DomainName{"example.com"}}}}}
		},
		selected: "10.0.0.1,10.0.0.2",
		notes:    []string{"p: spec.egress[0].to[0].domainNames: domain name peers are not enforced by reef: this Accept rule matches nothing"},
	}, {
		name:    "named port of a subject with no pod here: matches nothing",
		subject: nsSubject("ns", "y"),
		edit: func(p *cnp.ClusterNetworkPolicy) {
			p.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{{Action: "Pass", From: fromNS(), Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "http"}}}}
		},
		selected: "", // y's pods are remote
		ingress:  []cRuleView{{Pass, "10.0.0.1-10.0.0.2,10.0.1.1-10.0.1.2", "TCP/http[],UDP/http[],SCTP/http[]"}},
	}, {
		name:    "an unknown tier skips the policy",
		subject: nsSubject(),
		edit:    func(p *cnp.ClusterNetworkPolicy) { p.Spec.Tier = "Developer" },
		skipped: `ClusterNetworkPolicy/p: spec.tier: unknown tier "Developer"`,
	}, {
		name:    "an empty subject skips the policy",
		subject: cnp.ClusterNetworkPolicySubject{},
		skipped: "ClusterNetworkPolicy/p: spec.subject: want exactly one of namespaces and pods",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			in := sampleInput()
			if tc.input != nil {
				tc.input(&in)
			}
			p := clusterPolicy("p", cnp.AdminTier, 10, tc.subject)
			if tc.edit != nil {
				tc.edit(p)
			}
			in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{p}
			st := Compile(in)
			if tc.skipped != "" {
				if len(st.Skipped) != 1 || st.Skipped[0].Key()+": "+st.Skipped[0].Reason != tc.skipped || len(st.Cluster) != 0 {
					t.Fatalf("skipped %+v, cluster %d; want %q", st.Skipped, len(st.Cluster), tc.skipped)
				}
				return
			}
			if len(st.Cluster) != 1 || len(st.Skipped) != 0 {
				t.Fatalf("cluster %d, skipped %+v", len(st.Cluster), st.Skipped)
			}
			c := st.Cluster[0]
			var selected []string
			for _, a := range c.Selected {
				selected = append(selected, a.String())
			}
			if got := strings.Join(selected, ","); got != tc.selected {
				t.Errorf("selected %q, want %q", got, tc.selected)
			}
			if d := cmp.Diff(tc.ingress, viewRules(c.Rules[Ingress])); d != "" {
				t.Errorf("ingress (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.egress, viewRules(c.Rules[Egress])); d != "" {
				t.Errorf("egress (-want +got):\n%s", d)
			}
			var notes []string
			for _, n := range st.NotEnforced {
				notes = append(notes, n.String())
			}
			if d := cmp.Diff(tc.notes, notes); d != "" {
				t.Errorf("not enforced (-want +got):\n%s", d)
			}
		})
	}
}

// TestClusterOrder: Admin before Baseline, by priority, then name.
func TestClusterOrder(t *testing.T) {
	in := sampleInput()
	in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{
		clusterPolicy("b-base", cnp.BaselineTier, 0, nsSubject()),
		clusterPolicy("z", cnp.AdminTier, 5, nsSubject()),
		clusterPolicy("a", cnp.AdminTier, 5, nsSubject()),
		clusterPolicy("first", cnp.AdminTier, 1, nsSubject()),
	}
	var got []string
	for _, c := range Compile(in).Cluster {
		got = append(got, c.Name)
	}
	if want := []string{"first", "a", "z", "b-base"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestNoClusterPolicyNoChange: without cluster policies the table is the
// one reef rendered before they existed: no tier chains, pods no
// NetworkPolicy isolates accepted in the base chain.
func TestNoClusterPolicyNoChange(t *testing.T) {
	tb := Table(Compile(sampleInput()))
	for _, c := range tb.Chains {
		if strings.HasPrefix(c.Name, "adm-") || strings.HasPrefix(c.Name, "bl-") {
			t.Errorf("chain %s without cluster policies", c.Name)
		}
	}
	for _, s := range tb.Sets {
		if strings.HasPrefix(s.Name, "csel") || strings.HasPrefix(s.Name, "cpeers") {
			t.Errorf("set %s without cluster policies", s.Name)
		}
	}
}

// TestClusterTableInKernel: the tiers as the kernel takes and lists them:
// the Admin jump before NetworkPolicy, Pass as return, the Baseline chain
// for pods no NetworkPolicy isolates, a named port's address . port set,
// node peers' addresses, a peer set shared by the rules with the same
// peers, the input hook's chain for egress to the node;
// and the table goes back to none of it (the base chains deleted before
// the chains they jump to).
func TestClusterTableInKernel(t *testing.T) {
	netns, k := testNetns(t)
	in := sampleInput()
	adm := clusterPolicy("deny-y", cnp.AdminTier, 10, nsSubject("ns", "x"))
	adm.Spec.Ingress = []cnp.ClusterNetworkPolicyIngressRule{
		{Action: "Pass", From: fromNS("ns", "y"), Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(8080)}},
		{Action: "Deny", From: fromNS("ns", "y")},
	}
	adm.Spec.Ingress = append(adm.Spec.Ingress, cnp.ClusterNetworkPolicyIngressRule{Action: "Accept", From: fromNS(), Protocols: []cnp.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "http"}}})
	adm.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Accept", To: []cnp.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role", "worker")}}, Protocols: []cnp.ClusterNetworkPolicyProtocol{tcpProto(10250)}}}
	withNodes(&in)
	base := clusterPolicy("base", cnp.BaselineTier, 10, nsSubject())
	base.Spec.Egress = []cnp.ClusterNetworkPolicyEgressRule{{Action: "Deny", To: []cnp.ClusterNetworkPolicyEgressPeer{{Networks: []cnp.CIDR{"198.51.100.0/24"}}}}}
	in.ClusterPolicies = []*cnp.ClusterNetworkPolicy{adm, base}
	converge(t, k, Table(Compile(in)))
	if _, err := exec.LookPath("nft"); err == nil {
		out := netnstest.Run(t, netns, "nft", "list", "table", "inet", "reef")
		for _, want := range []string{
			"jump adm-in",
			// Rules with the same peers share their set: in.0 and in.1
			// (namespaces ns=y), named by a hash of the selectors.
			"ip daddr @csel4.deny-y ip saddr @cpeers4.sel.a9f8da72c813bd8f tcp dport 8080 counter packets 0 bytes 0 return",
			"ip daddr @csel4.deny-y ip saddr @cpeers4.sel.a9f8da72c813bd8f counter packets 0 bytes 0 drop",
			`comment "reef: peers of ClusterNetworkPolicy rules: pods {} of namespaces {ns=y}"`,
			"ip saddr != @eg-isolated4 goto bl-eg",
			"ip daddr != @in-isolated4 accept",
			"ip saddr @csel4.base ip daddr @cpeers4.eg.0.base counter packets 0 bytes 0 drop",
			"ip daddr @csel4.deny-y ip saddr @cpeers4.sel.3e7ea713641f5037 ip daddr . tcp dport @cnamed4.in.2.0.deny-y counter packets 0 bytes 0 accept",
			"elements = { 10.0.0.1 . 8080 }",
			"ip saddr @csel4.deny-y ip daddr @cpeers4.eg.0.deny-y tcp dport 10250 counter packets 0 bytes 0 accept",
			"elements = { 192.168.10.2, 203.0.113.2 }",
			"elements = { fd00::2 }",
			"chain host-eg {\n\t\ttype filter hook input priority filter; policy accept;",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("nft list table inet reef lacks %q:\n%s", want, out)
			}
		}
	}
	// The cluster policies go: back to the table without them.
	in.ClusterPolicies = nil
	converge(t, k, Table(Compile(in)))
}

// TestClusterShapeIgnoresStatus: a cluster policy from the API keeps its
// shape when only its resourceVersion changes (a status condition
// written), and not when its generation or UID does.
func TestClusterShapeIgnoresStatus(t *testing.T) {
	p := clusterPolicy("p", cnp.AdminTier, 1, nsSubject())
	p.UID, p.Generation, p.ResourceVersion = "u", 2, "10"
	q := p.DeepCopy()
	q.ResourceVersion = "11"
	if ClusterShape([]*cnp.ClusterNetworkPolicy{p}) != ClusterShape([]*cnp.ClusterNetworkPolicy{q}) {
		t.Error("a status-only update changed the shape")
	}
	q.Generation = 3
	if ClusterShape([]*cnp.ClusterNetworkPolicy{p}) == ClusterShape([]*cnp.ClusterNetworkPolicy{q}) {
		t.Error("a new generation kept the shape")
	}
	q.Generation, q.UID = 2, "v"
	if ClusterShape([]*cnp.ClusterNetworkPolicy{p}) == ClusterShape([]*cnp.ClusterNetworkPolicy{q}) {
		t.Error("a recreated object kept the shape")
	}
}
