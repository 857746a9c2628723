package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
)

// clusterImages builds (once, cached) the images the cluster's pods run.
func clusterImages(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	out := filepath.Join(os.TempDir(), "reef-k8s-images")
	tars, err := k8simages.Build(ctx, k8simages.Options{Out: out})
	if err != nil {
		t.Fatal(err)
	}
	return []string{filepath.Join(out, k8simages.AllArchive), tars[k8simages.Pause]}
}

// startCluster brings the lab's Kubernetes cluster up: three workers
// with kubelet, kube-proxy, containerd 2 and reef.
func startCluster(t *testing.T, l *lab.Lab) *lab.Cluster {
	t.Helper()
	return startClusterWith(t, l, lab.ClusterOptions{})
}

// startClusterWith is startCluster with opts, the images and CoreDNS
// filled in.
func startClusterWith(t *testing.T, l *lab.Lab, opts lab.ClusterOptions) *lab.Cluster {
	t.Helper()
	images := clusterImages(t)
	start := time.Now()
	opts.Images, opts.SandboxImage, opts.CoreDNSImage = images[:1], k8simages.Pause, k8simages.CoreDNS
	c, err := l.StartCluster(opts)
	if c == nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.Nodes {
				t.Logf("%s:\n%s", n.Name, n.LogTail(30))
			}
			t.Logf("control plane:\n%s", c.LogTail(30))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster of %d nodes up in %s", len(c.Nodes), time.Since(start).Round(time.Second))
	return c
}

// webPods is the manifest of a pod web-<node> on each of nodes, labelled
// app=web: agnhost netexec serving HTTP on 8080 (the readiness probe), with
// extra args.
func webPods(nodes []*lab.ClusterNode, extra ...string) string {
	args := strings.Join(append([]string{"netexec", "--http-port=8080"}, extra...), ", ")
	manifest := ""
	for _, n := range nodes {
		manifest += fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web-%[1]s, namespace: default, labels: {app: web}}
spec:
  nodeName: %[1]s
  containers:
  - name: web
    image: %[2]s
    args: [%[3]s]
    ports: [{containerPort: 8080}]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}}
---
`, n.Name, k8simages.Agnhost, args)
	}
	return manifest
}

// TestKubernetesCluster: reef as the pod network of a real cluster, with
// no part of Kubernetes played by the lab. Pods that the scheduler places
// on the three nodes get reef addresses from kubelet through containerd's
// CNI call, reach each other across nodes, reach a ClusterIP Service
// through kube-proxy (nftables), resolve names through CoreDNS, and are
// reached by the API server (pods/proxy).
//
// One cluster, three parts, since a cluster takes most of a minute to
// start: Basics (this), ConformanceSlice, then KubeletPaths
// (e2e/k8s_kubelet_test.go), which restarts kubelets and powers a node
// off, and so comes last.
func TestKubernetesCluster(t *testing.T) {
	l := newLab(t)
	c := startCluster(t, l)
	t.Run("Basics", func(t *testing.T) { clusterBasics(t, l, c) })
	t.Run("ConformanceSlice", func(t *testing.T) { conformanceSlice(t, l, c) })
	t.Run("KubeletPaths", func(t *testing.T) { kubeletPaths(t, l, c) })
}

// clusterBasics: pods on every node, across nodes, through a Service and
// its DNS name, from the API server.
func clusterBasics(t *testing.T, l *lab.Lab, c *lab.Cluster) {
	manifest := webPods(c.Nodes, "--udp-port=8081")
	manifest += `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
