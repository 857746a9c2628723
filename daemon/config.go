package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/reefcni/reef/bgp"
)

// EncapMode says when traffic of a pool is encapsulated, as in Calico's IPPool.
type EncapMode string

// The encapsulation modes.
const (
	EncapNever       EncapMode = "Never"
	EncapCrossSubnet EncapMode = "CrossSubnet"
	EncapAlways      EncapMode = "Always"
)

// Config is the daemon configuration, read from /etc/reef/config.yaml and
// overridden by flags. Every key has a default (see DefaultConfig).
type Config struct {
	NodeName    string     `yaml:"nodeName"`
	NodeAddress netip.Addr `yaml:"nodeAddress"` // zero: autodetected from the uplink
	// NodeAddressV6 is the node's IPv6 address, the next hop of its IPv6
	// blocks on the other nodes and on its external peers; its interface
	// is the IPv6 uplink. Zero: detected when an IPv6 pool is configured,
	// on interface, else on the interface of the IPv6 default route
	// (DetectUplink6).
	NodeAddressV6 netip.Addr `yaml:"nodeAddressV6"`
	// Interface is the uplink of both families; "": autodetected, the
	// IPv4 one from the IPv4 default route, the IPv6 one from the IPv6
	// default route.
	Interface        string       `yaml:"interface"`
	StateDir         string       `yaml:"stateDir"`
	Socket           string       `yaml:"socket"`
	PendingDeleteDir string       `yaml:"pendingDeleteDir"` // "": <stateDir>/pending-del, filled by Finish
	MTU              int          `yaml:"mtu"`              // 0: derived from the uplink
	Pools            []PoolConfig `yaml:"pools"`
	BGP              BGPConfig    `yaml:"bgp"`
	Kubernetes       KubeConfig   `yaml:"kubernetes"`
	Metrics          string       `yaml:"metrics"` // "": disabled
	// CNIConfDir and CNIBinDir are where the container runtime looks for
	// conflists and plugins (containerd's conf_dir and bin_dir): reef
	// status warns when the runtime will not use reef.
	CNIConfDir        string        `yaml:"cniConfDir"`
	CNIBinDir         string        `yaml:"cniBinDir"`
	ReconcileInterval time.Duration `yaml:"reconcileInterval"`
	LogLevel          string        `yaml:"logLevel"`

	source configSource // set by ParseConfig
}

// KubeConfig is the optional Kubernetes API client: with a kubeconfig the
// daemon enforces NetworkPolicy (docs/policy.md); without one it is the
// plain network.
type KubeConfig struct {
	Kubeconfig string `yaml:"kubeconfig"` // "": no API, policy off
	// NodeName is this node's name in the API (its Pods' spec.nodeName);
	// "": nodeName.
	NodeName string `yaml:"nodeName"`
}

// PoolConfig is one IP pool that pod addresses are allocated from.
type PoolConfig struct {
	CIDR        netip.Prefix `yaml:"cidr"`
	BlockSize   int          `yaml:"blockSize"` // default 26, IPv6 122
	VXLANMode   EncapMode    `yaml:"vxlanMode"`
	IPIPMode    EncapMode    `yaml:"ipipMode"`
	NATOutgoing bool         `yaml:"natOutgoing"`
}

