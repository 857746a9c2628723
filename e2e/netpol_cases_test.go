package e2e

// NetworkPolicy truth tables, in the manner of the upstream Kubernetes
// "Netpol" e2e suite (k8s.io/kubernetes test/e2e/network/netpol, read at
// v1.37.2): the cases, the model they run on, and the expected reachability
// of every pod pair. This file is data and pure logic only; the driver that
// runs it against reef lives elsewhere.
//
// # The model
//
// Three namespaces, symbolically x, y and z, each holding pods a, b and c:
// nine pods, always in the order x/a x/b x/c y/a ... z/c (npAllPods). The
// Kubernetes names are npEnv.NS(sym) = Prefix+sym. The objects to create are
// npEnv.Namespace(sym) (labels ns=<sym> and kubernetes.io/metadata.name=
// <Prefix+sym>, which the API server would set anyway) and npEnv.Pod(pod)
// (label pod=<a|b|c>; one container whose ports are TCP, UDP and SCTP 80 and
// 81, named serve-80-tcp, serve-81-tcp, serve-80-udp, serve-81-udp,
// serve-80-sctp, serve-81-sctp as upstream). Every pod serves all six:
// `reef-lab serve-ports --tcp 80,81 --udp 80,81 --sctp 80,81` in its netns.
// Put pods on both nodes so that pairs cross nodes as well as stay on one
// (npNodeIndex does it by alternation).
//
// # A case
//
// npCases() returns every case. A case is named by its upstream ginkgo
// Context and It() title (npCase.ID(); unique), and npCase.Source says where
// a case not taken from upstream v1.37.2 comes from. npCase.Steps(env) builds
// the steps once the pods have their IPs (env.PodIP; the ipBlock cases use
// them). Each step is:
//
//   - Do: actions, applied in order to the API objects (npAction): create,
//     update or delete a NetworkPolicy (the object carries its namespace and
//     name), or merge labels into a namespace or a pod (SetLabels added or
//     overwritten, DelLabels removed).
//   - Expect: the protocol/ports to probe (npProbe, e.g. TCP/80) with, for
//     each, the expected reachability of all 81 (from, to) pairs. Only these
//     are probed; a case's probes are exactly the ones upstream probes, plus
//     a few marked "not probed upstream" where the case says something about
//     another port or protocol.
//
// # Running a case (the driver's side of the contract)
//
//  1. Before a case: no NetworkPolicy in the three namespaces, and every
//     namespace and pod with exactly its model labels (npEnv.Namespace,
//     npEnv.Pod): a case's label actions are not undone by the case. Before
//     the first, probe every protocol/port with no policy and expect all
//     allowed, as upstream waits for its servers: a failure then is the
//     lab's, not a policy's.
//  2. For each step: apply Do in order; then for each Expect, probe the whole
//     matrix: from each pod's netns, probe.Target(ip of to) for the nine pods
//     ("tcp:10.244.1.5:80", the format of `reef-lab probe`). Record each
//     result with npObserved.Observe and compare with Reach.Mismatches.
//     Policy changes take time to reach the nodes: re-probe until there is no
//     mismatch or a deadline passes, as upstream polls each probe for 10 s
//     (upstream: 3 s probe timeout, 1 s poll interval).
//  3. On failure print Reach.Table(probe, observed): rows are "from",
//     columns "to", '.' allowed, 'X' denied, '*' after an observation that
//     differs from the expectation.
//  4. Pairs from a pod to itself are ignored, as upstream ignores them
//     (ignoreLoopback: CNIs disagree). In reef a pod reaching its own IP
//     never leaves its netns, so no policy can apply.
//  5. SCTP: if `reef-lab probe` reports "sctp: the kernel has no SCTP", skip
//     that expectation (upstream puts SCTP behind [Feature:SCTPConnectivity]).
//  6. An update replaces the policy of that namespace and name with the new
//     object (NetworkPolicy allows an unconditional Update; or Get and copy
//     the resourceVersion).
//
// # Deliberate differences from upstream
//
//   - Upstream v1.37 creates only the pods each test names ("x/a", "y/b") and
//     writes its expectations for that subset; here every case runs on all
//     nine pods and the expectations are written for all of them (that is
//     what upstream's older full-model tables did, e.g. z/a in "Multiple
//     PodSelectors and NamespaceSelectors").
//   - Upstream probes each pod's Service ClusterIP; kube-proxy rewrites it to
//     the pod IP before any policy sees it. Reef's lab has no Services: the
//     probes go to pod IPs, which is what the policies see in both cases.
//   - No DNS: upstream v1.37 probes by IP and no longer adds the "UDP 53"
//     egress rule its older egress policies carried; neither do these.
//   - Upstream selects namespaces by kubernetes.io/metadata.name throughout;
//     two cases here ("only from a different namespace, based on
//     NamespaceSelector" and "NamespaceSelector with MatchExpressions") use
//     the model's own ns label, as upstream did before the default label,
//     so that both a custom and the default label are exercised.
//   - Upstream has no truth-table case for endPort (only the API validation
//     test); the "port range" cases follow kubernetes/kubernetes#100291,
//     which proposed them, on ports 80/81. The MatchExpressions Exists and
//     DoesNotExist cases and a few others are reef's (Source says so).
//
// TestNetpolCasesWellFormed checks that every case builds, that its policies
// pass the API server's validation rules, and that every hand-written
// expectation agrees with npState, an independent reference evaluation of
// the NetworkPolicy semantics. These tests need neither root nor a lab, but
// e2e's TestMain skips the whole package without root; as root,
// `REEF_BIN_DIR=bin go test -run TestNetpol ./e2e` runs them without
// building the daemons.

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	netv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The model.

const (
	npKeyNS  = "ns"  // the model's own namespace label: ns=<x|y|z>
	npKeyPod = "pod" // pod=<a|b|c>, as upstream
	npN      = 9     // pods in the model
)

var (
	npNamespaces = []string{"x", "y", "z"}
	npPodNames   = []string{"a", "b", "c"}
	npPorts      = []int32{80, 81}
	npProtocols  = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	npAllPods    = func() []npPod {
		var ps []npPod
		for _, ns := range npNamespaces {
			for _, n := range npPodNames {
				ps = append(ps, npPod{ns, n})
			}
		}
		return ps
	}()
)

// npPod is a pod of the model, by symbolic namespace and name: {x a} is x/a.
type npPod struct{ NS, Name string }

func (p npPod) String() string { return p.NS + "/" + p.Name }

// index is the pod's place in npAllPods, or -1.
func (p npPod) index() int {
	ns, n := slices.Index(npNamespaces, p.NS), slices.Index(npPodNames, p.Name)
	if ns < 0 || n < 0 {
		return -1
	}
	return ns*len(npPodNames) + n
}

// npp parses "x/a"; cases only name model pods, so a typo panics when the
// case is built (and TestNetpolCasesWellFormed fails).
func npp(s string) npPod {
	ns, n, _ := strings.Cut(s, "/")
	p := npPod{ns, n}
	if p.index() < 0 {
		panic("not a pod of the netpol model: " + s)
	}
	return p
}

// npNodeIndex places the model's pods on nodes by alternation, so that with
// two nodes x/a and x/b are on different nodes and x/a and x/c on one.
func npNodeIndex(p npPod, nodes int) int { return p.index() % nodes }

// npPortName is upstream's container port name: serve-80-tcp.
func npPortName(proto corev1.Protocol, port int32) string {
	return fmt.Sprintf("serve-%d-%s", port, strings.ToLower(string(proto)))
}

// npContainerPorts are the ports every pod of the model declares.
func npContainerPorts() []corev1.ContainerPort {
	var cps []corev1.ContainerPort
	for _, proto := range npProtocols {
		for _, port := range npPorts {
			cps = append(cps, corev1.ContainerPort{Name: npPortName(proto, port), ContainerPort: port, Protocol: proto})
		}
	}
	return cps
}

// npFamily is an IP family the model's pods have addresses of.
type npFamily int

const (
	npIPv4 npFamily = 4
	npIPv6 npFamily = 6
)

func (f npFamily) String() string { return fmt.Sprintf("IPv%d", int(f)) }

func npFamilyOf(a netip.Addr) npFamily {
	if a.Is4() {
		return npIPv4
	}
	return npIPv6
}

// holds: a is of family f.
func (f npFamily) holds(a netip.Addr) bool { return a.Is4() == (f == npIPv4) }

// npEnv is what a case is built against: the real namespace names and the
// pods' addresses.
type npEnv struct {
	Prefix string // namespace x is Prefix+"x"
	// Families are the pods' families, IPv4 first: IPv4-only, IPv6-only
	// or dual-stack pods. Every expectation holds in each: a case's
	// ipBlocks come one per family (ipPeers).
	Families []npFamily
	// PodIPs are a pod's addresses, one of each family; set once the
	// pods are wired.
	PodIPs func(npPod) []netip.Addr
}

// PodIP is p's address of family f (invalid if p has none).
func (e npEnv) PodIP(p npPod, f npFamily) netip.Addr {
	for _, a := range e.PodIPs(p) {
		if f.holds(a) {
			return a
		}
	}
	return netip.Addr{}
}

// NS is the Kubernetes name of symbolic namespace sym.
func (e npEnv) NS(sym string) string { return e.Prefix + sym }

// nsLabels are the labels namespace sym has before any case changes them.
func (e npEnv) nsLabels(sym string) map[string]string {
	return map[string]string{npKeyNS: sym, corev1.LabelMetadataName: e.NS(sym)}
}

// npPodLabels are the labels a pod has before any case changes them.
func npPodLabels(p npPod) map[string]string { return map[string]string{npKeyPod: p.Name} }

// Namespace is the namespace object to create for sym.
func (e npEnv) Namespace(sym string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.NS(sym), Labels: e.nsLabels(sym)}}
}

// Pod is the pod object to create for p. It runs no container: the lab
// wires a netns and runs reef-lab serve-ports in it; the container is there
// for its named ports, which policies refer to.
func (e npEnv) Pod(p npPod) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: e.NS(p.NS), Labels: npPodLabels(p)},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name:    "serve-ports",
				Image:   "reef-lab",
				Command: []string{"reef-lab", "serve-ports", "--tcp", "80,81", "--udp", "80,81", "--sctp", "80,81"},
				Ports:   npContainerPorts(),
			}},
		},
	}
}

