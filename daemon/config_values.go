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

// scalars parses each scalar value of the file with configLeaf and sets
// it in c, over what yaml.v3 made of it.
func (ix *configIndex) scalars(c *Config) []error {
	var errs []error
	for _, v := range ix.values {
		t, n := configTypeAt(v.path), configDeref(v.n)
		if t == nil || n.Kind != yaml.ScalarNode || !configScalar(t) {
			continue
		}
		x, err := configLeaf(t, n)
		if err != nil {
			errs = append(errs, &configError{line: n.Line, path: v.path, msg: err.Error(), err: err})
		} else if f := configValueAt(c, v.path); f.IsValid() && x != nil {
			f.Set(reflect.ValueOf(x).Convert(t))
		}
	}
	return errs
}

// configScalar says whether reef's leaf parser owns values of type t.
func configScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Uint32:
		return true
	}
	return t == reflect.TypeFor[ConfigAddr]() || t == reflect.TypeFor[ConfigPrefix]()
}

// configLeaf parses the scalar n for a key of type t; nil for an address
// or a CIDR, which decode themselves (ConfigAddr), once they have a value.
func configLeaf(t reflect.Type, n *yaml.Node) (any, error) {
	s := n.Value
	if configIsNull(n) {
		if t.Kind() != reflect.String {
			return nil, errors.New("has no value")
		}
		s = ""
	}
	switch {
	case t.Kind() == reflect.Struct:
		return nil, nil
	case t == reflect.TypeFor[time.Duration]():
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
	}
	return configInt(t, n)
}

// configInt parses a number: decimal, also when quoted or with a leading
// zero, or as YAML writes hexadecimal and octal (0x10, 0o17).
func configInt(t reflect.Type, n *yaml.Node) (any, error) {
	s := n.Value
	i, err := strconv.ParseInt(s, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) && n.ShortTag() == "!!int" {
		err = n.Decode(&i)
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

// The address types of the configuration. yaml.v3 decodes a netip value
// through its UnmarshalText and stops at the first bad one, without a
// line; these decode themselves and report a bad value as a
// yaml.TypeError, which yaml.v3 collects beside the file's other errors.

// ConfigAddr is an IP address in the configuration.
type ConfigAddr struct{ netip.Addr }

// ConfigPrefix is a CIDR in the configuration.
type ConfigPrefix struct{ netip.Prefix }

// ConfigAddrs is a list of IP addresses in the configuration.
type ConfigAddrs []netip.Addr

// ConfigPrefixes is a list of CIDRs in the configuration.
type ConfigPrefixes []netip.Prefix

// UnmarshalYAML implements yaml.Unmarshaler.
func (a *ConfigAddr) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseConfigAddr(n)
	a.Addr = v
	return err
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *ConfigPrefix) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseConfigPrefix(n)
	p.Prefix = v
	return err
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *ConfigAddrs) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseConfigList(n, parseConfigAddr)
	*l = v
	return err
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (l *ConfigPrefixes) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseConfigList(n, parseConfigPrefix)
	*l = v
	return err
}

func parseConfigAddr(n *yaml.Node) (netip.Addr, error) {
	if n.Kind != yaml.ScalarNode {
		return netip.Addr{}, configLeafError(n, "value is %s, not a single value", configShow(n))
	}
	a, err := netip.ParseAddr(n.Value)
	if p, perr := netip.ParsePrefix(n.Value); err != nil && perr == nil {
		return a, configLeafError(n, "value %q: not an IPv4 address (%v); write the address without /%d", n.Value, err, p.Bits())
	} else if err != nil {
		return a, configLeafError(n, "value %q: not an IPv4 address (%v)", n.Value, err)
	}
	return a, nil
}

func parseConfigPrefix(n *yaml.Node) (netip.Prefix, error) {
	if n.Kind != yaml.ScalarNode {
		return netip.Prefix{}, configLeafError(n, "value is %s, not a single value", configShow(n))
	}
	p, err := netip.ParsePrefix(n.Value)
	if _, aerr := netip.ParseAddr(n.Value); err != nil && aerr == nil {
		return p, configLeafError(n, "value %q: not an IPv4 CIDR (%v); write it with a prefix length, e.g. 10.244.0.0/16", n.Value, err)
	} else if err != nil {
		return p, configLeafError(n, "value %q: not an IPv4 CIDR (%v)", n.Value, err)
	}
	return p, nil
}

// parseConfigList decodes a sequence item by item, every bad item
// reported.
func parseConfigList[T any](n *yaml.Node, parse func(*yaml.Node) (T, error)) ([]T, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, configLeafError(n, "value %s is not a list (write it as [ ... ] or as lines starting with \"- \")", configShow(n))
	}
	out := make([]T, len(n.Content))
	var bad yaml.TypeError
	for i, item := range n.Content {
		for item.Kind == yaml.AliasNode && item.Alias != nil {
			item = item.Alias
		}
		v, err := parse(item)
		if te, ok := err.(*yaml.TypeError); ok {
			bad.Errors = append(bad.Errors, te.Errors...)
		}
		out[i] = v
	}
	if len(bad.Errors) > 0 {
		return out, &bad
	}
	return out, nil
}

// configLeafError reports a bad value the way yaml.v3 reports its own,
// with the node's column too, by which ParseConfig finds the key.
func configLeafError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: column %d: %s", n.Line, n.Column, fmt.Sprintf(format, args...))}}
}