`
	file := filepath.Join(l.Dir, "web.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl("apply", "-f", file); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl("wait", "--for=condition=Ready", "pod", "-l", "app=web", "--timeout=120s"); err != nil {
		out, _ := c.Kubectl("get", "pods", "-A", "-o", "wide")
		desc, _ := c.Kubectl("describe", "pods", "-l", "app=web")
		t.Fatalf("%v\n%s\n%s", err, out, desc)
	}
	out, err := c.Kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.podIP}{\"\\n\"}{end}")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pods:\n%s", out)
	pool := netip.MustParsePrefix(lab.ClusterPool)
	ips := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("pod line %q", line)
		}
		ip, err := netip.ParseAddr(f[2])
		if err != nil || !pool.Contains(ip) {
			t.Fatalf("pod %s on %s has address %q, not one of reef's pool %s", f[0], f[1], f[2], pool)
		}
		ips[f[0]] = f[2]
	}
	// Each pod's address is in its node's reef IPAM, under the pod's name.
	for _, n := range c.Nodes {
		rep, err := n.IPAM()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, a := range rep.GetAllocations() {
			if a.GetIp() == ips["web-"+n.Name] && strings.Contains(a.GetPod(), "web-"+n.Name) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s's reef IPAM does not hold web-%s's %s: %v", n.Name, n.Name, ips["web-"+n.Name], rep.GetAllocations())
		}
	}
	// Pod to pod across nodes, and through the Service.
	from := "web-" + c.Nodes[0].Name
	for _, n := range c.Nodes[1:] {
		to := "web-" + n.Name
		got, err := c.Kubectl("exec", from, "--", "curl", "-sS", "--max-time", "5", "http://"+ips[to]+":8080/hostname")
		if err != nil || strings.TrimSpace(got) != to {
			t.Errorf("%s -> %s (%s): %q, %v", from, to, ips[to], got, err)
		}
	}
	// kube-proxy programs the Service's endpoints after the pods are
	// Ready, on its own time; until then it rejects the connection.
	eventually(t, 30*time.Second, func() string {
		got, err := c.Kubectl("exec", from, "--", "curl", "-sS", "--max-time", "5", "http://web.default.svc.cluster.local/hostname")
		if err != nil || !strings.HasPrefix(strings.TrimSpace(got), "web-") {
			return fmt.Sprintf("%s -> Service web by its DNS name: %q, %v", from, got, err)
		}
		return ""
	})
	got, err := c.Kubectl("exec", from, "--", "nslookup", "kubernetes.default.svc.cluster.local")
	if err != nil || !strings.Contains(got, lab.KubeServiceRange.Addr().Next().String()) {
		t.Errorf("%s: nslookup kubernetes.default: %q, %v", from, got, err)
	}
	// The API server reaches every pod (pods/proxy, as webhooks and
	// metrics-server need): through a node of its ECMP route, which
	// forwards to the block's owner by reef's route.
	for _, n := range c.Nodes {
		pod := "web-" + n.Name
		got, err := c.Kubectl("get", "--raw", "/api/v1/namespaces/default/pods/"+pod+":8080/proxy/hostname")
		if err != nil || strings.TrimSpace(got) != pod {
			t.Errorf("API server -> %s (%s) through pods/proxy: %q, %v", pod, ips[pod], got, err)
		}
	}
}

// conformanceSlice: the part of the upstream suite that make test runs on
// every change (issue 27): e2e.test v1.37.2's pod-pod and node-pod
// granular checks and a handful of NetworkPolicy cases, against reef in
// the lab's cluster c. make conformance runs the rest.
func conformanceSlice(t *testing.T, l *lab.Lab, c *lab.Cluster) {
	dir := filepath.Join(l.Dir, "e2e-report")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	results, err := c.RunE2E(ctx, lab.E2EOptions{Focus: lab.CISliceFocus, Skip: lab.ConformanceSkip, ReportDir: dir, Procs: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		t.Logf("%s %s (%s)", r.State, r.Name, r.Duration.Round(time.Second))
		if r.State != "passed" {
			t.Errorf("%s: %s: %s", r.State, r.Name, r.Message)
		}
	}
	counts := lab.E2ECounts(results)
	if counts["passed"] < 8 {
		t.Errorf("%d tests passed of %d run (%v), want the slice's 8 or more", counts["passed"], len(results), counts)
	}
	// The e2e framework deletes its namespaces and does not wait for
	// them: their pods end in their own grace periods (30 s by default)
	// while the next part runs. Wait for them here, so that the node's
	// pods in KubeletPaths are its own.
	cs, err := c.API.Admin()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	eventually(t, 3*time.Minute, func() string {
		list, err := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var ending []string
		for _, ns := range list.Items {
			if ns.DeletionTimestamp != nil {
				ending = append(ending, ns.Name)
			}
		}
		if len(ending) > 0 {
			return fmt.Sprintf("namespaces still ending: %v", ending)
		}
		return ""
	})
	t.Logf("the slice's namespaces gone %s after it ended", time.Since(t0).Round(100*time.Millisecond))
}
