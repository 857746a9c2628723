package store

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSetEndpoint(t *testing.T) {
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	s := openTest(t, "node-a")
	orig, _, _, err := allocAuto(s, Endpoint{
		Handle: "k8s-pod-network.abc", Network: "k8s-pod-network", ContainerID: "abc",
		IfName: "eth0", Netns: "/var/run/netns/x", PodNamespace: "default", PodName: "web",
	}, pool)
	if err != nil {
		t.Fatal(err)
	}

	ready := orig
	ready.State, ready.HostVeth, ready.MTU = EndpointReady, "reef0123456789a", 1450
	ready.Created = time.Time{} // keeps the stored one

	otherIP, otherBlock, otherPool := orig, orig, orig
	otherIP.IP = orig.IP.Next()
	otherBlock.Block = netip.PrefixFrom(orig.Block.Addr(), 27)
	otherPool.Pool = netip.MustParsePrefix("10.245.0.0/24")
	unknown := orig
	unknown.Handle = "k8s-pod-network.nope"
	badState := orig
	badState.State = "up"

	for _, tc := range []struct {
		name     string
		ep       Endpoint
		wantErr  string // substring; "" for success
		notFound bool
	}{
		{"unknown handle", unknown, "endpoint k8s-pod-network.nope not found", true},
		{"empty handle", Endpoint{State: EndpointReady}, "handle is empty", false},
		{"change ip", otherIP, "ip " + otherIP.IP.String() + " differs from allocated " + orig.IP.String(), false},
		{"change block", otherBlock, "block " + otherBlock.Block.String() + " differs", false},
		{"change pool", otherPool, "pool 10.245.0.0/24 differs", false},
		{"unknown state", badState, `unknown state "up"`, false},
		{"ready", ready, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.SetEndpoint(tc.ep)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("SetEndpoint: %v", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("SetEndpoint error = %v, want one containing %q", err, tc.wantErr)
			}
			if got := errors.Is(err, ErrNotFound); got != tc.notFound {
				t.Errorf("errors.Is(%v, ErrNotFound) = %v, want %v", err, got, tc.notFound)
			}
		})
	}

	got, ok, err := s.Endpoint(orig.Handle)
	if err != nil || !ok {
		t.Fatalf("Endpoint = %v, %v", ok, err)
	}
	want := ready
	want.Created = orig.Created
	if diff := cmp.Diff(want, got, netipEqual); diff != "" {
		t.Errorf("record after SetEndpoint (-want +got):\n%s", diff)
	}
	if _, ok, _ := s.Endpoint(unknown.Handle); ok {
		t.Error("SetEndpoint of an unknown handle created a record")
	}
}

func TestEndpointsSorted(t *testing.T) {
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	s := openTest(t, "node-a")
	for _, h := range []string{"net.c", "net.a", "net.b"} {
		if _, _, _, err := allocAuto(s, Endpoint{Handle: h}, pool); err != nil {
			t.Fatal(err)
		}
	}
	eps, err := s.Endpoints()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ep := range eps {
		got = append(got, ep.Handle)
	}
	if diff := cmp.Diff([]string{"net.a", "net.b", "net.c"}, got); diff != "" {
		t.Errorf("Endpoints order (-want +got):\n%s", diff)
	}
	if _, ok, err := s.Endpoint("net.zzz"); ok || err != nil {
		t.Errorf("Endpoint(net.zzz) = %v, %v, want not found and no error", ok, err)
	}
}

func TestEndpointsWithVeth(t *testing.T) {
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	s := openTest(t, "node-a")
	for _, ep := range []Endpoint{
		{Handle: "net.a", HostVeth: "reef0000000000a"},
		{Handle: "net.b", HostVeth: "reef0000000000b"},
		{Handle: "net.c", HostVeth: "reef0000000000a"},
		{Handle: "net.d", HostVeth: "reef0000000000"}, // a prefix of the others
		{Handle: "net.e"},
		// The name only in another field must not match.
		{Handle: "net.f", PodName: "reef0000000000a"},
	} {
		if _, _, _, err := allocAuto(s, ep, pool); err != nil {
			t.Fatal(err)
		}
	}
	for veth, want := range map[string][]string{
		"reef0000000000a": {"net.a", "net.c"},
		"reef0000000000b": {"net.b"},
		"reef0000000000":  {"net.d"},
		"reef0000000000z": nil,
	} {
		eps, err := s.EndpointsWithVeth(veth)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ep := range eps {
			got = append(got, ep.Handle)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("EndpointsWithVeth(%s) (-want +got):\n%s", veth, diff)
		}
	}
	if _, err := s.EndpointsWithVeth(""); err == nil {
		t.Error("EndpointsWithVeth(\"\") gave no error")
	}
}

// UpdateEndpoint changes a record in one transaction, only as its change
// function says, and never what IPAM owns.
func TestUpdateEndpoint(t *testing.T) {
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 26}
	s := openTest(t, "node-a")
	orig, _, _, err := allocAuto(s, Endpoint{Handle: "net.abc", Network: "net", ContainerID: "abc", IfName: "eth0",
		HostVeth: "reefabc", MTU: 1500}, pool)
	if err != nil {
		t.Fatal(err)
	}
	onVeth := func(veth string, mtu int) func(*Endpoint) bool {
		return func(ep *Endpoint) bool {
			if ep.HostVeth != veth {
				return false
			}
			ep.MTU = mtu
			return true
		}
	}
	if wrote, err := s.UpdateEndpoint(orig.Handle, onVeth("reefabc", 1400)); !wrote || err != nil {
		t.Fatalf("UpdateEndpoint = %v, %v; want written", wrote, err)
	}
	if got, _, _ := s.Endpoint(orig.Handle); got.MTU != 1400 || got.IP != orig.IP {
		t.Errorf("after UpdateEndpoint: MTU %d, IP %s; want 1400, %s", got.MTU, got.IP, orig.IP)
	}
	if wrote, err := s.UpdateEndpoint(orig.Handle, onVeth("reefother", 1300)); wrote || err != nil {
		t.Errorf("UpdateEndpoint declined by its change = %v, %v; want not written", wrote, err)
	}
	if got, _, _ := s.Endpoint(orig.Handle); got.MTU != 1400 {
		t.Errorf("a declined change wrote MTU %d", got.MTU)
	}
	if wrote, err := s.UpdateEndpoint("net.nope", onVeth("reefabc", 1300)); wrote || err != nil {
		t.Errorf("UpdateEndpoint of an unknown handle = %v, %v; want nothing, no error", wrote, err)
	}
	_, err = s.UpdateEndpoint(orig.Handle, func(ep *Endpoint) bool { ep.IP = ep.IP.Next(); return true })
	if err == nil || !strings.Contains(err.Error(), "differs from allocated") {
		t.Errorf("UpdateEndpoint changing the address = %v, want a refusal", err)
	}
}
