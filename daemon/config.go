package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
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
	NodeName          string        `yaml:"nodeName"`
	NodeAddress       netip.Addr    `yaml:"nodeAddress"` // zero: autodetected from the uplink
	Interface         string        `yaml:"interface"`   // "": autodetected
	StateDir          string        `yaml:"stateDir"`
	Socket            string        `yaml:"socket"`
	PendingDeleteDir  string        `yaml:"pendingDeleteDir"` // "": <stateDir>/pending-del, filled by Finish
	MTU               int           `yaml:"mtu"`              // 0: derived from the uplink
	Pools             []PoolConfig  `yaml:"pools"`
	BGP               BGPConfig     `yaml:"bgp"`
	Metrics           string        `yaml:"metrics"` // "": disabled
	ReconcileInterval time.Duration `yaml:"reconcileInterval"`
	LogLevel          string        `yaml:"logLevel"`
}

// PoolConfig is one IP pool that pod addresses are allocated from.
type PoolConfig struct {
	CIDR        netip.Prefix `yaml:"cidr"`
	BlockSize   int          `yaml:"blockSize"`
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
	// node must list the same ones (docs/ipam.md). Empty: this node and
	// bgp.peers, which is the same list on every node of a cluster whose
	// nodes all list each other. Required with route reflectors.
	Voters []netip.Addr `yaml:"voters"`
	// RouteReflectors are the route reflectors this node peers with
	// instead of the full mesh (Calico: BGPPeer with nodeToNodeMesh off).
	RouteReflectors []netip.Addr `yaml:"routeReflectors"`
	// RouteReflector makes this node a route reflector (Calico:
	// routeReflectorClusterID on the node): sessions accepted through
	// PeerPrefixes are its clients, Peers are the other reflectors, and
	// the cluster ID is the node address. docs/bgp.md.
	RouteReflector bool `yaml:"routeReflector"`
}

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
		BGP:               BGPConfig{ASN: 64512, Port: 179, KeepaliveTime: 10 * time.Second, HoldTime: 30 * time.Second},
		Metrics:           "127.0.0.1:9099",
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

