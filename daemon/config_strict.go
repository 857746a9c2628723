package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Which keys a config file may have is yaml.v3's decision: its decoder,
// with KnownFields, refuses a key no field of Config has, and it refuses a
// duplicate key (always). The walk in config_decode.go decodes the values
// and knows where each key is (its key path, the keys that would have been
// right), so it puts yaml.v3's findings into words; it does not decide
// them. docs/design.md, "Configuration".

// configFinding is one error of yaml.v3's strict decode.
type configFinding struct {
	line  int
	key   string
	first int    // a duplicate key: the line of its first occurrence; 0: an unknown key
	msg   string // as yaml.v3 wrote it
	// stopped: yaml.v3's decode stopped there, before the end of the file.
	stopped bool
}

var (
	configUnknownRE   = regexp.MustCompile(`^line (\d+): field (.*) not found in type `)
	configDuplicateRE = regexp.MustCompile(`^line (\d+): mapping key ("(?:[^"\\]|\\.)*") already defined at line (\d+)$`)
	configLineRE      = regexp.MustCompile(`^line (\d+): `)
)

// configStrictness decodes the file's first document as yaml.v3 does with
// KnownFields into configSkeleton, and returns its errors. Only keys can
// fail there: every value lands in a yaml.Node, so no value stops the
// decode early (decoding into Config, yaml.v3 stops at the first address
// it cannot parse).
func configStrictness(data []byte) []configFinding {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(reflect.New(configSkeleton()).Interface())
	var te *yaml.TypeError
	switch {
	case err == nil || errors.Is(err, io.EOF): // io.EOF: no document
		return nil
	case !errors.As(err, &te):
		// yaml.v3 stopped at a value it cannot take (a merge key on a
		// list, a !!binary key that is not base64).
		return []configFinding{{msg: err.Error(), stopped: true}}
	}
	var out []configFinding
	for _, m := range te.Errors {
		f := configFinding{msg: m}
		if s := configUnknownRE.FindStringSubmatch(m); s != nil {
			f.line, _ = strconv.Atoi(s[1])
			f.key = s[2]
		} else if s := configDuplicateRE.FindStringSubmatch(m); s != nil {
			f.line, _ = strconv.Atoi(s[1])
			f.key, _ = strconv.Unquote(s[2])
			f.first, _ = strconv.Atoi(s[3])
		} else if s := configLineRE.FindStringSubmatch(m); s != nil {
			f.line, _ = strconv.Atoi(s[1])
		}
		out = append(out, f)
	}
	return out
}

// configSkeleton is Config's shape, its keys and what holds mappings and
// lists of mappings, with a yaml.Node for every other value: a type that
// yaml.v3 can decode any value into.
var configSkeleton = sync.OnceValue(func() reflect.Type { return configSkeletonOf(reflect.TypeFor[Config]()) })

func configSkeletonOf(t reflect.Type) reflect.Type {
	switch {
	case t.Kind() == reflect.Struct && t != configTypeAddr && t != configTypePrefix:
		var fields []reflect.StructField
		for i := range t.NumField() {
			if f := t.Field(i); f.Tag.Get("yaml") != "" {
				fields = append(fields, reflect.StructField{Name: f.Name, Type: configSkeletonOf(f.Type), Tag: f.Tag})
			}
		}
		return reflect.StructOf(fields)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct && t.Elem() != configTypeAddr && t.Elem() != configTypePrefix:
		return reflect.SliceOf(configSkeletonOf(t.Elem()))
	}
	return reflect.TypeFor[yaml.Node]()
}

// configKey is one key of a mapping the walk decoded into a struct, as the
// walk found it.
type configKey struct {
	node    *yaml.Node
	path    string   // the mapping's key path ("" at the top)
	names   []string // the keys the mapping may have
	first   int      // a repeated key: the line of the first one
	unknown bool
	at      int  // how many errors the walk had found before this key
	matched bool // a finding of yaml.v3's is about this key
}