// npProbe is one protocol and port the matrix is probed on.
type npProbe struct {
	Protocol corev1.Protocol
	Port     int32
}

var (
	npTCP80  = npProbe{corev1.ProtocolTCP, 80}
	npTCP81  = npProbe{corev1.ProtocolTCP, 81}
	npUDP80  = npProbe{corev1.ProtocolUDP, 80}
	npUDP81  = npProbe{corev1.ProtocolUDP, 81}
	npSCTP80 = npProbe{corev1.ProtocolSCTP, 80}
	npSCTP81 = npProbe{corev1.ProtocolSCTP, 81}
)

func (p npProbe) String() string { return fmt.Sprintf("%s/%d", p.Protocol, p.Port) }

// Target is the `reef-lab probe` argument that probes ip: tcp:10.244.1.5:80,
// tcp:[fd00:10:248::5]:80.
func (p npProbe) Target(ip netip.Addr) string {
	return strings.ToLower(string(p.Protocol)) + ":" + netip.AddrPortFrom(ip, uint16(p.Port)).String()
}

// Reachability.

// npPeer matches pods by namespace and name, an empty field matching all,
// as upstream's Peer: npPeer{} is every pod, npPeer{NS: "x"} namespace x.
type npPeer struct{ NS, Pod string }

func (p npPeer) matches(q npPod) bool {
	return (p.NS == "" || p.NS == q.NS) && (p.Pod == "" || p.Pod == q.Name)
}

// reachability is the expected verdict, allowed or denied, of every (from,
// to) pair of the model for one protocol and port.
type reachability struct {
	allowed [npN][npN]bool // [from][to]
}

// newReachability expects every pair to be allowed (or denied).
func newReachability(allowed bool) *reachability {
	r := &reachability{}
	r.ExpectPeer(npPeer{}, npPeer{}, allowed)
	return r
}

// Expect sets one pair.
func (r *reachability) Expect(from, to npPod, allowed bool) {
	r.allowed[from.index()][to.index()] = allowed
}

// ExpectAllIngress sets every pair into to.
func (r *reachability) ExpectAllIngress(to npPod, allowed bool) {
	r.ExpectPeer(npPeer{}, npPeer{to.NS, to.Name}, allowed)
}

// ExpectAllEgress sets every pair out of from.
func (r *reachability) ExpectAllEgress(from npPod, allowed bool) {
	r.ExpectPeer(npPeer{from.NS, from.Name}, npPeer{}, allowed)
}

// ExpectPeer sets every pair whose ends match from and to.
func (r *reachability) ExpectPeer(from, to npPeer, allowed bool) {
	for i, f := range npAllPods {
		for j, t := range npAllPods {
			if from.matches(f) && to.matches(t) {
				r.allowed[i][j] = allowed
			}
		}
	}
}

// Allowed is the expected verdict for from -> to.
func (r *reachability) Allowed(from, to npPod) bool { return r.allowed[from.index()][to.index()] }

// npObserved holds the probes' verdicts as they come in.
type npObserved struct {
	seen, allowed [npN][npN]bool
}

// Observe records one probe.
func (o *npObserved) Observe(from, to npPod, allowed bool) {
	i, j := from.index(), to.index()
	o.seen[i][j], o.allowed[i][j] = true, allowed
}

// npPair is a (from, to) pair of the model.
type npPair struct{ From, To npPod }

func (p npPair) String() string { return p.From.String() + " -> " + p.To.String() }

// Mismatches are the pairs whose observation differs from the expectation
// or is missing, pairs from a pod to itself left out (see the contract).
func (r *reachability) Mismatches(o *npObserved) []npPair {
	var wrong []npPair
	for i, f := range npAllPods {
		for j, t := range npAllPods {
			if i != j && (!o.seen[i][j] || o.allowed[i][j] != r.allowed[i][j]) {
				wrong = append(wrong, npPair{f, t})
			}
		}
	}
	return wrong
}

// Table shows the expectation and the observation as upstream's truth
// tables: rows are the "from" pods, columns the "to" pods, '.' allowed, 'X'
// denied, '?' not observed; in the observed table a '*' follows a verdict
// that differs from the expectation, a '~' one that differs on a pod's
// pair with itself (ignored).
func (r *reachability) Table(p npProbe, o *npObserved) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d wrong\n", p, len(r.Mismatches(o)))
	b.WriteString("expected:\n")
	r.write(&b, func(i, j int) string { return npMark(r.allowed[i][j]) })
	b.WriteString("observed:\n")
	r.write(&b, func(i, j int) string {
		switch {
		case !o.seen[i][j]:
			return "?"
		case o.allowed[i][j] == r.allowed[i][j]:
			return npMark(o.allowed[i][j])
		case i == j:
			return npMark(o.allowed[i][j]) + "~"
		}
		return npMark(o.allowed[i][j]) + "*"
	})
	return b.String()
}

func (r *reachability) write(b *strings.Builder, cell func(i, j int) string) {
	line := func(head string, cells func(j int) string) {
		l := fmt.Sprintf("%-4s", head)
		for j := range npAllPods {
			l += fmt.Sprintf(" %-4s", cells(j))
		}
		b.WriteString(strings.TrimRight(l, " ") + "\n")
	}
	line("-", func(j int) string { return npAllPods[j].String() })
	for i, f := range npAllPods {
		line(f.String(), func(j int) string { return cell(i, j) })
	}
}

func npMark(allowed bool) string {
	if allowed {
		return "."
	}
	return "X"
}

// Cases.

// npCase is one upstream It(): its steps, built against an environment.
type npCase struct {
	Context string // upstream ginkgo.Context
	Name    string // upstream It() title
	Source  string // empty: upstream v1.37.2 network_policy.go; else its origin
	Steps   func(e npEnv) []npStep
}

// ID names the case uniquely, as ginkgo joins Context and It().
func (c npCase) ID() string { return c.Context + " " + c.Name }

// npStep is applied, then probed.
type npStep struct {
	Do     []npAction
	Expect []npExpectation
}

// npExpectation is a probe and what it should find.
type npExpectation struct {
	Probe npProbe
	Reach *reachability
}

// npActionKind is what an action does to the API objects.
type npActionKind int

const (
	npCreatePolicy   npActionKind = iota // create Policy
	npUpdatePolicy                       // replace the policy of Policy's namespace and name
	npDeletePolicy                       // delete the policy of Policy's namespace and name
	npLabelNamespace                     // merge labels into namespace NS
	npLabelPod                           // merge labels into pod Pod
)

func (k npActionKind) String() string {
	return [...]string{"create policy", "update policy", "delete policy", "label namespace", "label pod"}[k]
}

// npAction is one change to the API objects; the driver applies it.
type npAction struct {
	Kind   npActionKind
	Policy *netv1.NetworkPolicy // policy actions; delete uses its namespace and name only

	NS        string            // npLabelNamespace: symbolic namespace
	Pod       npPod             // npLabelPod
	SetLabels map[string]string // label actions: added or overwritten
	DelLabels []string          // label actions: removed
}

func (a npAction) String() string {
	switch a.Kind {
	case npLabelNamespace:
		return fmt.Sprintf("%s %s %v -%v", a.Kind, a.NS, a.SetLabels, a.DelLabels)
	case npLabelPod:
		return fmt.Sprintf("%s %s %v -%v", a.Kind, a.Pod, a.SetLabels, a.DelLabels)
	}
	return fmt.Sprintf("%s %s/%s", a.Kind, a.Policy.Namespace, a.Policy.Name)
}

func npCreate(p *netv1.NetworkPolicy) npAction { return npAction{Kind: npCreatePolicy, Policy: p} }
func npUpdate(p *netv1.NetworkPolicy) npAction { return npAction{Kind: npUpdatePolicy, Policy: p} }

func (e npEnv) npDelete(ns, name string) npAction {
	return npAction{Kind: npDeletePolicy, Policy: &netv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS(ns), Name: name}}}
}

func npRelabelNS(ns string, set map[string]string) npAction {
	return npAction{Kind: npLabelNamespace, NS: ns, SetLabels: set}
}

func npRelabelPod(p npPod, set map[string]string) npAction {
	return npAction{Kind: npLabelPod, Pod: p, SetLabels: set}
}

// Policy builders, after upstream's GenNetworkPolicyWithNameAndPodSelector
// and its SetSpec* options.

type npPolicyOpt func(*netv1.NetworkPolicySpec)

// policy is the NetworkPolicy name in namespace ns (symbolic) selecting
// podSelector.
func (e npEnv) policy(ns, name string, podSelector metav1.LabelSelector, opts ...npPolicyOpt) *netv1.NetworkPolicy {
	p := &netv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS(ns), Name: name}, Spec: netv1.NetworkPolicySpec{PodSelector: podSelector}}
	for _, o := range opts {
		o(&p.Spec)
	}
	return p
}

// npIngress adds ingress rules, and Ingress to the policy types the first
// time, as upstream's SetSpecIngressRules: npIngress() alone denies all.
func npIngress(rules ...netv1.NetworkPolicyIngressRule) npPolicyOpt {
	return func(s *netv1.NetworkPolicySpec) {
		if s.Ingress == nil {
			s.Ingress = []netv1.NetworkPolicyIngressRule{}
			s.PolicyTypes = append(s.PolicyTypes, netv1.PolicyTypeIngress)
		}
		s.Ingress = append(s.Ingress, rules...)
	}
}

// npEgress is ingress for egress (upstream's SetSpecEgressRules): a policy
// built with egress only is an egress policy only.
func npEgress(rules ...netv1.NetworkPolicyEgressRule) npPolicyOpt {
	return func(s *netv1.NetworkPolicySpec) {
		if s.Egress == nil {
			s.Egress = []netv1.NetworkPolicyEgressRule{}
			s.PolicyTypes = append(s.PolicyTypes, netv1.PolicyTypeEgress)
		}
		s.Egress = append(s.Egress, rules...)
	}
}

// npPolicyTypes overrides the policy types.
func npPolicyTypes(ts ...netv1.PolicyType) npPolicyOpt {
	return func(s *netv1.NetworkPolicySpec) { s.PolicyTypes = ts }
}

// npSelectAll is the empty selector: every pod of the policy's namespace.
var npSelectAll = metav1.LabelSelector{}

// npSelectPod selects pods by the model's pod label.
func npSelectPod(name string) metav1.LabelSelector {
	return metav1.LabelSelector{MatchLabels: map[string]string{npKeyPod: name}}
}

