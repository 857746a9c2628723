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
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/reefcni/reef/internal/poll"
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

// ClusterPool is the pod pool of the cluster's nodes; ClusterPool6 the
// IPv6 one beside it in a dual-stack cluster (/122 blocks, reef's
// default).
const (
	ClusterPool  = "10.244.0.0/16"
	ClusterPool6 = "fd00:10:244::/56"
)

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
	// DualStack makes the cluster dual-stack, IPv4 first (issue 29):
	// reef pools of both families (ClusterPool, ClusterPool6), each node
	// an IPv6 address on its uplink (NodeAddress6) and an IPv6 default
	// route, both families in kube-apiserver's and the
	// controller-manager's service range (ServiceRanges), kubelet's
	// --node-ip and kube-proxy's clusterCIDR, and the control plane's
	// routes to the pods in both families. Not with Reference.
	DualStack bool
	// BGPExtra is appended to every node's bgp: section (NodeOptions):
	// external peers, Service addresses.
	BGPExtra string
}

// dual is whether the cluster is dual-stack.
func (c *Cluster) dual() bool { return c.opts.DualStack }

// clusterCIDRs are the pod pools, as kube-proxy's clusterCIDR lists
// them.
func (c *Cluster) clusterCIDRs() string {
	if c.dual() {
		return ClusterPool + "," + ClusterPool6
	}
	return ClusterPool
}

