package daemon

import (
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The config file's values: the YAML node tree walked against Config's
// fields, every value checked by its field's type, and errors that name
// the line and the key (config.go has the types, defaults and checks it
// fills). Which keys the file may have is yaml.v3's decision
// (config_strict.go).

// configDecoder walks the YAML node tree itself, rather than letting
// yaml.v3 decode the values, to report every error with its line and key
// path, and to take each value as reef means it (TestYAMLv3ValuesFallShort).
type configDecoder struct {
	name  string
	lines map[string]int // key path -> line, for the keys the file sets
	errs  []error
	keys  []configKey // the unknown and repeated keys, for configKeyErrors
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
		// Unknown and duplicate keys are yaml.v3's to find (config_strict.go);
		// the walk notes where they are, and decodes neither.
		key := configKey{node: k, path: path, names: names, first: seen[k.Value], at: len(d.errs)}
		if key.first == 0 {
			seen[k.Value] = k.Line
		}
		fi, known := fields[k.Value]
		switch {
		case key.first > 0:
			d.keys = append(d.keys, key)
			continue
		case configIsNull(k):
			// yaml.v3 passes over a null key without a word.
			d.fail(k, path, nil, "unknown key %q (known keys: %s)", k.Value, strings.Join(names, ", "))
			continue
		case k.Value == "<<" && k.ShortTag() == "!!merge":
			// yaml.v3 would merge the mapping in; the walk does not.
			d.fail(k, path, nil, "unknown key %q (merge keys are not supported; write the keys out)", k.Value)
			continue
		case k.ShortTag() == "!!binary":
			// yaml.v3 would take the key its base64 spells.
			d.fail(k, path, nil, "a key must be a plain name, not !!binary")
			continue
		case !known:
			key.unknown = true
			d.keys = append(d.keys, key)
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

	configTypeExternalPeer = reflect.TypeFor[ExternalPeerConfig]()
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
			// A pool or external peer entry starts from its defaults so
			// that it may leave keys out.
			switch t.Elem() {
			case configTypePool:
				s.Index(i).Set(reflect.ValueOf(configPoolDefaults()))
			case configTypeExternalPeer:
				s.Index(i).Set(reflect.ValueOf(configExternalPeerDefaults()))
			}
			d.decodeValue(item, p, s.Index(i))
		}
		v.Set(s)
	case t.Kind() == reflect.Pointer && configIsNull(n):
		v.Set(reflect.Zero(t)) // "key:" with no value: unset, the default
	case t.Kind() == reflect.Pointer: // an optional value whose zero is not its default
		p := reflect.New(t.Elem())
		d.decodeValue(n, path, p.Elem())
		v.Set(p)
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
			return nil, fmt.Errorf("value %q: not an IP address (%w); write the address without /%d", s, err, p.Bits())
		} else if err != nil {
			return nil, fmt.Errorf("value %q: not an IP address (%w)", s, err)
		}
		return a, nil
	case t == configTypePrefix:
		p, err := netip.ParsePrefix(s)
		if a, aerr := netip.ParseAddr(s); err != nil && aerr == nil {
			eg := "10.244.0.0/16"
			if a.Is6() {
				eg = "fd00:10:244::/56"
			}
			return nil, fmt.Errorf("value %q: not a CIDR (%w); write it with a prefix length, e.g. %s", s, err, eg)
		} else if err != nil {
			return nil, fmt.Errorf("value %q: not a CIDR (%w)", s, err)
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
