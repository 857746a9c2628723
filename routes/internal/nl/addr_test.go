package nl

import (
	"net"
	"testing"
)

func TestIPNetToPrefix(t *testing.T) {
	for _, tt := range []struct {
		n    *net.IPNet
		want string // "" for none
	}{
		{&net.IPNet{IP: net.IP{10, 244, 1, 0}, Mask: net.CIDRMask(26, 32)}, "10.244.1.0/26"},
		{&net.IPNet{IP: net.ParseIP("10.244.1.5"), Mask: net.CIDRMask(32, 32)}, "10.244.1.5/32"},
		{&net.IPNet{IP: net.ParseIP("fd00:10:244::"), Mask: net.CIDRMask(122, 128)}, "fd00:10:244::/122"},
		{&net.IPNet{IP: net.ParseIP("::ffff:10.244.1.5"), Mask: net.CIDRMask(128, 128)}, "::ffff:10.244.1.5/128"},
		{&net.IPNet{IP: net.IP{10, 244, 1, 5}, Mask: net.CIDRMask(128, 128)}, ""},
		{nil, ""},
	} {
		p, ok := Prefix(tt.n)
		got := ""
		if ok {
			got = p.String()
		}
		if got != tt.want {
			t.Errorf("Prefix(%v) = %q, want %q", tt.n, got, tt.want)
		}
	}
}
