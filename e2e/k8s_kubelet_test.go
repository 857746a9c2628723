package e2e

// The kubelet-driven paths of issue 27 that TestKubernetesCluster's Basics do not
// take: a container restarted in its sandbox, kubelet's own probes, a
// deletion with a grace period, hostNetwork pods next to reef's, pods that
// call the API through the kubernetes Service, and sandboxes recreated
// after a node loses its power. One cluster for all of them; the node
// restart comes last, since it takes node3 down.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reefcni/reef/internal/lab"
	"github.com/reefcni/reef/internal/lab/k8simages"
	reefv1 "github.com/reefcni/reef/proto"
)

// kubeletPods are the pods of kubeletPaths, all created at once so
// that their starts overlap: name, node (index), and the container.
// netexec answers /hostname with the pod's name.
const kubeletPods = `apiVersion: v1
kind: Pod
metadata: {name: base-%[1]s, namespace: default, labels: {kubelet-test: up}}
spec:
  nodeName: %[1]s
  containers:
  - name: web
    image: %[4]s
    args: [netexec, --http-port=8080, --udp-port=8081]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: base-%[2]s, namespace: default, labels: {kubelet-test: up}}
spec:
  nodeName: %[2]s
  containers:
  - name: web
    image: %[4]s
    args: [netexec, --http-port=8080, --udp-port=8081]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: base-%[3]s, namespace: default, labels: {kubelet-test: up}}
spec:
  nodeName: %[3]s
  containers:
  - name: web
    image: %[4]s
    args: [netexec, --http-port=8080, --udp-port=8081]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: restart, namespace: default, labels: {kubelet-test: up}}
spec:
  nodeName: %[2]s
  restartPolicy: Always
  containers:
  - name: web
    image: %[4]s
    args: [netexec, --http-port=8080, --udp-port=8081]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: ready-ok, namespace: default, labels: {kubelet-test: up}}
spec:
  nodeName: %[3]s
  containers:
  - name: web
    image: %[4]s
    args: [netexec, --http-port=8080, --udp-port=8081]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
# Its probe is answered 503 by the pod itself: kubelet reaches it, and the
# pod stays not Ready for what it says, not for a network that fails.
apiVersion: v1
kind: Pod
metadata: {name: ready-bad, namespace: default}
spec:
  nodeName: %[3]s
  containers:
  - name: web
    image: %[4]s
    args: [netexec, --http-port=8080, --udp-port=8081]
    readinessProbe: {httpGet: {path: "/echo?msg=not-ready&code=503", port: 8080}, periodSeconds: 1}
---
# netexec serves on for 60 s after SIGTERM: only the SIGKILL at the end of
# the 5 s grace period stops it.
apiVersion: v1
kind: Pod
metadata: {name: grace, namespace: default, labels: {kubelet-test: up}}
spec:
  nodeName: %[2]s
  terminationGracePeriodSeconds: 5
  containers:
  - name: web
    image: %[4]s
    args: [netexec, --http-port=8080, --udp-port=8081, --delay-shutdown=60]
    readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Pod
metadata: {name: hostnet, namespace: default, labels: {kubelet-test: up}}
spec:
  nodeName: %[1]s
  hostNetwork: true
  containers:
  - name: web
    image: %[4]s
    args: [netexec, --http-port=18080, --udp-port=18081]
    readinessProbe: {httpGet: {path: /healthz, port: 18080}, periodSeconds: 1}
`

// kubeletRig is the cluster of kubeletPaths and its API client.
type kubeletRig struct {
	l  *lab.Lab
	c  *lab.Cluster
	cs *kubernetes.Clientset
}

// pod returns the pod, nil when it does not exist.
func (r *kubeletRig) pod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := r.cs.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// waitReady waits until every named pod is Ready.
func (r *kubeletRig) waitReady(t *testing.T, timeout time.Duration, names ...string) {
	t.Helper()
	args := append([]string{"wait", "--for=condition=Ready", "--timeout=" + timeout.String()}, podRefs(names)...)
	if _, err := r.c.Kubectl(args...); err != nil {
		out, _ := r.c.Kubectl("get", "pods", "-A", "-o", "wide")
		desc, _ := r.c.Kubectl(append([]string{"describe"}, podRefs(names)...)...)
		t.Fatalf("%v\n%s\n%s", err, out, desc)
	}
}

