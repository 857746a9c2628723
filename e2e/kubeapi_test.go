package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/reefcni/reef/internal/lab"
)

// TestKubeAPI checks the lab's Kubernetes API, which the NetworkPolicy
// tests stand on: the admin creates what a controller-manager would not be
// there to make; a service account's TokenRequest token, through a
// kubeconfig, authenticates from the namespace of a node on either subnet
// (403 for what it is not granted, not 401); a restart of kube-apiserver
// keeps the objects and the tokens.
func TestKubeAPI(t *testing.T) {
	l := newLab(t)
	a1, err := l.AddNode("a1", lab.NodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	k, err := l.StartKubeAPI()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("StartKubeAPI: ready after %s at %s", time.Since(start).Round(time.Millisecond), k.Server())
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-api logs:\n%s", k.LogTail(40))
		}
	})
	// The router and a node behind it after the API: its way back to
	// SubnetB was set in advance.
	if _, err := l.AddCrossRouter(); err != nil {
		t.Fatal(err)
	}
	b1, err := l.AddNode("b1", lab.NodeOptions{SubnetB: true})
	if err != nil {
		t.Fatal(err)
	}

	admin, err := k.Admin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	const ns = "smoke"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A pod on a node, with no service account of its own and no
	// scheduler, as the policy tests make them; without a kubelet, only a
	// delete with no grace period removes it.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: a1.Name, Containers: []corev1.Container{{Name: "web", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if _, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.CoreV1().Pods(ns).Delete(ctx, "web", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod web after a delete with grace period 0: %v, want not found", err)
	}

	token, err := k.ServiceAccountToken(ns, "reef", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(l.Dir, "kubeconfig")
	if err := k.WriteKubeconfig(kubeconfig, token); err != nil {
		t.Fatal(err)
	}
	// clientFrom is the kubeconfig's client, connecting from a node's
	// namespace as its daemon would.
	clientFrom := func(n *lab.Node, kubeconfig string) *kubernetes.Clientset {
		t.Helper()
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Dial = lab.DialIn(n.Netns)
		c, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	wantUser := "system:serviceaccount:" + ns + ":reef"
	authenticated := func(n *lab.Node) {
		t.Helper()
		c := clientFrom(n, kubeconfig)
		rev, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("from %s: SelfSubjectReview: %v", n.Name, err)
		}
		if got := rev.Status.UserInfo.Username; got != wantUser {
			t.Errorf("from %s: the token authenticates as %q, want %q", n.Name, got, wantUser)
		}
		if _, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("from %s: list pods as the unbound service account: %v, want 403 Forbidden", n.Name, err)
		}
	}
	for _, n := range []*lab.Node{a1, b1} {
		authenticated(n)
	}
	// A token the API never issued is 401, so the 403 above was the
	// service account's.
	bogus := filepath.Join(l.Dir, "bogus-kubeconfig")
	if err := k.WriteKubeconfig(bogus, "not-a-token"); err != nil {
		t.Fatal(err)
	}
	if _, err := clientFrom(a1, bogus).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
		t.Errorf("list pods with a bogus token: %v, want 401 Unauthorized", err)
	}

	if err := k.Stop(); err != nil {
		t.Fatal(err)
	}
	down, cancelDown := context.WithTimeout(ctx, 5*time.Second)
	_, err = admin.CoreV1().Namespaces().Get(down, ns, metav1.GetOptions{})
	cancelDown()
	if err == nil {
		t.Fatal("the API answers after Stop")
	}
	restart := time.Now()
	if err := k.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Start after Stop: ready after %s", time.Since(restart).Round(time.Millisecond))
	if _, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Errorf("namespace %s after the restart: %v", ns, err)
	}
	authenticated(a1) // the same signing key: the token still holds

	if err := k.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	if err := k.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}