// configKeyErrors puts yaml.v3's findings into words at their key, and
// merges them into the walk's errors in the order of the file.
func (d *configDecoder) configKeyErrors(findings []configFinding) []error {
	said := make([]error, len(d.keys))
	var rest []error
	stopped := map[string]bool{} // mappings yaml.v3 did not look into: "" for all
	for _, f := range findings {
		i := d.findKey(f)
		// The third copy of a key: yaml.v3 names it once for each copy
		// before it.
		again := i < 0 && f.first > 0 && d.repeated(f)
		if f.stopped || i < 0 && f.first > 0 && !again {
			// Where is not known: a duplicate of keys the walk did not
			// take (two complex keys), or a stopped decode.
			stopped[""] = true
		}
		switch {
		case again:
		case i < 0 && len(d.errs) == 0:
			// Not where the walk decoded a mapping, and the walk found
			// nothing: yaml.v3's own words, so that what it refuses is
			// never taken.
			rest = append(rest, &configError{file: d.name, line: f.line, msg: strings.TrimPrefix(f.msg, "line "+strconv.Itoa(f.line)+": ")})
		case i < 0:
			// Inside a value the walk refused as a whole (a mapping where a
			// list belongs, a key that is not a name): that error covers it.
		case f.first > 0:
			k := &d.keys[i]
			stopped[k.path] = true
			said[i] = d.keyError(k, "duplicate key %q (first at line %d)", k.node.Value, k.first)
		default:
			said[i] = d.unknownKeyError(&d.keys[i])
		}
	}
	// yaml.v3 looks no further into a mapping once it has found a
	// duplicate key there, and no further into the file once its decode
	// stopped; the keys it did not get to, in that mapping and below it,
	// are named as it would have named them.
	for i, k := range d.keys {
		switch {
		case said[i] != nil || !configUnder(k.path, stopped):
		case k.unknown:
			said[i] = d.unknownKeyError(&k)
		default:
			said[i] = d.keyError(&k, "duplicate key %q (first at line %d)", k.node.Value, k.first)
		}
	}
	var out []error
	i := 0
	for j := 0; j <= len(d.errs); j++ {
		for ; i < len(d.keys) && d.keys[i].at == j; i++ {
			if said[i] != nil {
				out = append(out, said[i])
			}
		}
		if j < len(d.errs) {
			out = append(out, d.errs[j])
		}
	}
	return append(out, rest...)
}

// findKey is the index of the key f is about, the first not yet put into
// words: by line and name, else (should yaml.v3 spell a key otherwise) the
// first such key on that line; -1 if none.
func (d *configDecoder) findKey(f configFinding) int {
	for _, byName := range []bool{true, false} {
		for i := range d.keys {
			k := &d.keys[i]
			if k.matched || k.node.Line != f.line || byName && k.node.Value != f.key {
				continue
			}
			if f.first > 0 && k.first == f.first || f.first == 0 && k.unknown {
				k.matched = true
				return i
			}
		}
	}
	return -1
}

// repeated says whether the duplicate f is about is one already put into
// words.
func (d *configDecoder) repeated(f configFinding) bool {
	for _, k := range d.keys {
		if k.matched && k.first > 0 && k.node.Line == f.line && k.node.Value == f.key {
			return true
		}
	}
	return false
}

func (d *configDecoder) keyError(k *configKey, format string, args ...any) error {
	return &configError{file: d.name, line: k.node.Line, path: k.path, msg: fmt.Sprintf(format, args...)}
}

func (d *configDecoder) unknownKeyError(k *configKey) error {
	if s := configSuggest(k.node.Value, k.names); s != "" {
		return d.keyError(k, "unknown key %q (did you mean %q?)", k.node.Value, s)
	}
	return d.keyError(k, "unknown key %q (known keys: %s)", k.node.Value, strings.Join(k.names, ", "))
}

// configUnder says whether path is one of paths or inside one of them.
func configUnder(path string, paths map[string]bool) bool {
	for p := range paths {
		if p == "" || path == p || strings.HasPrefix(path, p+".") || strings.HasPrefix(path, p+"[") {
			return true
		}
	}
	return false
}
