package lab

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/reefcni/reef/packaging"
)

// The lab's Kubernetes cluster (issue 27): the real binaries of one
// Kubernetes release, built by `make deps-k8s`, none of them played by the
// lab. The control plane (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) runs in the API's namespace; each worker is a lab node,
// its namespace holding a containerd 2 (built from its module), kubelet,
// kube-proxy in nftables mode and the reef daemon, reef wired as its
// package lays it out: the one-line conflist in the CNI conf dir, reef-cni
// in the bin dir, policy on through `reef kubeconfig`. CoreDNS runs as a
// Deployment behind the kube-dns Service, and no image is pulled: the
// images are built here and imported into every node's containerd.
//
// Processes run in the host's mount namespace, as the CRI lab's do: each
// kubelet has its own root dir, pod logs dir, cgroup root and containerd,
// and its ports are its node namespace's.

// ClusterDNS is the kube-dns Service's address (kubeadm's: the tenth of
// the service range).
var ClusterDNS = func() netip.Addr {
	a := KubeServiceRange.Addr().As4()
	a[3] += 10
	return netip.AddrFrom4(a)
}()

// ClusterPool is the pod pool of the cluster's nodes.
const ClusterPool = "10.244.0.0/16"

// ClusterOptions shape a cluster.
type ClusterOptions struct {
	// Nodes is the number of workers; 0 means 3.
	Nodes int
	// Images are image tars imported into every node's containerd: the
	// sandbox image and those the pods use (ClusterImages).
	Images []string
	// SandboxImage is containerd's sandbox (pause) image, one of Images.
	SandboxImage string
	// CoreDNSImage runs CoreDNS; "" starts no DNS.
	CoreDNSImage string
	// Reference wires the nodes with Debian's reference plugins instead
	// of reef (referenceCNI: ptp, host-local, portmap); the reef daemons
	// do not run, and pods reach only the pods of their own node.
	Reference bool
}

// Cluster is a running cluster.
type Cluster struct {
	Lab   *Lab
	API   *KubeAPI
	Nodes []*ClusterNode
	// Kubeconfig is an admin kubeconfig that works from the API's
	// namespace (kubectl and e2e.test run there).
	Kubeconfig string

	bins      map[string]string
	cm, sched *kubeProc
	mu        sync.Mutex
	closed    bool
}

// ClusterNode is a worker.
type ClusterNode struct {
	*Node
	Containerd *Containerd
	Dir        string // kubelet's and kube-proxy's files
	CgroupRoot string // kubelet's cgroupRoot

	kubelet, proxy *kubeProc
	// kubeletArgv and proxyArgv start them again (StartKubelet, PowerOn).
	kubeletArgv, proxyArgv []string
	// reefRan: reef's daemon ran when PowerOff came (not on a Reference
	// cluster's node), so PowerOn starts it.
	reefRan bool
}

// ClusterBinaries are the binaries a cluster runs, from KubeBinDir.
var ClusterBinaries = []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl", "containerd2", "containerd2-shim-runc-v2"}

