package policy

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Builders of API objects for the tests.

func ns(name string, lbl ...string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labelMap(append(lbl, "kubernetes.io/metadata.name", name))}}
}

func labelMap(kv []string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

type podOpt func(*corev1.Pod)

func withPort(name string, proto corev1.Protocol, port int32) podOpt {
	return func(p *corev1.Pod) {
		if len(p.Spec.Containers) == 0 {
			p.Spec.Containers = []corev1.Container{{Name: "c"}}
		}
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: name, Protocol: proto, ContainerPort: port})
	}
}

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func pod(namespace, name, ip string, lbl []string, opts ...podOpt) *Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labelMap(lbl)}}
	if ip != "" {
		p.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	}
	p.Status.Phase = corev1.PodRunning
	for _, o := range opts {
		o(p)
	}
	return PodFrom(p)
}

func sel(kv ...string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: labelMap(kv)} }

func tcp(port int) networkingv1.NetworkPolicyPort {
	p := corev1.ProtocolTCP
	v := intstr.FromInt32(int32(port))
	return networkingv1.NetworkPolicyPort{Protocol: &p, Port: &v}
}

func named(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	v := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v}
}

func portRange(proto corev1.Protocol, from, to int32) networkingv1.NetworkPolicyPort {
	v := intstr.FromInt32(from)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &v, EndPort: &to}
}

func netpol(namespace, name string, podSel *metav1.LabelSelector, types []networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *podSel, PolicyTypes: types}}
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

// sampleInput: namespaces x and y; pods x/a (local, 10.0.0.1), x/b (local,
// 10.0.0.2), y/a (remote, 10.0.1.1), y/b (remote, 10.0.1.2); a policy on
// x/a allowing TCP 80 from namespace y, port "http" from pod b of x, and
// an ipBlock; an egress policy on every pod of x to y on UDP 5000-5010.
func sampleInput() Input {
	ingress := netpol("x", "allow-y", sel("pod", "a"), []networkingv1.PolicyType{networkingv1.PolicyTypeIngress})
	ingress.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
		{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y")}}, Ports: []networkingv1.NetworkPolicyPort{tcp(80)}},
		{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("pod", "b")}}, Ports: []networkingv1.NetworkPolicyPort{named(corev1.ProtocolTCP, "http")}},
		{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.128/25"}}}}},
	}
	egress := netpol("x", "egress-y", sel(), []networkingv1.PolicyType{networkingv1.PolicyTypeEgress})
	egress.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{
		{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("ns", "y")}}, Ports: []networkingv1.NetworkPolicyPort{portRange(corev1.ProtocolUDP, 5000, 5010)}},
	}
	return Input{
		Policies:   []*networkingv1.NetworkPolicy{ingress, egress},
		Namespaces: []*corev1.Namespace{ns("x", "ns", "x"), ns("y", "ns", "y")},
		Pods: []*Pod{
			pod("x", "a", "", []string{"pod", "a"}, onNode("n1"), withPort("http", corev1.ProtocolTCP, 8080)),
			pod("x", "b", "10.0.0.2", []string{"pod", "b"}, onNode("n1")),
			pod("y", "a", "10.0.1.1", []string{"pod", "a"}, onNode("n2")),
			pod("y", "b", "10.0.1.2", []string{"pod", "b"}, onNode("n2")),
		},
		Local: []Endpoint{{Namespace: "x", Name: "a", IP: addr("10.0.0.1")}, {Namespace: "x", Name: "b", IP: addr("10.0.0.2")}},
	}
}