// Finish fills the defaults derived from other keys and validates. Call it
// once, after the file and all flag overrides are applied.
func (c *Config) Finish() error {
	if c.PendingDeleteDir == "" && filepath.IsAbs(c.StateDir) {
		c.PendingDeleteDir = filepath.Join(c.StateDir, "pending-del")
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

// configDecoder walks the YAML node tree itself, rather than using
// yaml.Unmarshal, to report every error with its line and key path, and to
// reject unknown and duplicate keys.
type configDecoder struct {
	name  string
	lines map[string]int // key path -> line, for the keys the file sets
	errs  []error
}

func (d *configDecoder) fail(n *yaml.Node, path string, err error, format string, args ...any) {
	d.errs = append(d.errs, &configError{file: d.name, line: n.Line, path: path, msg: fmt.Sprintf(format, args...), err: err})
}

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

func (d *configDecoder) decodeStruct(n *yaml.Node, path string, v reflect.Value) {
	t := v.Type()
	fields := map[string]int{}
	var names []string
	for i := range t.NumField() {
		if name := t.Field(i).Tag.Get("yaml"); name != "" {
			fields[name] = i
			names = append(names, name)
		}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := configDeref(n.Content[i]), configDeref(n.Content[i+1])
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, nil, "a key must be a plain name")
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.fail(k, path, nil, "duplicate key %q (first at line %d)", k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		fi, ok := fields[k.Value]
		if !ok {
			if s := configSuggest(k.Value, names); s != "" {
				d.fail(k, path, nil, "unknown key %q (did you mean %q?)", k.Value, s)
			} else {
				d.fail(k, path, nil, "unknown key %q (known keys: %s)", k.Value, strings.Join(names, ", "))
			}
			continue
		}
		p := strings.TrimPrefix(path+"."+k.Value, ".")
		d.lines[p] = k.Line
		d.decodeValue(val, p, v.Field(fi))
	}
}

var (
	configTypeAddr     = reflect.TypeFor[netip.Addr]()
	configTypePrefix   = reflect.TypeFor[netip.Prefix]()
	configTypeDuration = reflect.TypeFor[time.Duration]()
	configTypePool     = reflect.TypeFor[PoolConfig]()
)

func (d *configDecoder) decodeValue(n *yaml.Node, path string, v reflect.Value) {
	t := v.Type()
	switch {
	case t.Kind() == reflect.Slice && configIsNull(n):
		v.Set(reflect.Zero(t))
	case t.Kind() == reflect.Slice && n.Kind != yaml.SequenceNode:
		d.fail(n, path, nil, "value %s is not a list (write it as [ ... ] or as lines starting with \"- \")", configShow(n))
	case t.Kind() == reflect.Slice:
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			item = configDeref(item)
			p := fmt.Sprintf("%s[%d]", path, i)
			d.lines[p] = item.Line
			// A pool entry starts from the pool defaults so that it may
			// leave keys out.
			if t.Elem() == configTypePool {
				s.Index(i).Set(reflect.ValueOf(configPoolDefaults()))
			}
			d.decodeValue(item, p, s.Index(i))
		}
		v.Set(s)
	case t.Kind() == reflect.Struct && t != configTypeAddr && t != configTypePrefix:
		if n.Kind == yaml.MappingNode {
			d.decodeStruct(n, path, v)
		} else if !configIsNull(n) { // "bgp:" with nothing under it keeps the defaults
			d.fail(n, path, nil, "value %s is not a mapping of keys such as a: b", configShow(n))
		}
	case n.Kind != yaml.ScalarNode:
		d.fail(n, path, nil, "value is %s, not a single value", configShow(n))
	case configIsNull(n) && t.Kind() != reflect.String:
		d.fail(n, path, nil, "has no value")
	default:
		x, err := configLeaf(t, n)
		if err != nil {
			d.errs = append(d.errs, &configError{file: d.name, line: n.Line, path: path, msg: err.Error(), err: err})
			return
		}
		v.Set(reflect.ValueOf(x).Convert(t))
	}
}

// configLeaf parses the scalar n for a field of type t.
func configLeaf(t reflect.Type, n *yaml.Node) (any, error) {
	s := n.Value
	if configIsNull(n) {
		s = ""
	}
	switch {
	case t == configTypeAddr:
		a, err := netip.ParseAddr(s)
		if p, perr := netip.ParsePrefix(s); err != nil && perr == nil {
			return nil, fmt.Errorf("value %q: not an IPv4 address (%w); write the address without /%d", s, err, p.Bits())
		} else if err != nil {
			return nil, fmt.Errorf("value %q: not an IPv4 address (%w)", s, err)
		}
		return a, nil
	case t == configTypePrefix:
		p, err := netip.ParsePrefix(s)
		if _, aerr := netip.ParseAddr(s); err != nil && aerr == nil {
			return nil, fmt.Errorf("value %q: not an IPv4 CIDR (%w); write it with a prefix length, e.g. 10.244.0.0/16", s, err)
		} else if err != nil {
			return nil, fmt.Errorf("value %q: not an IPv4 CIDR (%w)", s, err)
		}
		return p, nil
	case t == configTypeDuration:
		dur, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("value %q is not a duration (write e.g. \"30s\")", s)
		}
		return dur, nil
	case t.Kind() == reflect.String:
		return s, nil
	case t.Kind() == reflect.Bool:
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
		return nil, fmt.Errorf("value %q is not true or false", s)
	case t.Kind() == reflect.Int || t.Kind() == reflect.Uint32:
		i, err := strconv.ParseInt(s, 10, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) && n.ShortTag() == "!!int" {
			err = n.Decode(&i) // 0x10, 0o17 and the like
		}
		z := reflect.New(t).Elem()
		switch {
		case t.Kind() == reflect.Uint32 && (errors.Is(err, strconv.ErrRange) || err == nil && (i < 0 || z.OverflowUint(uint64(i)))):
			return nil, fmt.Errorf("value %q is out of range (0 to %d)", s, uint32(1<<32-1))
		case errors.Is(err, strconv.ErrRange) || err == nil && t.Kind() == reflect.Int && z.OverflowInt(i):
			return nil, fmt.Errorf("value %q is out of range", s)
		case err != nil && n.ShortTag() == "!!float":
			return nil, fmt.Errorf("value %q is not a whole number", s)
		case err != nil:
			return nil, fmt.Errorf("value %q is not a number", s)
		}
		return i, nil
	}
	// Only reachable when a field of an unsupported type is added.
	return nil, fmt.Errorf("unsupported field type %s", t)
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

// configProblem is one failed check: the key path and what is wrong.
type configProblem struct{ path, msg string }

func (c *Config) configProblems() []configProblem {
	var ps []configProblem
	bad := func(path, format string, args ...any) {
		ps = append(ps, configProblem{path, fmt.Sprintf(format, args...)})
	}
	if c.NodeName != "" && !configValidNodeName(c.NodeName) {
		bad("nodeName", "value %q is not a valid node name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters)", c.NodeName)
	}
	if a := c.NodeAddress; a.IsValid() {
		switch {
		case !a.Is4():
			bad("nodeAddress", "value %q is not IPv4; reef supports IPv4 only", a)
		case a.IsLoopback() || a.IsUnspecified() || a.IsMulticast():
			bad("nodeAddress", "value %q is a loopback, unspecified or multicast address; give the node's own address", a)
		}
	}
	if i := c.Interface; i != "" && (len(i) > 15 || i == "." || i == ".." || strings.ContainsAny(i, "/: \t\n\r\v\f")) {
		bad("interface", "value %q is not an interface name (at most 15 characters, no '/', ':' or spaces)", i)
	}
	for _, p := range []struct{ key, val string }{{"stateDir", c.StateDir}, {"socket", c.Socket}, {"pendingDeleteDir", c.PendingDeleteDir}} {
		if (p.val != "" || p.key != "pendingDeleteDir") && !filepath.IsAbs(p.val) {
			bad(p.key, "value %q is not an absolute path", p.val)
		}
	}
	if len(c.Socket) >= 108 {
		bad("socket", "value %q is %d bytes long; a unix socket path must be shorter than 108", c.Socket, len(c.Socket))
	}
	if c.MTU != 0 && (c.MTU < 576 || c.MTU > 9216) {
		bad("mtu", "value %d is outside 576..9216 (or 0 to derive it from the uplink)", c.MTU)
	}
	if len(c.Pools) == 0 {
		bad("pools", "no pool; give at least one, e.g. - cidr: 10.244.0.0/16")
	}
	for i, p := range c.Pools {
		at := fmt.Sprintf("pools[%d]", i)
		switch {
		case !p.CIDR.IsValid():
			bad(at+".cidr", "missing; every pool needs one, e.g. cidr: 10.244.0.0/16")
		case !p.CIDR.Addr().Is4():
			bad(at+".cidr", "value %q is not IPv4; reef supports IPv4 only", p.CIDR)
		case p.CIDR != p.CIDR.Masked():
			bad(at+".cidr", "value %q has host bits set (did you mean %s?)", p.CIDR, p.CIDR.Masked())
		case p.BlockSize < p.CIDR.Bits() || p.BlockSize > 32:
			bad(at+".blockSize", "value %d is outside %d..32 (from the /%d of cidr %s to 32)", p.BlockSize, p.CIDR.Bits(), p.CIDR.Bits(), p.CIDR)
		}
		modesOK := true
		for _, m := range []struct {
			key  string
			mode EncapMode
		}{{"vxlanMode", p.VXLANMode}, {"ipipMode", p.IPIPMode}} {
			if m.mode != EncapNever && m.mode != EncapCrossSubnet && m.mode != EncapAlways {
				bad(at+"."+m.key, "value %q is not one of Never, CrossSubnet, Always", m.mode)
				modesOK = false
			}
		}
		if modesOK && p.VXLANMode != EncapNever && p.IPIPMode != EncapNever {
			bad(at+".ipipMode", "value %q and vxlanMode %q both encapsulate (vxlanMode defaults to CrossSubnet); set one of them to Never", p.IPIPMode, p.VXLANMode)
		}
		for j, q := range c.Pools[:i] {
			if p.CIDR.IsValid() && q.CIDR.IsValid() && p.CIDR.Overlaps(q.CIDR) {
				bad(at+".cidr", "value %q overlaps pools[%d].cidr %q", p.CIDR, j, q.CIDR)
			}
		}
	}
	b := c.BGP
	if b.ASN == 0 {
		bad("bgp.asn", "value 0 is not an AS number; use a private one such as 64512")
	}
	if b.Port < 1 || b.Port > 65535 {
		bad("bgp.port", "value %d is outside 1..65535", b.Port)
	}
	for i, a := range b.Peers {
		if !a.Is4() || a.IsUnspecified() || a.IsMulticast() {
			bad(fmt.Sprintf("bgp.peers[%d]", i), "value %q is not a unicast IPv4 address", a)
		}
	}
	for i, p := range b.PeerPrefixes {
		at := fmt.Sprintf("bgp.peerPrefixes[%d]", i)
		if !p.Addr().Is4() {
			bad(at, "value %q is not IPv4", p)
		} else if p != p.Masked() {
			bad(at, "value %q has host bits set (did you mean %s?)", p, p.Masked())
		}
	}
	if b.KeepaliveTime <= 0 {
		bad("bgp.keepaliveTime", "value %q must be positive", b.KeepaliveTime)
	}
	seen := map[netip.Addr]int{}
	for i, a := range b.Voters {
		at := fmt.Sprintf("bgp.voters[%d]", i)
		if !a.Is4() || a.IsUnspecified() || a.IsMulticast() {
			bad(at, "value %q is not a unicast IPv4 address", a)
		} else if j, dup := seen[a]; dup {
			bad(at, "value %q is listed twice (also bgp.voters[%d])", a, j)
		}
		seen[a] = i
	}
	seen = map[netip.Addr]int{}
	for i, a := range b.RouteReflectors {
		at := fmt.Sprintf("bgp.routeReflectors[%d]", i)
		if !a.Is4() || a.IsUnspecified() || a.IsMulticast() {
			bad(at, "value %q is not a unicast IPv4 address", a)
		} else if j, dup := seen[a]; dup {
			bad(at, "value %q is listed twice (also bgp.routeReflectors[%d])", a, j)
		}
		seen[a] = i
	}
	ps = append(ps, b.reflectorProblems()...)
	if b.HoldTime < 3*time.Second {
		bad("bgp.holdTime", "value %q is below the 3s BGP allows", b.HoldTime)
	} else if b.KeepaliveTime >= b.HoldTime {
		bad("bgp.keepaliveTime", "value %q is not below bgp.holdTime %q (a third of it is usual)", b.KeepaliveTime, b.HoldTime)
	}
	if m := c.Metrics; m != "" {
		if _, port, err := net.SplitHostPort(m); err != nil {
			bad("metrics", "value %q is not host:port such as 127.0.0.1:9099 (or \"\" to disable)", m)
		} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			bad("metrics", "value %q has no port number 1..65535", m)
		}
	}
	if c.ReconcileInterval < time.Second {
		bad("reconcileInterval", "value %q is below 1s", c.ReconcileInterval)
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		bad("logLevel", "value %q is not one of debug, info, warn, error", c.LogLevel)
	}
	return ps
}

