package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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
	NodeName         string       `yaml:"nodeName"`
	NodeAddress      ConfigAddr   `yaml:"nodeAddress"` // zero: autodetected from the uplink
	Interface        string       `yaml:"interface"`   // "": autodetected
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
	CIDR        ConfigPrefix `yaml:"cidr"`
	BlockSize   int          `yaml:"blockSize"`
	VXLANMode   EncapMode    `yaml:"vxlanMode"`
	IPIPMode    EncapMode    `yaml:"ipipMode"`
	NATOutgoing bool         `yaml:"natOutgoing"`
}

// BGPConfig configures the BGP speaker.
type BGPConfig struct {
	ASN           uint32         `yaml:"asn"`
	Port          int            `yaml:"port"`
	Peers         ConfigAddrs    `yaml:"peers"`
	PeerPrefixes  ConfigPrefixes `yaml:"peerPrefixes"`
	Password      string         `yaml:"password"` // TCP MD5; "": none
	KeepaliveTime time.Duration  `yaml:"keepaliveTime"`
	HoldTime      time.Duration  `yaml:"holdTime"`
	// Voters are the nodes whose majority confirms a block claim; every
	// node must list the same ones (docs/ipam.md). Required as soon as the
	// node has other nodes to talk to (bgp.peers, bgp.peerPrefixes,
	// bgp.routeReflectors); a node with none runs alone, its own voter.
	Voters ConfigAddrs `yaml:"voters"`
	// RouteReflectors are the route reflectors this node peers with
	// instead of the full mesh (Calico: BGPPeer with nodeToNodeMesh off).
	RouteReflectors ConfigAddrs `yaml:"routeReflectors"`
	// RouteReflector makes this node a route reflector (Calico:
	// routeReflectorClusterID on the node): sessions accepted through
	// PeerPrefixes are its clients, Peers are the other reflectors, and
	// the cluster ID is the node address. docs/bgp.md.
	RouteReflector bool `yaml:"routeReflector"`
	// ExternalPeers are this node's routers (Calico: a BGPPeer with a
	// node selector): they get the node's confirmed blocks, next hop the
	// node, and nothing they send is imported. docs/bgp.md.
	ExternalPeers []ExternalPeerConfig `yaml:"externalPeers"`
}

// ExternalPeerConfig is one router in bgp.externalPeers.
type ExternalPeerConfig struct {
	Address ConfigAddr `yaml:"address"`
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
	// the daemon restarts. reef imports none of them; a router that sends
	// none (docs/bgp.md) never gets near it.
	MaxPrefixes uint32 `yaml:"maxPrefixes"`
	// Communities are added to every block exported to this peer:
	// standard "65000:100" or large "65000:1:2".
	Communities []string `yaml:"communities"`
}

// externalPeers are bgp.externalPeers as the speaker takes them, the
// session timers that the entries leave out taken from the bgp section.
func (b BGPConfig) externalPeers() []bgp.ExternalPeer {
	var out []bgp.ExternalPeer
	for _, p := range b.ExternalPeers {
		e := bgp.ExternalPeer{Address: p.Address.Addr, ASN: p.ASN, Port: p.Port, Password: p.Password, Hold: p.HoldTime, Keepalive: p.KeepaliveTime,
			Multihop: uint8(p.Multihop), MaxPrefixes: p.MaxPrefixes, Communities: p.Communities}
		if e.Hold == 0 {
			e.Hold = b.HoldTime
		}
		if e.Keepalive == 0 {
			e.Keepalive = b.KeepaliveTime
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

// configPoolDefaults is what a pool entry gets for the keys it leaves out.
func configPoolDefaults() PoolConfig {
	return PoolConfig{BlockSize: 26, VXLANMode: EncapCrossSubnet, IPIPMode: EncapNever, NATOutgoing: true}
}

// UnmarshalYAML starts a pool entry from its defaults. It is yaml.v3's
// callback form, whose unmarshal keeps the decoder's KnownFields and error
// list (yaml.Node.Decode would start a lenient decoder of its own).
func (p *PoolConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain PoolConfig
	*p = configPoolDefaults()
	return configEntryErr(unmarshal((*plain)(p)))
}

// UnmarshalYAML starts an external peer entry from its defaults, as
// PoolConfig's does.
func (e *ExternalPeerConfig) UnmarshalYAML(unmarshal func(any) error) error {
	type plain ExternalPeerConfig
	*e = configExternalPeerDefaults()
	return configEntryErr(unmarshal((*plain)(e)))
}

// DefaultConfig returns the configuration used when no file exists.
// PendingDeleteDir is left empty because it derives from StateDir, which
// flags may still override; Finish fills it.
func DefaultConfig() Config {
	pool := configPoolDefaults()
	pool.CIDR = ConfigPrefix{netip.MustParsePrefix("10.244.0.0/16")}
	// Lower-cased as the kubelet does, so the default matches the Node object.
	host, _ := os.Hostname()
	return Config{
		NodeName:          strings.ToLower(host),
		StateDir:          "/var/lib/reef",
		Socket:            "/run/reef/reef.sock",
		Pools:             []PoolConfig{pool},
		BGP:               BGPConfig{ASN: 64512, Port: 179, KeepaliveTime: 10 * time.Second, HoldTime: 30 * time.Second},
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

func configDeref(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func configIsNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// configLine finds the line of path or, when the file leaves that key out
// (a pool without cidr), of the nearest enclosing key it sets.
func configLine(lines map[string]int, path string) (int, bool) {
	for path != "" {
		if l, ok := lines[path]; ok {
			return l, true
		}
		path = path[:max(strings.LastIndexByte(path, '.'), strings.LastIndexByte(path, '['), 0)]
	}
	return 0, false
}

func configShow(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	}
	return strconv.Quote(n.Value)
}

// configSuggest returns the known key that key was probably meant to be:
// same letters in another case, written kebab- or snake-case, or a small typo.
func configSuggest(key string, known []string) string {
	norm := func(s string) string { return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(s)) }
	best, bestDist := "", 3
	for _, k := range known {
		if norm(k) == norm(key) {
			return k
		}
		if dist := configEditDistance(strings.ToLower(key), strings.ToLower(k)); dist < bestDist && dist < len(key) {
			best, bestDist = k, dist
		}
	}
	return best
}

// configEditDistance is the Levenshtein distance between a and b.
func configEditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
