package cniserver

import (
	"fmt"
	"math"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/reefcni/reef/routes/tc"
	"github.com/reefcni/reef/store"
)

// RuntimeConfig is what the runtime passes for the capabilities the
// conflist declares ("capabilities": {"portMappings": true, "bandwidth":
// true}): the pod's hostPorts, and its bandwidth annotations
// (kubernetes.io/ingress-bandwidth, kubernetes.io/egress-bandwidth). The
// CNI conventions define both.
type RuntimeConfig struct {
	PortMappings []PortMapEntry  `json:"portMappings,omitempty"`
	Bandwidth    *BandwidthEntry `json:"bandwidth,omitempty"`
}

// PortMapEntry is one hostPort as the runtime passes it.
type PortMapEntry struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// BandwidthEntry is the pod's limits as the runtime passes them: rates in
// bits per second, bursts in bits.
type BandwidthEntry struct {
	IngressRate  uint64 `json:"ingressRate"`
	IngressBurst uint64 `json:"ingressBurst"`
	EgressRate   uint64 `json:"egressRate"`
	EgressBurst  uint64 `json:"egressBurst"`
}

// portMappings validates the runtime's hostPorts. Repeats are dropped;
// every refusal names the entry, the value and what to fix.
func portMappings(in []PortMapEntry) ([]store.PortMapping, *types.Error) {
	var out []store.PortMapping
	for i, e := range in {
		bad := func(format string, a ...any) *types.Error {
			return types.NewError(types.ErrInvalidNetworkConfig,
				fmt.Sprintf("runtimeConfig.portMappings[%d]: ", i)+fmt.Sprintf(format, a...), "")
		}
		proto := strings.ToLower(e.Protocol)
		if proto == "" {
			proto = "tcp" // Kubernetes' default
		}
		switch proto {
		case "tcp", "udp", "sctp":
		default:
			return nil, bad("protocol %q is not tcp, udp or sctp", e.Protocol)
		}
		if e.HostPort < 1 || e.HostPort > math.MaxUint16 {
			return nil, bad("hostPort %d is not a port (1-65535)", e.HostPort)
		}
		if e.ContainerPort < 1 || e.ContainerPort > math.MaxUint16 {
			return nil, bad("containerPort %d is not a port (1-65535)", e.ContainerPort)
		}
		m := store.PortMapping{Protocol: proto, HostPort: uint16(e.HostPort), ContainerPort: uint16(e.ContainerPort)}
		if e.HostIP != "" {
			a, err := netip.ParseAddr(e.HostIP)
			if err != nil || a.Zone() != "" {
				return nil, bad("hostIP %q is not an IP address", e.HostIP)
			}
			// A hostIP of either family: it leads to the pod's address
			// of that family, and to none if the pod has none (package
			// hostport), as the portmap plugin skips such an entry.
			if a = a.Unmap(); !a.IsUnspecified() {
				m.HostIP = a // 0.0.0.0 and :: are every address, as no hostIP
			}
		}
		dup := false
		for j, o := range out {
			switch {
			case o == m:
				dup = true
			case o.Overlaps(m):
				return nil, bad("%s overlaps runtimeConfig.portMappings[%d] (%s) of the same pod", m, j, o)
			}
		}
		if !dup {
			out = append(out, m)
		}
	}
	return out, nil
}

// maxBurstBits is the largest burst reef takes: tbf keeps it in a 32-bit
// count of bytes.
const maxBurstBits = 8 * math.MaxUint32

// bandwidth validates the runtime's limits. A direction with rate and
// burst 0 has no limit; a rate of 0 with a burst, or a rate with no
// burst, is refused.
func bandwidth(in *BandwidthEntry) (*store.Bandwidth, *types.Error) {
	if in == nil {
		return nil, nil
	}
	check := func(dir string, rate, burst uint64) *types.Error {
		bad := func(format string, a ...any) *types.Error {
			return types.NewError(types.ErrInvalidNetworkConfig, "runtimeConfig.bandwidth: "+fmt.Sprintf(format, a...), "")
		}
		switch {
		case rate == 0 && burst != 0:
			return bad("%sRate is 0 with %sBurst %d: a limit needs a rate in bits per second (kubernetes.io/%s-bandwidth)", dir, dir, burst, dir)
		case rate != 0 && burst == 0:
			return bad("%sRate %d has no %sBurst: set the burst in bits", dir, rate, dir)
		case burst > maxBurstBits:
			return bad("%sBurst %d bits is more than tbf holds (%d bits)", dir, burst, uint64(maxBurstBits))
		}
		return nil
	}
	if err := check("ingress", in.IngressRate, in.IngressBurst); err != nil {
		return nil, err
	}
	if err := check("egress", in.EgressRate, in.EgressBurst); err != nil {
		return nil, err
	}
	if in.IngressRate == 0 && in.EgressRate == 0 {
		return nil, nil
	}
	return &store.Bandwidth{IngressRate: in.IngressRate, IngressBurst: in.IngressBurst, EgressRate: in.EgressRate, EgressBurst: in.EgressBurst}, nil
}

// checkBurst refuses a burst smaller than one frame of the pod's MTU: tbf
// would drop every full-size packet.
func checkBurst(b *store.Bandwidth, mtu int) *types.Error {
	if b == nil {
		return nil
	}
	min := tc.MinBurstBits(mtu)
	for _, d := range []struct {
		dir         string
		rate, burst uint64
	}{{"ingress", b.IngressRate, b.IngressBurst}, {"egress", b.EgressRate, b.EgressBurst}} {
		if d.rate != 0 && d.burst < min {
			return types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf(
				"runtimeConfig.bandwidth: %sBurst %d bits is less than one frame of the pod's MTU %d (%d bits): tbf would drop every full-size packet; set a larger burst",
				d.dir, d.burst, mtu, min), "")
		}
	}
	return nil
}

// RoutesBandwidth is a stored limit as package routes applies it.
func RoutesBandwidth(b store.Bandwidth) tc.Bandwidth {
	return tc.Bandwidth{IngressRate: b.IngressRate, IngressBurst: b.IngressBurst, EgressRate: b.EgressRate, EgressBurst: b.EgressBurst}
}
