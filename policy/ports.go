package policy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Protocol numbers of the protocols NetworkPolicy names.
const (
	protoTCP  uint8 = 6
	protoUDP  uint8 = 17
	protoSCTP uint8 = 132
)

// AddrPort is one pod's address and the number a named port stands for on
// it.
type AddrPort struct {
	Addr netip.Addr
	Port uint16
}

// Port is one entry of a rule's ports: a protocol and either every port
// (Any), a number or range (From-To), or a name resolved to the pods that
// define it (Named: the destination pods' address . port).
type Port struct {
	Proto    uint8
	Any      bool
	From, To uint16
	Name     string
	Named    []AddrPort // sorted
}

func protoNumber(p *corev1.Protocol) (uint8, error) {
	if p == nil {
		return protoTCP, nil
	}
	switch *p {
	case corev1.ProtocolTCP, "":
		return protoTCP, nil
	case corev1.ProtocolUDP:
		return protoUDP, nil
	case corev1.ProtocolSCTP:
		return protoSCTP, nil
	}
	return 0, fmt.Errorf("protocol %q: want TCP, UDP or SCTP", *p)
}

// compilePort resolves one port entry; targets are the pods a named port
// is looked up on.
func compilePort(p networkingv1.NetworkPolicyPort, targets []podInfo) (Port, error) {
	proto, err := protoNumber(p.Protocol)
	if err != nil {
		return Port{}, err
	}
	out := Port{Proto: proto}
	switch {
	case p.Port == nil:
		if p.EndPort != nil {
			return out, fmt.Errorf("endPort %d without port", *p.EndPort)
		}
		out.Any = true
	case p.Port.Type == intstr.String:
		if p.EndPort != nil {
			return out, fmt.Errorf("endPort with the named port %q", p.Port.StrVal)
		}
		out.Name = p.Port.StrVal
		out.Named = namedPorts(targets, out.Name, proto)
	default:
		n := p.Port.IntVal
		if n < 1 || n > 65535 {
			return out, fmt.Errorf("port %d: want 1-65535", n)
		}
		out.From, out.To = uint16(n), uint16(n)
		if p.EndPort != nil {
			e := *p.EndPort
			if e < n || e > 65535 {
				return out, fmt.Errorf("endPort %d: want %d-65535", e, n)
			}
			out.To = uint16(e)
		}
	}
	return out, nil
}

// namedPorts resolves a port name on pods: every address of every pod
// with a containerPort of that name and protocol.
func namedPorts(pods []podInfo, name string, proto uint8) []AddrPort {
	var out []AddrPort
	for _, pi := range pods {
		for _, cp := range pi.pod.Ports {
			pp, err := protoNumber(&cp.Protocol)
			if err != nil || cp.Name != name || pp != proto || cp.Port < 1 || cp.Port > 65535 {
				continue
			}
			for _, a := range pi.addrs {
				out = append(out, AddrPort{a, uint16(cp.Port)})
			}
		}
	}
	slices.SortFunc(out, func(a, b AddrPort) int { return cmp.Or(a.Addr.Compare(b.Addr), cmp.Compare(a.Port, b.Port)) })
	return slices.Compact(out)
}