func podRefs(names []string) []string {
	var refs []string
	for _, n := range names {
		refs = append(refs, "pod/"+n)
	}
	return refs
}

// exec runs a command in the pod's container.
func (r *kubeletRig) exec(pod string, args ...string) (string, error) {
	return r.c.Kubectl(append([]string{"exec", pod, "--"}, args...)...)
}

// get fetches url with curl from the pod and fails the test unless it
// answers with want (compared trimmed).
func (r *kubeletRig) get(t *testing.T, from, url, want string) {
	t.Helper()
	got, err := r.exec(from, "curl", "-sS", "--max-time", "5", url)
	if err != nil || strings.TrimSpace(got) != want {
		t.Errorf("%s -> %s: %q, %v; want %q", from, url, strings.TrimSpace(got), err, want)
	}
}

// node returns the cluster node named name.
func (r *kubeletRig) node(name string) *lab.ClusterNode {
	for _, n := range r.c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// sandboxes lists the ids of the pod's sandboxes on its node's containerd;
// state "ready" or "notready" filters, "" lists all.
func (r *kubeletRig) sandboxes(t *testing.T, p *corev1.Pod, state string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := []string{"pods", "-q", "--label", "io.kubernetes.pod.uid=" + string(p.UID)}
	if state != "" {
		args = append(args, "--state", state)
	}
	out, err := r.node(p.Spec.NodeName).Containerd.Run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return nonEmptyLines(out)
}

// allocationOf returns the node's reef allocation of the pod, nil if none.
func allocationOf(t *testing.T, n *lab.Node, pod string) *reefv1.Allocation {
	t.Helper()
	var found *reefv1.Allocation
	for _, a := range podAllocations(t, n) {
		if a.GetPod() == "default/"+pod {
			if found != nil {
				t.Errorf("%s holds two addresses for %s: %s and %s", n.Name, pod, found.GetIp(), a.GetIp())
			}
			found = a
		}
	}
	return found
}

// kubeletPaths drives reef through the paths only a kubelet takes, in the
// cluster c of lab l (TestKubernetesCluster/KubeletPaths, the last of its
// parts: it restarts kubelets and powers a node off).
func kubeletPaths(t *testing.T, l *lab.Lab, c *lab.Cluster) {
	start := time.Now()
	cs, err := c.API.Admin()
	if err != nil {
		t.Fatal(err)
	}
	r := &kubeletRig{l: l, c: c, cs: cs}
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	file := filepath.Join(l.Dir, "kubelet-paths.yaml")
	if err := os.WriteFile(file, []byte(fmt.Sprintf(kubeletPods, n1.Name, n2.Name, n3.Name, k8simages.Agnhost)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl("apply", "-f", file); err != nil {
		t.Fatal(err)
	}
	up := []string{"base-" + n1.Name, "base-" + n2.Name, "base-" + n3.Name, "restart", "ready-ok", "grace", "hostnet"}
	r.waitReady(t, 2*time.Minute, up...)
	t.Logf("pods Ready %s after the start", time.Since(start).Round(time.Second))
	client := "base-" + n1.Name // the pod every subtest calls from
	pool := netip.MustParsePrefix(lab.ClusterPool)

	phase := func(name string, f func(t *testing.T)) {
		t0 := time.Now()
		t.Run(name, f)
		t.Logf("%s: %s", name, time.Since(t0).Round(100*time.Millisecond))
	}

	// A container that exits is started again by kubelet in the sandbox it
	// had: the same sandbox id, the same reef allocation (address, veth,
	// sandbox), and reachable at that address from another node.
	phase("ContainerRestart", func(t *testing.T) {
		before := r.pod(t, "restart")
		ip := before.Status.PodIP
		boxes := r.sandboxes(t, before, "")
		alloc := allocationOf(t, n2.Node, "restart")
		if len(boxes) != 1 || alloc == nil || alloc.GetIp() != ip || alloc.GetContainerId() != boxes[0] {
			t.Fatalf("before: sandboxes %v, pod IP %s, allocation %v", boxes, ip, alloc)
		}
		oldCID := before.Status.ContainerStatuses[0].ContainerID
		// The connection may die with the process: the exit is what counts.
		r.exec(client, "curl", "-sS", "--max-time", "3", "http://"+ip+":8080/exit?code=3")
		var after *corev1.Pod
		eventually(t, 60*time.Second, func() string {
			after = r.pod(t, "restart")
			cst := after.Status.ContainerStatuses[0]
			if cst.RestartCount < 1 || !podReady(after) {
				return fmt.Sprintf("restartCount %d, ready %v, state %+v", cst.RestartCount, podReady(after), cst.State)
			}
			return ""
		})
		cst := after.Status.ContainerStatuses[0]
		if term := cst.LastTerminationState.Terminated; term == nil || term.ExitCode != 3 {
			t.Errorf("last termination %+v, want exit code 3 from /exit", cst.LastTerminationState)
		}
		if cst.ContainerID == oldCID {
			t.Errorf("container id %s unchanged: no new container", oldCID)
		}
		if after.Status.PodIP != ip {
			t.Errorf("pod IP %s -> %s", ip, after.Status.PodIP)
		}
		if got := r.sandboxes(t, after, ""); !slices.Equal(got, boxes) {
			t.Errorf("sandboxes %v -> %v: want the same one", boxes, got)
		}
		if a := allocationOf(t, n2.Node, "restart"); a == nil || a.GetIp() != ip || a.GetContainerId() != boxes[0] || a.GetHostVeth() != alloc.GetHostVeth() {
			t.Errorf("allocation %v -> %v", alloc, a)
		}
		t.Logf("restart: restartCount %d, %s -> %s, sandbox %.12s, IP %s", cst.RestartCount, oldCID, cst.ContainerID, boxes[0], ip)
		r.get(t, client, "http://"+ip+":8080/hostname", "restart")
	})

	// kubelet probes from the node's namespace: a probe the pod answers
	// 200 makes it Ready, one it answers 503 keeps it not Ready. The pods'
	// logs show that the probes arrived.
	phase("Probes", func(t *testing.T) {
		if p := r.pod(t, "ready-ok"); !podReady(p) {
			t.Fatalf("ready-ok not Ready: %+v", p.Status.Conditions)
		}
		logs, err := c.Kubectl("logs", "ready-ok")
		if err != nil || !strings.Contains(logs, "GET /healthz") {
			t.Errorf("ready-ok's log shows no probe: %v\n%s", err, logs)
		}
		eventually(t, 60*time.Second, func() string {
			logs, _ := c.Kubectl("logs", "ready-bad")
			if n := strings.Count(logs, "GET /echo"); n < 4 {
				return fmt.Sprintf("ready-bad's log holds %d probes, want 4:\n%s", n, logs)
			}
			return ""
		})
		p := r.pod(t, "ready-bad")
		if podReady(p) || p.Status.Phase != corev1.PodRunning || !pool.Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Errorf("ready-bad: phase %s, ready %v, IP %s; want Running, not Ready, an address of reef's", p.Status.Phase, podReady(p), p.Status.PodIP)
		}
		ev, err := c.Kubectl("get", "events", "--field-selector", "involvedObject.name=ready-bad,reason=Unhealthy", "-o", "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}")
		if err != nil || !strings.Contains(ev, "Readiness probe failed: HTTP probe failed with statuscode: 503") {
			t.Errorf("ready-bad's Unhealthy events: %q, %v", ev, err)
		}
		if _, err := c.Kubectl("delete", "pod", "ready-bad", "--grace-period=0", "--wait=true", "--timeout=60s"); err != nil {
			t.Error(err)
		}
	})

	// A deletion with a 5 s grace period, its container ignoring SIGTERM:
	// the pod keeps its address, veth and traffic until kubelet kills the
	// container at the end of the grace period and tears the sandbox down;
	// then nothing of it is left on the node.
	phase("GracefulDelete", func(t *testing.T) {
		p := r.pod(t, "grace")
		ip := p.Status.PodIP
		alloc := allocationOf(t, n2.Node, "grace")
		if alloc == nil || alloc.GetIp() != ip || !slices.Contains(reefVeths(t, n2.Node), alloc.GetHostVeth()) {
			t.Fatalf("before: IP %s, allocation %v, veths %v", ip, alloc, reefVeths(t, n2.Node))
		}
		otherAllocs := podAllocations(t, n2.Node)
		delete(otherAllocs, ip)
		otherVeths := slices.DeleteFunc(reefVeths(t, n2.Node), func(v string) bool { return v == alloc.GetHostVeth() })

		t0 := time.Now()
		if _, err := c.Kubectl("delete", "pod", "grace", "--wait=false"); err != nil {
			t.Fatal(err)
		}
		// Well inside the grace period: terminating, still served.
		eventually(t, 10*time.Second, func() string {
			if p := r.pod(t, "grace"); p == nil || p.DeletionTimestamp == nil {
				return "grace has no deletionTimestamp yet"
			}
			return ""
		})
		r.get(t, client, "http://"+ip+":8080/hostname", "grace")
		if a := allocationOf(t, n2.Node, "grace"); a == nil || a.GetIp() != ip {
			t.Errorf("%s after the delete, inside the grace period: allocation %v, want %s held", time.Since(t0).Round(time.Millisecond), a, ip)
		}
		var released, gone time.Duration
		eventually(t, 60*time.Second, func() string {
			if released == 0 && allocationOf(t, n2.Node, "grace") == nil {
				released = time.Since(t0)
			}
			if gone == 0 && r.pod(t, "grace") == nil {
				gone = time.Since(t0)
			}
			if released == 0 || gone == 0 {
				return fmt.Sprintf("released at %s, pod gone at %s", released, gone)
			}
			return ""
		})
		t.Logf("grace: delete at 0, address released at %s, pod object gone at %s", released.Round(time.Millisecond), gone.Round(time.Millisecond))
		if released < 4500*time.Millisecond {
			t.Errorf("%s released %s after the delete, inside the 5 s grace period", ip, released.Round(time.Millisecond))
		}
		// What the teardown leaves: nothing of the pod, and the rest of the
		// node as it was. Pods of the conformance slice's namespaces may
		// still be ending in their own grace periods (the e2e framework
		// does not wait for its namespaces to go), so the node may lose
		// more than grace meanwhile; it must gain nothing, and this test's
		// own pods on it keep their addresses and veths.
		keep := map[string]*reefv1.Allocation{}
		for _, name := range []string{"base-" + n2.Name, "restart"} {
			a := allocationOf(t, n2.Node, name)
			if a == nil || otherAllocs[a.GetIp()] == nil || !slices.Contains(otherVeths, a.GetHostVeth()) {
				t.Fatalf("%s on %s: allocation %v, not one of those before the delete", name, n2.Name, a)
			}
			keep[name] = a
		}
		eventually(t, 30*time.Second, func() string {
			allocs := podAllocations(t, n2.Node)
			veths := reefVeths(t, n2.Node)
			var problems []string
			for a, al := range allocs {
				if otherAllocs[a] == nil {
					problems = append(problems, fmt.Sprintf("allocation %s of %s is held; want only those of the other pods before the delete", a, al.GetPod()))
				}
			}
			for _, v := range veths {
				if !slices.Contains(otherVeths, v) {
					problems = append(problems, "veth "+v+" was not there before")
				}
			}
			for name, a := range keep {
				if allocs[a.GetIp()] == nil || !slices.Contains(veths, a.GetHostVeth()) {
					problems = append(problems, fmt.Sprintf("%s lost its allocation %s or its veth %s", name, a.GetIp(), a.GetHostVeth()))
				}
			}
			if _, err := os.Stat(alloc.GetNetns()); err == nil {
				problems = append(problems, "the sandbox's netns "+alloc.GetNetns()+" is still there")
			}
			return strings.Join(problems, "; ")
		})
		if out := run(t, l, n2.Netns, "ip", "-4", "route", "show", ip); strings.TrimSpace(out) != "" {
			t.Errorf("route to %s left on %s: %s", ip, n2.Name, out)
		}
	})

	// A hostNetwork pod has the node's address and no reef allocation;
	// it reaches reef pods on its node and on another, and they reach it.
	phase("HostNetwork", func(t *testing.T) {
		p := r.pod(t, "hostnet")
		if p.Status.PodIP != n1.Address.String() {
			t.Errorf("hostnet's IP %s, want node %s's %s", p.Status.PodIP, n1.Name, n1.Address)
		}
		if a := allocationOf(t, n1.Node, "hostnet"); a != nil {
			t.Errorf("reef allocated %s to the hostNetwork pod", a.GetIp())
		}
		remote, local := r.pod(t, "base-"+n2.Name), r.pod(t, client)
		r.get(t, "hostnet", "http://"+remote.Status.PodIP+":8080/hostname", remote.Name)
		r.get(t, "hostnet", "http://"+local.Status.PodIP+":8080/hostname", local.Name)
		url := "http://" + netip.AddrPortFrom(n1.Address, 18080).String()
		r.get(t, remote.Name, url+"/echo?msg=hostnet", "hostnet")
		r.get(t, local.Name, url+"/echo?msg=hostnet", "hostnet")
		// Who the hostNetwork pod sees calling from node2's pod: the pod,
		// or its node if natOutgoing masquerades pod -> node traffic.
		got, err := r.exec(remote.Name, "curl", "-sS", "--max-time", "5", url+"/clientip")
		src, _, _ := strings.Cut(strings.TrimSpace(got), ":")
		if err != nil || (src != remote.Status.PodIP && src != n2.Address.String()) {
			t.Errorf("%s -> hostnet /clientip: %q, %v", remote.Name, got, err)
		}
		t.Logf("hostnet sees %s's requests from %s (pod %s, node %s)", remote.Name, src, remote.Status.PodIP, n2.Address)
	})

	// Pods on every node call the API through the kubernetes Service
	// (kube-proxy's nftables next to reef's), by name and by its ClusterIP,
	// with the service account's CA and token.
	phase("APIThroughService", func(t *testing.T) {
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			t.Fatal(err)
		}
		svc := lab.KubeServiceRange.Addr().Next().String()
		const sa = "/var/run/secrets/kubernetes.io/serviceaccount"
		for _, n := range c.Nodes {
			pod := "base-" + n.Name
			for _, host := range []string{"kubernetes.default.svc", svc + ":443"} {
				script := fmt.Sprintf(`curl -sS --max-time 10 --cacert %[1]s/ca.crt -H "Authorization: Bearer $(cat %[1]s/token)" https://%[2]s/version`, sa, host)
				out, err := r.exec(pod, "sh", "-c", script)
				var got struct{ GitVersion string }
				if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.GitVersion != v.GitVersion {
					t.Errorf("%s -> https://%s/version: %q, %v; want gitVersion %s", pod, host, out, err, v.GitVersion)
				}
			}
		}
		// The token is the pod's: the API names its service account.
		script := fmt.Sprintf(`curl -sS --max-time 10 --cacert %[1]s/ca.crt -H "Authorization: Bearer $(cat %[1]s/token)" https://kubernetes.default.svc/api/v1/namespaces/kube-system/secrets`, sa)
		out, err := r.exec(client, "sh", "-c", script)
		if err != nil || !strings.Contains(out, `system:serviceaccount:default:default`) || !strings.Contains(out, `"code": 403`) {
			t.Errorf("%s lists kube-system's secrets: %q, %v; want 403 for system:serviceaccount:default:default", client, out, err)
		}
	})

	// kubelet restarted alone (an upgrade, say) finds its pods running and
	// leaves them be: no CNI call, the same sandboxes and addresses, and
	// traffic goes on while it is down.
	phase("KubeletRestart", func(t *testing.T) {
		pods := []string{"base-" + n2.Name, "restart"}
		type podWas struct {
			ip, box  string
			restarts int32
		}
		was := map[string]podWas{}
		for _, name := range pods {
			p := r.pod(t, name)
			boxes := r.sandboxes(t, p, "")
			if len(boxes) != 1 {
				t.Fatalf("%s: sandboxes %v", name, boxes)
			}
			was[name] = podWas{p.Status.PodIP, boxes[0], p.Status.ContainerStatuses[0].RestartCount}
		}
		logBefore := len(n2.Log())
		t0 := time.Now()
		if err := n2.StopKubelet(); err != nil {
			t.Fatal(err)
		}
		for _, name := range pods {
			r.get(t, client, "http://"+was[name].ip+":8080/hostname", name)
		}
		if err := n2.StartKubelet(); err != nil {
			t.Fatal(err)
		}
		// The new kubelet has reported: its node lease is renewed after
		// the restart. (The Ready condition's heartbeat is no sign: with
		// leases, kubelet posts the node's status only when it changes or
		// every five minutes.)
		eventually(t, 60*time.Second, func() string {
			lease, err := cs.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), n2.Name, metav1.GetOptions{})
			if err != nil {
				return err.Error()
			}
			if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(t0) {
				return fmt.Sprintf("%s: node lease not renewed since the restart: %v", n2.Name, lease.Spec.RenewTime)
			}
			return ""
		})
		// A pod started by the new kubelet: by the time it is Ready, the
		// kubelet has long synced the pods it found.
		barrier := filepath.Join(l.Dir, "after-kubelet.yaml")
		if err := os.WriteFile(barrier, []byte(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: after-kubelet, namespace: default}
spec:
  nodeName: %s
  containers:
  - {name: web, image: %q, args: [netexec, --http-port=8080, --udp-port=8081], readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}}
`, n2.Name, k8simages.Agnhost)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Kubectl("apply", "-f", barrier); err != nil {
			t.Fatal(err)
		}
		r.waitReady(t, time.Minute, append(pods, "after-kubelet")...)
		var calls []string
		for _, line := range strings.Split(n2.Log()[logBefore:], "\n") {
			if (strings.Contains(line, "cmd=ADD") || strings.Contains(line, "cmd=DEL")) && !strings.Contains(line, "pod=default/after-kubelet") {
				calls = append(calls, line)
			}
		}
		if len(calls) > 0 {
			t.Errorf("CNI calls on %s across the kubelet restart:\n%s", n2.Name, strings.Join(calls, "\n"))
		}
		for _, name := range pods {
			p := r.pod(t, name)
			got := podWas{p.Status.PodIP, "", p.Status.ContainerStatuses[0].RestartCount}
			if boxes := r.sandboxes(t, p, ""); len(boxes) == 1 {
				got.box = boxes[0]
			}
			if got != was[name] {
				t.Errorf("%s across the kubelet restart: %+v -> %+v", name, was[name], got)
			}
			if a := allocationOf(t, n2.Node, name); a == nil || a.GetIp() != got.ip || a.GetContainerId() != got.box {
				t.Errorf("%s's allocation after the kubelet restart: %v", name, a)
			}
			r.get(t, "base-"+n3.Name, "http://"+got.ip+":8080/hostname", name)
		}
		if _, err := r.exec("base-"+n2.Name, "true"); err != nil {
			t.Errorf("exec through the new kubelet: %v", err)
		}
		if _, err := c.Kubectl("delete", "pod", "after-kubelet", "--grace-period=0", "--wait=true", "--timeout=60s"); err != nil {
			t.Error(err)
		}
	})

	// node3 loses its power: kubelet, kube-proxy, containerd, reef and the
	// pods die, the pods' namespaces and containerd's /run state go. On
	// the way back, containerd lists the old sandboxes as not ready and
	// kubelet makes new ones: reef gives them addresses again, frees the
	// old ones, and the pods answer from the other nodes.
	phase("NodeRestart", func(t *testing.T) {
		type podWas struct {
			p     *corev1.Pod
			boxes []string
			netns string
		}
		list, err := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + n3.Name})
		if err != nil {
			t.Fatal(err)
		}
		was := map[string]podWas{}
		allocs := podAllocations(t, n3.Node)
		for i := range list.Items {
			p := &list.Items[i]
			w := podWas{p: p, boxes: r.sandboxes(t, p, "ready")}
			if a := allocs[p.Status.PodIP]; a != nil {
				w.netns = a.GetNetns()
			}
			was[p.Namespace+"/"+p.Name] = w
			t.Logf("before: %s/%s %s sandbox %.12v", p.Namespace, p.Name, p.Status.PodIP, w.boxes)
		}
		if _, ok := was["default/base-"+n3.Name]; !ok || len(allocs) != len(was) {
			t.Fatalf("pods on %s: %d, allocations %v", n3.Name, len(was), allocs)
		}

		t0 := time.Now()
		if err := n3.PowerOff(); err != nil {
			t.Fatal(err)
		}
		for _, w := range was {
			if _, err := os.Stat(w.netns); w.netns != "" && err == nil {
				t.Errorf("after the power-off, %s's netns %s is still there", w.p.Name, w.netns)
			}
		}
		// The kernel frees a namespace, and the veths in it, a moment
		// after its last user.
		eventually(t, 10*time.Second, func() string {
			if v := reefVeths(t, n3.Node); len(v) != 0 {
				return fmt.Sprintf("after the power-off, veths of pods whose namespaces are gone: %v", v)
			}
			return ""
		})
		if err := n3.PowerOn(); err != nil {
			t.Fatal(err)
		}
		t.Logf("node %s off and on again in %s", n3.Name, time.Since(t0).Round(100*time.Millisecond))

		// Every pod Ready in a new sandbox, with an address of reef's.
		eventually(t, 2*time.Minute, func() string {
			for key, w := range was {
				ns, name, _ := strings.Cut(key, "/")
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				cancel()
				if err != nil {
					return err.Error()
				}
				if !podReady(p) {
					return key + " not Ready"
				}
				boxes := r.sandboxes(t, p, "ready")
				if len(boxes) != 1 || slices.Contains(w.boxes, boxes[0]) {
					return fmt.Sprintf("%s: ready sandboxes %v (before %v)", key, boxes, w.boxes)
				}
			}
			return ""
		})
		t.Logf("pods Ready again %s after the power-off", time.Since(t0).Round(100*time.Millisecond))
		// reef holds one address per pod, the new sandbox's, and no
		// other; each veth and each pod route is a pod's.
		eventually(t, 90*time.Second, func() string {
			allocs := podAllocations(t, n3.Node)
			var veths, ips []string
			for key := range was {
				ns, name, _ := strings.Cut(key, "/")
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				cancel()
				if err != nil {
					return err.Error()
				}
				a := allocs[p.Status.PodIP]
				boxes := r.sandboxes(t, p, "ready")
				if a == nil || len(boxes) != 1 || a.GetContainerId() != boxes[0] || a.GetPod() != key {
					return fmt.Sprintf("%s at %s, sandbox %v: allocation %v", key, p.Status.PodIP, boxes, a)
				}
				delete(allocs, p.Status.PodIP)
				veths = append(veths, a.GetHostVeth())
				ips = append(ips, p.Status.PodIP)
			}
			if len(allocs) != 0 {
				return fmt.Sprintf("allocations of no pod left: %v", allocs)
			}
			got := reefVeths(t, n3.Node)
			slices.Sort(got)
			slices.Sort(veths)
			if !slices.Equal(got, veths) {
				return fmt.Sprintf("veths %v, want the pods' %v", got, veths)
			}
			var routes []string
			for _, r := range reefRoutes(t, n3.Node) {
				if f := strings.Fields(r); len(f) >= 3 && f[1] == "dev" && strings.HasPrefix(f[2], "reef") {
					routes = append(routes, f[0])
				}
			}
			slices.Sort(routes)
			slices.Sort(ips)
			if !slices.Equal(routes, ips) {
				return fmt.Sprintf("pod routes to %v, want the pods' %v", routes, ips)
			}
			return ""
		})
		t.Logf("reef's allocations on %s are the new sandboxes' only, %s after the power-off", n3.Name, time.Since(t0).Round(100*time.Millisecond))
		for key, w := range was {
			ns, name, _ := strings.Cut(key, "/")
			if ns != "default" {
				continue
			}
			p := r.pod(t, name)
			t.Logf("after: %s %s -> %s, restartCount %d", key, w.p.Status.PodIP, p.Status.PodIP, p.Status.ContainerStatuses[0].RestartCount)
			if !pool.Contains(netip.MustParseAddr(p.Status.PodIP)) {
				t.Errorf("%s's address %s is not reef's", key, p.Status.PodIP)
			}
			r.get(t, client, "http://"+p.Status.PodIP+":8080/hostname", name)
			r.get(t, "base-"+n2.Name, "http://"+p.Status.PodIP+":8080/hostname", name)
		}
		// And the node's pods reach out again.
		r.get(t, "base-"+n3.Name, "http://"+r.pod(t, client).Status.PodIP+":8080/hostname", client)
	})
	t.Logf("KubeletPaths: %s in all", time.Since(start).Round(time.Second))
}