// BGPConfig configures the BGP speaker.
type BGPConfig struct {
	ASN           uint32         `yaml:"asn"`
	Port          int            `yaml:"port"`
	Peers         []netip.Addr   `yaml:"peers"`
	PeerPrefixes  []netip.Prefix `yaml:"peerPrefixes"`
	Password      string         `yaml:"password"` // TCP MD5; "": none
	KeepaliveTime time.Duration  `yaml:"keepaliveTime"`
	HoldTime      time.Duration  `yaml:"holdTime"`
	// Voters are the nodes whose majority confirms a block claim; every
	// node must list the same ones (docs/ipam.md). Required as soon as the
	// node has other nodes to talk to (bgp.peers, bgp.peerPrefixes,
	// bgp.routeReflectors); a node with none runs alone, its own voter.
	Voters []netip.Addr `yaml:"voters"`
	// RouterID is this node's identity in the block protocol and its BGP
	// router ID on a node with no IPv4 address (an IPv6-only node), where
	// it is required and must be unique in the cluster (docs/design.md,
	// "IPv6-only nodes"). On a node with an IPv4 address the identity is
	// that address, and RouterID, if set, must be it.
	RouterID netip.Addr `yaml:"routerID"`
	// RouteReflectors are the route reflectors this node peers with
	// instead of the full mesh (Calico: BGPPeer with nodeToNodeMesh off).
	RouteReflectors []netip.Addr `yaml:"routeReflectors"`
	// RouteReflector makes this node a route reflector (Calico:
	// routeReflectorClusterID on the node): sessions accepted through
	// PeerPrefixes are its clients, Peers are the other reflectors, and
	// the cluster ID is the node address. docs/bgp.md.
	RouteReflector bool `yaml:"routeReflector"`
	// ExternalPeers are this node's routers (Calico: a BGPPeer with a
	// node selector): they get the node's confirmed blocks, next hop the
	// node, and nothing they send is imported. docs/bgp.md.
	ExternalPeers []ExternalPeerConfig `yaml:"externalPeers"`
	// ServiceClusterIPs are announced to the external peers by every node,
	// next hop the node (Calico's BGPConfiguration serviceClusterIPs): the
	// routers spread traffic to Service addresses over the nodes, and
	// kube-proxy delivers it. Never announced to the cluster's own
	// sessions. docs/bgp.md.
	ServiceClusterIPs []netip.Prefix `yaml:"serviceClusterIPs"`
	// ServiceExternalIPs and ServiceLoadBalancerIPs (Calico's names): a
	// Service's spec.externalIPs inside the first, and a LoadBalancer
	// Service's status.loadBalancer.ingress addresses inside the second,
	// are announced to the external peers as /32 (/128), by every node
	// (externalTrafficPolicy Cluster) or by the nodes with a ready
	// endpoint of the Service (Local). They are read from the Kubernetes
	// API (kubernetes.kubeconfig). docs/bgp.md. With the API, reef also
	// assigns the LoadBalancer addresses (docs/lbipam.md) unless
	// AssignLoadBalancerIPs is false.
	ServiceExternalIPs     []netip.Prefix `yaml:"serviceExternalIPs"`
	ServiceLoadBalancerIPs []netip.Prefix `yaml:"serviceLoadBalancerIPs"`
	// AssignLoadBalancerIPs: one reef daemon at a time assigns
	// LoadBalancer addresses from ServiceLoadBalancerIPs to the Services
	// with no loadBalancerClass or reef's (true when unset). false:
	// another controller (MetalLB, say) assigns them.
	AssignLoadBalancerIPs *bool `yaml:"assignLoadBalancerIPs"`
	// GracefulShutdownTime is how long a stopping daemon (SIGTERM) waits,
	// once it has sent its Service CIDRs to the external peers marked
	// GRACEFUL_SHUTDOWN (RFC 8326), and its blocks so marked to the other
	// nodes (which stand in for them at their BFD routers), for the routers
	// to move the traffic before it exits; 0: it exits at once, and no
	// node stands in. docs/bgp.md, "Planned restarts".
	GracefulShutdownTime time.Duration `yaml:"gracefulShutdownTime"`
}

// assignsLoadBalancerIPs says whether this daemon contends to assign
// LoadBalancer addresses.
func (c *Config) assignsLoadBalancerIPs() bool {
	b := c.BGP
	return c.Kubernetes.Kubeconfig != "" && len(b.ServiceLoadBalancerIPs) > 0 && (b.AssignLoadBalancerIPs == nil || *b.AssignLoadBalancerIPs)
}

// The default and the most of bgp.gracefulShutdownTime: a router runs its
// decision process and programs its FIB in milliseconds, and reef.service
// gives the whole stop TimeoutStopSec=30s, of which the CNI server may take
// 5 s.
const (
	defaultGracefulShutdownTime = 2 * time.Second
	maxGracefulShutdownTime     = 20 * time.Second
)

