package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
)

// CRIPod is a pod sandbox created through the CRI.
type CRIPod struct {
	C         *Containerd
	ID        string // sandbox id
	Name      string
	Namespace string
	UID       string
	IP        netip.Addr // the CRI's status.network.ip while the sandbox was ready
	NetnsPath string     // /var/run/netns/cni-…, containerd's
	State     string     // SANDBOX_READY, SANDBOX_NOTREADY
}

// Netns is the pod's netns name (the base of NetnsPath), for Lab.Run.
func (p *CRIPod) Netns() string { return filepath.Base(p.NetnsPath) }

// CRIPortMapping is a sandbox's port mapping as the CRI has it (kubelet
// writes one per container port with a hostPort). Protocol: 0 TCP, 1 UDP,
// 2 SCTP.
type CRIPortMapping struct {
	Protocol      int    `json:"protocol"`
	ContainerPort int    `json:"container_port"`
	HostPort      int    `json:"host_port"`
	HostIP        string `json:"host_ip,omitempty"`
}

// CRIPodOptions are what a sandbox config carries beyond its name: port
// mappings and annotations (kubernetes.io/ingress-bandwidth, …).
type CRIPodOptions struct {
	PortMappings []CRIPortMapping
	Annotations  map[string]string
}

// PodConfig writes a crictl pod sandbox config and returns its path and
// the pod's UID. A hostNetwork pod shares the node's namespace: no CNI.
func (c *Containerd) PodConfig(namespace, name string, hostNetwork bool) (string, string, error) {
	return c.podConfig(namespace, name, hostNetwork, CRIPodOptions{})
}

func (c *Containerd) podConfig(namespace, name string, hostNetwork bool, o CRIPodOptions) (string, string, error) {
	uid := fmt.Sprintf("%s-%s-%d", c.Node.Netns, name, c.seq.Add(1))
	linux := map[string]any{"cgroup_parent": "/reef-lab/" + c.Node.Netns + "/" + uid}
	if hostNetwork {
		linux["security_context"] = map[string]any{"namespace_options": map[string]any{"network": 2}} // NODE
	}
	cfg := map[string]any{
		"metadata":      map[string]any{"name": name, "namespace": namespace, "uid": uid, "attempt": 0},
		"log_directory": filepath.Join(c.Dir, "pod-logs", uid),
		"linux":         linux,
	}
	if !hostNetwork { // a hostNetwork pod shares the node's UTS namespace too
		cfg["hostname"] = name
	}
	if len(o.PortMappings) > 0 {
		cfg["port_mappings"] = o.PortMappings
	}
	if len(o.Annotations) > 0 {
		cfg["annotations"] = o.Annotations
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return "", "", err
	}
	path := filepath.Join(c.Dir, "pod-"+uid+".json")
	return path, uid, os.WriteFile(path, b, 0o644)
}

// RunPod runs `crictl runp` for a new pod and inspects the sandbox. On
// error the returned error carries the CRI's message.
func (c *Containerd) RunPod(ctx context.Context, namespace, name string) (*CRIPod, error) {
	return c.runPod(ctx, namespace, name, false, CRIPodOptions{})
}

// RunPodWith is RunPod with port mappings and annotations.
func (c *Containerd) RunPodWith(ctx context.Context, namespace, name string, o CRIPodOptions) (*CRIPod, error) {
	return c.runPod(ctx, namespace, name, false, o)
}

// RunHostNetworkPod runs a pod in the node's network namespace: the CRI's
// path without CNI (a floor for the benchmark).
func (c *Containerd) RunHostNetworkPod(ctx context.Context, namespace, name string) (*CRIPod, error) {
	return c.runPod(ctx, namespace, name, true, CRIPodOptions{})
}

func (c *Containerd) runPod(ctx context.Context, namespace, name string, hostNetwork bool, o CRIPodOptions) (*CRIPod, error) {
	cfg, uid, err := c.podConfig(namespace, name, hostNetwork, o)
	if err != nil {
		return nil, err
	}
	out, err := c.Run(ctx, "runp", cfg)
	if err != nil {
		return nil, err
	}
	p := &CRIPod{C: c, ID: strings.TrimSpace(out), Name: name, Namespace: namespace, UID: uid}
	if err := p.Inspect(ctx); err != nil {
		return p, err
	}
	return p, nil
}