// StartCluster brings a cluster up and waits until every node is Ready
// and, with CoreDNSImage, CoreDNS answers. Lab.Close tears it down. When
// the cluster came up but is not ready, it is returned with the error, to
// look at.
func (l *Lab) StartCluster(opts ClusterOptions) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	c := &Cluster{Lab: l, bins: map[string]string{}}
	for _, b := range ClusterBinaries {
		p, err := exec.LookPath(filepath.Join(KubeBinDir(), b))
		if err != nil {
			return nil, fmt.Errorf("lab: %s not found in %s (run make deps-k8s): %w", b, KubeBinDir(), err)
		}
		c.bins[b] = p
	}
	first := len(l.Nodes())
	var names []string
	for i := range opts.Nodes {
		names = append(names, fmt.Sprintf("node%d", first+i+1))
	}
	k, err := l.StartKubeAPIWith(KubeAPIOptions{Cluster: true, Nodes: names})
	if err != nil {
		return nil, err
	}
	c.API = k
	l.mu.Lock()
	l.spawned = append(l.spawned, func() { c.Close() })
	l.mu.Unlock()
	c.Kubeconfig = k.path("admin.conf")
	if err := k.WriteAdminKubeconfig(c.Kubeconfig); err != nil {
		return nil, err
	}
	if err := c.startControllers(); err != nil {
		return nil, err
	}
	if err := k.Apply("/usr/share/reef/rbac.yaml", packaging.RBAC); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(l.Dir, "reef-kubeconfig")
	out, err := exec.Command("nsenter", "--net="+NetnsPath(k.Netns), "--", filepath.Join(l.BinDir, "reef"),
		"kubeconfig", "--admin-kubeconfig", c.Kubeconfig, "--out", kubeconfig, "--duration", "24h").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("reef kubeconfig: %w: %s", err, out)
	}
	nodes, err := l.AddMeshWith(opts.Nodes, NodeOptions{
		Extra: "pools:\n  - cidr: " + ClusterPool + "\n    blockSize: 26\n    vxlanMode: Never\n    natOutgoing: true\n" +
			"kubernetes:\n  kubeconfig: " + kubeconfig + "\n",
		ReconcileInterval: 30 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	// A node has a default route through its uplink's gateway, as a
	// kubeadm node has: kube-proxy rejects traffic to a Service with no
	// endpoints in its forward chain, which only a routed packet reaches
	// (without the route, the kernel answers "network is unreachable"
	// first, and the Services tests that want "connection refused" fail).
	o, err := l.AddOutside()
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if err := o.DefaultRoute(n); err != nil {
			return nil, err
		}
	}
	if !opts.Reference {
		if err := StartAll(nodes); err != nil {
			return nil, err
		}
	}
	for _, n := range nodes {
		cn, err := c.startNode(n, opts)
		if err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, cn)
	}
	if err := c.WaitNodesReady(2 * time.Minute); err != nil {
		return c, err
	}
	if opts.CoreDNSImage != "" {
		if err := c.startCoreDNS(opts.CoreDNSImage); err != nil {
			return c, err
		}
	}
	return c, nil
}

// kubeconfigFor writes a kubeconfig of the user's token for the cluster.
func (c *Cluster) kubeconfigFor(path, user string) error {
	tok := c.API.tokens[user]
	if tok == "" {
		return fmt.Errorf("lab: no token for %s", user)
	}
	cfg := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"reef-lab": {Server: c.API.Server(), CertificateAuthorityData: c.API.CA()}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{user: {Token: tok}},
		Contexts:       map[string]*clientcmdapi.Context{"reef-lab": {Cluster: "reef-lab", AuthInfo: user}},
		CurrentContext: "reef-lab",
	}
	return clientcmd.WriteToFile(cfg, path)
}

func (c *Cluster) startControllers() error {
	k := c.API
	for _, u := range []string{"system:kube-controller-manager", "system:kube-scheduler"} {
		if err := c.kubeconfigFor(k.path(strings.TrimPrefix(u, "system:")+".conf"), u); err != nil {
			return err
		}
	}
	cm, err := spawnIn(k.Netns, k.path("kube-controller-manager.log"), c.bins["kube-controller-manager"],
		"--kubeconfig="+k.path("kube-controller-manager.conf"),
		"--authentication-kubeconfig="+k.path("kube-controller-manager.conf"),
		"--authorization-kubeconfig="+k.path("kube-controller-manager.conf"),
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+k.path("sa.key"),
		"--root-ca-file="+k.path("ca.crt"),
		"--cluster-signing-cert-file="+k.path("ca.crt"),
		"--cluster-signing-key-file="+k.path("ca.key"),
		// reef does IPAM: no node gets a podCIDR.
		"--allocate-node-cidrs=false",
		"--service-cluster-ip-range="+KubeServiceRange.String(),
	)
	if err != nil {
		return err
	}
	c.cm = cm
	sched, err := spawnIn(k.Netns, k.path("kube-scheduler.log"), c.bins["kube-scheduler"],
		"--kubeconfig="+k.path("kube-scheduler.conf"),
		"--authentication-kubeconfig="+k.path("kube-scheduler.conf"),
		"--authorization-kubeconfig="+k.path("kube-scheduler.conf"),
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
	)
	if err != nil {
		return err
	}
	c.sched = sched
	return nil
}