// ExternalPeerConfig is one router in bgp.externalPeers.
type ExternalPeerConfig struct {
	Address netip.Addr `yaml:"address"`
	ASN     uint32     `yaml:"asn"` // eBGP when it differs from bgp.asn, iBGP when equal
	Port    int        `yaml:"port"`
	// Password is the TCP MD5 key of the session; "": none.
	Password      string        `yaml:"password"`
	HoldTime      time.Duration `yaml:"holdTime"`      // 0: bgp.holdTime
	KeepaliveTime time.Duration `yaml:"keepaliveTime"` // 0: bgp.keepaliveTime
	// Multihop is the TTL of an eBGP session to a router that is not
	// directly connected (Calico: ttlSecurity's hop count); 0 for one
	// that is.
	Multihop int `yaml:"multihop"`
	// MaxPrefixes is the session's prefix limit: the router sends more
	// routes than this and the session is torn down, and stays down until
	// `reef peer reset` or a restart. reef imports none of them; a router that sends
	// none (docs/bgp.md) never gets near it.
	MaxPrefixes uint32 `yaml:"maxPrefixes"`
	// Communities are added to every block and Service CIDR exported to
	// this peer: standard "65000:100" or large "65000:1:2".
	Communities []string `yaml:"communities"`
	// BFD, with minInterval set, runs single-hop BFD (RFC 5880, 5881)
	// with the router, so that the router drops this node's routes within
	// minInterval × multiplier of the node's death instead of the hold
	// time. docs/bgp.md, "BFD".
	BFD BFDConfig `yaml:"bfd"`
}

// BFDConfig is bgp.externalPeers[].bfd: the intervals reef asks for and
// offers (RFC 5880's Desired Min TX and Required Min RX, both
// minInterval) and its Detect Mult.
type BFDConfig struct {
	MinInterval time.Duration `yaml:"minInterval"` // 0: BFD off
	Multiplier  int           `yaml:"multiplier"`  // 0: defaultBFDMultiplier
}

// The limits of bgp.externalPeers[].bfd: FRR's bfdd takes 10ms to 60s,
// and a multiplier is a byte on the wire that must not be 0.
const (
	defaultBFDMultiplier = 3
	minBFDInterval       = 10 * time.Millisecond
	maxBFDInterval       = 60 * time.Second
)

// on says whether the peer runs BFD.
func (b BFDConfig) on() bool { return b.MinInterval != 0 }

// multiplier is the Detect Mult, the default filled in.
func (b BFDConfig) multiplier() int {
	if b.Multiplier == 0 {
		return defaultBFDMultiplier
	}
	return b.Multiplier
}

// externalPeers are bgp.externalPeers as the speaker takes them, the
// session timers that the entries leave out taken from the bgp section.
func (b BGPConfig) externalPeers() []bgp.ExternalPeer {
	var out []bgp.ExternalPeer
	for _, p := range b.ExternalPeers {
		e := bgp.ExternalPeer{Address: p.Address, ASN: p.ASN, Port: p.Port, Password: p.Password, Hold: p.HoldTime, Keepalive: p.KeepaliveTime,
			Multihop: uint8(p.Multihop), MaxPrefixes: p.MaxPrefixes, Communities: p.Communities}
		if e.Hold == 0 {
			e.Hold = b.HoldTime
		}
		if e.Keepalive == 0 {
			e.Keepalive = b.KeepaliveTime
		}
		if p.BFD.on() {
			e.BFD = &bgp.BFD{MinInterval: p.BFD.MinInterval, Multiplier: uint8(p.BFD.multiplier())}
		}
		out = append(out, e)
	}
	return out
}

// defaultMaxPrefixes is an external peer's prefix limit when the config
// gives none: a ToR that sends reef nothing, as docs/bgp.md configures it,
// stays far below; one that sends a full table is cut off, not believed.
const defaultMaxPrefixes = 1000

// configExternalPeerDefaults is what an external peer entry gets for the
// keys it leaves out.
func configExternalPeerDefaults() ExternalPeerConfig {
	return ExternalPeerConfig{Port: 179, MaxPrefixes: defaultMaxPrefixes}
}

// defaultBlockSize6 is an IPv6 pool's block length when the entry gives
// none (configPoolDefaults' 26 is IPv4's).
const defaultBlockSize6 = 122

// configPoolDefaults is what a pool entry gets for the keys it leaves out.
func configPoolDefaults() PoolConfig {
	return PoolConfig{BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true}
}