// npMatchLabels is a selector of key, value pairs; no pairs is the empty
// selector written as upstream writes it (MatchLabels: map[string]string{}).
func npMatchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// npMatchExpr is a selector of one requirement.
func npMatchExpr(key string, op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

// nsName selects namespace sym by kubernetes.io/metadata.name.
func (e npEnv) nsName(sym string) *metav1.LabelSelector {
	return npMatchLabels(corev1.LabelMetadataName, e.NS(sym))
}

func npPodPeer(s *metav1.LabelSelector) netv1.NetworkPolicyPeer {
	return netv1.NetworkPolicyPeer{PodSelector: s}
}
func npNSPeer(s *metav1.LabelSelector) netv1.NetworkPolicyPeer {
	return netv1.NetworkPolicyPeer{NamespaceSelector: s}
}

// npNSPodPeer is one peer with both selectors: pods matching pod in
// namespaces matching ns (AND).
func npNSPodPeer(ns, pod *metav1.LabelSelector) netv1.NetworkPolicyPeer {
	return netv1.NetworkPolicyPeer{NamespaceSelector: ns, PodSelector: pod}
}

func npIPPeer(cidr string, except ...string) netv1.NetworkPolicyPeer {
	return netv1.NetworkPolicyPeer{IPBlock: &netv1.IPBlock{CIDR: cidr, Except: except}}
}

// npBlock derives an ipBlock, its CIDR and excepts, from a pod's address.
type npBlock func(ip netip.Addr) (cidr string, except []string)

// npHostBlock is the address alone: ip/32 or ip/128.
func npHostBlock(ip netip.Addr) (string, []string) { return npHostCIDR(ip), nil }

// npLargeBlockExcept is the /4 holding the address, except the address.
func npLargeBlockExcept(ip netip.Addr) (string, []string) {
	return npLargeCIDR(ip), []string{npHostCIDR(ip)}
}

// ipPeers is block made from p's address as ipBlock peers, one per family
// of the pods. An ipBlock holds addresses of one family; a case written
// with p's IPv4 address has the same block made from p's IPv6 address as
// its IPv6 counterpart, so that its expectations hold in both families.
func (e npEnv) ipPeers(p npPod, block npBlock) []netv1.NetworkPolicyPeer {
	var peers []netv1.NetworkPolicyPeer
	for _, f := range e.Families {
		cidr, except := block(e.PodIP(p, f))
		peers = append(peers, npIPPeer(cidr, except...))
	}
	return peers
}

func npFrom(peers ...netv1.NetworkPolicyPeer) netv1.NetworkPolicyIngressRule {
	return netv1.NetworkPolicyIngressRule{From: peers}
}

func npTo(peers ...netv1.NetworkPolicyPeer) netv1.NetworkPolicyEgressRule {
	return netv1.NetworkPolicyEgressRule{To: peers}
}

func npProto(p corev1.Protocol) *corev1.Protocol { return &p }

// npPort is a numeric port; proto nil leaves the protocol to its default, TCP.
func npPort(proto *corev1.Protocol, n int32) netv1.NetworkPolicyPort {
	p := intstr.FromInt32(n)
	return netv1.NetworkPolicyPort{Protocol: proto, Port: &p}
}

// npPortRange is port..end inclusive.
func npPortRange(proto *corev1.Protocol, n, end int32) netv1.NetworkPolicyPort {
	p := npPort(proto, n)
	p.EndPort = &end
	return p
}

// npNamedPort refers to a container port of the destination pod by name.
func npNamedPort(proto *corev1.Protocol, name string) netv1.NetworkPolicyPort {
	p := intstr.FromString(name)
	return netv1.NetworkPolicyPort{Protocol: proto, Port: &p}
}

// npHostCIDR is ip/32 (or /128).
func npHostCIDR(ip netip.Addr) string { return netip.PrefixFrom(ip, ip.BitLen()).String() }

// npLargeCIDR is the /4 holding ip, as upstream's makeLargeCIDRForIP: a block
// that holds every pod when the pool lies within one /4 (10.244.0.0/16 lies
// in 0.0.0.0/4, fd00:10:248::/56 in f000::/4).
func npLargeCIDR(ip netip.Addr) string { return netip.PrefixFrom(ip, 4).Masked().String() }

const (
	npCtx      = "NetworkPolicy between server and client"
	npCtxUDP   = "NetworkPolicy between server and client using UDP"
	npCtxSCTP  = "NetworkPolicy between server and client using SCTP"
	npCtxRange = "NetworkPolicy between server and client using port range"
	npCtxReef  = "NetworkPolicy between server and client (reef)"

	npSrcRangePR = "kubernetes/kubernetes#100291 (proposed, not merged), ports 111-116 moved to 80-81"
	npSrcReef    = "reef: not in upstream"
)

// npCases are all the cases, in upstream's order.
func npCases() []npCase {
	var all []npCase
	for _, group := range []struct {
		context string
		cases   []npCase
	}{
		{npCtx, npCasesTCP()},
		{npCtxUDP, npCasesProtocol(corev1.ProtocolUDP)},
		{npCtxSCTP, npCasesProtocol(corev1.ProtocolSCTP)},
		{npCtxRange, npCasesPortRange()},
		{npCtxReef, npCasesReef()},
	} {
		for _, c := range group.cases {
			c.Context = group.context
			all = append(all, c)
		}
	}
	return all
}

// npOneStep is the shape of most cases: create the policies, then probe.
func npOneStep(policies []*netv1.NetworkPolicy, expect ...npExpectation) []npStep {
	var do []npAction
	for _, p := range policies {
		do = append(do, npCreate(p))
	}
	return []npStep{{Do: do, Expect: expect}}
}

func npPolicies(ps ...*netv1.NetworkPolicy) []*netv1.NetworkPolicy { return ps }

// npCasesTCP are upstream's "NetworkPolicy between server and client".
func npCasesTCP() []npCase {
	tcp, udp, sctp := npProto(corev1.ProtocolTCP), npProto(corev1.ProtocolUDP), npProto(corev1.ProtocolSCTP)
	xa := npp("x/a")
	return []npCase{
		{Name: "should support a 'default-deny-ingress' policy", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			return npOneStep(npPolicies(e.policy("x", "deny-ingress", npSelectAll, npIngress())), npExpectation{npTCP80, r})
		}},
		{Name: "should support a 'default-deny-all' policy", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{}, false)
			return npOneStep(npPolicies(e.policy("x", "deny-all", npSelectAll, npIngress(), npEgress())), npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy to allow traffic from pods within server namespace based on PodSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			r.Expect(npp("x/b"), xa, true)
			return npOneStep(npPolicies(e.policy("x", "x-a-allows-x-b", npSelectPod("a"), npIngress(npFrom(npPodPeer(npMatchLabels(npKeyPod, "b")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy to allow ingress traffic for a target", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			r.ExpectAllIngress(xa, true)
			return npOneStep(npPolicies(
				e.policy("x", "deny-all", npSelectAll, npIngress()),
				e.policy("x", "allow-all-to-a", npSelectPod("a"), npIngress(npFrom(npNSPodPeer(&metav1.LabelSelector{}, &metav1.LabelSelector{}))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy to allow ingress traffic from pods in all namespaces", Steps: func(e npEnv) []npStep {
			return npOneStep(npPolicies(e.policy("x", "allow-from-another-ns", npSelectPod("a"), npIngress(npFrom(npNSPeer(npMatchLabels()))))),
				npExpectation{npTCP80, newReachability(true)})
		}},
		{Name: "should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{"x", "a"}, false)
			r.ExpectPeer(npPeer{NS: "z"}, npPeer{"x", "a"}, false)
			// The model's ns label, not kubernetes.io/metadata.name (see the
			// file comment).
			return npOneStep(npPolicies(e.policy("x", "allow-client-a-via-ns-selector", npSelectPod("a"), npIngress(npFrom(npNSPeer(npMatchLabels(npKeyNS, "y")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy based on PodSelector with MatchExpressions", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			r.Expect(npp("x/b"), xa, true)
			return npOneStep(npPolicies(e.policy("x", "x-a-allows-x-b", npSelectPod("a"), npIngress(npFrom(npPodPeer(npMatchExpr(npKeyPod, metav1.LabelSelectorOpIn, "b")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy based on NamespaceSelector with MatchExpressions", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{"x", "a"}, false)
			r.ExpectPeer(npPeer{NS: "z"}, npPeer{"x", "a"}, false)
			return npOneStep(npPolicies(e.policy("x", "allow-ns-y-match-selector", npSelectPod("a"), npIngress(npFrom(npNSPeer(npMatchExpr(npKeyNS, metav1.LabelSelectorOpIn, "y")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy based on PodSelector or NamespaceSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.Expect(xa, xa, false)
			r.Expect(npp("x/c"), xa, false)
			return npOneStep(npPolicies(e.policy("x", "allow-ns-y-match-selector", npSelectPod("a"), npIngress(npFrom(
				npNSPeer(npMatchExpr(corev1.LabelMetadataName, metav1.LabelSelectorOpNotIn, e.NS("x"))),
				npPodPeer(npMatchLabels(npKeyPod, "b")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy based on PodSelector and NamespaceSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			r.Expect(npp("y/b"), xa, true)
			r.Expect(npp("z/b"), xa, true)
			return npOneStep(npPolicies(e.policy("x", "allow-ns-y-podselector-and-nsselector", npSelectPod("a"), npIngress(npFrom(npNSPodPeer(
				npMatchExpr(corev1.LabelMetadataName, metav1.LabelSelectorOpNotIn, e.NS("x")),
				npMatchLabels(npKeyPod, "b")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy based on Multiple PodSelectors and NamespaceSelectors", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{"x", "a"}, false)
			r.Expect(npp("y/a"), xa, false)
			r.Expect(npp("z/a"), xa, false) // upstream v1.37 has no z/a in this test; its full-model tables had
			return npOneStep(npPolicies(e.policy("x", "allow-ns-y-z-pod-b-c", npSelectPod("a"), npIngress(npFrom(npNSPodPeer(
				npMatchExpr(corev1.LabelMetadataName, metav1.LabelSelectorOpNotIn, e.NS("x")),
				npMatchExpr(npKeyPod, metav1.LabelSelectorOpIn, "b", "c")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy based on any PodSelectors", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			r.Expect(npp("x/b"), xa, true)
			r.Expect(npp("x/c"), xa, true)
			return npOneStep(npPolicies(e.policy("x", "allow-ns-x-pod-b-c", npSelectPod("a"), npIngress(npFrom(
				npPodPeer(npMatchLabels(npKeyPod, "b")), npPodPeer(npMatchLabels(npKeyPod, "c")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			r.Expect(npp("y/a"), xa, true)
			return npOneStep(npPolicies(e.policy("x", "allow-ns-y-pod-a-via-namespace-pod-selector", npSelectPod("a"),
				npIngress(npFrom(npNSPodPeer(e.nsName("y"), npMatchLabels(npKeyPod, "a")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy based on Ports", Steps: func(e npEnv) []npStep {
			r81 := newReachability(true)
			r81.ExpectPeer(npPeer{NS: "x"}, npPeer{"x", "a"}, false)
			r81.ExpectPeer(npPeer{NS: "y"}, npPeer{"x", "a"}, true)
			r81.ExpectPeer(npPeer{NS: "z"}, npPeer{"x", "a"}, false)
			r80 := newReachability(true) // not probed upstream
			r80.ExpectAllIngress(xa, false)
			rule := npFrom(npNSPeer(e.nsName("y")))
			rule.Ports = []netv1.NetworkPolicyPort{npPort(tcp, 81)}
			return npOneStep(npPolicies(e.policy("x", "allow-client-a-via-ns-selector", npSelectPod("a"), npIngress(rule))),
				npExpectation{npTCP81, r81}, npExpectation{npTCP80, r80})
		}},
		{Name: "should enforce multiple, stacked policies with overlapping podSelectors", Steps: func(e npEnv) []npStep {
			allow := newReachability(true)
			allow.ExpectPeer(npPeer{NS: "x"}, npPeer{"x", "a"}, false)
			allow.ExpectPeer(npPeer{NS: "y"}, npPeer{"x", "a"}, true)
			allow.ExpectPeer(npPeer{NS: "z"}, npPeer{"x", "a"}, false)
			deny := newReachability(true)
			deny.ExpectAllIngress(xa, false)
			rule81, rule80 := npFrom(npNSPeer(e.nsName("y"))), npFrom(npNSPeer(e.nsName("y")))
			rule81.Ports = []netv1.NetworkPolicyPort{npPort(tcp, 81)}
			rule80.Ports = []netv1.NetworkPolicyPort{npPort(tcp, 80)}
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-client-a-via-ns-selector", npSelectPod("a"), npIngress(rule81)))},
					Expect: []npExpectation{{npTCP81, allow}, {npTCP80, deny}}},
				{Do: []npAction{npCreate(e.policy("x", "allow-client-a-via-ns-selector-80", npSelectPod("a"), npIngress(rule80)))},
					Expect: []npExpectation{{npTCP80, allow}, {npTCP81, allow}}},
			}
		}},
		{Name: "should support allow-all policy", Steps: func(e npEnv) []npStep {
			return npOneStep(npPolicies(e.policy("x", "allow-all", *npMatchLabels(), npIngress(netv1.NetworkPolicyIngressRule{}))),
				npExpectation{npTCP80, newReachability(true)}, npExpectation{npTCP81, newReachability(true)})
		}},
		{Name: "should allow ingress access on one named port", Steps: func(e npEnv) []npStep {
			r80 := newReachability(true)
			r80.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			rUDP := newReachability(true) // not probed upstream: the name is a TCP port's
			rUDP.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			return npOneStep(npPolicies(e.policy("x", "allow-all", *npMatchLabels(), npIngress(netv1.NetworkPolicyIngressRule{
				Ports: []netv1.NetworkPolicyPort{npNamedPort(nil, "serve-81-tcp")}}))),
				npExpectation{npTCP81, newReachability(true)}, npExpectation{npTCP80, r80}, npExpectation{npUDP81, rUDP})
		}},
		{Name: "should allow ingress access from namespace on one named port", Steps: func(e npEnv) []npStep {
			r80 := newReachability(true)
			r80.ExpectPeer(npPeer{NS: "x"}, npPeer{"x", "a"}, false)
			r80.ExpectPeer(npPeer{NS: "z"}, npPeer{"x", "a"}, false)
			r81 := newReachability(true)
			r81.ExpectAllIngress(xa, false)
			rule := npFrom(npNSPeer(e.nsName("y")))
			rule.Ports = []netv1.NetworkPolicyPort{npNamedPort(tcp, "serve-80-tcp")}
			return npOneStep(npPolicies(e.policy("x", "allow-client-a-via-ns-selector-80", npSelectPod("a"), npIngress(rule))),
				npExpectation{npTCP80, r80}, npExpectation{npTCP81, r81})
		}},
		{Name: "should allow egress access on one named port", Steps: func(e npEnv) []npStep {
			// The name is looked up in the destination pod: egress named
			// ports need the policy engine to know other pods' ports.
			r81 := newReachability(true)
			r81.ExpectPeer(npPeer{NS: "x"}, npPeer{}, false)
			return npOneStep(npPolicies(e.policy("x", "allow-egress", *npMatchLabels(), npEgress(netv1.NetworkPolicyEgressRule{
				Ports: []netv1.NetworkPolicyPort{npNamedPort(nil, "serve-80-tcp")}}))),
				npExpectation{npTCP80, newReachability(true)}, npExpectation{npTCP81, r81})
		}},
		{Name: "should not allow all ports if it cannot limit to the requested port", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			return npOneStep(npPolicies(e.policy("x", "allow-ingress-on-nonexistent-port", npSelectPod("a"), npIngress(netv1.NetworkPolicyIngressRule{
				Ports: []netv1.NetworkPolicyPort{npNamedPort(tcp, "no-such-port")}}))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce updated policy", Steps: func(e npEnv) []npStep {
			deny := newReachability(true)
			deny.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			allowAll := e.policy("x", "allow-all-mutate-to-deny-all", *npMatchLabels(), npIngress(netv1.NetworkPolicyIngressRule{}))
			denyAll := e.policy("x", "allow-all-mutate-to-deny-all", *npMatchLabels(), npIngress())
			return []npStep{
				{Do: []npAction{npCreate(allowAll)}, Expect: []npExpectation{{npTCP81, newReachability(true)}}},
				{Do: []npAction{npUpdate(denyAll)}, Expect: []npExpectation{{npTCP81, deny}}},
			}
		}},
		{Name: "should allow ingress access from updated namespace", Steps: func(e npEnv) []npStep {
			before := newReachability(true)
			before.ExpectAllIngress(xa, false)
			after := newReachability(true)
			after.ExpectAllIngress(xa, false)
			after.ExpectPeer(npPeer{NS: "y"}, npPeer{}, true)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-client-a-via-ns-selector", npSelectPod("a"), npIngress(npFrom(npNSPeer(npMatchLabels("ns2", "updated"))))))},
					Expect: []npExpectation{{npTCP80, before}}},
				{Do: []npAction{npRelabelNS("y", map[string]string{"ns2": "updated"})}, Expect: []npExpectation{{npTCP80, after}}},
			}
		}},
		{Name: "should allow ingress access from updated pod", Steps: func(e npEnv) []npStep {
			before := newReachability(true)
			before.ExpectAllIngress(xa, false)
			after := newReachability(true)
			after.ExpectAllIngress(xa, false)
			after.Expect(npp("x/b"), xa, true)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-client-a-via-pod-selector", npSelectPod("a"), npIngress(npFrom(npPodPeer(npMatchLabels(npKeyPod, "b", "pod2", "updated"))))))},
					Expect: []npExpectation{{npTCP80, before}}},
				{Do: []npAction{npRelabelPod(npp("x/b"), map[string]string{"pod2": "updated"})}, Expect: []npExpectation{{npTCP80, after}}},
			}
		}},
		{Name: "should deny ingress from pods on other namespaces", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "y"}, npPeer{NS: "x"}, false)
			r.ExpectPeer(npPeer{NS: "z"}, npPeer{NS: "x"}, false)
			return npOneStep(npPolicies(e.policy("x", "deny-empty-policy", npSelectAll, npIngress(npFrom(npPodPeer(npMatchLabels()))))), npExpectation{npTCP80, r})
		}},
		{Name: "should deny ingress access to updated pod", Steps: func(e npEnv) []npStep {
			isolated := newReachability(true)
			isolated.ExpectAllIngress(xa, false)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "deny-ingress-via-label-selector", *npMatchLabels("target", "isolated"), npIngress()))},
					Expect: []npExpectation{{npTCP80, newReachability(true)}}},
				{Do: []npAction{npRelabelPod(xa, map[string]string{"target": "isolated"})}, Expect: []npExpectation{{npTCP80, isolated}}},
			}
		}},
		{Name: "should deny egress from pods based on PodSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllEgress(xa, false)
			return npOneStep(npPolicies(e.policy("x", "deny-egress-pod-a", npSelectPod("a"), npEgress())), npExpectation{npTCP80, r})
		}},
		{Name: "should deny egress from all pods in a namespace", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{}, false)
			return npOneStep(npPolicies(e.policy("x", "deny-egress-ns-x", npSelectAll, npEgress())), npExpectation{npTCP80, r})
		}},
		{Name: "should work with Ingress, Egress specified together", Steps: func(e npEnv) []npStep {
			r80 := newReachability(true)
			r80.ExpectAllIngress(xa, false)
			r80.Expect(npp("x/b"), xa, true)
			r81 := newReachability(true)
			r81.ExpectAllIngress(xa, false)
			r81.ExpectAllEgress(xa, false)
			r81.Expect(npp("x/b"), xa, true)
			return npOneStep(npPolicies(e.policy("x", "allow-client-a-via-pod-selector", npSelectPod("a"),
				npIngress(npFrom(npPodPeer(npMatchLabels(npKeyPod, "b")))),
				npEgress(netv1.NetworkPolicyEgressRule{Ports: []netv1.NetworkPolicyPort{npPort(nil, 80)}}),
				npPolicyTypes(netv1.PolicyTypeEgress, netv1.PolicyTypeIngress))),
				npExpectation{npTCP80, r80}, npExpectation{npTCP81, r81})
		}},
		{Name: "should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{"x", "a"}, npPeer{}, false)
			r.ExpectPeer(npPeer{}, npPeer{"y", "a"}, false)
			r.ExpectPeer(npPeer{"x", "a"}, npPeer{"y", "a"}, true)
			r.ExpectPeer(npPeer{}, npPeer{"y", "b"}, false)
			fromXA := npFrom(npNSPodPeer(e.nsName("x"), npMatchLabels(npKeyPod, "a")))
			return npOneStep(npPolicies(
				e.policy("x", "allow-to-ns-y-pod-a", npSelectPod("a"), npEgress(npTo(npNSPodPeer(e.nsName("y"), npMatchLabels(npKeyPod, "a"))))),
				e.policy("y", "allow-from-xa-on-ya-match-selector", npSelectPod("a"), npIngress(fromXA)),
				e.policy("y", "allow-from-xa-on-yb-match-selector", npSelectPod("b"), npIngress(fromXA))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllEgress(xa, false)
			r.Expect(xa, npp("y/a"), true)
			return npOneStep(npPolicies(e.policy("x", "allow-to-ns-y-pod-a", npSelectPod("a"), npEgress(npTo(npNSPodPeer(e.nsName("y"), npMatchLabels(npKeyPod, "a")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce ingress policy allowing any port traffic to a server on a specific protocol", Steps: func(e npEnv) []npStep {
			rUDP := newReachability(true)
			rUDP.ExpectPeer(npPeer{}, npPeer{"x", "a"}, false)
			return npOneStep(npPolicies(e.policy("x", "allow-ingress-by-proto", npSelectPod("a"), npIngress(netv1.NetworkPolicyIngressRule{
				Ports: []netv1.NetworkPolicyPort{{Protocol: tcp}}}))),
				npExpectation{npTCP80, newReachability(true)}, npExpectation{npUDP80, rUDP},
				npExpectation{npTCP81, newReachability(true)}) // TCP/81: not probed upstream
		}},
		{Name: "should enforce multiple ingress policies with ingress allow-all policy taking precedence", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-ingress-port-80", *npMatchLabels(), npIngress(netv1.NetworkPolicyIngressRule{
					Ports: []netv1.NetworkPolicyPort{npPort(nil, 80)}})))},
					Expect: []npExpectation{{npTCP81, r}}},
				{Do: []npAction{npCreate(e.policy("x", "allow-ingress", *npMatchLabels(), npIngress(netv1.NetworkPolicyIngressRule{})))},
					Expect: []npExpectation{{npTCP81, newReachability(true)}}},
			}
		}},
		{Name: "should enforce multiple egress policies with egress allow-all policy taking precedence", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{}, false)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-egress-port-80", *npMatchLabels(), npEgress(netv1.NetworkPolicyEgressRule{
					Ports: []netv1.NetworkPolicyPort{npPort(nil, 80)}})))},
					Expect: []npExpectation{{npTCP81, r}}},
				{Do: []npAction{npCreate(e.policy("x", "allow-egress", *npMatchLabels(), npEgress(netv1.NetworkPolicyEgressRule{})))},
					Expect: []npExpectation{{npTCP81, newReachability(true)}}},
			}
		}},
		{Name: "should stop enforcing policies after they are deleted", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{}, false)
			r.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "deny-all", npSelectAll, npIngress(), npEgress()))}, Expect: []npExpectation{{npTCP80, r}}},
				{Do: []npAction{e.npDelete("x", "deny-all")}, Expect: []npExpectation{{npTCP80, newReachability(true)}}},
			}
		}},
		{Name: "should allow egress access to server in CIDR block", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllEgress(xa, false)
			r.Expect(xa, npp("y/b"), true)
			return npOneStep(npPolicies(e.policy("x", "allow-client-a-via-cidr-egress-rule", npSelectPod("a"), npEgress(npTo(e.ipPeers(npp("y/b"), npHostBlock)...)))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce except clause while egress access to server in CIDR block", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.Expect(xa, npp("x/b"), false)
			return npOneStep(npPolicies(e.policy("x", "allow-client-a-via-cidr-egress-rule", npSelectPod("a"), npEgress(npTo(e.ipPeers(npp("x/b"), npLargeBlockExcept)...)))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed", Steps: func(e npEnv) []npStep {
			// As upstream: the second policy has the first's name, so the
			// "update" replaces the except rule rather than adding to it,
			// and the title's overlap is never in force. npCasesReef has the
			// overlap proper.
			xb := npp("x/b")
			except := newReachability(true)
			except.Expect(xa, npp("x/b"), false)
			onlyB := newReachability(true)
			onlyB.ExpectAllEgress(xa, false)
			onlyB.Expect(xa, npp("x/b"), true)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-client-a-via-cidr-egress-rule", npSelectPod("a"), npEgress(npTo(e.ipPeers(xb, npLargeBlockExcept)...))))},
					Expect: []npExpectation{{npTCP80, except}}},
				{Do: []npAction{npUpdate(e.policy("x", "allow-client-a-via-cidr-egress-rule", npSelectPod("a"), npEgress(npTo(e.ipPeers(xb, npHostBlock)...))))},
					Expect: []npExpectation{{npTCP80, onlyB}}},
			}
		}},
		{Name: "should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-egress-for-target", npSelectPod("a"), npEgress(netv1.NetworkPolicyEgressRule{})))},
					Expect: []npExpectation{{npTCP80, newReachability(true)}}},
				{Do: []npAction{npCreate(e.policy("x", "deny-ingress-via-label-selector", npSelectPod("a"), npIngress()))},
					Expect: []npExpectation{{npTCP80, r}}},
			}
		}},
		{Name: "should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			rSCTP := newReachability(true) // not probed upstream
			rSCTP.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			rSCTP.ExpectAllIngress(xa, true)
			return npOneStep(npPolicies(
				e.policy("x", "deny-ingress", npSelectAll, npIngress()),
				e.policy("x", "allow-only-sctp-ingress-on-port-81", npSelectPod("a"), npIngress(netv1.NetworkPolicyIngressRule{
					Ports: []netv1.NetworkPolicyPort{npPort(sctp, 81)}}))),
				npExpectation{npTCP81, r}, npExpectation{npSCTP81, rSCTP})
		}},
		{Name: "should properly isolate pods that are selected by a policy allowing SCTP, even if the plugin doesn't support SCTP", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			return npOneStep(npPolicies(e.policy("x", "allow-only-sctp-ingress-on-port-80", npSelectPod("a"), npIngress(netv1.NetworkPolicyIngressRule{
				Ports: []netv1.NetworkPolicyPort{npPort(sctp, 80)}}))),
				npExpectation{npTCP81, r})
		}},
		{Name: "should not allow access by TCP when a policy specifies only UDP", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			return npOneStep(npPolicies(e.policy("x", "allow-only-udp-ingress-on-port-81", npSelectPod("a"), npIngress(netv1.NetworkPolicyIngressRule{
				Ports: []netv1.NetworkPolicyPort{npPort(udp, 81)}}))),
				npExpectation{npTCP81, r}, npExpectation{npUDP81, newReachability(true)}) // UDP/81: not probed upstream
		}},
		{Name: "should enforce policy to allow traffic based on NamespaceSelector with MatchLabels using default ns label", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{"x", "a"}, false)
			r.ExpectPeer(npPeer{NS: "z"}, npPeer{"x", "a"}, false)
			return npOneStep(npPolicies(e.policy("x", "allow-client-a-via-ns-selector-for-immutable-ns-label", npSelectPod("a"), npIngress(npFrom(npNSPeer(e.nsName("y")))))),
				npExpectation{npTCP80, r})
		}},
		{Name: "should enforce policy based on NamespaceSelector with MatchExpressions using default ns label", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{"x", "a"}, npPeer{NS: "y"}, false)
			return npOneStep(npPolicies(e.policy("x", "allow-ns-y-match-selector-for-immutable-ns-label", npSelectPod("a"), npEgress(npTo(npNSPeer(
				npMatchExpr(corev1.LabelMetadataName, metav1.LabelSelectorOpNotIn, e.NS("y"))))))),
				npExpectation{npTCP80, r})
		}},
	}
}

// npCasesProtocol are upstream's three cases "using UDP" and "using SCTP".
func npCasesProtocol(proto corev1.Protocol) []npCase {
	p80, p81 := npProbe{proto, 80}, npProbe{proto, 81}
	xa := npp("x/a")
	return []npCase{
		{Name: "should support a 'default-deny-ingress' policy", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{}, npPeer{NS: "x"}, false)
			return npOneStep(npPolicies(e.policy("x", "deny-all", npSelectAll, npIngress())), npExpectation{p80, r})
		}},
		{Name: "should enforce policy based on Ports", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectPeer(npPeer{NS: "x"}, npPeer{"x", "a"}, false)
			r.ExpectPeer(npPeer{NS: "z"}, npPeer{"x", "a"}, false)
			rule := npFrom(npNSPeer(e.nsName("y")))
			rule.Ports = []netv1.NetworkPolicyPort{npPort(npProto(proto), 81)}
			return npOneStep(npPolicies(e.policy("x", "allow-ingress-on-port-81-ns-x", npSelectPod("a"), npIngress(rule))), npExpectation{p81, r})
		}},
		{Name: "should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector", Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			r.Expect(npp("y/a"), xa, true)
			return npOneStep(npPolicies(e.policy("x", "allow-ns-y-pod-a-via-namespace-pod-selector", npSelectPod("a"),
				npIngress(npFrom(npNSPodPeer(e.nsName("y"), npMatchLabels(npKeyPod, "a")))))),
				npExpectation{p80, r})
		}},
	}
}

// npCasesPortRange are the endPort cases kubernetes/kubernetes#100291
// proposed, on the model's ports: a range from 81 up holds 81, not 80.
func npCasesPortRange() []npCase {
	xa := npp("x/a")
	return []npCase{
		{Name: "should enforce policy to allow ingress traffic using port range", Source: npSrcRangePR, Steps: func(e npEnv) []npStep {
			r80 := newReachability(true)
			r80.ExpectAllIngress(xa, false)
			r81 := newReachability(true)
			r81.ExpectAllIngress(xa, true)
			return npOneStep(npPolicies(e.policy("x", "allow-ingress-use-port-range", npSelectPod("a"), npIngress(netv1.NetworkPolicyIngressRule{
				Ports: []netv1.NetworkPolicyPort{npPortRange(nil, 81, 85)}}))),
				npExpectation{npTCP81, r81}, npExpectation{npTCP80, r80})
		}},
		{Name: "should enforce policy to allow egress traffic using port range", Source: npSrcRangePR, Steps: func(e npEnv) []npStep {
			r80 := newReachability(true)
			r80.ExpectAllEgress(xa, false)
			r81 := newReachability(true)
			r81.ExpectAllEgress(xa, true)
			return npOneStep(npPolicies(e.policy("x", "allow-egress-use-port-range", npSelectPod("a"), npEgress(netv1.NetworkPolicyEgressRule{
				Ports: []netv1.NetworkPolicyPort{npPortRange(nil, 81, 85)}}))),
				npExpectation{npTCP81, r81}, npExpectation{npTCP80, r80})
		}},
		{Name: "should enforce policy to allow ingress traffic using port range on UDP", Source: npSrcReef, Steps: func(e npEnv) []npStep {
			// A range holding both ports, on UDP only; and a range whose
			// ends are equal.
			denied := newReachability(true)
			denied.ExpectAllIngress(xa, false)
			udp := npProto(corev1.ProtocolUDP)
			return npOneStep(npPolicies(e.policy("x", "allow-udp-port-range", npSelectPod("a"), npIngress(netv1.NetworkPolicyIngressRule{
				Ports: []netv1.NetworkPolicyPort{npPortRange(udp, 79, 81), npPortRange(nil, 81, 81)}}))),
				npExpectation{npUDP80, newReachability(true)}, npExpectation{npUDP81, newReachability(true)},
				npExpectation{npTCP80, denied}, npExpectation{npTCP81, newReachability(true)})
		}},
	}
}

// npCasesReef are reef's own, for what upstream leaves out.
func npCasesReef() []npCase {
	xa := npp("x/a")
	udp := npProto(corev1.ProtocolUDP)
	return []npCase{
		{Name: "should enforce policy based on NamespaceSelector with MatchExpressions Exists", Source: npSrcReef, Steps: func(e npEnv) []npStep {
			before := newReachability(true)
			before.ExpectAllIngress(xa, false)
			after := newReachability(true)
			after.ExpectAllIngress(xa, false)
			after.ExpectPeer(npPeer{NS: "z"}, npPeer{"x", "a"}, true)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-from-ns-with-team", npSelectPod("a"), npIngress(npFrom(npNSPeer(npMatchExpr("team", metav1.LabelSelectorOpExists))))))},
					Expect: []npExpectation{{npTCP80, before}}},
				{Do: []npAction{npRelabelNS("z", map[string]string{"team": "blue"})}, Expect: []npExpectation{{npTCP80, after}}},
				{Do: []npAction{{Kind: npLabelNamespace, NS: "z", DelLabels: []string{"team"}}}, Expect: []npExpectation{{npTCP80, before}}},
			}
		}},
		{Name: "should enforce policy based on PodSelector with MatchExpressions DoesNotExist", Source: npSrcReef, Steps: func(e npEnv) []npStep {
			// From every namespace, pods without a quarantine label; then
			// y/b gets one.
			after := newReachability(true)
			after.Expect(npp("y/b"), xa, false)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "deny-quarantined", npSelectPod("a"), npIngress(npFrom(npNSPodPeer(
					&metav1.LabelSelector{}, npMatchExpr("quarantine", metav1.LabelSelectorOpDoesNotExist))))))},
					Expect: []npExpectation{{npTCP80, newReachability(true)}}},
				{Do: []npAction{npRelabelPod(npp("y/b"), map[string]string{"quarantine": "true"})}, Expect: []npExpectation{{npTCP80, after}}},
			}
		}},
		{Name: "should isolate the pods a podSelector with MatchExpressions NotIn selects", Source: npSrcReef, Steps: func(e npEnv) []npStep {
			r := newReachability(true)
			r.ExpectAllIngress(npp("x/b"), false)
			r.ExpectAllIngress(npp("x/c"), false)
			p := e.policy("x", "deny-all-but-a", *npMatchExpr(npKeyPod, metav1.LabelSelectorOpNotIn, "a"), npIngress())
			return npOneStep(npPolicies(p), npExpectation{npTCP80, r})
		}},
		{Name: "should allow egress access on one named UDP port", Source: npSrcReef, Steps: func(e npEnv) []npStep {
			// The name is a UDP port's, so the rule must say UDP: TCP/81
			// and UDP/80 stay denied.
			denied := newReachability(true)
			denied.ExpectPeer(npPeer{NS: "x"}, npPeer{}, false)
			return npOneStep(npPolicies(e.policy("x", "allow-egress-udp-81", *npMatchLabels(), npEgress(netv1.NetworkPolicyEgressRule{
				Ports: []netv1.NetworkPolicyPort{npNamedPort(udp, "serve-81-udp")}}))),
				npExpectation{npUDP81, newReachability(true)}, npExpectation{npUDP80, denied}, npExpectation{npTCP81, denied})
		}},
		{Name: "should not match a named port of another protocol", Source: npSrcReef, Steps: func(e npEnv) []npStep {
			// serve-80-udp with the protocol left to its default, TCP,
			// names no port: x/a admits nothing.
			r := newReachability(true)
			r.ExpectAllIngress(xa, false)
			return npOneStep(npPolicies(e.policy("x", "allow-serve-80-udp-as-tcp", npSelectPod("a"), npIngress(netv1.NetworkPolicyIngressRule{
				Ports: []netv1.NetworkPolicyPort{npNamedPort(nil, "serve-80-udp")}}))),
				npExpectation{npTCP80, r}, npExpectation{npUDP80, r})
		}},
		{Name: "should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed (two policies)", Source: npSrcReef, Steps: func(e npEnv) []npStep {
			// What upstream's title says: one policy's except does not take
			// away what another policy allows.
			xb := npp("x/b")
			except := newReachability(true)
			except.Expect(xa, npp("x/b"), false)
			return []npStep{
				{Do: []npAction{npCreate(e.policy("x", "allow-client-a-via-cidr-egress-rule", npSelectPod("a"), npEgress(npTo(e.ipPeers(xb, npLargeBlockExcept)...))))},
					Expect: []npExpectation{{npTCP80, except}}},
				{Do: []npAction{npCreate(e.policy("x", "allow-client-a-to-b-via-cidr", npSelectPod("a"), npEgress(npTo(e.ipPeers(xb, npHostBlock)...))))},
					Expect: []npExpectation{{npTCP80, newReachability(true)}}},
			}
		}},
		{Name: "should allow ingress from a CIDR block with except", Source: npSrcReef, Steps: func(e npEnv) []npStep {
			// ipBlock in ingress, matching the source pod's address: y/a's
			// /4 without y/a.
			r := newReachability(true)
			r.Expect(npp("y/a"), xa, false)
			return npOneStep(npPolicies(e.policy("x", "allow-cidr-except-y-a", npSelectPod("a"), npIngress(npFrom(e.ipPeers(npp("y/a"), npLargeBlockExcept)...)))),
				npExpectation{npTCP80, r}, npExpectation{npUDP80, r})
		}},
	}
}

