package policy

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Pod is what policy reads of a Pod: its identity and labels, where it
// runs, whether it is done, its addresses (parsed once) and its named
// ports. policy/kube's informer keeps these instead of the API's Pods,
// which take several times the memory in a cluster's worth of them.
type Pod struct {
	metav1.TypeMeta
	metav1.ObjectMeta // Name, Namespace, UID, ResourceVersion, Labels only
	NodeName          string
	HostNetwork       bool
	Done              bool         // phase Succeeded or Failed
	Terminating       bool         // metadata.deletionTimestamp set: being deleted
	IPs               []netip.Addr // status.podIPs (status.podIP when empty)
	Ports             []NamedPort  // the containers' and sidecars' named ports
}

// NamedPort is a named containerPort.
type NamedPort struct {
	Name     string
	Protocol corev1.Protocol
	Port     int32
}

// PodFrom makes a Pod from the API's.
func PodFrom(p *corev1.Pod) *Pod {
	out := &Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion, Labels: p.Labels},
		NodeName: p.Spec.NodeName, HostNetwork: p.Spec.HostNetwork,
		Done:        p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed,
		Terminating: p.DeletionTimestamp != nil}
	add := func(s string) {
		if a, err := netip.ParseAddr(s); err == nil {
			out.IPs = append(out.IPs, a.Unmap())
		}
	}
	for _, ip := range p.Status.PodIPs {
		add(ip.IP)
	}
	if len(out.IPs) == 0 && p.Status.PodIP != "" {
		add(p.Status.PodIP)
	}
	named := func(cs []corev1.Container, sidecarsOnly bool) {
		for _, c := range cs {
			if sidecarsOnly && (c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways) {
				continue
			}
			for _, cp := range c.Ports {
				if cp.Name != "" {
					out.Ports = append(out.Ports, NamedPort{Name: cp.Name, Protocol: cp.Protocol, Port: cp.ContainerPort})
				}
			}
		}
	}
	named(p.Spec.Containers, false)
	// A sidecar (an init container with restartPolicy Always) runs beside
	// the containers, and its named ports are the pod's as theirs are, as
	// for a Service's targetPort (kubernetes#127976) and in Calico.
	named(p.Spec.InitContainers, true)
	return out
}

// DeepCopyObject makes Pod a runtime.Object, as an informer's store
// expects of what it holds.
func (p *Pod) DeepCopyObject() runtime.Object {
	out := *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.IPs = append([]netip.Addr(nil), p.IPs...)
	out.Ports = append([]NamedPort(nil), p.Ports...)
	return &out
}