// DefaultConfig returns the configuration used when no file exists.
// PendingDeleteDir is left empty because it derives from StateDir, which
// flags may still override; Finish fills it.
func DefaultConfig() Config {
	pool := configPoolDefaults()
	pool.CIDR = netip.MustParsePrefix("10.244.0.0/16")
	// Lower-cased as the kubelet does, so the default matches the Node object.
	host, _ := os.Hostname()
	return Config{
		NodeName:          strings.ToLower(host),
		StateDir:          "/var/lib/reef",
		Socket:            "/run/reef/reef.sock",
		Pools:             []PoolConfig{pool},
		BGP:               BGPConfig{ASN: 64512, Port: 179, KeepaliveTime: 10 * time.Second, HoldTime: 30 * time.Second, GracefulShutdownTime: defaultGracefulShutdownTime},
		Metrics:           "127.0.0.1:9099",
		CNIConfDir:        "/etc/cni/net.d",
		CNIBinDir:         "/opt/cni/bin",
		ReconcileInterval: 30 * time.Second,
		LogLevel:          "info",
	}
}

// LoadConfig reads and parses the file at path (see ParseConfig). A missing
// file yields DefaultConfig unless mustExist is set, for the operator who
// named the file on the command line and would not want it silently ignored.
func LoadConfig(path string, mustExist bool) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && !mustExist {
			return DefaultConfig(), nil
		}
		// The path error would repeat the path we already print.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return ParseConfig(path, data)
}

// ParseConfig decodes YAML on top of DefaultConfig; name (the file path) starts
// every error message. Each error names the line, the key path and the value.
// Semantic checks (Validate) run on the keys the file sets, so they too get a
// line; the caller applies flag overrides and then calls Finish.
func ParseConfig(name string, data []byte) (Config, error) {
	c := DefaultConfig()
	if err := configUTF8(name, data); err != nil {
		return Config{}, err
	}
	d := &configDecoder{name: name, lines: map[string]int{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil // empty, or only comments
		}
		return Config{}, fmt.Errorf("config %s: %w", name, err)
	}
	// A second document would be silently ignored; a bare trailing "---" is harmless.
	var extra yaml.Node
	if err := dec.Decode(&extra); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("config %s: %w", name, err)
	} else if err == nil && len(extra.Content) > 0 && !configIsNull(extra.Content[0]) {
		return Config{}, &configError{file: name, line: extra.Line, msg: "more than one YAML document; reef reads one"}
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) > 0 {
		top = top.Content[0]
	}
	top = configDeref(top)
	switch {
	case top.Kind == yaml.DocumentNode || configIsNull(top):
		return c, nil
	case top.Kind != yaml.MappingNode:
		return Config{}, &configError{file: name, line: top.Line, msg: "the top level must be a mapping of keys such as nodeName: and pools:"}
	}
	d.decodeStruct(top, "", reflect.ValueOf(&c).Elem())
	d.errs = d.configKeyErrors(configStrictness(data))
	for i, p := range c.Pools {
		// An IPv6 pool's blocks default to Calico's /122 (64 addresses).
		if _, set := d.lines[fmt.Sprintf("pools[%d].blockSize", i)]; !set && p.CIDR.Addr().Is6() {
			c.Pools[i].BlockSize = defaultBlockSize6
		}
	}
	for i, p := range c.BGP.ExternalPeers {
		// "bfd:" without minInterval would silently leave BFD off.
		at := fmt.Sprintf("bgp.externalPeers[%d].bfd", i)
		if line, set := d.lines[at]; set && !p.BFD.on() && p.BFD.Multiplier == 0 {
			if _, given := d.lines[at+".minInterval"]; !given {
				d.errs = append(d.errs, &configError{file: name, line: line, path: at + ".minInterval",
					msg: "missing; BFD runs with minInterval set, e.g. bfd: {minInterval: 300ms, multiplier: 3} (or leave bfd out)"})
			}
		}
	}
	c.source = configSource{file: name, lines: d.lines}
	if len(d.errs) == 0 {
		// Problems in values the file does not set (a default hostname, say)
		// are left to Finish, after flags had their chance to override them.
		for _, p := range c.configProblems() {
			if line, ok := configLine(d.lines, p.path); ok {
				d.errs = append(d.errs, &configError{file: name, line: line, path: p.path, msg: p.msg})
			}
		}
	}
	if len(d.errs) > 0 {
		return Config{}, errors.Join(d.errs...)
	}
	return c, nil
}

