package main

import (
	"fmt"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The API's background of bench-policy: namespaces, pods scheduled to nodes
// the lab does not run, and NetworkPolicies selecting them.

func (b *policyBench) namespace(name string, labels map[string]string) error {
	_, err := b.c.CoreV1().Namespaces().Create(b.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	return err
}

// parallel runs f(0..n-1) on 16 workers and returns the first error.
func parallel(n int, f func(i int) error) error {
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// background adds pods (objects with an address, on nodes the lab does
// not run) in new namespaces, and policies selecting them by label.
func (b *policyBench) background(pods, namespaces, policies int) error {
	base := b.seq
	b.seq += namespaces
	if err := parallel(namespaces, func(i int) error {
		return b.namespace(fmt.Sprintf("bg-%d", base+i), map[string]string{"team": fmt.Sprintf("t%d", (base+i)%10)})
	}); err != nil {
		return err
	}
	for i := range namespaces {
		b.bgNamespaces = append(b.bgNamespaces, fmt.Sprintf("bg-%d", base+i))
	}
	b.policies += policies
	start := b.remote
	if err := parallel(pods, func(i int) error {
		n := start + i
		ns := fmt.Sprintf("bg-%d", base+i%namespaces)
		ip := netip.AddrFrom4([4]byte{10, 250, byte(n >> 8), byte(n)})
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%d", n),
			Labels: map[string]string{"app": fmt.Sprintf("app-%d", n%100), "tier": []string{"web", "db", "cache"}[n%3]}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("elsewhere-%d", n%50), Containers: []corev1.Container{{Name: "c", Image: "x",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}}
		p, err := b.c.CoreV1().Pods(ns).Create(b.ctx, p, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIPs = []corev1.PodIP{{IP: ip.String()}}
		_, err = b.c.CoreV1().Pods(ns).UpdateStatus(b.ctx, p, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	b.remote += pods
	return parallel(policies, func(i int) error {
		ns := fmt.Sprintf("bg-%d", base+i%namespaces)
		pol := benchNetpol(ns, fmt.Sprintf("pol-%d", i), map[string]string{"app": fmt.Sprintf("app-%d", i%100)}, i)
		_, err := b.c.NetworkingV1().NetworkPolicies(ns).Create(b.ctx, pol, metav1.CreateOptions{})
		return err
	})
}

// benchNetpol is a policy of the usual shape: ingress from a tier of the
// team's namespaces on a port and a named port, egress to an ipBlock.
func benchNetpol(ns, name string, sel map[string]string, i int) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port, named := intstr.FromInt32(int32(8000+i%100)), intstr.FromString("http")
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: sel},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": fmt.Sprintf("t%d", i%10)}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}, {Protocol: &tcp, Port: &named}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.250.0.0/16", Except: []string{fmt.Sprintf("10.250.%d.0/24", i%200)}}}},
			}},
		}}
}
