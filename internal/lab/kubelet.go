package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/reefcni/reef/packaging"
)

// The lab plays kubelet for the NetworkPolicy tests: a pod is a Pod
// object with spec.nodeName, created before its sandbox, wired through
// libcni, and its address written into status.podIPs after the ADD, in
// that order, as kubelet does.

// WriteAdminKubeconfig writes a kubeconfig of the API's admin (as kubeadm's
// /etc/kubernetes/admin.conf), for `reef kubeconfig` run in k.Netns.
func (k *KubeAPI) WriteAdminKubeconfig(path string) error {
	return k.WriteKubeconfig(path, k.adminToken)
}

// Apply creates the objects of YAML documents (ServiceAccounts,
// ClusterRoles, ClusterRoleBindings, Namespaces, NetworkPolicies), as
// `kubectl create -f` does; path names them in errors.
func (k *KubeAPI) Apply(path string, data []byte) error {
	c, err := k.Admin()
	if err != nil {
		return err
	}
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var raw runtime.RawExtension
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(raw.Raw) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := create(ctx, c, obj); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
	}
}

func create(ctx context.Context, c *kubernetes.Clientset, obj runtime.Object) error {
	o := metav1.CreateOptions{}
	var err error
	switch v := obj.(type) {
	case *corev1.ServiceAccount:
		_, err = c.CoreV1().ServiceAccounts(v.Namespace).Create(ctx, v, o)
	case *corev1.Namespace:
		_, err = c.CoreV1().Namespaces().Create(ctx, v, o)
	case *rbacv1.ClusterRole:
		_, err = c.RbacV1().ClusterRoles().Create(ctx, v, o)
	case *rbacv1.ClusterRoleBinding:
		_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, v, o)
	case *rbacv1.Role:
		_, err = c.RbacV1().Roles(v.Namespace).Create(ctx, v, o)
	case *rbacv1.RoleBinding:
		_, err = c.RbacV1().RoleBindings(v.Namespace).Create(ctx, v, o)
	case *networkingv1.NetworkPolicy:
		_, err = c.NetworkingV1().NetworkPolicies(v.Namespace).Create(ctx, v, o)
	default:
		return fmt.Errorf("lab: cannot create a %T", obj)
	}
	return err
}

// KubePod is a pod of the lab's kubelet: its API object and its sandbox.
type KubePod struct {
	*Pod
	Object *corev1.Pod
}

// RunPod does what kubelet does for a pod scheduled to node: the Pod
// object first (spec.nodeName, labels, the containers' ports), then the
// sandbox's ADD through libcni, then status.podIPs and phase Running. A
// failed ADD returns the pod (its object exists) and the error.
func (k *KubeAPI) RunPod(node *Node, namespace, name string, labels map[string]string, ports []corev1.ContainerPort) (*KubePod, error) {
	c, err := k.Admin()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	obj := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node.Name, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "server", Image: "reef-lab/serve-ports", Ports: ports}}},
	}
	if obj, err = c.CoreV1().Pods(namespace).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create pod %s/%s: %w", namespace, name, err)
	}
	p, err := node.NewPodNetns(namespace, name)
	if err != nil {
		return nil, err
	}
	kp := &KubePod{Pod: p, Object: obj}
	if err := p.Add(); err != nil {
		return kp, err
	}
	obj.Status.Phase = corev1.PodRunning
	obj.Status.PodIP = p.IP.String()
	obj.Status.PodIPs = nil
	for _, ip := range p.IPs {
		obj.Status.PodIPs = append(obj.Status.PodIPs, corev1.PodIP{IP: ip.String()})
	}
	if kp.Object, err = c.CoreV1().Pods(namespace).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		return kp, fmt.Errorf("write status of pod %s/%s: %w", namespace, name, err)
	}
	return kp, nil
}

// DeletePod deletes the sandbox (CNI DEL) and then the object, at once:
// there is no kubelet to confirm a graceful delete.
func (k *KubeAPI) DeletePod(p *KubePod) error {
	if err := p.Del(); err != nil {
		return err
	}
	c, err := k.Admin()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	zero := int64(0)
	return c.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
}

// StartPolicyMesh is the lab of NetworkPolicy: the API started, reef's
// RBAC applied from the package's file, a node kubeconfig written by
// `reef kubeconfig` as docs/policy.md says (run in the API's namespace, as
// an admin on a control-plane node runs it), and n meshed nodes with
// opts that read the API through it, started together.
func (l *Lab) StartPolicyMesh(n int, opts NodeOptions) (*KubeAPI, []*Node, error) {
	k, nodes, err := l.AddPolicyMesh(n, opts)
	if err != nil {
		return k, nodes, err
	}
	return k, nodes, StartAll(nodes)
}

// AddPolicyMesh is StartPolicyMesh with the nodes' daemons not started,
// for a caller that changes the nodes first (IPv6 addresses on their
// uplinks) and then starts them with StartAll.
func (l *Lab) AddPolicyMesh(n int, opts NodeOptions) (*KubeAPI, []*Node, error) {
	return l.AddPolicyMeshWith(n, opts, KubeAPIOptions{})
}

// AddPolicyMeshWith is AddPolicyMesh with the API's options (a dual-stack
// service range).
func (l *Lab) AddPolicyMeshWith(n int, opts NodeOptions, api KubeAPIOptions) (*KubeAPI, []*Node, error) {
	k, kubeconfig, err := l.StartKubeAPIForReefWith(api)
	if err != nil {
		return k, nil, err
	}
	opts.Extra += "kubernetes:\n  kubeconfig: " + kubeconfig + "\n"
	nodes, err := l.AddMeshWith(n, opts)
	return k, nodes, err
}

// StartKubeAPIForReef starts the lab's Kubernetes API, applies reef's
// RBAC from the package's file and writes a node kubeconfig with `reef
// kubeconfig` as docs/policy.md says (run in the API's namespace, as an
// admin on a control-plane node runs it); it returns the kubeconfig's
// path, for the nodes' kubernetes.kubeconfig.
func (l *Lab) StartKubeAPIForReef() (*KubeAPI, string, error) {
	return l.StartKubeAPIForReefWith(KubeAPIOptions{})
}

// StartKubeAPIForReefWith is StartKubeAPIForReef with the API's options.
func (l *Lab) StartKubeAPIForReefWith(opts KubeAPIOptions) (*KubeAPI, string, error) {
	k, err := l.StartKubeAPIWith(opts)
	if err != nil {
		return nil, "", err
	}
	if err := k.Apply("/usr/share/reef/rbac.yaml", packaging.RBAC); err != nil {
		return k, "", err
	}
	admin := filepath.Join(l.Dir, "admin.conf")
	if err := k.WriteAdminKubeconfig(admin); err != nil {
		return k, "", err
	}
	kubeconfig := filepath.Join(l.Dir, "reef-kubeconfig")
	out, err := exec.Command("nsenter", "--net="+NetnsPath(k.Netns), "--", filepath.Join(l.BinDir, "reef"),
		"kubeconfig", "--admin-kubeconfig", admin, "--out", kubeconfig, "--duration", "24h").CombinedOutput()
	if err != nil {
		return k, "", fmt.Errorf("reef kubeconfig: %w: %s", err, out)
	}
	if want := "wrote " + kubeconfig + " for service account kube-system/reef"; !bytes.Contains(out, []byte(want)) {
		return k, "", fmt.Errorf("reef kubeconfig said %q, want %q", out, want)
	}
	return k, kubeconfig, nil
}