// sandboxInspect is the part of `crictl inspectp` the lab reads.
type sandboxInspect struct {
	Status struct {
		ID      string `json:"id"`
		State   string `json:"state"`
		Network struct {
			IP string `json:"ip"`
		} `json:"network"`
	} `json:"status"`
	Info struct {
		Pid         int `json:"pid"`
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct {
					Type string `json:"type"`
					Path string `json:"path"`
				} `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	} `json:"info"`
}

// Inspect refreshes IP, NetnsPath and State from `crictl inspectp`.
func (p *CRIPod) Inspect(ctx context.Context) error {
	out, err := p.C.Run(ctx, "inspectp", "-o", "json", p.ID)
	if err != nil {
		return err
	}
	var in sandboxInspect
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		return fmt.Errorf("crictl inspectp %s: %w", p.ID, err)
	}
	p.State = in.Status.State
	// A stopped sandbox reports no IP; IP keeps the one it had.
	if in.Status.Network.IP != "" {
		if p.IP, err = netip.ParseAddr(in.Status.Network.IP); err != nil {
			return fmt.Errorf("crictl inspectp %s: ip: %w", p.ID, err)
		}
	}
	for _, ns := range in.Info.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" && ns.Path != "" {
			p.NetnsPath = ns.Path
		}
	}
	p.C.recordSandbox(p.ID, p.NetnsPath)
	return nil
}

// Stop runs `crictl stopp` (CNI DEL with the netns).
func (p *CRIPod) Stop(ctx context.Context) error {
	_, err := p.C.Run(ctx, "stopp", p.ID)
	return err
}

// Remove runs `crictl rmp` (CNI DEL again, with an empty CNI_NETNS).
func (p *CRIPod) Remove(ctx context.Context) error {
	_, err := p.C.Run(ctx, "rmp", p.ID)
	return err
}

// StartContainer creates and starts a container of the pause image in the
// pod, and returns its id and its process id on the host.
func (p *CRIPod) StartContainer(ctx context.Context, name string) (id string, pid int, err error) {
	cfg, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"name": name},
		"image":    map[string]any{"image": PauseImage},
		// What kubelet sets, so that crictl ps names the pod.
		"labels":   map[string]any{"io.kubernetes.pod.name": p.Name, "io.kubernetes.pod.namespace": p.Namespace},
		"log_path": name + ".log",
	})
	if err != nil {
		return "", 0, err
	}
	ccfg := filepath.Join(p.C.Dir, "ctr-"+p.UID+"-"+name+".json")
	if err := os.WriteFile(ccfg, cfg, 0o644); err != nil {
		return "", 0, err
	}
	podCfg := filepath.Join(p.C.Dir, "pod-"+p.UID+".json")
	out, err := p.C.Run(ctx, "create", p.ID, ccfg, podCfg)
	if err != nil {
		return "", 0, err
	}
	id = strings.TrimSpace(out)
	if _, err := p.C.Run(ctx, "start", id); err != nil {
		return id, 0, err
	}
	out, err = p.C.Run(ctx, "inspect", "-o", "json", id)
	if err != nil {
		return id, 0, err
	}
	var in struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		return id, 0, fmt.Errorf("crictl inspect %s: %w", id, err)
	}
	if in.Info.Pid == 0 {
		return id, 0, fmt.Errorf("crictl inspect %s: no pid", id)
	}
	return id, in.Info.Pid, nil
}

// PodIDs lists the ids of every sandbox the CRI knows.
func (c *Containerd) PodIDs(ctx context.Context) ([]string, error) {
	out, err := c.Run(ctx, "pods", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(out), nil
}

// Info returns `crictl info` as JSON (the CRI's Status: runtime and
// network conditions, the loaded CNI config).
func (c *Containerd) Info(ctx context.Context) (map[string]any, error) {
	out, err := c.Run(ctx, "info")
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return nil, fmt.Errorf("crictl info: %w", err)
	}
	return m, nil
}

// NetworkReady reads the NetworkReady condition of `crictl info`.
func (c *Containerd) NetworkReady(ctx context.Context) (ready bool, reason string, err error) {
	m, err := c.Info(ctx)
	if err != nil {
		return false, "", err
	}
	status, _ := m["status"].(map[string]any)
	conds, _ := status["conditions"].([]any)
	for _, x := range conds {
		cond, _ := x.(map[string]any)
		if cond["type"] == "NetworkReady" {
			ready, _ := cond["status"].(bool)
			r, _ := cond["reason"].(string)
			msg, _ := cond["message"].(string)
			return ready, strings.TrimSpace(r + " " + msg), nil
		}
	}
	return false, "", errors.New("crictl info: no NetworkReady condition")
}

// recordSandbox notes a sandbox and its netns in the work dir, so that a
// later lab can clean up after it if this process is killed before the
// sandbox is removed.