// The reference evaluation: what the NetworkPolicy API says each pair's
// verdict is, computed from the API objects. It exists to check the
// hand-written tables above (and can give a driver the expectation of a
// probe a case does not list).

// npState is the API objects a case has made: labels and policies.
type npState struct {
	env       npEnv
	nsLabels  map[string]map[string]string // by symbolic namespace
	podLabels map[npPod]map[string]string
	policies  map[string]*netv1.NetworkPolicy // by "namespace/name"
}

// newNPState is the model before any case: no policies, model labels.
func newNPState(e npEnv) *npState {
	s := &npState{env: e, nsLabels: map[string]map[string]string{}, podLabels: map[npPod]map[string]string{}, policies: map[string]*netv1.NetworkPolicy{}}
	for _, ns := range npNamespaces {
		s.nsLabels[ns] = e.nsLabels(ns)
	}
	for _, p := range npAllPods {
		s.podLabels[p] = npPodLabels(p)
	}
	return s
}

// apply does what the API server would, refusing what it would refuse.
func (s *npState) apply(a npAction) error {
	switch a.Kind {
	case npCreatePolicy, npUpdatePolicy, npDeletePolicy:
		key := a.Policy.Namespace + "/" + a.Policy.Name
		_, exists := s.policies[key]
		switch {
		case a.Kind == npCreatePolicy && exists:
			return fmt.Errorf("create policy %s: already exists", key)
		case a.Kind != npCreatePolicy && !exists:
			return fmt.Errorf("%s %s: not found", a.Kind, key)
		case a.Kind == npDeletePolicy:
			delete(s.policies, key)
		default:
			s.policies[key] = a.Policy
		}
	case npLabelNamespace:
		l, ok := s.nsLabels[a.NS]
		if !ok {
			return fmt.Errorf("label namespace %q: not in the model", a.NS)
		}
		npMergeLabels(l, a.SetLabels, a.DelLabels)
	case npLabelPod:
		l, ok := s.podLabels[a.Pod]
		if !ok {
			return fmt.Errorf("label pod %q: not in the model", a.Pod)
		}
		npMergeLabels(l, a.SetLabels, a.DelLabels)
	default:
		return fmt.Errorf("unknown action %d", a.Kind)
	}
	return nil
}

