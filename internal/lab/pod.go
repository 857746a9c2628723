package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
)

var podSeq atomic.Int64

// Pod is a pod namespace wired by reef-cni through libcni.
type Pod struct {
	Node        *Node
	Namespace   string // Kubernetes namespace (K8S_POD_NAMESPACE)
	Name        string // K8S_POD_NAME
	ContainerID string
	Netns       string       // netns name; NetnsPath(Netns) is CNI_NETNS
	IP          netip.Addr   // the first address of the result
	IPs         []netip.Addr // every address: one, or one of each family on a dual-stack node
	Result      *types100.Result
	// CapabilityArgs are what a runtime passes for the conflist's
	// capabilities: "portMappings" ([]PortMapping), "bandwidth"
	// (Bandwidth).
	CapabilityArgs map[string]any
}

// PortMapping is a hostPort as a runtime passes it (capability
// portMappings).
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Bandwidth is the capability bandwidth's argument: bits per second and
// bits.
type Bandwidth struct {
	IngressRate  uint64 `json:"ingressRate"`
	IngressBurst uint64 `json:"ingressBurst"`
	EgressRate   uint64 `json:"egressRate"`
	EgressBurst  uint64 `json:"egressBurst"`
}

// CNI is the runtime side: libcni with reef-cni on its path and a cache dir
// of the lab's own, as containerd would hold it.
func (n *Node) CNI() *libcni.CNIConfig {
	return libcni.NewCNIConfigWithCacheDir([]string{n.Lab.BinDir}, filepath.Join(n.Dir, "cni-cache"), nil)
}

// NetworkList parses the node's conflist.
func (n *Node) NetworkList() (*libcni.NetworkConfigList, error) {
	return libcni.ConfListFromBytes(n.Conflist())
}

// NewPodNetns creates an unwired pod namespace on the node: the runtime's
// sandbox before it calls ADD.
func (n *Node) NewPodNetns(namespace, name string) (*Pod, error) {
	seq := podSeq.Add(1)
	p := &Pod{Node: n, Namespace: namespace, Name: name,
		ContainerID: containerID(n.Lab.Prefix, seq),
		Netns:       fmt.Sprintf("%s-p%d", n.Lab.Prefix, seq)}
	if err := n.Lab.AddNetns(p.Netns); err != nil {
		return nil, err
	}
	return p, nil
}

// NewPod creates a pod namespace and ADDs it through libcni.
func (n *Node) NewPod(namespace, name string) (*Pod, error) {
	p, err := n.NewPodNetns(namespace, name)
	if err != nil {
		return nil, err
	}
	if err := p.Add(); err != nil {
		return p, err
	}
	return p, nil
}

// containerID looks like a runtime's: 64 hex digits, unique per lab.
func containerID(prefix string, seq int64) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", prefix, seq)))
	return hex.EncodeToString(sum[:])
}

// RuntimeConf is what the runtime passes for this pod.
func (p *Pod) RuntimeConf() *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: p.ContainerID,
		NetNS:       NetnsPath(p.Netns),
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.ContainerID},
		},
		CapabilityArgs: p.CapabilityArgs,
	}
}

func cniCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

// Add runs CNI ADD and records the address.
func (p *Pod) Add() error {
	list, err := p.Node.NetworkList()
	if err != nil {
		return err
	}
	ctx, cancel := cniCtx()
	defer cancel()
	res, err := p.Node.CNI().AddNetworkList(ctx, list, p.RuntimeConf())
	if err != nil {
		return fmt.Errorf("ADD %s/%s on %s: %w", p.Namespace, p.Name, p.Node.Name, err)
	}
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return err
	}
	var ips []netip.Addr
	for _, c := range r.IPs {
		ip, _ := netip.AddrFromSlice(c.Address.IP)
		ips = append(ips, ip.Unmap())
	}
	if len(ips) == 0 || len(ips) > 2 || len(ips) == 2 && ips[0].Is4() == ips[1].Is4() {
		return fmt.Errorf("ADD %s/%s: IPs %v in result, want one, or one of each family", p.Namespace, p.Name, ips)
	}
	p.Result = r
	p.IP, p.IPs = ips[0], ips
	return nil
}

