package kube

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/reefcni/reef/policy"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The transforms keep what policy reads of each object and drop the rest
// (managedFields, annotations, most of a Pod's spec and status) before
// the informer stores it: the caches hold every pod of the cluster, as
// policy.Pod (a fifth of the memory of a trimmed corev1.Pod).

// meta keeps an object's identity and labels.
func meta(m metav1.ObjectMeta, withLabels bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
	if withLabels {
		out.Labels = m.Labels
	}
	return out
}

func trimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // cache.DeletedFinalStateUnknown and the like
	}
	return policy.PodFrom(p), nil
}

func trimNamespace(obj any) (any, error) {
	n, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: meta(n.ObjectMeta, true)}, nil
}

func trimPolicy(obj any) (any, error) {
	p, ok := obj.(*networkingv1.NetworkPolicy)
	if !ok {
		return obj, nil
	}
	out := &networkingv1.NetworkPolicy{ObjectMeta: meta(p.ObjectMeta, false), Spec: p.Spec}
	out.Generation = p.Generation
	return out, nil
}