func npMergeLabels(l, set map[string]string, del []string) {
	maps.Copy(l, set)
	for _, k := range del {
		delete(l, k)
	}
}

// reachability is the verdict of every pair for probe p between the pods'
// addresses of family f.
func (s *npState) reachability(p npProbe, f npFamily) (*reachability, error) {
	r := &reachability{}
	for i, from := range npAllPods {
		for j, t := range npAllPods {
			eg, err := s.admits(from, t, p, f, netv1.PolicyTypeEgress)
			if err != nil {
				return nil, err
			}
			in, err := s.admits(from, t, p, f, netv1.PolicyTypeIngress)
			if err != nil {
				return nil, err
			}
			r.allowed[i][j] = eg && in
		}
	}
	return r, nil
}

// admits is the verdict of one direction: for egress, the policies of
// from's namespace that select from; for ingress, those of to's namespace
// that select to. No policy of that direction selecting the pod admits all;
// else any rule of any of them must admit the pair (rules add up).
func (s *npState) admits(from, to npPod, p npProbe, f npFamily, dir netv1.PolicyType) (bool, error) {
	self, peer := from, to
	if dir == netv1.PolicyTypeIngress {
		self, peer = to, from
	}
	isolated := false
	for _, pol := range s.sortedPolicies() {
		if pol.Namespace != s.env.NS(self.NS) || !npHasPolicyType(pol.Spec, dir) {
			continue
		}
		selects, err := npSelectorMatches(&pol.Spec.PodSelector, s.podLabels[self])
		if err != nil {
			return false, fmt.Errorf("policy %s/%s: %w", pol.Namespace, pol.Name, err)
		}
		if !selects {
			continue
		}
		isolated = true
		for _, r := range npRules(pol.Spec, dir) {
			ok, err := s.ruleAdmits(self.NS, r, peer, p, f)
			if err != nil {
				return false, fmt.Errorf("policy %s/%s: %w", pol.Namespace, pol.Name, err)
			}
			if ok {
				return true, nil
			}
		}
	}
	return !isolated, nil
}

