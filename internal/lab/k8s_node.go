package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// A worker of the lab's Kubernetes cluster (k8s.go): containerd 2,
// kubelet and kube-proxy in the node's namespace, next to its reef daemon,
// and what a test does to a node (kubelet stopped, a power cut).

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
	pc := fmt.Sprintf(kubeProxyConfig, cn.path("kube-proxy.conf"), n.Name, n.Address, c.clusterCIDRs())
	if err := os.WriteFile(cn.path("kube-proxy.yaml"), []byte(pc), 0o644); err != nil {
		return nil, err
	}
	// Dual-stack: both addresses, IPv4 first (the primary family, as the
	// service range's), so that the Node lists an InternalIP of each.
	nodeIPs := n.Address.String()
	if c.dual() {
		nodeIPs += "," + NodeAddress6(n).String()
	}
	cn.kubeletArgv = []string{c.bins["kubelet"],
		"--config=" + cn.path("kubelet.yaml"),
		"--kubeconfig=" + cn.path("kubelet.conf"),
		"--root-dir=" + cn.path("root"),
		"--cert-dir=" + cn.path("pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + nodeIPs,
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
	poll.Until(10*time.Second, func() error {
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
		if left {
			return errors.New("processes left in the cgroup")
		}
		return nil
	})
}

func (cn *ClusterNode) path(name string) string { return filepath.Join(cn.Dir, name) }

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