// Cluster is a running cluster.
type Cluster struct {
	Lab   *Lab
	API   *KubeAPI
	Nodes []*ClusterNode
	// Kubeconfig is an admin kubeconfig that works from the API's
	// namespace (kubectl and e2e.test run there).
	Kubeconfig string

	opts      ClusterOptions
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
	if opts.DualStack && opts.Reference {
		return nil, errors.New("lab: a dual-stack cluster runs reef, not the reference plugins")
	}
	c := &Cluster{Lab: l, opts: opts, bins: map[string]string{}}
	if err := c.findBinaries(); err != nil {
		return nil, err
	}
	first := len(l.Nodes())
	var names []string
	for i := range opts.Nodes {
		names = append(names, fmt.Sprintf("node%d", first+i+1))
	}
	k, err := l.StartKubeAPIWith(KubeAPIOptions{Cluster: true, Nodes: names, DualStack: opts.DualStack})
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
	kubeconfig, err := c.reefKubeconfig()
	if err != nil {
		return nil, err
	}
	nodes, err := c.addNodes(kubeconfig)
	if err != nil {
		return nil, err
	}
	if !opts.Reference {
		if err := c.routePodsFromControlPlane(nodes); err != nil {
			return nil, err
		}
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

// findBinaries finds the cluster's binaries (ClusterBinaries) in
// KubeBinDir.
func (c *Cluster) findBinaries() error {
	for _, b := range ClusterBinaries {
		p, err := exec.LookPath(filepath.Join(KubeBinDir(), b))
		if err != nil {
			return fmt.Errorf("lab: %s not found in %s (run make deps-k8s): %w", b, KubeBinDir(), err)
		}
		c.bins[b] = p
	}
	return nil
}

// reefKubeconfig applies reef's RBAC and writes the kubeconfig of reef's
// daemons, as an operator would with `reef kubeconfig`; it returns its
// path.
func (c *Cluster) reefKubeconfig() (string, error) {
	k := c.API
	if err := k.Apply("/usr/share/reef/rbac.yaml", packaging.RBAC); err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(c.Lab.Dir, "reef-kubeconfig")
	out, err := exec.Command("nsenter", "--net="+NetnsPath(k.Netns), "--", filepath.Join(c.Lab.BinDir, "reef"),
		"kubeconfig", "--admin-kubeconfig", c.Kubeconfig, "--out", kubeconfig, "--duration", "24h").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("reef kubeconfig: %w: %s", err, out)
	}
	return kubeconfig, nil
}

// addNodes adds the cluster's nodes, their reef configured with the
// cluster's pools and kubeconfig (not started), each with a default route
// through the lab's outside router, and with DualStack their IPv6
// addresses and the API's on the IPv6 underlay.
func (c *Cluster) addNodes(kubeconfig string) ([]*Node, error) {
	pools := "pools:\n  - cidr: " + ClusterPool + "\n    blockSize: 26\n    vxlanMode: Never\n    natOutgoing: true\n"
	if c.opts.DualStack {
		pools += "  - cidr: " + ClusterPool6 + "\n    vxlanMode: Never\n    natOutgoing: true\n"
	}
	nodes, err := c.Lab.AddMeshWith(c.opts.Nodes, NodeOptions{
		Extra:             pools + "kubernetes:\n  kubeconfig: " + kubeconfig + "\n",
		ReconcileInterval: 30 * time.Second,
		BGPExtra:          c.opts.BGPExtra,
	})
	if err != nil {
		return nil, err
	}
	// A node has a default route through its uplink's gateway, as a
	// kubeadm node has: kube-proxy rejects traffic to a Service with no
	// endpoints in its forward chain, which only a routed packet reaches
	// (without the route, the kernel answers "network is unreachable"
	// first, and the Services tests that want "connection refused" fail).
	o, err := c.Lab.AddOutside()
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if err := o.DefaultRoute(n); err != nil {
			return nil, err
		}
	}
	// Dual-stack: the nodes' IPv6 addresses on the uplink and their IPv6
	// default route through the router, before reef starts (it takes
	// nodeAddressV6 from the uplink); the API's namespace on the IPv6
	// underlay too, to reach the nodes and, through them, the pods.
	if c.opts.DualStack {
		if err := o.AddIPv6(nodes...); err != nil {
			return nil, err
		}
		if err := c.Lab.IP(c.API.Netns, "-6", "addr", "add", netip.PrefixFrom(KubeAPIAddr6, Underlay6.Bits()).String(), "dev", "eth0", "nodad"); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

// routePodsFromControlPlane routes the pod pool from the control plane's
// namespace through the nodes (one ECMP route, a next hop per node). The
// API server dials pods for the pods/proxy and services/proxy
// subresources, admission webhooks and aggregated APIs (metrics-server);
// on a kubeadm cluster it runs on a control-plane node that runs reef and
// has reef's routes. Here it has no daemon of its own: a node it sends a
// packet to forwards it to the block's owner, whose pod answers straight
// back (the way back needs no route, the control plane is on the
// underlay). Without this route the upstream DNS tests, which read their
// probes' results through the pod proxy, and the Proxy tests fail. A
// Reference cluster has no routes between nodes, so it gets none.
//
// A dual-stack cluster routes the IPv6 pool the same way, through the
// nodes' IPv6 addresses.
func (c *Cluster) routePodsFromControlPlane(nodes []*Node) error {
	args := []string{"route", "replace", ClusterPool}
	for _, n := range nodes {
		args = append(args, "nexthop", "via", n.Address.String())
	}
	if err := c.Lab.IP(c.API.Netns, args...); err != nil || !c.dual() {
		return err
	}
	args = []string{"-6", "route", "replace", ClusterPool6}
	for _, n := range nodes {
		args = append(args, "nexthop", "via", NodeAddress6(n).String())
	}
	return c.Lab.IP(c.API.Netns, args...)
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
		"--service-cluster-ip-range="+ServiceRanges(c.dual()),
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

// LogTail is the end of the control plane's logs.
func (c *Cluster) LogTail(lines int) string {
	return c.API.LogTail(lines) + "\nkube-controller-manager:\n" + logTail(c.API.path("kube-controller-manager.log"), lines) +
		"\nkube-scheduler:\n" + logTail(c.API.path("kube-scheduler.log"), lines)
}

// WaitNodesReady waits until every node's Node object is Ready.
func (c *Cluster) WaitNodesReady(timeout time.Duration) error {
	cs, err := c.API.Admin()
	if err != nil {
		return err
	}
	err = poll.Until(timeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, n := range c.Nodes {
			if n.kubelet.exited() {
				return poll.Stop(fmt.Errorf("kubelet of %s exited: %v", n.Name, n.kubelet.exitErr()))
			}
			obj, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ready, why := false, n.Name+": no Ready condition"
			for _, cond := range obj.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					ready = cond.Status == corev1.ConditionTrue
					why = fmt.Sprintf("%s: Ready %s: %s", n.Name, cond.Status, cond.Message)
				}
			}
			if !ready {
				return errors.New(why)
			}
		}
		return nil
	})
	if err != nil {
		var tails []string
		for _, n := range c.Nodes {
			tails = append(tails, n.Name+" "+n.LogTail(15))
		}
		return fmt.Errorf("lab cluster: nodes not Ready: %v\n%s", err, strings.Join(tails, "\n"))
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
	if err := poll.Until(3*time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := cs.AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != *d.Spec.Replicas {
			return fmt.Errorf("%d of %d replicas available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		}
		return nil
	}); err != nil {
		pods, _ := c.Kubectl("get", "pods", "-A", "-o", "wide")
		events, _ := c.Kubectl("get", "events", "-n", "kube-system", "--sort-by=.lastTimestamp")
		return fmt.Errorf("lab cluster: CoreDNS not available: %v\n%s\n%s", err, pods, events)
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