// npRule is an ingress or an egress rule: its peers (from or to) and ports.
type npRule struct {
	peers []netv1.NetworkPolicyPeer
	ports []netv1.NetworkPolicyPort
}

func npRules(spec netv1.NetworkPolicySpec, dir netv1.PolicyType) []npRule {
	var rs []npRule
	if dir == netv1.PolicyTypeIngress {
		for _, r := range spec.Ingress {
			rs = append(rs, npRule{r.From, r.Ports})
		}
		return rs
	}
	for _, r := range spec.Egress {
		rs = append(rs, npRule{r.To, r.Ports})
	}
	return rs
}

func (s *npState) sortedPolicies() []*netv1.NetworkPolicy {
	keys := slices.Sorted(maps.Keys(s.policies))
	ps := make([]*netv1.NetworkPolicy, len(keys))
	for i, k := range keys {
		ps[i] = s.policies[k]
	}
	return ps
}

// npHasPolicyType applies the API's default: without policyTypes a policy is
// an ingress policy, and an egress policy too if it has egress rules.
func npHasPolicyType(spec netv1.NetworkPolicySpec, t netv1.PolicyType) bool {
	if len(spec.PolicyTypes) == 0 {
		return t == netv1.PolicyTypeIngress || len(spec.Egress) > 0
	}
	return slices.Contains(spec.PolicyTypes, t)
}