// Del runs CNI DEL with the pod's netns.
func (p *Pod) Del() error {
	return p.del(p.RuntimeConf())
}

// DelNoNetns runs CNI DEL with an empty CNI_NETNS, as containerd does at
// sandbox removal.
func (p *Pod) DelNoNetns() error {
	rt := p.RuntimeConf()
	rt.NetNS = ""
	return p.del(rt)
}

func (p *Pod) del(rt *libcni.RuntimeConf) error {
	list, err := p.Node.NetworkList()
	if err != nil {
		return err
	}
	ctx, cancel := cniCtx()
	defer cancel()
	if err := p.Node.CNI().DelNetworkList(ctx, list, rt); err != nil {
		return fmt.Errorf("DEL %s/%s on %s: %w", p.Namespace, p.Name, p.Node.Name, err)
	}
	return nil
}

// Check runs CNI CHECK.
func (p *Pod) Check() error {
	list, err := p.Node.NetworkList()
	if err != nil {
		return err
	}
	ctx, cancel := cniCtx()
	defer cancel()
	return p.Node.CNI().CheckNetworkList(ctx, list, p.RuntimeConf())
}

// Remove deletes the pod's namespace (after a DEL, or to make it vanish).
func (p *Pod) Remove() error { return p.Node.Lab.DelNetns(p.Netns) }

// Run runs a command in the pod's namespace.
func (p *Pod) Run(args ...string) (string, error) { return p.Node.Lab.Run(p.Netns, args...) }

var ttlRE = regexp.MustCompile(`ttl=(\d+)`)

// Ping sends one ICMP echo from netns to dst and returns the reply's TTL.
func (l *Lab) Ping(netns string, dst netip.Addr) (int, error) {
	out, err := l.Run(netns, "ping", "-c", "1", "-W", "2", dst.String())
	if err != nil {
		return 0, err
	}
	m := ttlRE.FindStringSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("ping %s from %s: no ttl in %q", dst, netns, out)
	}
	return strconv.Atoi(m[1])
}

// Ping pings dst from the pod and returns the reply's TTL.
func (p *Pod) Ping(dst netip.Addr) (int, error) { return p.Node.Lab.Ping(p.Netns, dst) }

// GC runs CNI GC for the node's network with the given attachments valid.
func (n *Node) GC(valid ...*Pod) error {
	list, err := n.NetworkList()
	if err != nil {
		return err
	}
	args := &libcni.GCArgs{}
	for _, p := range valid {
		args.ValidAttachments = append(args.ValidAttachments, types.GCAttachment{ContainerID: p.ContainerID, IfName: "eth0"})
	}
	ctx, cancel := cniCtx()
	defer cancel()
	return n.CNI().GCNetworkList(ctx, list, args)
}

// CNIStatus runs CNI STATUS for the node's network.
func (n *Node) CNIStatus() error {
	list, err := n.NetworkList()
	if err != nil {
		return err
	}
	ctx, cancel := cniCtx()
	defer cancel()
	return n.CNI().GetStatusNetworkList(ctx, list)
}

// ForgetCNICache drops the pod's result from the runtime's libcni cache,
// as a runtime that lost its state would: the pod stays, but the runtime
// no longer knows it (its GC does not DEL it, its CHECK has no
// prevResult).
func (p *Pod) ForgetCNICache() error {
	list, err := p.Node.NetworkList()
	if err != nil {
		return err
	}
	rt := p.RuntimeConf()
	return os.Remove(filepath.Join(p.Node.Dir, "cni-cache", "results", list.Name+"-"+rt.ContainerID+"-"+rt.IfName))
}
