package daemon

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

var configCmpOpts = cmp.Options{cmpopts.EquateComparable(netip.Addr{}, netip.Prefix{}), cmpopts.IgnoreUnexported(Config{})}

// designExample is the example of the first design's "Configuration"
// (docs/design.md has today's), with the bgp.voters a node with peers
// must now have (issue 26).
const designExample = `
nodeName: k8s-node-1          # default: hostname
nodeAddress: 192.168.10.20    # default: the address on the default-route interface
interface: ens18              # default: the default-route interface
stateDir: /var/lib/reef
socket: /run/reef/reef.sock
mtu: 0                        # 0 = derive from the uplink
pools:
  - cidr: 10.244.0.0/16       # default pool
    blockSize: 26
    vxlanMode: CrossSubnet    # Never | CrossSubnet | Always
    ipipMode: Never           # Never | CrossSubnet | Always
    natOutgoing: true
bgp:
  asn: 64512
  port: 179
  peers: [192.168.10.17, 192.168.10.21]
  peerPrefixes: [192.168.10.0/24]
  password: ""                # TCP MD5, optional
  voters: [192.168.10.17, 192.168.10.20, 192.168.10.21]
metrics: 127.0.0.1:9099
reconcileInterval: 30s
logLevel: info
`

func TestParseConfig(t *testing.T) {
	addr := netip.MustParseAddr
	pfx := netip.MustParsePrefix
	tests := []struct {
		name string
		yaml string
		want func(c *Config) // applied to DefaultConfig()
	}{
		{name: "empty", yaml: "", want: func(*Config) {}},
		{name: "only comments", yaml: "# reef\n\n  # nothing set\n", want: func(*Config) {}},
		{name: "document marker only", yaml: "---\n", want: func(*Config) {}},
		{name: "null document", yaml: "~\n", want: func(*Config) {}},
		{name: "trailing empty document", yaml: "logLevel: debug\n---\n", want: func(c *Config) { c.LogLevel = "debug" }},
		{
			name: "design example",
			yaml: designExample,
			want: func(c *Config) {
				c.NodeName = "k8s-node-1"
				c.NodeAddress = addr("192.168.10.20")
				c.Interface = "ens18"
				c.BGP.Peers = []netip.Addr{addr("192.168.10.17"), addr("192.168.10.21")}
				c.BGP.PeerPrefixes = []netip.Prefix{pfx("192.168.10.0/24")}
				c.BGP.Voters = []netip.Addr{addr("192.168.10.17"), addr("192.168.10.20"), addr("192.168.10.21")}
			},
		},
		{
			name: "LoadBalancer assignment off, and unset",
			yaml: "kubernetes: {kubeconfig: /k}\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceLoadBalancerIPs: [203.0.113.0/24]\n  assignLoadBalancerIPs: false\n",
			want: func(c *Config) {
				off := false
				c.Kubernetes.Kubeconfig = "/k"
				c.BGP.ExternalPeers = []ExternalPeerConfig{configExternalPeerDefaults()}
				c.BGP.ExternalPeers[0].Address, c.BGP.ExternalPeers[0].ASN = addr("10.0.0.1"), 65000
				c.BGP.ServiceLoadBalancerIPs = []netip.Prefix{pfx("203.0.113.0/24")}
				c.BGP.AssignLoadBalancerIPs = &off
			},
		},
		{
			name: "pool entries get the pool defaults",
			yaml: "pools: [{cidr: 10.10.0.0/16}, {cidr: 10.20.0.0/16, blockSize: 24, vxlanMode: Never, ipipMode: Always, natOutgoing: false}]",
			want: func(c *Config) {
				c.Pools = []PoolConfig{
					{CIDR: pfx("10.10.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true},
					{CIDR: pfx("10.20.0.0/16"), BlockSize: 24, VXLANMode: EncapNever, IPIPMode: EncapAlways, NATOutgoing: false},
				}
			},
		},
		{
			name: "bgp keys left out keep their defaults",
			yaml: "bgp:\n  asn: 65001\n  holdTime: 90s\n  keepaliveTime: 30s\n",
			want: func(c *Config) {
				c.BGP.ASN = 65001
				c.BGP.HoldTime = 90 * time.Second
				c.BGP.KeepaliveTime = 30 * time.Second
			},
		},
		{name: "empty bgp section", yaml: "bgp:\n", want: func(*Config) {}},
		{name: "metrics disabled", yaml: `metrics: ""`, want: func(c *Config) { c.Metrics = "" }},
		{name: "metrics on all addresses", yaml: `metrics: ":9099"`, want: func(c *Config) { c.Metrics = ":9099" }},
		{name: "bgp password null", yaml: "bgp:\n  password:\n", want: func(*Config) {}},
		{name: "empty peer list", yaml: "bgp: {peers: []}", want: func(c *Config) { c.BGP.Peers = []netip.Addr{} }},
		{name: "quoted number", yaml: `mtu: "1450"`, want: func(c *Config) { c.MTU = 1450 }},
		{name: "quoted boolean", yaml: "pools: [{cidr: 10.10.0.0/16, natOutgoing: 'false'}]", want: func(c *Config) {
			c.Pools = []PoolConfig{{CIDR: pfx("10.10.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever}}
		}},
		{name: "metrics null is off", yaml: "metrics:\n", want: func(c *Config) { c.Metrics = "" }},
		{name: "duration 0 without a unit", yaml: "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, holdTime: 0}]}", want: func(c *Config) {
			c.BGP.ExternalPeers = []ExternalPeerConfig{{Address: addr("10.0.0.1"), ASN: 65000, Port: 179, MaxPrefixes: 1000}}
		}},
		{name: "IPv6 pool, default block size", yaml: "pools: [{cidr: 'fd00:10:244::/56'}]", want: func(c *Config) {
			c.Pools = []PoolConfig{{CIDR: pfx("fd00:10:244::/56"), BlockSize: 122, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true}}
		}},
		{name: "IPv6 pool, block size given", yaml: "pools: [{cidr: 'fd00:10:244::/64', blockSize: 120, natOutgoing: false}]", want: func(c *Config) {
			c.Pools = []PoolConfig{{CIDR: pfx("fd00:10:244::/64"), BlockSize: 120, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever}}
		}},
		{name: "dual-stack pools, several of a family", yaml: "pools: [{cidr: 10.10.0.0/16}, {cidr: 'fd00:10:244::/56'}, {cidr: 10.20.0.0/16}]", want: func(c *Config) {
			c.Pools = []PoolConfig{{CIDR: pfx("10.10.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true},
				{CIDR: pfx("fd00:10:244::/56"), BlockSize: 122, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true},
				{CIDR: pfx("10.20.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true}}
		}},
		{name: "IPv6 pool beside peers, routed directly", yaml: "nodeAddressV6: 'fd77::20'\npools: [{cidr: 'fd00:10:244::/56', vxlanMode: Never}]\nbgp: {peers: [10.0.0.2], voters: [10.0.0.2]}",
			want: func(c *Config) {
				c.NodeAddressV6 = addr("fd77::20")
				c.Pools = []PoolConfig{{CIDR: pfx("fd00:10:244::/56"), BlockSize: 122, VXLANMode: EncapNever, IPIPMode: EncapNever, NATOutgoing: true}}
				c.BGP.Peers, c.BGP.Voters = []netip.Addr{addr("10.0.0.2")}, []netip.Addr{addr("10.0.0.2")}
			}},
		{name: "IPv6 pool beside peers through VXLAN", yaml: "pools: [{cidr: 'fd00:10:244::/56'}, {cidr: 'fd00:10:245::/56', vxlanMode: Always}]\nbgp: {routeReflectors: [10.0.0.2], voters: [10.0.0.2]}",
			want: func(c *Config) {
				c.Pools = []PoolConfig{{CIDR: pfx("fd00:10:244::/56"), BlockSize: 122, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true},
					{CIDR: pfx("fd00:10:245::/56"), BlockSize: 122, VXLANMode: EncapAlways, IPIPMode: EncapNever, NATOutgoing: true}}
				c.BGP.RouteReflectors, c.BGP.Voters = []netip.Addr{addr("10.0.0.2")}, []netip.Addr{addr("10.0.0.2")}
			}},
		{name: "hex number", yaml: `bgp: {port: 0x1f90}`, want: func(c *Config) { c.BGP.Port = 8080 }},
		{name: "leading zero is decimal", yaml: "mtu: 01450", want: func(c *Config) { c.MTU = 1450 }},
		{name: "large ASN", yaml: "bgp: {asn: 4200000000}", want: func(c *Config) { c.BGP.ASN = 4200000000 }},
		{name: "no is false", yaml: "pools: [{cidr: 10.10.0.0/16, natOutgoing: no}]", want: func(c *Config) {
			c.Pools = []PoolConfig{{CIDR: pfx("10.10.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever}}
		}},
		{
			name: "paths and durations",
			yaml: "stateDir: /srv/reef\nsocket: /srv/reef.sock\npendingDeleteDir: /srv/pd\nreconcileInterval: 1m30s\nmtu: 1450\n",
			want: func(c *Config) {
				c.StateDir, c.Socket, c.PendingDeleteDir = "/srv/reef", "/srv/reef.sock", "/srv/pd"
				c.ReconcileInterval = 90 * time.Second
				c.MTU = 1450
			},
		},
		{
			name: "route reflector client",
			yaml: "bgp:\n  routeReflectors: [10.0.0.1, 10.0.0.2]\n  voters: [10.0.0.11, 10.0.0.12, 10.0.0.13]\n",
			want: func(c *Config) {
				c.BGP.RouteReflectors = []netip.Addr{addr("10.0.0.1"), addr("10.0.0.2")}
				c.BGP.Voters = []netip.Addr{addr("10.0.0.11"), addr("10.0.0.12"), addr("10.0.0.13")}
			},
		},
		{
			name: "route reflector",
			yaml: "bgp:\n  routeReflector: true\n  peers: [10.0.0.2]\n  peerPrefixes: [10.0.0.0/24]\n  voters: [10.0.0.11, 10.0.0.12, 10.0.0.13]\n",
			want: func(c *Config) {
				c.BGP.RouteReflector = true
				c.BGP.Peers = []netip.Addr{addr("10.0.0.2")}
				c.BGP.PeerPrefixes = []netip.Prefix{pfx("10.0.0.0/24")}
				c.BGP.Voters = []netip.Addr{addr("10.0.0.11"), addr("10.0.0.12"), addr("10.0.0.13")}
			},
		},
		{
			name: "external peers",
			yaml: "bgp:\n  externalPeers:\n    - address: 192.168.10.1\n      asn: 65000\n    - {address: 10.9.9.9, asn: 65001, port: 1179, password: s3cret, holdTime: 9s, keepaliveTime: 3s, multihop: 2, maxPrefixes: 50, communities: ['65000:100', '65000:1:2']}\n",
			want: func(c *Config) {
				c.BGP.ExternalPeers = []ExternalPeerConfig{
					{Address: addr("192.168.10.1"), ASN: 65000, Port: 179, MaxPrefixes: 1000},
					{Address: addr("10.9.9.9"), ASN: 65001, Port: 1179, Password: "s3cret", HoldTime: 9 * time.Second, KeepaliveTime: 3 * time.Second,
						Multihop: 2, MaxPrefixes: 50, Communities: []string{"65000:100", "65000:1:2"}},
				}
			},
		},
		{
			name: "external peer with BFD",
			yaml: "bgp:\n  externalPeers:\n    - {address: 192.168.10.1, asn: 65000, bfd: {minInterval: 300ms, multiplier: 3}}\n    - {address: 192.168.10.2, asn: 65000, bfd: {minInterval: 50ms}}\n",
			want: func(c *Config) {
				c.BGP.ExternalPeers = []ExternalPeerConfig{
					{Address: addr("192.168.10.1"), ASN: 65000, Port: 179, MaxPrefixes: 1000, BFD: BFDConfig{MinInterval: 300 * time.Millisecond, Multiplier: 3}},
					{Address: addr("192.168.10.2"), ASN: 65000, Port: 179, MaxPrefixes: 1000, BFD: BFDConfig{MinInterval: 50 * time.Millisecond}},
				}
			},
		},
		{
			name: "service cluster IPs",
			yaml: "pools: [{cidr: 10.244.0.0/16}, {cidr: 'fd00:10:244::/56'}]\nbgp:\n  externalPeers: [{address: 192.168.10.1, asn: 65000}]\n  serviceClusterIPs: [10.96.0.0/12, 'fd00:10:96::/112']\n",
			want: func(c *Config) {
				c.Pools = []PoolConfig{{CIDR: pfx("10.244.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true},
					{CIDR: pfx("fd00:10:244::/56"), BlockSize: 122, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true}}
				c.BGP.ExternalPeers = []ExternalPeerConfig{{Address: addr("192.168.10.1"), ASN: 65000, Port: 179, MaxPrefixes: 1000}}
				c.BGP.ServiceClusterIPs = []netip.Prefix{pfx("10.96.0.0/12"), pfx("fd00:10:96::/112")}
			},
		},
		{
			name: "service external and load balancer IPs",
			yaml: "pools: [{cidr: 10.244.0.0/16}, {cidr: 'fd00:10:244::/56'}]\nkubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  externalPeers: [{address: 192.168.10.1, asn: 65000}]\n  serviceExternalIPs: [198.51.100.0/24, '2001:db8:e::/64']\n  serviceLoadBalancerIPs: [203.0.113.0/24]\n",
			want: func(c *Config) {
				c.Pools = []PoolConfig{{CIDR: pfx("10.244.0.0/16"), BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true},
					{CIDR: pfx("fd00:10:244::/56"), BlockSize: 122, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true}}
				c.Kubernetes.Kubeconfig = "/etc/reef/kubeconfig"
				c.BGP.ExternalPeers = []ExternalPeerConfig{{Address: addr("192.168.10.1"), ASN: 65000, Port: 179, MaxPrefixes: 1000}}
				c.BGP.ServiceExternalIPs = []netip.Prefix{pfx("198.51.100.0/24"), pfx("2001:db8:e::/64")}
				c.BGP.ServiceLoadBalancerIPs = []netip.Prefix{pfx("203.0.113.0/24")}
			},
		},
		{
			name: "IPv6-only node",
			yaml: "interface: eth0\npools: [{cidr: 'fd00:10:247::/56', vxlanMode: Never}]\nbgp:\n  routerID: 10.255.0.1\n  peers: ['fd77::12', 'fd77::13']\n  peerPrefixes: ['fd77::/64']\n  voters: ['fd77::11', 'fd77::12', 'fd77::13']\n",
			want: func(c *Config) {
				c.Interface = "eth0"
				c.Pools = []PoolConfig{{CIDR: pfx("fd00:10:247::/56"), BlockSize: 122, VXLANMode: EncapNever, IPIPMode: EncapNever, NATOutgoing: true}}
				c.BGP.RouterID = addr("10.255.0.1")
				c.BGP.Peers = []netip.Addr{addr("fd77::12"), addr("fd77::13")}
				c.BGP.PeerPrefixes = []netip.Prefix{pfx("fd77::/64")}
				c.BGP.Voters = []netip.Addr{addr("fd77::11"), addr("fd77::12"), addr("fd77::13")}
			},
		},
		{
			name: "anchors and aliases",
			yaml: "pools:\n- &p {cidr: 10.10.0.0/16, blockSize: 28}\nbgp: {peers: [&a 10.0.0.1], peerPrefixes: [10.0.0.0/8], voters: [*a]}\n",
			want: func(c *Config) {
				c.Pools = []PoolConfig{{CIDR: pfx("10.10.0.0/16"), BlockSize: 28, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true}}
				c.BGP.Peers = []netip.Addr{addr("10.0.0.1")}
				c.BGP.PeerPrefixes = []netip.Prefix{pfx("10.0.0.0/8")}
				c.BGP.Voters = []netip.Addr{addr("10.0.0.1")}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig("/etc/reef/config.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("ParseConfig() error = %v", err)
			}
			want := DefaultConfig()
			tt.want(&want)
			if diff := cmp.Diff(want, got, configCmpOpts); diff != "" {
				t.Errorf("ParseConfig() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	const f = "config /etc/reef/config.yaml: "
	tests := []struct {
		name string
		yaml string
		want []string // substrings of the error
	}{
		{"typo", "logLevel: info\nmtu: 0\n\nnodname: n1\n", []string{f + `line 4: unknown key "nodname" (did you mean "nodeName"?)`}},
		{"wrong case", "NodeName: n1", []string{f + `line 1: unknown key "NodeName" (did you mean "nodeName"?)`}},
		{"kebab case", "state-dir: /x", []string{f + `line 1: unknown key "state-dir" (did you mean "stateDir"?)`}},
		{"unknown key, no suggestion", "colour: blue", []string{f + `line 1: unknown key "colour" (known keys: nodeName, `}},
		{"nested typo", "bgp:\n  holdtime: 9s\n", []string{f + `line 2: bgp: unknown key "holdtime" (did you mean "holdTime"?)`}},
		{"pool typo", "pools:\n- cidr: 10.1.0.0/16\n  blocksize: 24\n", []string{f + `line 3: pools[0]: unknown key "blocksize" (did you mean "blockSize"?)`}},
		{"duplicate key", "mtu: 1500\nmtu: 1400\n", []string{f + `line 2: duplicate key "mtu" (first at line 1)`}},
		{"nested duplicate key", "bgp:\n  asn: 65001\n  port: 179\n  asn: 65002\n", []string{f + `line 4: bgp: duplicate key "asn" (first at line 2)`}},
		{"duplicate key in a flow mapping", "bgp: {port: 179, port: 1179}", []string{f + `line 1: bgp: duplicate key "port" (first at line 1)`}},
		{"duplicate key in a pool", "pools:\n- cidr: 10.1.0.0/16\n  cidr: 10.2.0.0/16\n", []string{f + `line 3: pools[0]: duplicate key "cidr" (first at line 2)`}},
		{"duplicate key in an external peer", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n  - address: 10.0.0.2\n    asn: 65000\n    address: 10.0.0.3\n",
			[]string{f + `line 7: bgp.externalPeers[1]: duplicate key "address" (first at line 5)`}},
		{"unknown key in kubernetes", "kubernetes:\n  kubeconfg: /etc/reef/kubeconfig\n", []string{f + `line 2: kubernetes: unknown key "kubeconfg" (did you mean "kubeconfig"?)`}},
		{"unknown key in the second pool", "pools:\n- cidr: 10.1.0.0/16\n- cidr: 10.2.0.0/16\n  natOutgoin: false\n",
			[]string{f + `line 4: pools[1]: unknown key "natOutgoin" (did you mean "natOutgoing"?)`}},
		{"unknown key in an external peer", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asm: 65000\n",
			[]string{f + `line 4: bgp.externalPeers[0]: unknown key "asm" (did you mean "asn"?)`}},
		{"key known elsewhere on the line", "{nodeName: n1, pools: [{cidr: 10.1.0.0/16, nodeName: n2}]}", []string{f + `line 1: pools[0]: unknown key "nodeName" (known keys: cidr, `}},
		{"unknown key in an aliased pool", "pools:\n- &p {cidr: 10.1.0.0/16, size: 24}\n- *p\n",
			[]string{f + `line 2: pools[0]: unknown key "size"`, f + `line 2: pools[1]: unknown key "size"`}},
		{"merge key", "bgp:\n  <<: {asn: 65001}\n", []string{f + `line 2: bgp: unknown key "<<"`}},
		{"empty pool entry", "pools:\n-\n- cidr: 10.1.0.0/16\n", []string{f + `line 2: pools[0].cidr: missing`}},
		{"mapping with duplicate keys for a list", "pools:\n  cidr: 10.1.0.0/16\n  cidr: 10.2.0.0/16\n", []string{f + `line 2: pools: value a mapping is not a list`}},
		{"not a number", "pools:\n- cidr: 10.1.0.0/16\n  blockSize: abc\n", []string{f + `line 3: pools[0].blockSize: value "abc" is not a number`}},
		{"not a whole number", "mtu: 1500.5", []string{f + `line 1: mtu: value "1500.5" is not a whole number`}},
		{"quoted fraction", "bgp: {port: '179.5'}", []string{f + `line 1: bgp.port: value "179.5" is not a number`}},
		{"int overflow", "mtu: 99999999999999999999", []string{f + `line 1: mtu: value "99999999999999999999" is out of range`}},
		{"negative ASN", "bgp: {asn: -1}", []string{f + `line 1: bgp.asn: value "-1" is out of range (0 to 4294967295)`}},
		{"ASN too large", "bgp: {asn: 4294967296}", []string{f + `line 1: bgp.asn: value "4294967296" is out of range`}},
		{"bad CIDR", "pools:\n- cidr: 10.244.0.0/33\n", []string{f + `line 2: pools[0].cidr: value "10.244.0.0/33": not a CIDR (`}},
		{"bad IPv6 CIDR", "pools:\n- cidr: fd00:10:244::/130\n", []string{f + `line 2: pools[0].cidr: value "fd00:10:244::/130": not a CIDR (`}},
		{"IPv6 CIDR without length", "pools: [{cidr: 'fd00:10:244::'}]", []string{f + `line 1: pools[0].cidr: value "fd00:10:244::": not a CIDR (`, "e.g. fd00:10:244::/56"}},
		{"CIDR without length", "pools: [{cidr: 10.244.0.0}]", []string{f + `line 1: pools[0].cidr: value "10.244.0.0": not a CIDR (`, "write it with a prefix length, e.g. 10.244.0.0/16"}},
		{"bad address", "nodeAddress: 192.168.10.300", []string{f + `line 1: nodeAddress: value "192.168.10.300": not an IP address (`}},
		{"address with length", "nodeAddress: 192.168.10.20/24", []string{f + `line 1: nodeAddress: value "192.168.10.20/24"`, "write the address without /24"}},
		{"not UTF-8", "nodeName: n1\ninterface: \"eth\xe90\"\n", []string{f + `line 2: byte 0xe9 at column 16 is not UTF-8; save the file as UTF-8`}},
		{"bad peer", "bgp:\n  peers: [192.168.10.17, bogus]\n", []string{f + `line 2: bgp.peers[1]: value "bogus": not an IP address`}},
		{"peer listed twice", "bgp:\n  peers:\n  - 192.168.10.17\n  - 192.168.10.17\n  voters: [192.168.10.17, 192.168.10.18, 192.168.10.19]\n",
			[]string{f + `line 4: bgp.peers[1]: value "192.168.10.17" is listed twice (also bgp.peers[0] at line 3)`}},
		{"peer in a pool", "pools: [{cidr: 10.244.0.0/16}]\nbgp:\n  peers: [10.244.0.7]\n  voters: [192.168.10.17, 192.168.10.18, 192.168.10.19]\n",
			[]string{f + `line 3: bgp.peers[0]: value "10.244.0.7" is inside pools[0].cidr 10.244.0.0/16 at line 1: a pod address is never a node's`}},
		{"nodeAddress in a pool", "nodeAddress: 192.168.10.20\npools:\n- cidr: 192.168.10.0/24\n",
			[]string{f + `line 1: nodeAddress: value "192.168.10.20" is inside pools[0].cidr 192.168.10.0/24 at line 3: a pod address is never a node's`}},
		{"voter in a pool", "bgp:\n  peers: [192.168.10.17]\n  voters: [192.168.10.17, 10.244.0.8, 192.168.10.19]\n",
			[]string{f + `line 3: bgp.voters[1]: value "10.244.0.8" is inside pools[0].cidr 10.244.0.0/16`}},
		{"route reflector in a pool", "bgp:\n  routeReflectors: [10.244.0.9]\n  voters: [192.168.10.17, 192.168.10.18, 192.168.10.19]\n",
			[]string{f + `line 2: bgp.routeReflectors[0]: value "10.244.0.9" is inside pools[0].cidr 10.244.0.0/16`}},
		{"IPv6 pool under a small mtu", "mtu: 1200\npools:\n- cidr: 10.244.0.0/16\n- cidr: 'fd00:10:244::/56'\n",
			[]string{f + `line 1: mtu: value 1200 is below 1280, the least IPv6 runs on, and pools[1].cidr fd00:10:244::/56 at line 4 is IPv6`}},
		{"link-local pool", "pools: [{cidr: 169.254.0.0/16}]", []string{f + `line 1: pools[0].cidr: value "169.254.0.0/16" overlaps the link-local range 169.254.0.0/16`}},
		{"loopback pool", "pools: [{cidr: 127.0.0.0/8}]", []string{f + `line 1: pools[0].cidr: value "127.0.0.0/8" overlaps the loopback range`}},
		{"multicast pool", "pools: [{cidr: 224.0.0.0/8}]", []string{f + `line 1: pools[0].cidr: value "224.0.0.0/8" overlaps the multicast range 224.0.0.0/4`}},
		{"pool of every address", "pools: [{cidr: 0.0.0.0/0}]", []string{f + `line 1: pools[0].cidr: value "0.0.0.0/0" overlaps`}},
		{"IPv6 link-local pool", "pools: [{cidr: 'fe80::/64'}]", []string{f + `line 1: pools[0].cidr: value "fe80::/64" overlaps the link-local range fe80::/10`}},
		{"keepalive under a second", "bgp:\n  keepaliveTime: 500ms\n", []string{f + `line 2: bgp.keepaliveTime: value "500ms" is not a whole number of seconds`}},
		{"hold time with a fraction", "bgp:\n  holdTime: 3500ms\n  keepaliveTime: 1s\n", []string{f + `line 2: bgp.holdTime: value "3.5s" is not a whole number of seconds`}},
		{"hold time past 16 bits", "bgp:\n  holdTime: 65536s\n", []string{f + `line 2: bgp.holdTime: value "18h12m16s" is above the 18h12m15s a BGP OPEN message carries`}},
		{"external peer hold time past 16 bits", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000, holdTime: 100000s}]\n",
			[]string{f + `line 2: bgp.externalPeers[0].holdTime: value "27h46m40s" is above the 18h12m15s`}},
		{"external peer keepalive under a second", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000, keepaliveTime: 300ms}]\n",
			[]string{f + `line 2: bgp.externalPeers[0].keepaliveTime: value "300ms" is not a whole number of seconds`}},
		{"duration without unit", "logLevel: info\n\n\n\nreconcileInterval: 30\n", []string{f + `line 5: reconcileInterval: value "30" is not a duration (write e.g. "30s")`}},
		{"bad bool", "pools: [{cidr: 10.1.0.0/16, natOutgoing: maybe}]", []string{f + `line 1: pools[0].natOutgoing: value "maybe" is not true or false`}},
		{"scalar for list", "bgp: {peers: 10.0.0.1}", []string{f + `line 1: bgp.peers: value "10.0.0.1" is not a list`}},
		{"scalar for struct", "bgp: 64512", []string{f + `line 1: bgp: value "64512" is not a mapping`}},
		{"list for scalar", "nodeName: [a, b]", []string{f + `line 1: nodeName: value is a list, not a single value`}},
		{"mapping for scalar", "mtu: {a: 1}", []string{f + `line 1: mtu: value is a mapping, not a single value`}},
		{"null for number", "mtu:", []string{f + `line 1: mtu: has no value`}},
		{"top level list", "- nodeName: a\n", []string{f + `line 1: the top level must be a mapping`}},
		{"top level scalar", "nodeName", []string{f + `line 1: the top level must be a mapping`}},
		{"two documents", "mtu: 1500\n---\nmtu: 1400\n", []string{f + `line 2: more than one YAML document`}},
		{"syntax error", "logLevel: info\npools: [\n", []string{f + "yaml: line 2: did not find expected node content"}},
		{"tab indentation", "bgp:\n\tasn: 1\n", []string{f + "yaml: line 2: found character that cannot start any token"}},
		{"complex key", "? [a]\n: b\n", []string{f + `line 1: a key must be a plain name`}},
		{"all errors reported", "mtu: x\nlogLevel: [a]\nfoo: 1\n", []string{f + `line 1: mtu`, `line 2: logLevel`, `line 3: unknown key "foo"`}},

		// Semantic checks, with the line of the key.
		{"node name", "nodeName: My_Node", []string{f + `line 1: nodeName: value "My_Node" is not a valid node name`}},
		{"node name too long", "nodeName: " + strings.Repeat("a", 254), []string{f + `line 1: nodeName: value "aaaa`, "at most 253"}},
		{"node name ends in dash", "nodeName: node-", []string{f + `line 1: nodeName: value "node-" is not a valid node name`}},
		{"node address loopback", "nodeAddress: 127.0.0.1", []string{f + `line 1: nodeAddress: value "127.0.0.1" is a loopback`}},
		{"node address unspecified", "nodeAddress: 0.0.0.0", []string{f + `line 1: nodeAddress: value "0.0.0.0" is a loopback, unspecified or multicast`}},
		{"node address multicast", "nodeAddress: 224.0.0.1", []string{f + `line 1: nodeAddress: value "224.0.0.1"`}},
		{"node address IPv6", "nodeAddress: 2001:db8::1", []string{f + `line 1: nodeAddress: value "2001:db8::1" is not IPv4`}},
		{"interface too long", "interface: enp0s31f6-very-long", []string{f + `line 1: interface: value "enp0s31f6-very-long" is not an interface name`}},
		{"interface with slash", "interface: eth/0", []string{f + `line 1: interface: value "eth/0"`}},
		{"interface with space", "interface: 'eth 0'", []string{f + `line 1: interface: value "eth 0"`}},
		{"relative state dir", "stateDir: var/lib/reef", []string{f + `line 1: stateDir: value "var/lib/reef" is not an absolute path`}},
		{"empty state dir", "stateDir: ''", []string{f + `line 1: stateDir: value "" is not an absolute path`}},
		{"relative socket", "socket: reef.sock", []string{f + `line 1: socket: value "reef.sock" is not an absolute path`}},
		{"relative pending delete dir", "pendingDeleteDir: pd", []string{f + `line 1: pendingDeleteDir: value "pd" is not an absolute path`}},
		{"socket too long", "socket: /" + strings.Repeat("s", 107), []string{f + "line 1: socket: value \"/sss", "is 108 bytes long; a unix socket path must be shorter than 108"}},
		{"mtu too small", "mtu: 500", []string{f + `line 1: mtu: value 500 is outside 576..9216`}},
		{"mtu too large", "mtu: 9217", []string{f + `line 1: mtu: value 9217 is outside 576..9216`}},
		{"no pools", "pools: []", []string{f + `line 1: pools: no pool`}},
		{"null pools", "pools:", []string{f + `line 1: pools: no pool`}},
		{"pool without cidr", "pools:\n- blockSize: 24\n", []string{f + `line 2: pools[0].cidr: missing`}},
		{"pool host bits", "pools:\n- cidr: 10.244.1.0/16\n", []string{f + `line 2: pools[0].cidr: value "10.244.1.0/16" has host bits set (did you mean 10.244.0.0/16?)`}},
		{"IPv6 block too large", "pools: [{cidr: 'fd00::/64', blockSize: 112}]", []string{f + `line 1: pools[0].blockSize: value 112 is outside 116..128 (an IPv6 block is /116 to /128`}},
		{"IPv6 block too small", "pools: [{cidr: 'fd00::/64', blockSize: 129}]", []string{f + `line 1: pools[0].blockSize: value 129 is outside 116..128`}},
		{"IPv6 block longer than the pool", "pools: [{cidr: 'fd00::/120', blockSize: 118}]", []string{f + `line 1: pools[0].blockSize: value 118 is outside 120..128`}},
		{"IPv6 pool with IPIP", "pools: [{cidr: 'fd00::/64', vxlanMode: Never, ipipMode: Always}]", []string{f + `line 1: pools[0].ipipMode: value "Always" on an IPv6 pool: IPIP carries IPv4 only`}},
		{"IPv4-mapped pool", "pools: [{cidr: '::ffff:10.244.0.0/112'}]", []string{f + `line 1: pools[0].cidr: value "::ffff:10.244.0.0/112" is an IPv4-mapped IPv6 CIDR`}},
		{"dual-stack pools overlapping", "pools: [{cidr: 10.244.0.0/16}, {cidr: 'fd00::/64'}, {cidr: 'fd00::/56'}]", []string{f + `line 1: pools[2].cidr: value "fd00::/56" overlaps pools[1].cidr "fd00::/64"`}},
		{"IPv6 pool with VXLAN and IPIP beside peers", "pools: [{cidr: 'fd00::/64', ipipMode: Always}]\nbgp: {peers: [10.0.0.2], voters: [10.0.0.2]}",
			[]string{f + `line 1: pools[0].ipipMode: value "Always" on an IPv6 pool: IPIP carries IPv4 only; set ipipMode: Never (vxlanMode encapsulates IPv6)`}},
		{"node IPv6 address IPv4", "nodeAddressV6: 10.0.0.1", []string{f + `line 1: nodeAddressV6: value "10.0.0.1" is not a global unicast IPv6 address`}},
		{"node IPv6 address link-local", "nodeAddressV6: 'fe80::1'", []string{f + `line 1: nodeAddressV6: value "fe80::1" is not a global unicast IPv6 address`}},
		{"node IPv6 address mapped", "nodeAddressV6: '::ffff:10.0.0.1'", []string{f + `line 1: nodeAddressV6: value "::ffff:10.0.0.1" is not a global unicast IPv6 address`}},
		{"node IPv6 address in a pool", "nodeAddressV6: 'fd00::5'\npools: [{cidr: 'fd00::/64'}]", []string{f + `line 1: nodeAddressV6: value "fd00::5" is inside pools[0].cidr fd00::/64 at line 2: a pod address is never a node's`}},
		{"node IPv6 address with length", "nodeAddressV6: 'fd77::1/64'", []string{f + `line 1: nodeAddressV6: value "fd77::1/64": not an IP address`, "write the address without /64"}},
		{"block too large", "pools: [{cidr: 10.244.0.0/24, blockSize: 20}]", []string{f + `line 1: pools[0].blockSize: value 20 is outside 24..32`}},
		{"block too small", "pools: [{cidr: 10.244.0.0/16, blockSize: 33}]", []string{f + `line 1: pools[0].blockSize: value 33 is outside 16..32`}},
		{"bad encap", "pools:\n- cidr: 10.1.0.0/16\n  vxlanMode: always\n", []string{f + `line 3: pools[0].vxlanMode: value "always" is not one of Never, CrossSubnet, Always`}},
		{"bad ipip", "pools: [{cidr: 10.1.0.0/16, ipipMode: true}]", []string{f + `line 1: pools[0].ipipMode: value "true" is not one of Never, CrossSubnet, Always`}},
		{"both encaps", "pools: [{cidr: 10.1.0.0/16, ipipMode: Always}]", []string{f + `line 1: pools[0].ipipMode: value "Always" and vxlanMode "CrossSubnet" both encapsulate`, "set one of them to Never"}},
		{"overlapping pools", "pools:\n- cidr: 10.244.0.0/16\n- cidr: 10.244.128.0/17\n", []string{f + `line 3: pools[1].cidr: value "10.244.128.0/17" overlaps pools[0].cidr "10.244.0.0/16" at line 2; pools must not share addresses`}},
		{"pool smaller than the default block", "pools:\n- natOutgoing: false\n  cidr: 10.244.0.0/28\n",
			[]string{f + `line 3: pools[0].cidr: value "10.244.0.0/28" is smaller than one block of the default blockSize 26; set blockSize to 28..32 under it, or widen the cidr`}},
		{"IPv6 pool smaller than the default block", "pools:\n- natOutgoing: false\n  cidr: 'fd00::/124'\n",
			[]string{f + `line 3: pools[0].cidr: value "fd00::/124" is smaller than one block of the default blockSize 122; set blockSize to 124..128 under it, or widen the cidr`}},
		{"block size given, too large for the pool", "pools:\n- cidr: 10.244.0.0/28\n  blockSize: 26\n", []string{f + `line 3: pools[0].blockSize: value 26 is outside 28..32`}},
		{"both encaps given", "pools:\n- cidr: 10.1.0.0/16\n  vxlanMode: Always\n  ipipMode: CrossSubnet\n",
			[]string{f + `line 4: pools[0].ipipMode: value "CrossSubnet" and vxlanMode "Always" both encapsulate (vxlanMode at line 3); set one of them to Never`}},
		{"router ID not the node address, block style", "nodeAddress: 10.0.0.1\nbgp:\n  asn: 64512\n  routerID: 10.0.0.2\n", []string{f + `line 4: bgp.routerID: value "10.0.0.2" is not nodeAddress 10.0.0.1`}},
		{"asn zero", "bgp: {asn: 0}", []string{f + `line 1: bgp.asn: value 0 is not an AS number`}},
		{"port zero", "bgp: {port: 0}", []string{f + `line 1: bgp.port: value 0 is outside 1..65535`}},
		{"port too large", "bgp: {port: 70000}", []string{f + `line 1: bgp.port: value 70000 is outside 1..65535`}},
		{"peer link-local", "bgp: {peers: ['fe80::1'], voters: [10.0.0.1]}", []string{f + `line 1: bgp.peers[0]: value "fe80::1" is not a unicast IPv4 or global IPv6 address`}},
		{"peer prefix IPv4-mapped", "bgp: {peerPrefixes: ['::ffff:10.0.0.0/104'], voters: [10.0.0.1]}", []string{f + `line 1: bgp.peerPrefixes[0]: value "::ffff:10.0.0.0/104" is not an IPv4 or global IPv6 prefix`}},
		{"voter multicast", "bgp: {voters: ['ff02::1']}", []string{f + `line 1: bgp.voters[0]: value "ff02::1" is not a unicast IPv4 or global IPv6 address`}},
		{"router ID IPv6", "bgp: {routerID: '2001:db8::1'}", []string{f + `line 1: bgp.routerID: value "2001:db8::1" is not a unicast IPv4 address; a router ID is 32 bits`}},
		{"router ID not the node address", "nodeAddress: 10.0.0.1\nbgp: {routerID: 10.0.0.2}", []string{f + `line 2: bgp.routerID: value "10.0.0.2" is not nodeAddress 10.0.0.1: a node with an IPv4 address is known by it`}},
		{"external peer link-local", "bgp: {externalPeers: [{address: 'fe80::1', asn: 65000}]}", []string{f + `line 1: bgp.externalPeers[0].address: value "fe80::1" is not a unicast IPv4 or global IPv6 address`}},
		{"external peer loopback", "bgp: {externalPeers: [{address: 127.0.0.1, asn: 65000}]}", []string{f + `line 1: bgp.externalPeers[0].address: value "127.0.0.1" is not a unicast IPv4 or global IPv6 address`}},
		{"external peer own IPv6", "nodeAddressV6: '2001:db8::1'\nbgp:\n  externalPeers:\n  - address: '2001:db8::1'\n    asn: 65000\n",
			[]string{f + `line 4: bgp.externalPeers[0].address: value "2001:db8::1" is this node's own address (nodeAddressV6 at line 1)`}},
		{"peer prefix host bits", "bgp: {peerPrefixes: [192.168.10.1/24]}", []string{f + `line 1: bgp.peerPrefixes[0]: value "192.168.10.1/24" has host bits set (did you mean 192.168.10.0/24?)`}},
		{"keepalive zero", "bgp: {keepaliveTime: 0s}", []string{f + `line 1: bgp.keepaliveTime: value "0s" must be positive`}},
		{"hold too short", "bgp: {holdTime: 2s, keepaliveTime: 1s}", []string{f + `line 1: bgp.holdTime: value "2s" is below the 3s BGP allows`}},
		{"keepalive not below hold", "bgp:\n  keepaliveTime: 30s\n", []string{f + `line 2: bgp.keepaliveTime: value "30s" is not below bgp.holdTime "30s"`}},
		{"hold below default keepalive", "bgp:\n  holdTime: 9s\n", []string{f + `line 2: bgp.holdTime: value "9s" is not above bgp.keepaliveTime "10s", its default; give bgp.keepaliveTime too`}},
		{"keepalive not below hold, both given", "bgp:\n  holdTime: 9s\n  keepaliveTime: 9s\n", []string{f + `line 3: bgp.keepaliveTime: value "9s" is not below bgp.holdTime "9s" at line 2 (a third of it is usual)`}},
		{"metrics without port", "metrics: localhost", []string{f + `line 1: metrics: value "localhost" is not host:port`}},
		{"metrics bad port", "metrics: 'localhost:http'", []string{f + `line 1: metrics: value "localhost:http" has no port number`}},
		{"reconcile too often", "reconcileInterval: 10ms", []string{f + `line 1: reconcileInterval: value "10ms" is below 1s`}},
		{"negative reconcile", "reconcileInterval: -1s", []string{f + `line 1: reconcileInterval: value "-1s" is below 1s`}},
		{"log level", "logLevel: verbose", []string{f + `line 1: logLevel: value "verbose" is not one of debug, info, warn, error`}},
		{"log level case", "logLevel: INFO", []string{f + `line 1: logLevel: value "INFO"`}},
		{"null password at top level", "password:\nnodeName: n1", []string{f + `line 1: unknown key "password"`}},

		// A node with peers names the cluster's voters.
		{"peers without voters", "nodeAddress: 10.0.0.9\nbgp:\n  peers: [10.0.0.3, 10.0.0.1, 10.0.0.2, 10.0.0.4]\n",
			[]string{f + `line 3: bgp.peers: value [10.0.0.3 10.0.0.1 10.0.0.2 10.0.0.4], but bgp.voters is not set`, "the same 3 or 5 nodes on every node", "e.g. voters: [10.0.0.1, 10.0.0.2, 10.0.0.3]"}},
		{"peer prefixes without voters", "bgp:\n  peerPrefixes: [10.0.0.0/24]\n", []string{f + `line 2: bgp.peerPrefixes: value [10.0.0.0/24], but bgp.voters is not set`, "voters: [NODE1, NODE2, NODE3]"}},

		// Route reflectors.
		{"route reflector link-local", "bgp: {routeReflectors: ['fe80::1'], voters: [10.0.0.1]}", []string{f + `line 1: bgp.routeReflectors[0]: value "fe80::1" is not a unicast IPv4 or global IPv6 address`}},
		{"route reflector twice", "bgp:\n  voters: [10.0.0.5]\n  routeReflectors:\n  - 10.0.0.1\n  - 10.0.0.1\n",
			[]string{f + `line 5: bgp.routeReflectors[1]: value "10.0.0.1" is listed twice (also bgp.routeReflectors[0] at line 4)`}},
		{"peers and route reflectors", "bgp:\n  peers: [10.0.0.2]\n  voters: [10.0.0.5]\n  routeReflectors: [10.0.0.1]\n",
			[]string{f + `line 4: bgp.routeReflectors: value [10.0.0.1] and bgp.peers [10.0.0.2] are both set`}},
		{"route reflectors without voters", "bgp:\n  routeReflectors: [10.0.0.1, 10.0.0.2]\n",
			[]string{f + `line 2: bgp.routeReflectors: value [10.0.0.1 10.0.0.2] is set but bgp.voters is not`, "3 or 5 nodes of the cluster", "route reflectors do not vote"}},
		{"reflector without voters", "bgp:\n  peerPrefixes: [10.0.0.0/24]\n  routeReflector: true\n",
			[]string{f + `line 3: bgp.routeReflector: value true, but bgp.voters is not set`, "3 or 5 nodes of the cluster"}},
		{"reflector without peer prefixes", "bgp: {routeReflector: true, voters: [10.0.0.5]}", []string{f + `line 1: bgp.routeReflector: value true, but bgp.peerPrefixes is empty`}},
		{"reflector with route reflectors", "bgp: {routeReflector: true, peerPrefixes: [10.0.0.0/24], voters: [10.0.0.5], routeReflectors: [10.0.0.1]}",
			[]string{f + `line 1: bgp.routeReflectors: value [10.0.0.1] is set on a route reflector (bgp.routeReflector: true)`}},
		{"external peer without address", "bgp:\n  externalPeers:\n  - port: 179\n    asn: 65000\n", []string{f + `line 3: bgp.externalPeers[0].address: missing; every external peer needs the router's address`}},
		{"external peer without asn", "bgp:\n  externalPeers:\n  - port: 179\n    address: 10.0.0.1\n", []string{f + `line 3: bgp.externalPeers[0].asn: missing or 0`}},
		{"external peer is a mesh peer", "bgp: {peers: [10.0.0.1], externalPeers: [{address: 10.0.0.1, asn: 65000}]}", []string{f + `line 1: bgp.externalPeers[0].address: value "10.0.0.1" is also in bgp.peers`}},
		{"external peer twice", "bgp:\n  externalPeers:\n  - {address: 10.0.0.1, asn: 65000}\n  - {address: 10.0.0.1, asn: 65000}\n",
			[]string{f + `line 4: bgp.externalPeers[1].address: value "10.0.0.1" is listed twice (also bgp.externalPeers[0] at line 3)`}},
		{"external peer unlimited", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n    maxPrefixes: 0\n", []string{f + `line 5: bgp.externalPeers[0].maxPrefixes: value 0: every session has a prefix limit`}},
		{"service CIDR host bits", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs: [10.96.0.1/12]\n", []string{f + `line 3: bgp.serviceClusterIPs[0]: value "10.96.0.1/12" has host bits set (did you mean 10.96.0.0/12?)`}},
		{"service CIDR twice", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs:\n  - 10.96.0.0/12\n  - 10.96.0.0/12\n",
			[]string{f + `line 5: bgp.serviceClusterIPs[1]: value "10.96.0.0/12" is listed twice (also bgp.serviceClusterIPs[0] at line 4)`}},
		{"service CIDR over a pool", "pools: [{cidr: 10.244.0.0/16}]\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs: [10.0.0.0/8]\n", []string{f + `line 4: bgp.serviceClusterIPs[0]: value "10.0.0.0/8" overlaps pools[0].cidr "10.244.0.0/16"`}},
		{"service CIDR everything", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs: [0.0.0.0/0]\n", []string{f + `line 3: bgp.serviceClusterIPs[0]: value "0.0.0.0/0" covers every address`}},
		{"service CIDR 4in6", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs: ['::ffff:10.96.0.0/108']\n", []string{f + `line 3: bgp.serviceClusterIPs[0]: value "::ffff:10.96.0.0/108" is an IPv4 CIDR written as IPv6`}},
		{"service CIDR IPv6 without pool", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs: ['fd00:10:96::/112']\n", []string{f + `line 3: bgp.serviceClusterIPs[0]: value "fd00:10:96::/112" is IPv6, but no pool is`}},
		{"service CIDR over the node", "nodeAddress: 10.96.0.5\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs: [10.96.0.0/12]\n", []string{f + `line 4: bgp.serviceClusterIPs[0]: value "10.96.0.0/12" overlaps nodeAddress 10.96.0.5`}},
		{"service CIDR over a router", "bgp:\n  externalPeers: [{address: 10.100.0.1, asn: 65000}]\n  serviceClusterIPs: [10.96.0.0/11]\n", []string{f + `line 3: bgp.serviceClusterIPs[0]: value "10.96.0.0/11" overlaps bgp.externalPeers 10.100.0.1`}},
		{"service CIDR over a voter", "bgp:\n  peerPrefixes: [10.100.0.0/24]\n  voters: [10.100.0.1, 10.100.0.2, 10.100.0.3]\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs: [10.100.0.0/16]\n", []string{f + `line 5: bgp.serviceClusterIPs[0]: value "10.100.0.0/16" overlaps bgp.voters 10.100.0.1`}},
		{"service CIDR over peerPrefixes", "bgp:\n  peerPrefixes: [10.100.0.0/24]\n  voters: [10.0.0.11, 10.0.0.12, 10.0.0.13]\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceClusterIPs: [10.100.0.0/16]\n", []string{f + `line 5: bgp.serviceClusterIPs[0]: value "10.100.0.0/16" overlaps bgp.peerPrefixes 10.100.0.0/24`}},
		{"service CIDR without routers", "bgp:\n  serviceClusterIPs: [10.96.0.0/12]\n", []string{f + `line 2: bgp.serviceClusterIPs: value [10.96.0.0/12], but bgp.externalPeers is empty`}},
		{"external IPs host bits", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceExternalIPs: [198.51.100.1/24]\n", []string{f + `line 4: bgp.serviceExternalIPs[0]: value "198.51.100.1/24" has host bits set (did you mean 198.51.100.0/24?)`}},
		{"external IPs twice", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceExternalIPs: [198.51.100.0/24, 198.51.100.0/24]\n", []string{f + `line 4: bgp.serviceExternalIPs[1]: value "198.51.100.0/24" is listed twice (also bgp.serviceExternalIPs[0] at line 4)`}},
		{"external IPs everything", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceExternalIPs: ['::/0']\n", []string{f + `line 4: bgp.serviceExternalIPs[0]: value "::/0" covers every address; give the range the Services' externalIPs come from`}},
		{"external IPs IPv6 without pool", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceExternalIPs: ['2001:db8:e::/64']\n", []string{f + `line 4: bgp.serviceExternalIPs[0]: value "2001:db8:e::/64" is IPv6, but no pool is`}},
		{"load balancer IPs over a pool", "pools: [{cidr: 10.244.0.0/16}]\nkubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceLoadBalancerIPs: [10.244.255.0/24]\n", []string{f + `line 5: bgp.serviceLoadBalancerIPs[0]: value "10.244.255.0/24" overlaps pools[0].cidr "10.244.0.0/16"`}},
		{"load balancer IPs 4in6", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceLoadBalancerIPs: ['::ffff:203.0.113.0/120']\n", []string{f + `line 4: bgp.serviceLoadBalancerIPs[0]: value "::ffff:203.0.113.0/120" is an IPv4 CIDR written as IPv6`}},
		{"load balancer IPs over a router", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  externalPeers: [{address: 203.0.113.1, asn: 65000}]\n  serviceLoadBalancerIPs: [203.0.113.0/24]\n", []string{f + `line 4: bgp.serviceLoadBalancerIPs[0]: value "203.0.113.0/24" overlaps bgp.externalPeers 203.0.113.1`}},
		{"load balancer IPs without routers, not assigned", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  serviceLoadBalancerIPs: [203.0.113.0/24]\n  assignLoadBalancerIPs: false\n", []string{f + `line 3: bgp.serviceLoadBalancerIPs: value [203.0.113.0/24], but bgp.externalPeers is empty`}},
		{"assignment not a bool", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  serviceLoadBalancerIPs: [203.0.113.0/24]\n  assignLoadBalancerIPs: maybe\n", []string{f + `line 4: bgp.assignLoadBalancerIPs: value "maybe" is not true or false`}},
		{"assignment without a range", "kubernetes: {kubeconfig: /etc/reef/kubeconfig}\nbgp:\n  assignLoadBalancerIPs: true\n", []string{f + `line 3: bgp.assignLoadBalancerIPs: value true, but bgp.serviceLoadBalancerIPs is empty`}},
		{"assignment without the API", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceLoadBalancerIPs: [203.0.113.0/24]\n  assignLoadBalancerIPs: true\n", []string{f + `line 4: bgp.assignLoadBalancerIPs: value true, but kubernetes.kubeconfig is not set`}},
		{"external IPs without the API", "bgp:\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n  serviceExternalIPs: [198.51.100.0/24]\n", []string{f + `line 3: bgp.serviceExternalIPs: value [198.51.100.0/24], but kubernetes.kubeconfig is empty`}},
		{"external peer bad community", "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, communities: ['65000:70000']}]}", []string{f + `line 1: bgp.externalPeers[0].communities[0]: value "65000:70000"`}},
		{"external peer multihop iBGP", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 64512\n    multihop: 2\n", []string{f + `line 5: bgp.externalPeers[0].multihop: value 2 on an iBGP peer`}},
		{"external peer hold time", "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, holdTime: 2s}]}", []string{f + `line 1: bgp.externalPeers[0].holdTime: value "2s" is below the 3s`}},
		{"external peer hold time below the default keepalive", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n    holdTime: 9s\n",
			[]string{f + `line 5: bgp.externalPeers[0].holdTime: value "9s" is not above bgp.keepaliveTime "10s", the keepalive time this peer takes; give keepaliveTime too`}},
		{"external peer keepalive above the default hold", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n    keepaliveTime: 30s\n",
			[]string{f + `line 5: bgp.externalPeers[0].keepaliveTime: value "30s" is not below the hold time "30s"`}},
		{"external peer keepalive", "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, holdTime: 9s, keepaliveTime: 9s}]}", []string{f + `line 1: bgp.externalPeers[0].keepaliveTime: value "9s" is not below the hold time "9s"`}},
		{"external peer unknown key", "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, peerASN: 1}]}", []string{f + `line 1: bgp.externalPeers[0]: unknown key "peerASN"`}},
		{"graceful shutdown too long", "bgp:\n  gracefulShutdownTime: 1m\n", []string{f + `line 2: bgp.gracefulShutdownTime: value "1m0s" is outside 0s..20s`}},
		{"BFD without minInterval", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n    bfd: {multiplier: 3}\n", []string{f + `line 5: bgp.externalPeers[0].bfd.minInterval: missing; BFD runs with minInterval set`}},
		{"BFD empty", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n    bfd: {}\n", []string{f + `line 5: bgp.externalPeers[0].bfd.minInterval: missing`}},
		{"BFD interval too short", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n    bfd:\n      minInterval: 1ms\n", []string{f + `line 6: bgp.externalPeers[0].bfd.minInterval: value "1ms" is outside 10ms..1m0s`}},
		{"BFD interval too long", "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, bfd: {minInterval: 2m}}]}", []string{f + `line 1: bgp.externalPeers[0].bfd.minInterval: value "2m0s" is outside 10ms..1m0s`}},
		{"BFD interval in microseconds", "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, bfd: {minInterval: 300500us}}]}", []string{f + `line 1: bgp.externalPeers[0].bfd.minInterval: value "300.5ms" is not a whole number of milliseconds`}},
		{"BFD interval not a duration", "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, bfd: {minInterval: 300}}]}", []string{f + `line 1: bgp.externalPeers[0].bfd.minInterval: value "300" is not a duration`}},
		{"BFD multiplier", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n    bfd:\n      minInterval: 300ms\n      multiplier: 256\n", []string{f + `line 7: bgp.externalPeers[0].bfd.multiplier: value 256 is outside 1..255`}},
		{"BFD slower than BGP", "bgp:\n  externalPeers:\n  - address: 10.0.0.1\n    asn: 65000\n    holdTime: 9s\n    keepaliveTime: 3s\n    bfd: {multiplier: 3,\n      minInterval: 3s}\n",
			[]string{f + `line 8: bgp.externalPeers[0].bfd.minInterval: value "3s" × multiplier 3 = 9s is not below the hold time "9s"`}},
		{"BFD multihop", "bgp: {externalPeers: [{address: 10.0.0.1, asn: 65000, multihop: 2, bfd: {minInterval: 300ms}}]}", []string{f + `line 1: bgp.externalPeers[0].bfd: set on a multihop peer (multihop 2): reef's BFD is single-hop only`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseConfig("/etc/reef/config.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("ParseConfig() = %+v, want an error containing %q", got, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("ParseConfig() error =\n%v\nwant it to contain %q", err, w)
				}
			}
			// Every problem is about a place in the file: the first
			// wanted text pins the file and the line, and every error
			// line names both.
			if !configPinsLine.MatchString(tt.want[0]) {
				t.Errorf("want %q does not pin the file and the line", tt.want[0])
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !configPinsLine.MatchString(line) {
					t.Errorf("error line %q does not name the file and the line", line)
				}
			}
			// The lines are the file's: two lines more above, each line
			// named is two more.
			_, err = ParseConfig("/etc/reef/config.yaml", []byte("# reef\n\n"+tt.yaml))
			for _, w := range tt.want {
				w = configLineNum.ReplaceAllStringFunc(w, func(m string) string {
					n, _ := strconv.Atoi(strings.TrimPrefix(m, "line "))
					return "line " + strconv.Itoa(n+2)
				})
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("with two lines more above, ParseConfig() error =\n%v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

var (
	configPinsLine = regexp.MustCompile(`^config /etc/reef/config\.yaml: (yaml: )?line [0-9]+: `)
	configLineNum  = regexp.MustCompile(`line [0-9]+`)
)

// TestParseConfigErrorList checks whole error lists: in the order of the
// file, each problem once.
func TestParseConfigErrorList(t *testing.T) {
	const f = "config /etc/reef/config.yaml: "
	for _, tt := range []struct{ name, yaml, want string }{
		{"three copies of a key", "mtu: 1500\nmtu: 1400\nmtu: 1300\n",
			f + `line 2: duplicate key "mtu" (first at line 1)` + "\n" + f + `line 3: duplicate key "mtu" (first at line 1)`},
		{"walk and decoder errors in file order", "mtu: x\nnodeAddress: bogus\nbgp: {asm: 1, holdTime: 30}\n",
			f + `line 1: mtu: value "x" is not a number` + "\n" +
				f + `line 2: nodeAddress: value "bogus": not an IP address (ParseAddr("bogus"): unable to parse IP)` + "\n" +
				f + `line 3: bgp: unknown key "asm" (did you mean "asn"?)` + "\n" +
				f + `line 3: bgp.holdTime: value "30" is not a duration (write e.g. "30s")`},
		{"bgp timers reported once, not again for a peer that takes them", "bgp:\n  keepaliveTime: 30s\n  externalPeers: [{address: 10.0.0.1, asn: 65000}]\n",
			f + `line 2: bgp.keepaliveTime: value "30s" is not below bgp.holdTime "30s" (a third of it is usual)`},
		{"two complex keys", "? [a]\n: b\n? [c]\n: d\n", f + "line 1: a key must be a plain name\n" + f + "line 3: a key must be a plain name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("/etc/reef/config.yaml", []byte(tt.yaml))
			if err == nil || err.Error() != tt.want {
				t.Errorf("ParseConfig() error =\n%v\nwant\n%s", err, tt.want)
			}
		})
	}
}

func TestConfigFinish(t *testing.T) {
	c := DefaultConfig()
	c.NodeName = "n1" // independent of this machine's hostname
	if c.PendingDeleteDir != "" {
		t.Fatalf("DefaultConfig().PendingDeleteDir = %q, want it left for Finish", c.PendingDeleteDir)
	}
	// A flag overrides stateDir after the file was read.
	c.StateDir = "/srv/reef"
	if err := c.Finish(); err != nil {
		t.Fatalf("Finish() error = %v", err)
	}
	if want := "/srv/reef/pending-del"; c.PendingDeleteDir != want {
		t.Errorf("PendingDeleteDir = %q, want %q", c.PendingDeleteDir, want)
	}

	c = DefaultConfig()
	c.NodeName, c.PendingDeleteDir = "n1", "/elsewhere"
	if err := c.Finish(); err != nil || c.PendingDeleteDir != "/elsewhere" {
		t.Errorf("Finish() = %v with PendingDeleteDir %q, want nil and the explicit /elsewhere", err, c.PendingDeleteDir)
	}

	// Values that did not come from the file are checked by Finish, without a line.
	c = DefaultConfig()
	c.NodeName, c.StateDir, c.LogLevel = "Bad_Name", "relative", "loud"
	err := c.Finish()
	for _, w := range []string{
		`config: nodeName: value "Bad_Name" is not a valid node name`,
		`config: stateDir: value "relative" is not an absolute path`,
		`config: logLevel: value "loud" is not one of debug, info, warn, error`,
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Finish() error = %v, want it to contain %q", err, w)
		}
	}
}

func TestValidateDefaults(t *testing.T) {
	c := DefaultConfig()
	c.NodeName = "n1"
	if err := c.Finish(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")

	got, err := LoadConfig(missing, false)
	if err != nil {
		t.Fatalf("LoadConfig(missing, false) error = %v", err)
	}
	if diff := cmp.Diff(DefaultConfig(), got, configCmpOpts); diff != "" {
		t.Errorf("LoadConfig(missing, false) mismatch (-want +got):\n%s", diff)
	}

	_, err = LoadConfig(missing, true)
	if want := "config " + missing + ": no such file or directory"; err == nil || err.Error() != want {
		t.Errorf("LoadConfig(missing, true) error = %v, want %q", err, want)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadConfig(missing, true) error = %v, want it to match fs.ErrNotExist", err)
	}

	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte("mtu: 1450\nlogLevel: debug\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = LoadConfig(path, true)
	if err != nil {
		t.Fatalf("LoadConfig() error = %v", err)
	}
	if got.MTU != 1450 || got.LogLevel != "debug" {
		t.Errorf("LoadConfig() = mtu %d, logLevel %q; want 1450, debug", got.MTU, got.LogLevel)
	}

	if err := os.WriteFile(path, []byte("mtu: big\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(path, false)
	if want := "config " + path + `: line 1: mtu: value "big" is not a number`; err == nil || err.Error() != want {
		t.Errorf("LoadConfig() error = %v, want %q", err, want)
	}

	// A directory where the file should be is an error even when the file is optional.
	if _, err := LoadConfig(dir, false); err == nil || !strings.HasPrefix(err.Error(), "config "+dir+": ") {
		t.Errorf("LoadConfig(dir) error = %v, want one naming %s", err, dir)
	}
}

func TestConfigSuggest(t *testing.T) {
	known := []string{"nodeName", "nodeAddress", "interface", "mtu", "bgp"}
	for _, tt := range []struct{ key, want string }{
		{"nodname", "nodeName"},
		{"nodeadress", "nodeAddress"},
		{"NODENAME", "nodeName"},
		{"node_name", "nodeName"},
		{"interfaces", "interface"},
		{"mut", "mtu"},
		{"x", ""},
		{"color", ""},
	} {
		if got := configSuggest(tt.key, known); got != tt.want {
			t.Errorf("configSuggest(%q) = %q, want %q", tt.key, got, tt.want)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"", designExample, "pools: [{cidr: 10.10.0.0/16}]", "nodname: x\nnodeName: y\nnodeName: z\n",
		"pools:\n- &p {cidr: 10.10.0.0/16}\n- *p\n", "bgp: {peers: [1.2.3.4, ::1], asn: -1}", "[1, 2]", "a: [\n",
		"mtu: 0x10\nreconcileInterval: 1h\n---\nx: 1\n", "bgp:\n  <<: {asn: 1}\n", "pools:\n-\n- cidr: 10.0.0.0/8\n  cidr: 10.1.0.0/16\n",
		"? [a]\n: b\n? [c]\n: d\n", "mtu: '1450'\nbgp: {holdTime: 0, peers: {a: 1}}\n",
		"~: 1\n!!binary bm9kZU5hbWU=: n1\nbgp: {port: 1, port: 2, port: 3, asm: 1}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("fuzz.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "config fuzz.yaml: ") {
				t.Errorf("error %q does not name the file", err)
			}
			return
		}
		// Which keys a file may have is yaml.v3's decision: reef takes no
		// file its strict decode refuses (config_strict.go).
		if f := configStrictness(data); len(f) > 0 {
			t.Errorf("ParseConfig took a file yaml.v3's strict decode refuses: %+v", f)
		}
		_ = c.Finish()
	})
}

// TestDetectedInPool: a pool that holds the node's detected address (a
// pool over the node's subnet) stops the start naming the pool's line;
// the config's own check sees only a nodeAddress the file gives.
func TestDetectedInPool(t *testing.T) {
	cfg, err := ParseConfig("/etc/reef/config.yaml", []byte("nodeName: n1\npools:\n- cidr: 192.168.77.0/24\n- cidr: 'fd00:77::/64'\n"))
	if err != nil {
		t.Fatal(err)
	}
	up := Uplink{Address: netip.MustParseAddr("192.168.77.10"), Interface: "eth0"}
	up6 := Uplink6{Address: netip.MustParseAddr("fd00:77::10"), Interface: "eth1"}
	for _, tc := range []struct {
		name string
		up   Uplink
		up6  Uplink6
		want string
	}{
		{"IPv4", up, Uplink6{}, `config /etc/reef/config.yaml: line 3: pools[0].cidr: value "192.168.77.0/24" holds this node's address 192.168.77.10 (on eth0)`},
		{"IPv6", Uplink{Address: netip.MustParseAddr("192.168.78.10")}, up6, `line 4: pools[1].cidr: value "fd00:77::/64" holds this node's address fd00:77::10 (on eth1)`},
		{"outside", Uplink{Address: netip.MustParseAddr("192.168.78.10")}, Uplink6{Address: netip.MustParseAddr("fd00:78::10")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := detectedInPool(cfg, tc.up, tc.up6)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("detectedInPool() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPodMTU6: a pod MTU derived below IPv6's 1280 beside an IPv6 pool
// stops the start at the pool's line; a given mtu is the config's check.
func TestPodMTU6(t *testing.T) {
	cfg, err := ParseConfig("/etc/reef/config.yaml", []byte("nodeName: n1\npools:\n- cidr: 10.244.0.0/16\n- cidr: 'fd00:10:244::/56'\n"))
	if err != nil {
		t.Fatal(err)
	}
	up := Uplink{Interface: "eth0", MTU: 1280}
	if err := podMTU6(cfg, DeriveMTU(cfg, up.MTU, false), up, Uplink6{}); err == nil ||
		!strings.Contains(err.Error(), `line 4: pools[1].cidr: value "fd00:10:244::/56" is IPv6, but the pods' MTU derived from the uplink (eth0, less the encapsulation) is 1230, below 1280`) {
		t.Errorf("podMTU6 at an uplink MTU of 1280 with VXLAN: %v", err)
	}
	if err := podMTU6(cfg, DeriveMTU(cfg, 1500, false), Uplink{Interface: "eth0", MTU: 1500}, Uplink6{}); err != nil {
		t.Errorf("podMTU6 at an uplink MTU of 1500: %v", err)
	}
	v4, err := ParseConfig("/etc/reef/config.yaml", []byte("nodeName: n1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := podMTU6(v4, 1000, up, Uplink6{}); err != nil {
		t.Errorf("podMTU6 without an IPv6 pool: %v", err)
	}
	// An IPv6-only node has no IPv4 uplink: the IPv6 one is named.
	if err := podMTU6(cfg, 1230, Uplink{}, Uplink6{Interface: "eth1"}); err == nil || !strings.Contains(err.Error(), "(eth1, less the encapsulation)") {
		t.Errorf("podMTU6 on an IPv6-only node: %v", err)
	}
}

// TestPoolRangesAllowed: pools in ranges some clusters use for pods on
// purpose are taken: Class E, CGNAT's shared range, the benchmark range.
func TestPoolRangesAllowed(t *testing.T) {
	for _, cidr := range []string{"240.0.0.0/12", "100.64.0.0/16", "198.18.0.0/16"} {
		if _, err := ParseConfig("/etc/reef/config.yaml", []byte("nodeName: n1\npools: [{cidr: "+cidr+"}]\n")); err != nil {
			t.Errorf("pool %s: %v", cidr, err)
		}
	}
}

// TestDetectNodeNamesTheLine: an interface or nodeAddress the file gives
// that this node does not have stops the start at its line. It reads the
// links of the test's network namespace, and changes nothing.
func TestDetectNodeNamesTheLine(t *testing.T) {
	for _, tc := range []struct{ yaml, flag, want string }{
		{"nodeName: n1\ninterface: nosuch0\n", "", "config /etc/reef/config.yaml: line 2: interface: interface nosuch0 does not exist"},
		{"nodeName: n1\nnodeAddress: 192.0.2.254\n", "", "config /etc/reef/config.yaml: line 2: nodeAddress: nodeAddress 192.0.2.254 is not on any interface"},
		{"nodeName: n1\n", "192.0.2.253", "node address: nodeAddress 192.0.2.253 is not on any interface"},
	} {
		cfg, err := ParseConfig("/etc/reef/config.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if tc.flag != "" {
			cfg.NodeAddress = netip.MustParseAddr(tc.flag) // --node-address
		}
		if _, err := DetectNode(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: DetectNode() = %v, want an error that says %q", tc.yaml, err, tc.want)
		} else if (tc.flag != "" || strings.Contains(tc.yaml, "nodeAddress")) && strings.Contains(err.Error(), "needs bgp.routerID") {
			// An IPv4 nodeAddress given: not an IPv6-only node.
			t.Errorf("%q: DetectNode() = %v: the IPv6-only hint does not belong to a given IPv4 address", tc.yaml, err)
		}
	}
}
