package veth

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/reefcni/reef/routes/internal/nl"
)

// The IPv6 gateway is the node-side veth's EUI-64 link-local: Calico's
// fe80::ecee:eeff:feee:eeee, fixed here so that a change to the MAC or to
// the derivation cannot pass by changing both sides.
func TestPodGateway6(t *testing.T) {
	if got := Gateway6.String(); got != "fe80::ecee:eeff:feee:eeee" {
		t.Errorf("Gateway6 = %s, want fe80::ecee:eeff:feee:eeee", got)
	}
	if got := nl.LinkLocalEUI64(net.HardwareAddr{0x02, 0x42, 0xac, 0x11, 0x00, 0x02}); got != netip.MustParseAddr("fe80::42:acff:fe11:2") {
		t.Errorf("nl.LinkLocalEUI64(02:42:ac:11:00:02) = %s, want fe80::42:acff:fe11:2", got)
	}
	if gatewayFor(netip.MustParseAddr("10.244.1.5")) != Gateway || gatewayFor(netip.MustParseAddr("fd00::5")) != Gateway6 {
		t.Errorf("gatewayFor: want Gateway for IPv4, Gateway6 for IPv6")
	}
}

// Setup wires one address, or one of each family; it refuses the rest
// before it touches anything.
func TestCheckPodAddrs(t *testing.T) {
	for _, tt := range []struct {
		ips  string
		want string // "" for nil, else a part of the error
	}{
		{"10.244.1.5", ""},
		{"fd00:10:244::5", ""},
		{"fd00:10:244::5,10.244.1.5", ""},
		{"", "no address"},
		{"10.244.1.5,10.244.1.6", "at most one of each family"},
		{"fd00::5,fd00::6", "at most one of each family"},
		{"::ffff:10.244.1.5", "not a pod address"},
		{"fe80::5%eth0", "not a pod address"},
	} {
		var ips []netip.Addr
		if tt.ips != "" {
			for _, a := range strings.Split(tt.ips, ",") {
				ips = append(ips, netip.MustParseAddr(a))
			}
		}
		err := checkPodAddrs(ips)
		if (err == nil) != (tt.want == "") || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("checkPodAddrs(%s) = %v, want %q", tt.ips, err, tt.want)
		}
	}
	if err := checkPodAddrs([]netip.Addr{{}}); err == nil {
		t.Errorf("checkPodAddrs(zero address) = nil")
	}
}
