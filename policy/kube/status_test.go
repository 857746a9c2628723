package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cnp "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// TestUpToDate: a condition is written again only when what it says
// differs (not its time), or it is missing, or of another generation.
func TestUpToDate(t *testing.T) {
	c := Condition{Status: metav1.ConditionTrue, Reason: ReasonEnforced, Message: "m", Generation: 2}
	have := metav1.Condition{Type: ConditionEnforced, Status: metav1.ConditionTrue, Reason: ReasonEnforced, Message: "m", ObservedGeneration: 2,
		LastTransitionTime: metav1.Now()}
	for _, tc := range []struct {
		name string
		edit func(*metav1.Condition)
		want bool
	}{
		{"the same", func(*metav1.Condition) {}, true},
		{"another message", func(c *metav1.Condition) { c.Message = "n" }, false},
		{"another status", func(c *metav1.Condition) { c.Status = metav1.ConditionFalse }, false},
		{"another generation", func(c *metav1.Condition) { c.ObservedGeneration = 1 }, false},
		{"another type only", func(c *metav1.Condition) { c.Type = "Ready" }, false},
	} {
		h := have
		tc.edit(&h)
		p := &cnp.ClusterNetworkPolicy{Status: cnp.ClusterNetworkPolicyStatus{Conditions: []metav1.Condition{h}}}
		if got := upToDate(p, c); got != tc.want {
			t.Errorf("%s: upToDate %t, want %t", tc.name, got, tc.want)
		}
	}
	// A message longer than the API takes is written cut, and the cut
	// copy is up to date: it is not written again at every sync.
	long := c
	long.Message = strings.Repeat("x", maxMessage+10)
	h := have
	h.Message = long.message()
	if p := (&cnp.ClusterNetworkPolicy{Status: cnp.ClusterNetworkPolicyStatus{Conditions: []metav1.Condition{h}}}); !upToDate(p, long) || len(h.Message) != maxMessage {
		t.Errorf("a cut message (%d bytes) is not up to date", len(h.Message))
	}
}

// TestTrimNode keeps what node peers read: name, labels, addresses.
func TestTrimNode(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x": "y"}},
		Spec:   corev1.NodeSpec{PodCIDR: "10.0.0.0/24"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}, Phase: corev1.NodeRunning}}
	got, err := trimNode(n)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"a": "b"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("trimmed (-want +got):\n%s", d)
	}
}
