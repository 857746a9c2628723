package cniserver

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/store"
)

func TestPortMappings(t *testing.T) {
	got, cerr := portMappings([]PortMapEntry{
		{HostPort: 8080, ContainerPort: 80, Protocol: "TCP"},
		{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"}, // a repeat
		{HostPort: 53, ContainerPort: 53, Protocol: "udp", HostIP: "0.0.0.0"},
		{HostPort: 9000, ContainerPort: 9000, HostIP: "192.168.1.5"}, // no protocol: tcp
		{HostPort: 9001, ContainerPort: 9000, HostIP: "fd77::5"},
		{HostPort: 9002, ContainerPort: 9000, HostIP: "::"},
	})
	want := []store.PortMapping{
		{Protocol: "tcp", HostPort: 8080, ContainerPort: 80},
		{Protocol: "udp", HostPort: 53, ContainerPort: 53},
		{Protocol: "tcp", HostIP: netip.MustParseAddr("192.168.1.5"), HostPort: 9000, ContainerPort: 9000},
		{Protocol: "tcp", HostIP: netip.MustParseAddr("fd77::5"), HostPort: 9001, ContainerPort: 9000},
		{Protocol: "tcp", HostPort: 9002, ContainerPort: 9000},
	}
	if cerr != nil || len(got) != len(want) {
		t.Fatalf("portMappings: %v, %v", got, cerr)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, c := range []struct {
		in   []PortMapEntry
		want string
	}{
		{[]PortMapEntry{{HostPort: 0, ContainerPort: 80, Protocol: "tcp"}}, "portMappings[0]: hostPort 0"},
		{[]PortMapEntry{{HostPort: 80, ContainerPort: 70000, Protocol: "tcp"}}, "containerPort 70000"},
		{[]PortMapEntry{{HostPort: 80, ContainerPort: 80, Protocol: "icmp"}}, `protocol "icmp"`},
		{[]PortMapEntry{{HostPort: 80, ContainerPort: 80, HostIP: "node1"}}, `hostIP "node1"`},
		{[]PortMapEntry{{HostPort: 80, ContainerPort: 80, HostIP: "fe80::1%eth0"}}, `hostIP "fe80::1%eth0"`},
		{[]PortMapEntry{{HostPort: 80, ContainerPort: 80}, {HostPort: 80, ContainerPort: 81, HostIP: "10.0.0.1"}}, "portMappings[1]: tcp 10.0.0.1:80 -> 81 overlaps"},
	} {
		_, cerr := portMappings(c.in)
		if cerr == nil || cerr.Code != types.ErrInvalidNetworkConfig || !strings.Contains(cerr.Msg, c.want) {
			t.Errorf("portMappings(%+v) = %v, want code 7 and %q", c.in, cerr, c.want)
		}
	}
}

func TestBandwidth(t *testing.T) {
	if b, cerr := bandwidth(&BandwidthEntry{IngressRate: 1e7, IngressBurst: 8e5}); cerr != nil || b == nil || b.IngressRate != 1e7 || b.EgressRate != 0 {
		t.Errorf("ingress only: %+v, %v", b, cerr)
	}
	if b, cerr := bandwidth(&BandwidthEntry{}); cerr != nil || b != nil {
		t.Errorf("all zero: %+v, %v, want no limit", b, cerr)
	}
	for _, c := range []struct {
		in   BandwidthEntry
		want string
	}{
		{BandwidthEntry{IngressBurst: 100}, "ingressRate is 0"},
		{BandwidthEntry{EgressRate: 1e6}, "egressRate 1000000 has no egressBurst"},
		{BandwidthEntry{EgressRate: 1e6, EgressBurst: 1 << 40}, "more than tbf holds"},
	} {
		_, cerr := bandwidth(&c.in)
		if cerr == nil || cerr.Code != types.ErrInvalidNetworkConfig || !strings.Contains(cerr.Msg, c.want) {
			t.Errorf("bandwidth(%+v) = %v, want code 7 and %q", c.in, cerr, c.want)
		}
	}
}

// TestRuntimeConfigParsed: ADD reads runtimeConfig and refuses what it
// cannot use; DEL never looks at it.
func TestRuntimeConfigParsed(t *testing.T) {
	conf := func(rc string) func(in *reefv1.CNIRequest) {
		return func(in *reefv1.CNIRequest) {
			in.Netconf = []byte(`{"cniVersion":"1.0.0","name":"net","type":"reef-cni","runtimeConfig":` + rc + `}`)
		}
	}
	r, cerr := parseRequest("ADD", goodRequest(conf(`{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}],"bandwidth":{"ingressRate":1000000,"ingressBurst":80000}}`)))
	if cerr != nil || len(r.ports) != 1 || r.ports[0].HostPort != 8080 || r.bandwidth == nil || r.bandwidth.IngressRate != 1e6 {
		t.Fatalf("ADD: %+v, %v", r, cerr)
	}
	if _, cerr := parseRequest("ADD", goodRequest(conf(`{"portMappings":[{"hostPort":"8080"}]}`))); cerr == nil || cerr.Code != types.ErrDecodingFailure {
		t.Errorf("ADD with hostPort as a string: %v, want code %d", cerr, types.ErrDecodingFailure)
	}
	if _, cerr := parseRequest("ADD", goodRequest(conf(`{"bandwidth":{"egressRate":5}}`))); cerr == nil || cerr.Code != types.ErrInvalidNetworkConfig {
		t.Errorf("ADD with a rate and no burst: %v, want code %d", cerr, types.ErrInvalidNetworkConfig)
	}
	if _, cerr := parseRequest("DEL", goodRequest(conf(`{"portMappings":[{"hostPort":"8080"}]}`))); cerr != nil {
		t.Errorf("DEL with a runtimeConfig ADD would refuse: %v", cerr)
	}
}
