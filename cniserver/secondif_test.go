package cniserver

import (
	"context"
	"strings"
	"testing"

	reefv1 "github.com/reefcni/reef/proto"
)

// TestSecondInterfaceRefused: the spec's attachment is the container ID and
// CNI_IFNAME, and a container may be added to a network again under
// another ifname, or to another network. reef gives a sandbox one
// interface (its veth is named after the pod): the second ADD is refused
// with code 106 and leaves the first interface, its veth and its record as
// they were; the runtime's DEL of the refused interface leaves them too.
func TestSecondInterfaceRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second func(in *reefv1.CNIRequest)
	}{
		{"another ifname", func(in *reefv1.CNIRequest) { in.Ifname = "eth1" }},
		{"another network", func(in *reefv1.CNIRequest) {
			in.Ifname = "eth1"
			in.Netconf = []byte(strings.Replace(string(in.Netconf), `"name":"k8s-pod-network"`, `"name":"net2"`, 1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, st, f := newAddFailServer(t)
			first := podRequest("c1", "web-1", "/run/netns/p1", 8080)
			if _, cerr := s.add(context.Background(), first); cerr != nil {
				t.Fatalf("ADD eth0: %v", cerr)
			}
			wantKernel, wantEps := f.String(), endpoints(t, st)
			second := podRequest("c1", "web-1", "/run/netns/p1", 8081)
			tc.second(second)
			_, cerr := s.add(context.Background(), second)
			if cerr == nil || cerr.Code != ErrSecondInterface || !strings.Contains(cerr.Msg, "eth0") || !strings.Contains(cerr.Msg, "eth1") {
				t.Fatalf("ADD eth1: %+v, want code %d naming eth0 and eth1", cerr, ErrSecondInterface)
			}
			if cerr := s.Delete(second); cerr != nil {
				t.Fatalf("DEL eth1: %v", cerr)
			}
			if got := f.String(); got != wantKernel {
				t.Errorf("kernel after the refused ADD and its DEL:\n%s\nwant:\n%s", got, wantKernel)
			}
			got := endpoints(t, st)
			if len(got) != 1 || got["k8s-pod-network.c1"].HostVeth != wantEps["k8s-pod-network.c1"].HostVeth ||
				got["k8s-pod-network.c1"].IfName != "eth0" || got["k8s-pod-network.c1"].IP != wantEps["k8s-pod-network.c1"].IP {
				t.Errorf("records after the refused ADD and its DEL: %+v, want %+v", got, wantEps)
			}
			// The first interface still goes with its own DEL.
			if cerr := s.Delete(first); cerr != nil {
				t.Fatalf("DEL eth0: %v", cerr)
			}
			if got := f.String(); got != "" {
				t.Errorf("left after DEL eth0:\n%s", got)
			}
			if eps := endpoints(t, st); len(eps) != 0 {
				t.Errorf("records left after DEL eth0: %v", eps)
			}
		})
	}
}
