package cniserver

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/google/go-cmp/cmp"

	"github.com/reefcni/reef/store"
)

// resultView is a CNI result reduced to strings, so that 4- and 16-byte
// forms of one address compare equal.
type resultView struct {
	Interfaces []string
	IPs        []string
	Routes     []string
	DNS        []string
}

func viewOf(t *testing.T, res *types100.Result) resultView {
	t.Helper()
	var v resultView
	for _, i := range res.Interfaces {
		v.Interfaces = append(v.Interfaces, fmt.Sprintf("name=%s mac=%s mtu=%d sandbox=%s", i.Name, i.Mac, i.Mtu, i.Sandbox))
	}
	for _, ip := range res.IPs {
		idx := "nil"
		if ip.Interface != nil {
			idx = fmt.Sprint(*ip.Interface)
		}
		v.IPs = append(v.IPs, fmt.Sprintf("if=%s addr=%s gw=%s", idx, ip.Address.String(), ip.Gateway))
	}
	for _, r := range res.Routes {
		v.Routes = append(v.Routes, fmt.Sprintf("%s via %s", r.Dst.String(), r.GW))
	}
	v.DNS = res.DNS.Nameservers
	return v
}

func TestResult(t *testing.T) {
	// result() reads only its arguments, never the store.
	s := New(Config{MTU: 1450}, Deps{Log: slog.New(slog.DiscardHandler)})
	ep := store.Endpoint{
		HostVeth: "reef0123456789a",
		IP:       netip.MustParseAddr("10.244.1.5"),
		MTU:      1450,
	}
	const podMAC = "0a:58:0a:f4:01:05"

	for _, v := range SupportedVersions {
		t.Run(v, func(t *testing.T) {
			r := &request{
				command: "ADD", containerID: goodID, netns: goodNetns, ifName: "eth0",
				conf: goodConf(v),
			}
			r.conf.DNS = types.DNS{Nameservers: []string{"10.96.0.10"}}
			out, err := s.result(r, ep, podMAC)
			if err != nil {
				t.Fatalf("result: %v", err)
			}

			parsed, err := version.NewResult(v, out)
			if err != nil {
				t.Fatalf("CNI library cannot parse the %s result: %v\n%s", v, err, out)
			}
			if got := parsed.Version(); got != v {
				t.Errorf("result version = %q, want %q", got, v)
			}
			res, err := types100.NewResultFromResult(parsed)
			if err != nil {
				t.Fatalf("convert to 1.0.0+: %v", err)
			}
			wantMTU := 0
			if v == "1.1.0" {
				wantMTU = 1450
			}
			want := resultView{
				Interfaces: []string{
					fmt.Sprintf("name=reef0123456789a mac=ee:ee:ee:ee:ee:ee mtu=%d sandbox=", wantMTU),
					fmt.Sprintf("name=eth0 mac=%s mtu=%d sandbox=%s", podMAC, wantMTU, goodNetns),
				},
				IPs:    []string{"if=1 addr=10.244.1.5/32 gw=169.254.1.1"},
				Routes: []string{"0.0.0.0/0 via 169.254.1.1"},
				DNS:    []string{"10.96.0.10"},
			}
			if diff := cmp.Diff(want, viewOf(t, res)); diff != "" {
				t.Errorf("result %s (-want +got):\n%s\nraw: %s", v, diff, out)
			}

			// The raw JSON: the version the runtime asked for, and "mtu"
			// only where the spec has it.
			var raw struct {
				CNIVersion string                       `json:"cniVersion"`
				Interfaces []map[string]json.RawMessage `json:"interfaces"`
			}
			if err := json.Unmarshal(out, &raw); err != nil {
				t.Fatalf("result is not JSON: %v\n%s", err, out)
			}
			if raw.CNIVersion != v {
				t.Errorf(`raw "cniVersion" = %q, want %q`, raw.CNIVersion, v)
			}
			if len(raw.Interfaces) != 2 {
				t.Fatalf("raw result has %d interfaces, want 2:\n%s", len(raw.Interfaces), out)
			}
			for i, iface := range raw.Interfaces {
				mtu, has := iface["mtu"]
				switch {
				case v == "1.1.0" && (!has || string(mtu) != "1450"):
					t.Errorf("interface %d: mtu = %s (present %v), want 1450:\n%s", i, mtu, has, out)
				case v != "1.1.0" && has:
					t.Errorf("interface %d: cniVersion %s has no mtu, result carries %s:\n%s", i, v, mtu, out)
				}
			}
		})
	}
}