// ruleAdmits: no peers admit every peer, no ports every port.
func (s *npState) ruleAdmits(policyNS string, r npRule, peer npPod, p npProbe, f npFamily) (bool, error) {
	if len(r.ports) > 0 && !slices.ContainsFunc(r.ports, func(pp netv1.NetworkPolicyPort) bool { return npPortAdmits(pp, p) }) {
		return false, nil
	}
	if len(r.peers) == 0 {
		return true, nil
	}
	for _, pe := range r.peers {
		ok, err := s.peerMatches(policyNS, pe, peer, f)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

// peerMatches: an ipBlock matches q's address of family f (a block of the
// other family never does); selectors match q whatever the family.
func (s *npState) peerMatches(policyNS string, pe netv1.NetworkPolicyPeer, q npPod, f npFamily) (bool, error) {
	if pe.IPBlock != nil {
		cidr, err := netip.ParsePrefix(pe.IPBlock.CIDR)
		if err != nil {
			return false, err
		}
		ip := s.env.PodIP(q, f)
		if !cidr.Contains(ip) {
			return false, nil
		}
		for _, ex := range pe.IPBlock.Except {
			exp, err := netip.ParsePrefix(ex)
			if err != nil {
				return false, err
			}
			if exp.Contains(ip) {
				return false, nil
			}
		}
		return true, nil
	}
	if pe.NamespaceSelector != nil {
		ok, err := npSelectorMatches(pe.NamespaceSelector, s.nsLabels[q.NS])
		if err != nil || !ok {
			return false, err
		}
	} else if q.NS != policyNS {
		return false, nil // a podSelector alone is of the policy's namespace
	}
	if pe.PodSelector != nil {
		return npSelectorMatches(pe.PodSelector, s.podLabels[q])
	}
	return true, nil
}

// npPortAdmits: the protocol defaults to TCP; no port is every port of the
// protocol; a name is the destination pod's container port of that name
// and the rule's protocol (every pod of the model has the same ports).
func npPortAdmits(pp netv1.NetworkPolicyPort, p npProbe) bool {
	proto := corev1.ProtocolTCP
	if pp.Protocol != nil {
		proto = *pp.Protocol
	}
	switch {
	case proto != p.Protocol:
		return false
	case pp.Port == nil:
		return true
	case pp.Port.Type == intstr.String:
		return slices.ContainsFunc(npContainerPorts(), func(cp corev1.ContainerPort) bool {
			return cp.Name == pp.Port.StrVal && cp.Protocol == proto && cp.ContainerPort == p.Port
		})
	}
	end := pp.Port.IntVal
	if pp.EndPort != nil {
		end = *pp.EndPort
	}
	return pp.Port.IntVal <= p.Port && p.Port <= end
}

func npSelectorMatches(sel *metav1.LabelSelector, l map[string]string) (bool, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(l)), nil
}

// validatePolicy applies the API server's validation rules for
// NetworkPolicy (k8s.io/kubernetes pkg/apis/networking/validation, which
// this module cannot import) with apimachinery's helpers, and the model's
// own: the policy lives in one of the model's namespaces.
func (e npEnv) validatePolicy(p *netv1.NetworkPolicy) field.ErrorList {
	var errs field.ErrorList
	meta := field.NewPath("metadata")
	for _, msg := range validation.IsDNS1123Subdomain(p.Name) {
		errs = append(errs, field.Invalid(meta.Child("name"), p.Name, msg))
	}
	if !slices.ContainsFunc(npNamespaces, func(ns string) bool { return e.NS(ns) == p.Namespace }) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), p.Namespace, "not a namespace of the model"))
	}
	spec := field.NewPath("spec")
	opts := metav1validation.LabelSelectorValidationOptions{}
	errs = append(errs, metav1validation.ValidateLabelSelector(&p.Spec.PodSelector, opts, spec.Child("podSelector"))...)
	for i, r := range p.Spec.Ingress {
		path := spec.Child("ingress").Index(i)
		errs = append(errs, npValidatePorts(r.Ports, path.Child("ports"))...)
		errs = append(errs, npValidatePeers(r.From, path.Child("from"))...)
	}
	for i, r := range p.Spec.Egress {
		path := spec.Child("egress").Index(i)
		errs = append(errs, npValidatePorts(r.Ports, path.Child("ports"))...)
		errs = append(errs, npValidatePeers(r.To, path.Child("to"))...)
	}
	if len(p.Spec.PolicyTypes) > 2 {
		errs = append(errs, field.Invalid(spec.Child("policyTypes"), p.Spec.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range p.Spec.PolicyTypes {
		if t != netv1.PolicyTypeIngress && t != netv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(spec.Child("policyTypes").Index(i), t, []string{string(netv1.PolicyTypeIngress), string(netv1.PolicyTypeEgress)}))
		}
	}
	return errs
}

func npValidatePorts(ports []netv1.NetworkPolicyPort, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, pp := range ports {
		path := path.Index(i)
		if pp.Protocol != nil && !slices.Contains(npProtocols, *pp.Protocol) {
			errs = append(errs, field.NotSupported(path.Child("protocol"), *pp.Protocol, []string{"TCP", "UDP", "SCTP"}))
		}
		switch {
		case pp.Port == nil:
			if pp.EndPort != nil {
				errs = append(errs, field.Invalid(path.Child("endPort"), *pp.EndPort, "may not be specified when `port` is not specified"))
			}
		case pp.Port.Type == intstr.Int:
			for _, msg := range validation.IsValidPortNum(int(pp.Port.IntVal)) {
				errs = append(errs, field.Invalid(path.Child("port"), pp.Port.IntVal, msg))
			}
			if pp.EndPort != nil {
				if *pp.EndPort < pp.Port.IntVal {
					errs = append(errs, field.Invalid(path.Child("endPort"), *pp.EndPort, "must be greater than or equal to `port`"))
				}
				for _, msg := range validation.IsValidPortNum(int(*pp.EndPort)) {
					errs = append(errs, field.Invalid(path.Child("endPort"), *pp.EndPort, msg))
				}
			}
		default:
			if pp.EndPort != nil {
				errs = append(errs, field.Invalid(path.Child("endPort"), *pp.EndPort, "may not be specified when `port` is non-numeric"))
			}
			for _, msg := range validation.IsValidPortName(pp.Port.StrVal) {
				errs = append(errs, field.Invalid(path.Child("port"), pp.Port.StrVal, msg))
			}
		}
	}
	return errs
}

func npValidatePeers(peers []netv1.NetworkPolicyPeer, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	opts := metav1validation.LabelSelectorValidationOptions{}
	for i, pe := range peers {
		path := path.Index(i)
		n := 0
		if pe.PodSelector != nil {
			n++
			errs = append(errs, metav1validation.ValidateLabelSelector(pe.PodSelector, opts, path.Child("podSelector"))...)
		}
		if pe.NamespaceSelector != nil {
			n++
			errs = append(errs, metav1validation.ValidateLabelSelector(pe.NamespaceSelector, opts, path.Child("namespaceSelector"))...)
		}
		if pe.IPBlock != nil {
			n++
			errs = append(errs, npValidateIPBlock(pe.IPBlock, path.Child("ipBlock"))...)
		}
		switch {
		case n == 0:
			errs = append(errs, field.Required(path, "must specify a peer"))
		case n > 1 && pe.IPBlock != nil:
			errs = append(errs, field.Forbidden(path, "may not specify both ipBlock and another peer"))
		}
	}
	return errs
}

// npValidateIPBlock is strict about CIDRs (no host bits), as the API server
// is for new objects; each except must be a strict subset of the block.
func npValidateIPBlock(b *netv1.IPBlock, path *field.Path) field.ErrorList {
	errs := validation.IsValidCIDR(path.Child("cidr"), b.CIDR)
	if len(errs) > 0 {
		return errs
	}
	cidr := netip.MustParsePrefix(b.CIDR)
	for i, ex := range b.Except {
		path := path.Child("except").Index(i)
		if e := validation.IsValidCIDR(path, ex); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		exp := netip.MustParsePrefix(ex)
		if !cidr.Contains(exp.Addr()) || cidr.Bits() >= exp.Bits() {
			errs = append(errs, field.Invalid(path, ex, "must be a strict subset of `cidr`"))
		}
	}
	return errs
}

// Tests of the cases themselves: no root, no lab.