const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: %[3]q
# This machine's cgroup hierarchy is v1: supported, and refused since 1.35
# unless said so.
failCgroupV1: false
containerRuntimeEndpoint: unix://%[4]s
clusterDNS: [%[5]s]
clusterDomain: cluster.local
resolvConf: %[6]q
failSwapOn: false
podLogsDir: %[7]q
rotateCertificates: false
serializeImagePulls: false
# The imported images are all there is: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%%", imagefs.available: "1%%", nodefs.inodesFree: "1%%"}
protectKernelDefaults: false
maxPods: 250
`

const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %[1]q}
hostnameOverride: %[2]s
bindAddress: %[3]s
clusterCIDR: %[4]s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
# nf_conntrack_max is the host's: left alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`

func (c *Cluster) startNode(n *Node, opts ClusterOptions) (*ClusterNode, error) {
	cn := &ClusterNode{Node: n, Dir: filepath.Join(n.Dir, "k8s"), CgroupRoot: "/" + c.Lab.Prefix + "-" + n.Name}
	for _, d := range []string{cn.Dir, cn.path("root"), cn.path("pod-logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	copts := ContainerdOptions{V2: true, Conflist: n.Conflist(), Images: opts.Images, SandboxImage: opts.SandboxImage}
	if opts.Reference {
		copts.Conflist, copts.Plugins = referenceCNI(n)
	}
	ctr, err := n.StartContainerd(copts)
	if err != nil {
		return nil, err
	}
	cn.Containerd = ctr
	if err := makeCgroupRoot(cn.CgroupRoot); err != nil {
		return nil, err
	}
	// No nameserver the pods could reach: the cluster's DNS answers the
	// cluster's names, nothing else resolves.
	if err := os.WriteFile(cn.path("resolv.conf"), []byte("nameserver 127.0.0.53\noptions ndots:1\n"), 0o644); err != nil {
		return nil, err
	}
	if err := c.kubeconfigFor(cn.path("kubelet.conf"), "system:node:"+n.Name); err != nil {
		return nil, err
	}
	if err := c.kubeconfigFor(cn.path("kube-proxy.conf"), "system:kube-proxy"); err != nil {
		return nil, err
	}
	kc := fmt.Sprintf(kubeletConfig, n.Address, c.API.path("ca.crt"), cn.CgroupRoot, ctr.Socket, ClusterDNS,
		cn.path("resolv.conf"), cn.path("pod-logs"))
	if err := os.WriteFile(cn.path("kubelet.yaml"), []byte(kc), 0o644); err != nil {
		return nil, err
	}
	pc := fmt.Sprintf(kubeProxyConfig, cn.path("kube-proxy.conf"), n.Name, n.Address, ClusterPool)
	if err := os.WriteFile(cn.path("kube-proxy.yaml"), []byte(pc), 0o644); err != nil {
		return nil, err
	}
	cn.kubeletArgv = []string{c.bins["kubelet"],
		"--config=" + cn.path("kubelet.yaml"),
		"--kubeconfig=" + cn.path("kubelet.conf"),
		"--root-dir=" + cn.path("root"),
		"--cert-dir=" + cn.path("pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.Address.String(),
	}
	cn.proxyArgv = []string{c.bins["kube-proxy"], "--config=" + cn.path("kube-proxy.yaml")}
	if err := cn.StartKubelet(); err != nil {
		return nil, err
	}
	if cn.proxy, err = spawnIn(n.Netns, cn.path("kube-proxy.log"), cn.proxyArgv[0], cn.proxyArgv[1:]...); err != nil {
		return nil, err
	}
	return cn, nil
}

// StopKubelet stops the node's kubelet with SIGTERM, as `systemctl stop
// kubelet` does: its pods, containerd and reef go on.
func (cn *ClusterNode) StopKubelet() error {
	if cn.kubelet == nil {
		return nil
	}
	err := cn.kubelet.stop(syscall.SIGTERM, 15*time.Second)
	cn.kubelet = nil
	return err
}

// StartKubelet starts the node's kubelet, with the same configuration,
// root dir and log as before, if it does not run.
func (cn *ClusterNode) StartKubelet() error {
	if cn.kubelet != nil && !cn.kubelet.exited() {
		return nil
	}
	p, err := spawnIn(cn.Netns, cn.path("kubelet.log"), cn.kubeletArgv[0], cn.kubeletArgv[1:]...)
	if err != nil {
		return err
	}
	cn.kubelet = p
	return nil
}

// PowerOff does to the node what a power cut does to what runs on it.
// kubelet, kube-proxy, reef's daemon (if it runs), containerd, its shims
// and every process in the node's cgroup root (the pods') are killed with
// SIGKILL, and what a reboot loses goes: the pods' network namespaces
// (their netns files unmounted, so the pod ends of reef's veths go with
// them), containerd's state and runc's dirs, reef's socket (all on /run,
// a tmpfs, on a real node), the tmpfs volumes kubelet mounted and the
// pods' cgroups. What a disk keeps stays: containerd's root, whose metadata
// still lists the sandboxes, kubelet's root dir, reef's state dir and
// pending-DEL queue. The node's own namespace (eth0, routes, nftables)
// stays as it was: the lab cannot reboot it without taking the node off
// the underlay. PowerOn starts the node again.
func (cn *ClusterNode) PowerOff() error {
	for _, p := range []*kubeProc{cn.kubelet, cn.proxy} {
		if p != nil {
			p.stop(syscall.SIGKILL, 5*time.Second)
		}
	}
	cn.kubelet, cn.proxy = nil, nil
	cn.reefRan = cn.Node.Running()
	errs := []error{cn.Node.Kill()}
	ctr := cn.Containerd
	ctr.mu.Lock()
	cmd, done := ctr.cmd, ctr.done
	ctr.cmd = nil
	ctr.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
		<-done
	}
	killCgroup(cn.CgroupRoot)
	// The shims, the netns files of the sandboxes in containerd's state,
	// the rootfs and shm mounts.
	cleanContainerdDir(ctr.Dir, cn.Netns)
	for _, d := range []string{filepath.Join(ctr.Dir, "state"), filepath.Join(ctr.Dir, "runc")} {
		errs = append(errs, os.RemoveAll(d))
	}
	unmountUnder(cn.path("root"))
	removeCgroupRoot(cn.CgroupRoot)
	errs = append(errs, makeCgroupRoot(cn.CgroupRoot))
	if err := os.Remove(cn.Socket); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// PowerOn starts what PowerOff stopped, in the order the units start on a
// node (reef.service is Before=kubelet.service): reef, if it ran, until it
// serves ADD; containerd, until its CRI answers; kube-proxy; kubelet.
func (cn *ClusterNode) PowerOn() error {
	if cn.reefRan {
		if err := cn.Node.Start(); err != nil {
			return err
		}
	}
	if err := cn.Containerd.start(); err != nil {
		return err
	}
	p, err := spawnIn(cn.Netns, cn.path("kube-proxy.log"), cn.proxyArgv[0], cn.proxyArgv[1:]...)
	if err != nil {
		return err
	}
	cn.proxy = p
	return cn.StartKubelet()
}

// killCgroup SIGKILLs every process in the cgroup root's tree, in every
// v1 hierarchy, until none is left (a fork may race the first pass).
func killCgroup(root string) {
	waitFor(10*time.Second, func() bool {
		left := false
		for _, ctl := range cgroupControllers {
			filepath.WalkDir(filepath.Join("/sys/fs/cgroup", ctl, root), func(p string, e os.DirEntry, err error) error {
				if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
					return nil
				}
				b, _ := os.ReadFile(p)
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
						syscall.Kill(pid, syscall.SIGKILL)
						left = true
					}
				}
				return nil
			})
		}
		return !left
	})
}

