package cli

import (
	"bytes"
	"strings"
	"testing"

	reefv1 "github.com/reefcni/reef/proto"
)

// reef status names each Service address announced with the Service
// behind it and why, and what it left out; nothing without the watch.
func TestPrintServiceAddresses(t *testing.T) {
	var b bytes.Buffer
	printServiceAddresses(&b, &reefv1.StatusReply{})
	if b.Len() != 0 {
		t.Errorf("without Service addresses configured, status prints %q", b.String())
	}
	printServiceAddresses(&b, &reefv1.StatusReply{
		ServiceAddressesWatch: "synced with https://192.168.77.240:6443",
		ServiceAddresses: []*reefv1.ServiceAddress{
			{Address: "198.51.100.10", Service: "default/web", Source: "externalIP", Reason: "cluster"},
			{Address: "203.0.113.7", Service: "default/lb", Source: "loadBalancer", Reason: "local", LocalEndpoints: 2},
			{Address: "203.0.113.7", Service: "default/lb2", Source: "loadBalancer", Reason: "cluster"},
		},
		ServiceAddressesSkipped: []string{"default/web externalIP 198.51.100.200: outside bgp.serviceExternalIPs [198.51.100.0/25]"},
	})
	out := b.String()
	for _, want := range []string{
		"Service addresses announced to them (bgp.serviceExternalIPs, bgp.serviceLoadBalancerIPs): 2; API watch synced with https://192.168.77.240:6443\n",
		"198.51.100.10  default/web  externalIP    externalTrafficPolicy Cluster: every node announces it\n",
		"203.0.113.7    default/lb   loadBalancer  externalTrafficPolicy Local: 2 ready endpoint(s) on this node\n",
		"  NOT announced: default/web externalIP 198.51.100.200: outside bgp.serviceExternalIPs [198.51.100.0/25]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// reef status says which restarting nodes' blocks this node stands in
// for, and whether its own are marked; nothing when neither.
func TestPrintStandIns(t *testing.T) {
	var b bytes.Buffer
	printStandIns(&b, &reefv1.StatusReply{})
	if b.Len() != 0 {
		t.Errorf("without stand-ins, status prints %q", b.String())
	}
	printStandIns(&b, &reefv1.StatusReply{BlocksMarked: true, StandIns: []string{"10.244.41.192/26 via 192.168.77.11 to 192.168.77.254"}})
	want := "This node's blocks are marked GRACEFUL_SHUTDOWN for the other nodes to stand in for them at their BFD routers (a planned stop, or a start after one until its own BFD routers have them)\n" +
		"Standing in for restarting nodes (their blocks, next hop the owner): 10.244.41.192/26 via 192.168.77.11 to 192.168.77.254\n"
	if got := b.String(); got != want {
		t.Errorf("status prints\n%q\nwant\n%q", got, want)
	}
}