// reflectorProblems are the checks of bgp.routeReflectors and
// bgp.routeReflector against the rest of the bgp section. Each names the
// key the file sets, so that ParseConfig can give its line.
func (b BGPConfig) reflectorProblems() []configProblem {
	var ps []configProblem
	bad := func(path, format string, args ...any) {
		ps = append(ps, configProblem{path, fmt.Sprintf(format, args...)})
	}
	// Route reflectors do not vote: the default voters (this node and its
	// peers) would be the reflectors themselves, on a client, and the
	// other reflectors, on a reflector; neither is the same list on every
	// node.
	const pickVoters = "set bgp.voters to the same 3 or 5 nodes of the cluster on every node, reflectors included (route reflectors do not vote; docs/bgp.md)"
	rrs := fmt.Sprint(b.RouteReflectors)
	switch {
	case len(b.RouteReflectors) > 0 && len(b.Peers) > 0:
		bad("bgp.routeReflectors", "value %s and bgp.peers %v are both set; a node peers either with route reflectors or with a full mesh: keep one of them", rrs, b.Peers)
	case len(b.RouteReflectors) > 0 && b.RouteReflector:
		bad("bgp.routeReflectors", "value %s is set on a route reflector (bgp.routeReflector: true); a reflector lists the other reflectors in bgp.peers", rrs)
	case len(b.RouteReflectors) > 0 && len(b.Voters) == 0:
		bad("bgp.routeReflectors", "value %s is set but bgp.voters is not; %s", rrs, pickVoters)
	}
	if b.RouteReflector {
		if len(b.PeerPrefixes) == 0 {
			bad("bgp.routeReflector", "value true, but bgp.peerPrefixes is empty: a route reflector takes its clients in through bgp.peerPrefixes; set it to the clients' subnets")
		}
		if len(b.Voters) == 0 {
			bad("bgp.routeReflector", "value true, but bgp.voters is not set; %s", pickVoters)
		}
	}
	return ps
}

// configValidNodeName is a loose DNS-1123 subdomain check, the rule for
// Kubernetes node names.
func configValidNodeName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for i := range len(s) {
		ch := s[i]
		alnum := ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9'
		if !alnum && (ch != '-' && ch != '.' || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