// npTestEnvs are address layouts the cases must hold for: pods on two nodes'
// blocks of 10.244.0.0/16, and all in one block; IPv6-only pods on two
// nodes' blocks of fd00:10:248::/56, and dual-stack ones.
func npTestEnvs() map[string]npEnv {
	v4 := func(p npPod) netip.Addr {
		return netip.AddrFrom4([4]byte{10, 244, byte(npNodeIndex(p, 2)), byte(10 + p.index())})
	}
	v6 := func(p npPod) netip.Addr {
		return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0x48, 0, byte(npNodeIndex(p, 2)), 15: byte(10 + p.index())})
	}
	return map[string]npEnv{
		"two nodes": {Prefix: "np-", Families: []npFamily{npIPv4}, PodIPs: func(p npPod) []netip.Addr { return []netip.Addr{v4(p)} }},
		"one block": {Prefix: "rl123x4-", Families: []npFamily{npIPv4}, PodIPs: func(p npPod) []netip.Addr {
			return []netip.Addr{netip.AddrFrom4([4]byte{10, 244, 7, byte(200 + p.index())})}
		}},
		"IPv6 two nodes":       {Prefix: "np6-", Families: []npFamily{npIPv6}, PodIPs: func(p npPod) []netip.Addr { return []netip.Addr{v6(p)} }},
		"dual-stack two nodes": {Prefix: "np46-", Families: []npFamily{npIPv4, npIPv6}, PodIPs: func(p npPod) []netip.Addr { return []netip.Addr{v4(p), v6(p)} }},
	}
}

// TestNetpolCasesWellFormed: every case builds; IDs are unique; every
// policy is one the API server accepts; every action applies (no create of
// an existing policy, no update of a missing one); every probe is of the
// model; and every hand-written table equals the reference evaluation of
// the policies in force at that step.
func TestNetpolCasesWellFormed(t *testing.T) {
	cases := npCases()
	ids := map[string]bool{}
	upstream := 0
	for _, c := range cases {
		if ids[c.ID()] {
			t.Errorf("case %q: ID not unique", c.ID())
		}
		ids[c.ID()] = true
		if c.Source == "" {
			upstream++
		}
	}
	if upstream < 30 {
		t.Errorf("%d cases from upstream, want at least 30", upstream)
	}
	for envName, env := range npTestEnvs() {
		for _, c := range cases {
			t.Run(envName+"/"+c.ID(), func(t *testing.T) { checkNPCase(t, env, c) })
		}
	}
}

func checkNPCase(t *testing.T, env npEnv, c npCase) {
	var steps []npStep
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("building the case panics: %v", r)
			}
		}()
		steps = c.Steps(env)
	}()
	if len(steps) == 0 {
		t.Fatal("no steps")
	}
	s := newNPState(env)
	for i, st := range steps {
		if len(st.Expect) == 0 {
			t.Errorf("step %d: nothing probed", i)
		}
		for _, a := range st.Do {
			if a.Kind <= npUpdatePolicy {
				for _, err := range env.validatePolicy(a.Policy) {
					t.Errorf("step %d: policy %s/%s: %v", i, a.Policy.Namespace, a.Policy.Name, err)
				}
			}
			for _, err := range metav1validation.ValidateLabels(a.SetLabels, field.NewPath("metadata", "labels")) {
				t.Errorf("step %d: %s: %v", i, a, err)
			}
			if err := s.apply(a); err != nil {
				t.Errorf("step %d: %v", i, err)
			}
		}
		probed := map[npProbe]bool{}
		for _, x := range st.Expect {
			if !slices.Contains(npProtocols, x.Probe.Protocol) || !slices.Contains(npPorts, x.Probe.Port) {
				t.Errorf("step %d: probe %s is not of the model", i, x.Probe)
			}
			if probed[x.Probe] {
				t.Errorf("step %d: %s probed twice", i, x.Probe)
			}
			probed[x.Probe] = true
			for _, f := range env.Families {
				want, err := s.reachability(x.Probe, f)
				if err != nil {
					t.Fatalf("step %d: %s: %v", i, x.Probe, err)
				}
				if x.Reach.allowed != want.allowed {
					// Show the reference as the observation: its '*' cells
					// are the hand-written table's mistakes (or the
					// evaluator's).
					t.Errorf("step %d: %s: the table differs from the reference evaluation:\n%s", i, f, x.Reach.Table(x.Probe, want.asObserved()))
				}
			}
		}
	}
}

// asObserved presents a reachability as a complete observation.
func (r *reachability) asObserved() *npObserved {
	o := &npObserved{allowed: r.allowed}
	for i := range o.seen {
		for j := range o.seen[i] {
			o.seen[i][j] = true
		}
	}
	return o
}

// TestNetpolLargeCIDRHoldsThePods: the except cases need x/b's /4 to hold
// every pod, as upstream assumes; it does for any pool within one /4, of
// either family.
func TestNetpolLargeCIDRHoldsThePods(t *testing.T) {
	for name, env := range npTestEnvs() {
		for _, f := range env.Families {
			block := netip.MustParsePrefix(npLargeCIDR(env.PodIP(npp("x/b"), f)))
			for _, p := range npAllPods {
				if ip := env.PodIP(p, f); !block.Contains(ip) {
					t.Errorf("%s: %s (%s) outside %s", name, p, ip, block)
				}
			}
		}
	}
}

// TestNetpolIPPeersPerFamily: a case's ipBlock comes once per family of
// the pods, each made from the pod's address of that family, and only a
// block of the address's family matches it.
func TestNetpolIPPeersPerFamily(t *testing.T) {
	env := npTestEnvs()["dual-stack two nodes"]
	var got []string
	for _, pe := range env.ipPeers(npp("x/b"), npLargeBlockExcept) {
		got = append(got, pe.IPBlock.CIDR+" except "+strings.Join(pe.IPBlock.Except, ","))
	}
	want := []string{"0.0.0.0/4 except 10.244.1.11/32", "f000::/4 except fd00:10:248:1::b/128"}
	if !slices.Equal(got, want) {
		t.Errorf("ipPeers = %q, want %q", got, want)
	}
	// Only y/b's IPv4 block: x/a reaches y/b over IPv4, not over IPv6.
	s := newNPState(env)
	pol := env.policy("x", "to-y-b-v4", npSelectPod("a"), npEgress(npTo(npIPPeer(npHostCIDR(env.PodIP(npp("y/b"), npIPv4))))))
	if err := s.apply(npCreate(pol)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    npFamily
		want bool
	}{{npIPv4, true}, {npIPv6, false}} {
		r, err := s.reachability(npTCP80, c.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Allowed(npp("x/a"), npp("y/b")); got != c.want {
			t.Errorf("%s: x/a -> y/b allowed %v, want %v", c.f, got, c.want)
		}
	}
}

// TestNetpolModelObjects: the namespaces and pods a driver creates carry the
// labels and the named ports the cases rely on.
func TestNetpolModelObjects(t *testing.T) {
	e := npEnv{Prefix: "np-"}
	ns := e.Namespace("y")
	if ns.Name != "np-y" || ns.Labels[npKeyNS] != "y" || ns.Labels[corev1.LabelMetadataName] != "np-y" {
		t.Errorf("namespace y = %s %v", ns.Name, ns.Labels)
	}
	pod := e.Pod(npp("z/c"))
	if pod.Namespace != "np-z" || pod.Name != "c" || pod.Labels[npKeyPod] != "c" {
		t.Errorf("pod z/c = %s/%s %v", pod.Namespace, pod.Name, pod.Labels)
	}
	var names []string
	for _, cp := range pod.Spec.Containers[0].Ports {
		names = append(names, cp.Name)
	}
	want := []string{"serve-80-tcp", "serve-81-tcp", "serve-80-udp", "serve-81-udp", "serve-80-sctp", "serve-81-sctp"}
	if !slices.Equal(names, want) {
		t.Errorf("port names = %v, want %v", names, want)
	}
	if got := npSCTP81.Target(netip.MustParseAddr("10.244.1.5")); got != "sctp:10.244.1.5:81" {
		t.Errorf("target = %q", got)
	}
	if got := npUDP80.Target(netip.MustParseAddr("fd00:10:248::5")); got != "udp:[fd00:10:248::5]:80" {
		t.Errorf("target = %q", got)
	}
	if len(npAllPods) != npN || npAllPods[4] != npp("y/b") {
		t.Errorf("pods = %v", npAllPods)
	}
}

// TestNetpolTable: the printer marks the wrong cells, ignores loopback and
// shows what was not probed.
func TestNetpolTable(t *testing.T) {
	r := newReachability(true)
	r.ExpectAllIngress(npp("x/a"), false)
	o := newReachability(true).asObserved()
	o.Observe(npp("x/b"), npp("x/a"), false) // as expected
	o.Observe(npp("y/a"), npp("x/a"), true)  // wrong
	o.Observe(npp("x/a"), npp("x/a"), true)  // wrong, but loopback
	o.seen[npp("z/c").index()][npp("x/b").index()] = false
	got := r.Table(npTCP80, o)
	want := `TCP/80: 8 wrong
expected:
-    x/a  x/b  x/c  y/a  y/b  y/c  z/a  z/b  z/c
x/a  X    .    .    .    .    .    .    .    .
x/b  X    .    .    .    .    .    .    .    .
x/c  X    .    .    .    .    .    .    .    .
y/a  X    .    .    .    .    .    .    .    .
y/b  X    .    .    .    .    .    .    .    .
y/c  X    .    .    .    .    .    .    .    .
z/a  X    .    .    .    .    .    .    .    .
z/b  X    .    .    .    .    .    .    .    .
z/c  X    .    .    .    .    .    .    .    .
observed:
-    x/a  x/b  x/c  y/a  y/b  y/c  z/a  z/b  z/c
x/a  .~   .    .    .    .    .    .    .    .
x/b  X    .    .    .    .    .    .    .    .
x/c  .*   .    .    .    .    .    .    .    .
y/a  .*   .    .    .    .    .    .    .    .
y/b  .*   .    .    .    .    .    .    .    .
y/c  .*   .    .    .    .    .    .    .    .
z/a  .*   .    .    .    .    .    .    .    .
z/b  .*   .    .    .    .    .    .    .    .
z/c  .*   ?    .    .    .    .    .    .    .
`
	if got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	wrong := r.Mismatches(o)
	if len(wrong) != 8 || wrong[0] != (npPair{npp("x/c"), npp("x/a")}) {
		t.Errorf("mismatches = %v", wrong)
	}
}