// TestResultIPv6: an IPv6 pod's result has its /128 through the veth's
// link-local, and the IPv6 default route, in every version that has IPv6.
func TestResultIPv6(t *testing.T) {
	s := New(Config{MTU: 1450}, Deps{Log: slog.New(slog.DiscardHandler)})
	ep := store.Endpoint{HostVeth: "reef0123456789a", IP: netip.MustParseAddr("fd00:10:244::5"), MTU: 1450}
	for _, v := range SupportedVersions {
		t.Run(v, func(t *testing.T) {
			r := &request{command: "ADD", containerID: goodID, netns: goodNetns, ifName: "eth0", conf: goodConf(v)}
			out, err := s.result(r, ep, "0a:58:0a:f4:01:05")
			if err != nil {
				t.Fatalf("result: %v", err)
			}
			parsed, err := version.NewResult(v, out)
			if err != nil {
				t.Fatalf("CNI library cannot parse the %s result: %v\n%s", v, err, out)
			}
			res, err := types100.NewResultFromResult(parsed)
			if err != nil {
				t.Fatalf("convert to 1.0.0+: %v", err)
			}
			got := viewOf(t, res)
			want := resultView{IPs: []string{"if=1 addr=fd00:10:244::5/128 gw=fe80::ecee:eeff:feee:eeee"},
				Routes: []string{"::/0 via fe80::ecee:eeff:feee:eeee"}}
			if diff := cmp.Diff(want, resultView{IPs: got.IPs, Routes: got.Routes}); diff != "" {
				t.Errorf("result %s (-want +got):\n%s\nraw: %s", v, diff, out)
			}
		})
	}
}

// TestResultDualStack: a dual-stack pod's result lists both addresses on
// the pod's interface, each with its family's gateway and default route,
// in every version.
func TestResultDualStack(t *testing.T) {
	s := New(Config{MTU: 1450}, Deps{Log: slog.New(slog.DiscardHandler)})
	ep := store.Endpoint{HostVeth: "reef0123456789a", IP: netip.MustParseAddr("10.244.1.5"),
		Second: store.Assignment{IP: netip.MustParseAddr("fd00:10:244::5")}, MTU: 1450}
	for _, v := range SupportedVersions {
		t.Run(v, func(t *testing.T) {
			r := &request{command: "ADD", containerID: goodID, netns: goodNetns, ifName: "eth0", conf: goodConf(v)}
			out, err := s.result(r, ep, "0a:58:0a:f4:01:05")
			if err != nil {
				t.Fatalf("result: %v", err)
			}
			parsed, err := version.NewResult(v, out)
			if err != nil {
				t.Fatalf("CNI library cannot parse the %s result: %v\n%s", v, err, out)
			}
			res, err := types100.NewResultFromResult(parsed)
			if err != nil {
				t.Fatalf("convert to 1.0.0+: %v", err)
			}
			got := viewOf(t, res)
			want := resultView{
				IPs:    []string{"if=1 addr=10.244.1.5/32 gw=169.254.1.1", "if=1 addr=fd00:10:244::5/128 gw=fe80::ecee:eeff:feee:eeee"},
				Routes: []string{"0.0.0.0/0 via 169.254.1.1", "::/0 via fe80::ecee:eeff:feee:eeee"}}
			if diff := cmp.Diff(want, resultView{IPs: got.IPs, Routes: got.Routes}); diff != "" {
				t.Errorf("result %s (-want +got):\n%s\nraw: %s", v, diff, out)
			}
		})
	}
}

// TestPoolsFor: a pod gets one pool of each family the node has, the
// first of each, or the one the netconf names for its family.
func TestPoolsFor(t *testing.T) {
	p := func(cidr string) store.Pool { return store.Pool{CIDR: netip.MustParsePrefix(cidr), BlockSize: 26} }
	v4a, v4b, v6a, v6b := p("10.244.0.0/16"), p("10.245.0.0/16"), p("fd00:1::/56"), p("fd00:2::/56")
	for _, tc := range []struct {
		pools []store.Pool
		named string
		want  []store.Pool
	}{
		{[]store.Pool{v4a, v4b}, "", []store.Pool{v4a}},
		{[]store.Pool{v6a}, "", []store.Pool{v6a}},
		{[]store.Pool{v4a, v4b, v6a, v6b}, "", []store.Pool{v4a, v6a}},
		{[]store.Pool{v6a, v4a}, "", []store.Pool{v6a, v4a}},
		{[]store.Pool{v4a, v4b, v6a, v6b}, "10.245.0.0/16", []store.Pool{v4b, v6a}},
		{[]store.Pool{v4a, v4b, v6a, v6b}, "fd00:2::/56", []store.Pool{v6b, v4a}},
	} {
		s := New(Config{Pools: tc.pools}, Deps{Log: slog.New(slog.DiscardHandler)})
		r := &request{}
		if tc.named != "" {
			r.pool = netip.MustParsePrefix(tc.named)
		}
		got, cerr := s.poolsFor(r)
		if cerr != nil {
			t.Errorf("pools %v, named %q: %v", tc.pools, tc.named, cerr)
			continue
		}
		if diff := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
			t.Errorf("pools %v, named %q (-want +got):\n%s", tc.pools, tc.named, diff)
		}
	}
	s := New(Config{Pools: []store.Pool{v4a, v6a}}, Deps{Log: slog.New(slog.DiscardHandler)})
	if _, cerr := s.poolsFor(&request{pool: v4b.CIDR}); cerr == nil || cerr.Code != types.ErrInvalidNetworkConfig {
		t.Errorf("a pool the node does not have: %v", cerr)
	}
}
