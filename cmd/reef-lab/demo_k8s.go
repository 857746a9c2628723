package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
)

// demoK8s is `make demo-k8s`: the lab's Kubernetes cluster up, a
// Deployment of agnhost pods spread over the three nodes with their reef
// addresses, a NetworkPolicy and what it changes, then everything torn
// down.
func demoK8s(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reef-lab demo-k8s", flag.ContinueOnError)
	exe, _ := os.Executable()
	bin := fs.String("bin", filepath.Dir(exe), "directory holding reef and reef-cni")
	images := fs.String("images", filepath.Join(os.TempDir(), "reef-k8s-images"), "where the images are built (cached)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := k8simages.Build(ctx, k8simages.Options{Out: *images}); err != nil {
		return err
	}
	l, err := lab.New(*bin)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("\n== tearing down")
		l.Close()
	}()
	began := time.Now()
	c, err := l.StartCluster(lab.ClusterOptions{Images: []string{filepath.Join(*images, k8simages.AllArchive)},
		SandboxImage: k8simages.Pause, CoreDNSImage: k8simages.CoreDNS})
	if err != nil {
		return err
	}
	fmt.Printf("== a cluster of %d nodes (kubelet, kube-proxy nftables, containerd 2, reef) up in %s\n", len(c.Nodes), time.Since(began).Round(time.Second))
	show := func(args ...string) error {
		fmt.Printf("\n$ kubectl %s\n", strings.Join(args, " "))
		out, err := c.Kubectl(args...)
		fmt.Print(out)
		return err
	}
	if err := show("get", "nodes", "-o", "wide"); err != nil {
		return err
	}
	manifest := fmt.Sprintf(demoWebManifest, k8simages.Agnhost)
	file := filepath.Join(l.Dir, "web.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		return err
	}
	if err := show("apply", "-f", file); err != nil {
		return err
	}
	if _, err := c.Kubectl("wait", "--for=condition=Ready", "pod", "--all", "--timeout=120s"); err != nil {
		return err
	}
	if err := show("get", "pods", "-o", "wide"); err != nil {
		return err
	}
	target, web, err := demoWebPods(c)
	if err != nil {
		return err
	}
	probe := func(from string) {
		fmt.Printf("\n$ kubectl exec %s -- curl -sS --max-time 2 http://%s:8080/hostname\n", from, target)
		out, err := c.Kubectl("exec", from, "--", "curl", "-sS", "--max-time", "2", "http://"+target+":8080/hostname")
		if err != nil {
			fmt.Printf("(no answer: %s)\n", strings.TrimSpace(lastLine(out)))
			return
		}
		fmt.Println(strings.TrimSpace(out))
	}
	probe("client")
	pfile := filepath.Join(l.Dir, "policy.yaml")
	if err := os.WriteFile(pfile, []byte(demoPolicy), 0o644); err != nil {
		return err
	}
	fmt.Println("\n== a NetworkPolicy: the web pods accept only each other")
	if err := show("apply", "-f", pfile); err != nil {
		return err
	}
	probe("client")
	probe(web)
	fmt.Println("\n== reef's view on " + c.Nodes[0].Name)
	out, err := c.Nodes[0].Reef("policy", "show")
	fmt.Print(out)
	return err
}

// demoWebManifest is demo-k8s's Deployment of 6 web pods spread over the
// nodes and a client pod; %[1]s is the agnhost image.
const demoWebManifest = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 6
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}
      containers:
      - name: web
        image: %[1]s
        args: [netexec, --http-port=8080]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}}
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default, labels: {app: client}}
spec:
  containers:
  - {name: client, image: %[1]s, args: [pause]}
`

// demoPolicy lets the web pods accept only each other.
const demoPolicy = `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-only-from-web, namespace: default}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: web}}}]
`

// demoWebPods is the address of the last web pod, the target of the
// probes, and the name of the first.
func demoWebPods(c *lab.Cluster) (target, web string, err error) {
	ips, err := c.Kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].status.podIP}")
	if err != nil {
		return "", "", err
	}
	target = strings.Fields(ips)[len(strings.Fields(ips))-1]
	names, err := c.Kubectl("get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].metadata.name}")
	if err != nil {
		return "", "", err
	}
	web = strings.Fields(names)[0]
	return target, web, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