// configUTF8 refuses a file that is not UTF-8 (yaml.v3 would say only
// "invalid leading UTF-8 octet") with the line and column of the first
// bad byte: a file saved in Latin-1 or with a stray byte. A file that
// starts with a UTF-16 byte order mark is left to yaml.v3, which reads it.
func configUTF8(name string, data []byte) error {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) || utf8.Valid(data) {
		return nil
	}
	line, col := 1, 1
	for len(data) > 0 {
		r, size := utf8.DecodeRune(data)
		if r == utf8.RuneError && size <= 1 {
			return &configError{file: name, line: line, msg: fmt.Sprintf("byte 0x%02x at column %d is not UTF-8; save the file as UTF-8", data[0], col)}
		}
		if r == '\n' {
			line, col = line+1, 0
		}
		col++
		data = data[size:]
	}
	return nil
}

// LoadConfigPaths reads only stateDir, socket and pendingDeleteDir from the
// file at path, on top of the defaults, ignoring every other key: for
// `reef cleanup`, which must find reef's state on a node whose config the
// daemon refuses for another key. A missing file yields the defaults
// unless mustExist; a file that is not YAML, or a path that is not
// absolute, is an error.
func LoadConfigPaths(path string, mustExist bool) (Config, error) {
	c := DefaultConfig()
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !mustExist:
		return c, nil
	case err != nil:
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	var paths struct {
		StateDir         *string `yaml:"stateDir"`
		Socket           *string `yaml:"socket"`
		PendingDeleteDir *string `yaml:"pendingDeleteDir"`
	}
	if err := yaml.Unmarshal(data, &paths); err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	for _, p := range []struct {
		key      string
		from, to *string
	}{{"stateDir", paths.StateDir, &c.StateDir}, {"socket", paths.Socket, &c.Socket}, {"pendingDeleteDir", paths.PendingDeleteDir, &c.PendingDeleteDir}} {
		if p.from == nil {
			continue
		}
		if *p.from != "" && !filepath.IsAbs(*p.from) || *p.from == "" && p.key != "pendingDeleteDir" {
			return Config{}, fmt.Errorf("config %s: %s: value %q is not an absolute path", path, p.key, *p.from)
		}
		*p.to = *p.from
	}
	return c, nil
}

// Finish fills the defaults derived from other keys and validates. Call it
// once, after the file and all flag overrides are applied.
func (c *Config) Finish() error {
	if c.PendingDeleteDir == "" && filepath.IsAbs(c.StateDir) {
		c.PendingDeleteDir = filepath.Join(c.StateDir, "pending-del")
	}
	if c.Kubernetes.NodeName == "" {
		c.Kubernetes.NodeName = c.NodeName
	}
	return c.Validate()
}

// Validate checks the values; the error joins one line per problem, each
// naming the key and the value. An empty PendingDeleteDir passes, as
// Finish derives it.
func (c *Config) Validate() error {
	var errs []error
	for _, p := range c.configProblems() {
		errs = append(errs, &configError{path: p.path, msg: p.msg})
	}
	return errors.Join(errs...)
}

// configSource is where a configuration was read from: the file and the
// line of each key it sets, for problems found after parsing.
type configSource struct {
	file  string
	lines map[string]int
}

// KeyError is a problem with the key at path (such as bgp.voters) found
// after parsing, for instance against the store: it names the file and the
// line of the key, or of the nearest enclosing key the file sets.
func (c *Config) KeyError(path, msg string) error {
	line, _ := configLine(c.source.lines, path)
	return &configError{file: c.source.file, line: line, path: path, msg: msg}
}

// configError is one problem of a configuration, located as precisely as known.
type configError struct {
	file string
	line int
	path string // key path such as pools[0].cidr
	msg  string
	err  error
}

func (e *configError) Error() string {
	s := strings.TrimSuffix("config "+e.file, " ")
	if e.line > 0 {
		s += fmt.Sprintf(": line %d", e.line)
	}
	if e.path != "" {
		s += ": " + e.path
	}
	return s + ": " + e.msg
}

func (e *configError) Unwrap() error { return e.err }