func (cn *ClusterNode) path(name string) string { return filepath.Join(cn.Dir, name) }

// LogTail is the end of the control plane's logs.
func (c *Cluster) LogTail(lines int) string {
	return c.API.LogTail(lines) + "\nkube-controller-manager:\n" + logTail(c.API.path("kube-controller-manager.log"), lines) +
		"\nkube-scheduler:\n" + logTail(c.API.path("kube-scheduler.log"), lines)
}

// LogTail is the end of the node's kubelet and kube-proxy logs.
func (cn *ClusterNode) LogTail(lines int) string {
	return "kubelet:\n" + logTail(cn.path("kubelet.log"), lines) + "\nkube-proxy:\n" + logTail(cn.path("kube-proxy.log"), lines)
}

// cgroupControllers are the v1 hierarchies kubelet and runc use.
var cgroupControllers = []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd"}

// makeCgroupRoot makes a kubelet's cgroup root in every hierarchy; cpuset's
// needs its parent's cpus and mems before a task can join.
func makeCgroupRoot(root string) error {
	for _, ctl := range cgroupControllers {
		base := filepath.Join("/sys/fs/cgroup", ctl)
		if _, err := os.Stat(base); err != nil {
			continue
		}
		d := filepath.Join(base, root)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup root %s: %w", d, err)
		}
		if ctl == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(base, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup root %s: %w", d, err)
				}
			}
		}
	}
	return nil
}

