package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
)

// TestKubernetesDualStack: the lab's Kubernetes cluster made dual-stack
// (issue 29): reef pools of both families, each node an IPv6 address on
// its uplink, both families in the service range, kubelet's --node-ip and
// kube-proxy's clusterCIDR. Each Node lists an InternalIP of each family;
// pods that the scheduler places get two status.podIPs, IPv4 first, from
// reef's two pools, both held in their node's reef IPAM; a pod reaches
// pods on other nodes over IPv6; a Service with ipFamilyPolicy
// RequireDualStack gets a ClusterIP of each family, EndpointSlices of
// each family with the pods' addresses, and answers over both ClusterIPs
// from a pod on a node none of its endpoints is on; the control plane's
// namespace reaches the pods over IPv6 through its route.
func TestKubernetesDualStack(t *testing.T) {
	slowSuite(t)
	l := newLab(t)
	c := startClusterWith(t, l, lab.ClusterOptions{DualStack: true})
	cs, err := c.API.Admin()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Nodes: an InternalIP of each family, the uplink's two addresses.
	for _, n := range c.Nodes {
		obj, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var internal []string
		for _, a := range obj.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				internal = append(internal, a.Address)
			}
		}
		want := []string{n.Address.String(), lab.NodeAddress6(n.Node).String()}
		if !slices.Equal(internal, want) {
			t.Errorf("node %s has InternalIPs %v, want %v", n.Name, internal, want)
		}
	}

	// A client on the first node, servers on the others, behind a
	// dual-stack Service.
	client := c.Nodes[0].Name
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  nodeName: %s
  containers:
  - name: client
    image: %s
    args: [pause]
---
`, client, k8simages.Agnhost)
	var servers []string
	for _, n := range c.Nodes[1:] {
		servers = append(servers, "web-"+n.Name)
	}
	manifest += webPods(c.Nodes[1:])
	manifest += `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`
	file := filepath.Join(l.Dir, "web-dualstack.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl("apply", "-f", file); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl("wait", "--for=condition=Ready", "pod", "--all", "-n", "default", "--timeout=120s"); err != nil {
		out, _ := c.Kubectl("get", "pods", "-A", "-o", "wide")
		desc, _ := c.Kubectl("describe", "pods")
		t.Fatalf("%v\n%s\n%s", err, out, desc)
	}

	// Pods: two addresses, IPv4 first as status.podIP, one from each of
	// reef's pools, both held by the node's reef under the pod's name.
	pool4, pool6 := netip.MustParsePrefix(lab.ClusterPool), netip.MustParsePrefix(lab.ClusterPool6)
	ips := map[string][2]string{} // pod name: IPv4, IPv6
	for i, name := range append([]string{"client"}, servers...) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ip := range p.Status.PodIPs {
			got = append(got, ip.IP)
		}
		t.Logf("pod %s on %s: podIPs %v", name, p.Spec.NodeName, got)
		if len(got) != 2 {
			t.Errorf("pod %s has podIPs %v, want two", name, got)
			continue
		}
		a4, err4 := netip.ParseAddr(got[0])
		a6, err6 := netip.ParseAddr(got[1])
		if err4 != nil || err6 != nil || !pool4.Contains(a4) || !pool6.Contains(a6) || p.Status.PodIP != got[0] {
			t.Errorf("pod %s has podIP %s and podIPs %v, want one of %s first (as podIP), then one of %s", name, p.Status.PodIP, got, pool4, pool6)
			continue
		}
		ips[name] = [2]string{got[0], got[1]}
		rep, err := c.Nodes[i].IPAM()
		if err != nil {
			t.Fatal(err)
		}
		for _, ip := range got {
			found := false
			for _, a := range rep.GetAllocations() {
				if a.GetIp() == ip && a.GetPod() == "default/"+name {
					found = true
				}
			}
			if !found {
				t.Errorf("%s's reef IPAM does not hold %s's %s: %v", c.Nodes[i].Name, name, ip, rep.GetAllocations())
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	curl := func(url string) (string, error) {
		out, err := c.Kubectl("exec", "client", "--", "curl", "-g", "-sS", "--max-time", "5", url)
		return strings.TrimSpace(out), err
	}
	// Pod to pod across nodes over IPv6, and the control plane's
	// namespace (where kube-apiserver runs) to each server over IPv6.
	for _, s := range servers {
		url := "http://[" + ips[s][1] + "]:8080/hostname"
		if got, err := curl(url); err != nil || got != s {
			t.Errorf("client on %s -> %s over IPv6 (%s): %q, %v", client, s, url, got, err)
		}
		if got, err := l.Run(c.API.Netns, "curl", "-g", "-sS", "--max-time", "5", url); err != nil || strings.TrimSpace(got) != s {
			t.Errorf("the control plane's namespace -> %s over IPv6 (%s): %q, %v", s, url, got, err)
		}
	}

	// The Service: a ClusterIP of each family, IPv4 first, each from its
	// service range.
	svc, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Service web: ipFamilies %v, clusterIPs %v", svc.Spec.IPFamilies, svc.Spec.ClusterIPs)
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("Service web has clusterIPs %v, want two", svc.Spec.ClusterIPs)
	}
	for i, r := range []netip.Prefix{lab.KubeServiceRange, lab.KubeServiceRange6} {
		if a, err := netip.ParseAddr(svc.Spec.ClusterIPs[i]); err != nil || !r.Contains(a) {
			t.Errorf("Service web's clusterIPs[%d] is %s, want one of %s", i, svc.Spec.ClusterIPs[i], r)
		}
	}
	// Its EndpointSlices: one of each family, with the servers' addresses
	// of that family.
	eventually(t, 30*time.Second, func() string {
		list, err := cs.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=web"})
		if err != nil {
			return err.Error()
		}
		got := map[discoveryv1.AddressType][]string{}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					got[s.AddressType] = append(got[s.AddressType], e.Addresses...)
				}
			}
		}
		for fam, at := range []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6} {
			var want []string
			for _, s := range servers {
				want = append(want, ips[s][fam])
			}
			g := got[at]
			slices.Sort(g)
			slices.Sort(want)
			if !slices.Equal(g, want) {
				return fmt.Sprintf("Service web's ready %s endpoints are %v, want %v", at, g, want)
			}
		}
		return ""
	})
	// Over each ClusterIP from the client, whose node none of the
	// endpoints is on: an answer from a server. kube-proxy programs the
	// endpoints on its own time; until then it rejects the connection.
	for _, ip := range svc.Spec.ClusterIPs {
		url := "http://" + netip.AddrPortFrom(netip.MustParseAddr(ip), 80).String() + "/hostname"
		eventually(t, 30*time.Second, func() string {
			got, err := curl(url)
			if err != nil || !slices.Contains(servers, got) {
				return fmt.Sprintf("client on %s -> Service web at %s: %q, %v", client, url, got, err)
			}
			return ""
		})
		t.Logf("client on %s -> Service web at %s: answered", client, url)
	}
}
