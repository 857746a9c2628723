package policy

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestRecompileIsCompile: for an ADD (a pod of the API without an address
// gets its endpoint), Recompile from the State before gives exactly the
// table Compile gives, and it compiles only some of the policies.
func TestRecompileIsCompile(t *testing.T) {
	base := benchInput(400, 20, 60, 10)
	// Policies that look at pods in every way: AnyPeer with a named port,
	// an ipBlock with a named port, egress named ports, podSelector only.
	anyNamed := netpol("bg-1", "any-named", sel(), []networkingv1.PolicyType{networkingv1.PolicyTypeEgress})
	anyNamed.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{named(corev1.ProtocolTCP, "http")}}}
	blockNamed := netpol("bg-2", "block-named", sel("app", "app-2"), nil)
	blockNamed.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.250.0.0/16"}}}},
		{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("tier", "db")}}, Ports: []networkingv1.NetworkPolicyPort{named(corev1.ProtocolTCP, "http")}}}
	base.Policies = append(base.Policies, anyNamed, blockNamed)
	for i, n := range []int{1, 2, 21, 77, 399} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			in := base
			in.Pods = append([]*Pod(nil), base.Pods...)
			p := in.Pods[n].DeepCopyObject().(*Pod)
			p.IPs = nil // before kubelet writes it
			in.Pods[n] = p
			in.Local = append([]Endpoint(nil), base.Local...)
			prev := Compile(in)
			in.Local = append(in.Local, Endpoint{Namespace: p.Namespace, Name: p.Name, IP: netip.AddrFrom4([4]byte{10, 251, 0, byte(i + 1)})})
			st, changed, ok := Recompile(prev, in, p)
			if !ok {
				t.Fatal("Recompile refused a State of the same policies")
			}
			want := Compile(in)
			if !reflect.DeepEqual(Table(st), Table(want)) {
				t.Fatal("Recompile's table differs from Compile's")
			}
			if !reflect.DeepEqual(SetsOf(st, changed), SetsOf(want, changed)) {
				t.Fatal("SetsOf differs")
			}
			if len(changed) == 0 || len(changed) == len(want.Policies) {
				t.Errorf("compiled again %d of %d policies", len(changed), len(want.Policies))
			}
			t.Logf("pod %s/%s: %d of %d policies compiled again", p.Namespace, p.Name, len(changed), len(want.Policies))
		})
	}
}