// removeCgroupRoot removes a kubelet's cgroup root, deepest first, once its
// tasks are gone.
func removeCgroupRoot(root string) {
	for _, ctl := range cgroupControllers {
		d := filepath.Join("/sys/fs/cgroup", ctl, root)
		var dirs []string
		filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			syscall.Rmdir(dirs[i])
		}
	}
}

// WaitNodesReady waits until every node's Node object is Ready.
func (c *Cluster) WaitNodesReady(timeout time.Duration) error {
	cs, err := c.API.Admin()
	if err != nil {
		return err
	}
	var last string
	ok := waitFor(timeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, n := range c.Nodes {
			if n.kubelet.exited() {
				last = fmt.Sprintf("kubelet of %s exited: %v", n.Name, n.kubelet.exitErr())
				return true
			}
			obj, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false
			}
			ready := false
			for _, cond := range obj.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					ready = cond.Status == corev1.ConditionTrue
					last = fmt.Sprintf("%s: Ready %s: %s", n.Name, cond.Status, cond.Message)
				}
			}
			if !ready {
				return false
			}
		}
		last = ""
		return true
	})
	if !ok || last != "" {
		var tails []string
		for _, n := range c.Nodes {
			tails = append(tails, n.Name+" "+n.LogTail(15))
		}
		return fmt.Errorf("lab cluster: nodes not Ready within %s: %s\n%s", timeout, last, strings.Join(tails, "\n"))
	}
	return nil
}

//go:embed kube/coredns.yaml
var coreDNSManifest string

func (c *Cluster) startCoreDNS(image string) error {
	m := strings.NewReplacer("@IMAGE@", image, "@DNS@", ClusterDNS.String()).Replace(coreDNSManifest)
	file := c.API.path("coredns.yaml")
	if err := os.WriteFile(file, []byte(m), 0o644); err != nil {
		return err
	}
	if _, err := c.Kubectl("apply", "-f", file); err != nil {
		return err
	}
	cs, err := c.API.Admin()
	if err != nil {
		return err
	}
	var last string
	if !waitFor(3*time.Minute, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		return d.Status.AvailableReplicas == *d.Spec.Replicas
	}) {
		pods, _ := c.Kubectl("get", "pods", "-A", "-o", "wide")
		events, _ := c.Kubectl("get", "events", "-n", "kube-system", "--sort-by=.lastTimestamp")
		return fmt.Errorf("lab cluster: CoreDNS not available within 3m: %s\n%s\n%s", last, pods, events)
	}
	return nil
}

// Kubectl runs kubectl with the admin kubeconfig in the API's namespace.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	cmd := exec.Command("nsenter", append([]string{"--net=" + NetnsPath(c.API.Netns), "--", c.bins["kubectl"], "--kubeconfig", c.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Close stops the workers' kubelets and kube-proxies (their containers
// with their containerd, which the lab stops), then the controllers; the
// API closes with the lab. Safe to call more than once.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	var errs []error
	for _, n := range c.Nodes {
		for _, p := range []*kubeProc{n.kubelet, n.proxy} {
			if p != nil {
				errs = append(errs, p.stop(syscall.SIGTERM, 15*time.Second))
			}
		}
		if n.Containerd != nil {
			errs = append(errs, n.Containerd.Close())
		}
		// kubelet leaves its volumes (tmpfs of secrets, configmaps)
		// mounted when it stops.
		unmountUnder(n.Dir)
		removeCgroupRoot(n.CgroupRoot)
	}
	for _, p := range []*kubeProc{c.sched, c.cm} {
		if p != nil {
			errs = append(errs, p.stop(syscall.SIGTERM, 15*time.Second))
		}
	}
	return errors.Join(errs...)
}
