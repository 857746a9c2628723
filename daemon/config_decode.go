package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ParseConfig decodes YAML on top of DefaultConfig; name (the file path)
// starts every error message. yaml.v3 owns the document's shape: it
// decodes with KnownFields and rejects unknown and duplicate keys, a list
// where a mapping belongs and the like; each of its errors is turned into
// one that names the line and the key path, found in the file's node
// tree. reef's leaf parser owns the scalar values (configLeaf): the same
// rules and messages for a number, a switch or a duration wherever it
// stands. Semantic checks (Validate) run on the keys the file sets, so
// they too get a line; the caller applies flag overrides and then calls
// Finish.
func ParseConfig(name string, data []byte) (Config, error) {
	c := DefaultConfig()
	top, err := configTop(name, data)
	if err != nil {
		return Config{}, err
	}
	if top == nil {
		return c, nil
	}
	ix := configIndex{lines: map[string]int{}}
	ix.walk(top, "")
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err = dec.Decode(&c)
	errs := ix.errs
	var te *yaml.TypeError
	switch {
	case errors.As(err, &te):
		for _, e := range te.Errors {
			if err := ix.explain(e); err != nil {
				errs = append(errs, err)
			}
		}
	case err != nil:
		errs = append(errs, err)
	}
	errs = append(errs, ix.scalars(&c)...)
	slices.SortStableFunc(errs, func(a, b error) int { return configErrLine(a) - configErrLine(b) })
	// An aliased node's errors come once per use, at the anchor.
	errs = slices.CompactFunc(errs, func(a, b error) bool { return a.Error() == b.Error() })
	for i, e := range errs {
		if ce, ok := e.(*configError); ok {
			ce.file = name
		} else {
			errs[i] = &configError{file: name, msg: e.Error(), err: e}
		}
	}
	c.source = configSource{file: name, lines: ix.lines}
	if len(errs) == 0 {
		// Problems in values the file does not set (a default hostname, say)
		// are left to Finish, after flags had their chance to override them.
		for _, p := range c.configProblems() {
			if line, ok := configLine(ix.lines, p.path); ok {
				errs = append(errs, &configError{file: name, line: line, path: p.path, msg: p.msg})
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// configTop is the file's top-level mapping, or nil when the file holds
// nothing (it is empty, only comments, or null).
func configTop(name string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	// A second document would be silently ignored; a bare trailing "---" is harmless.
	var extra yaml.Node
	if err := dec.Decode(&extra); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config %s: %w", name, err)
	} else if err == nil && len(extra.Content) > 0 && !configIsNull(extra.Content[0]) {
		return nil, &configError{file: name, line: extra.Line, msg: "more than one YAML document; reef reads one"}
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) > 0 {
		top = top.Content[0]
	}
	top = configDeref(top)
	switch {
	case top.Kind == yaml.DocumentNode || configIsNull(top):
		return nil, nil
	case top.Kind != yaml.MappingNode:
		return nil, &configError{file: name, line: top.Line, msg: "the top level must be a mapping of keys such as nodeName: and pools:"}
	}
	return top, nil
}

// configIndex is where each key and value of the file is: the key path
// of every node, to turn yaml.v3's errors (which give a line) into ones
// that name the key.
type configIndex struct {
	lines  map[string]int // key path -> line, for the keys the file sets
	keys   []configNode   // path: the enclosing mapping's
	values []configNode
	errs   []error
}

type configNode struct {
	n    *yaml.Node
	path string
}

func (ix *configIndex) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				ix.errs = append(ix.errs, &configError{line: k.Line, path: path, msg: "a key must be a plain name"})
				continue
			}
			if k.ShortTag() == "!!merge" {
				ix.errs = append(ix.errs, &configError{line: k.Line, path: path, msg: `unknown key "<<" (reef does not read YAML merge keys; write the keys out)`})
				continue
			}
			ix.keys = append(ix.keys, configNode{k, path})
			p := strings.TrimPrefix(path+"."+k.Value, ".")
			if _, dup := ix.lines[p]; !dup {
				ix.lines[p] = k.Line
			}
			ix.value(v, p)
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			ix.lines[p] = item.Line
			ix.value(item, p)
		}
	}
}

// value indexes n, the value at path, and what it holds. An alias is not
// followed: yaml.v3 decodes it, and its errors point at the anchor.
func (ix *configIndex) value(n *yaml.Node, path string) {
	ix.values = append(ix.values, configNode{n, path})
	if t := configTypeAt(path); configIsNull(n) && t != nil && t.Kind() == reflect.Struct && strings.HasSuffix(path, "]") {
		// yaml.v3 drops an empty entry from the list.
		ix.errs = append(ix.errs, &configError{line: n.Line, path: path, msg: "is an empty entry"})
	}
	ix.walk(n, path)
}

var (
	configErrAt      = regexp.MustCompile(`^line (\d+): (?:column (\d+): )?(.*)$`)
	configErrUnknown = regexp.MustCompile(`^field (.*) not found in type \S+$`)
	configErrDup     = regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`)
	configErrType    = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into ")
)

// explain turns one of yaml.v3's error lines, or a configLeafError, into
// a configError with the key path.
func (ix *configIndex) explain(e string) error {
	m := configErrAt.FindStringSubmatch(e)
	if m == nil {
		return errors.New(e)
	}
	line, _ := strconv.Atoi(m[1])
	msg := m[3]
	if m[2] != "" { // reef's own: at a known column
		col, _ := strconv.Atoi(m[2])
		for _, v := range ix.values {
			if v.n.Line == line && v.n.Column == col {
				return &configError{line: line, path: v.path, msg: msg}
			}
		}
		return &configError{line: line, msg: msg}
	}
	if u := configErrUnknown.FindStringSubmatch(msg); u != nil {
		return ix.unknownKey(line, u[1])
	}
	if d := configErrDup.FindStringSubmatch(msg); d != nil {
		// yaml.v3 reports each pair of copies; the first copy names them all.
		parent, ok := ix.keyParent(line, d[1])
		first := ix.lines[strings.TrimPrefix(parent+"."+d[1], ".")]
		if !ok || strconv.Itoa(first) != d[2] {
			return nil
		}
		if t := configTypeAt(parent); t != nil && t.Kind() != reflect.Struct {
			// yaml.v3 looks for duplicates before it sees the mapping
			// does not belong here at all.
			for _, v := range ix.values {
				if v.path == parent {
					return &configError{line: v.n.Line, path: parent, msg: configValueProblem(v.n, t)}
				}
			}
		}
		return &configError{line: line, path: parent, msg: fmt.Sprintf("duplicate key %q (first at line %s)", d[1], d[2])}
	}
	if t := configErrType.FindStringSubmatch(msg); t != nil {
		if v, ok := ix.valueAt(line, t[1], t[2]); ok {
			typ := configTypeAt(v.path)
			if configDeref(v.n).Kind == yaml.ScalarNode && typ != nil && configScalar(typ) {
				return nil // the scalar pass says what is wrong with it, if anything
			}
			return &configError{line: line, path: v.path, msg: configValueProblem(v.n, typ)}
		}
	}
	return &configError{line: line, msg: msg}
}

// unknownKey is the error for a key at line that its mapping does not
// have, with the key it was probably meant to be.
func (ix *configIndex) unknownKey(line int, key string) error {
	path, _ := ix.keyParent(line, key)
	for _, k := range ix.keys {
		// The same name may be known to another mapping on the line.
		if k.n.Line == line && k.n.Value == key && !slices.Contains(configKeys(configTypeAt(k.path)), key) {
			path = k.path
			break
		}
	}
	names := configKeys(configTypeAt(path))
	if s := configSuggest(key, names); s != "" {
		return &configError{line: line, path: path, msg: fmt.Sprintf("unknown key %q (did you mean %q?)", key, s)}
	}
	return &configError{line: line, path: path, msg: fmt.Sprintf("unknown key %q (known keys: %s)", key, strings.Join(names, ", "))}
}

// keyParent is the path of the mapping that holds key at line.
func (ix *configIndex) keyParent(line int, key string) (string, bool) {
	for _, k := range ix.keys {
		if k.n.Line == line && k.n.Value == key {
			return k.path, true
		}
	}
	return "", false
}

// valueAt finds the value at line with tag whose text starts as yaml.v3
// quotes it (it shortens a long one to 7 characters and "..."): of those,
// the first whose key does not take its kind of node.
func (ix *configIndex) valueAt(line int, tag, quoted string) (configNode, bool) {
	prefix := strings.TrimSuffix(quoted, "...")
	var found []configNode
	for _, v := range ix.values {
		if n := configDeref(v.n); v.n.Line == line && n.ShortTag() == "!!"+tag && strings.HasPrefix(n.Value, prefix) {
			found = append(found, v)
		}
	}
	for _, v := range found {
		if !configFits(configDeref(v.n), configTypeAt(v.path)) {
			return v, true
		}
	}
	if len(found) > 0 {
		return found[0], true
	}
	return configNode{}, false
}

// configFits says whether a key of type t takes n's kind of node: a list,
// a mapping or a single value.
func configFits(n *yaml.Node, t reflect.Type) bool {
	switch {
	case t == nil:
		return false
	case n.Kind == yaml.SequenceNode:
		return t.Kind() == reflect.Slice
	case n.Kind == yaml.MappingNode:
		return t.Kind() == reflect.Struct && !configScalar(t)
	}
	return configScalar(t)
}

// configValueProblem says what is wrong with n as a value of type t.
func configValueProblem(n *yaml.Node, t reflect.Type) string {
	n = configDeref(n)
	switch {
	case t == nil:
		return fmt.Sprintf("value %s is not allowed here", configShow(n))
	case t.Kind() == reflect.Slice:
		return fmt.Sprintf("value %s is not a list (write it as [ ... ] or as lines starting with \"- \")", configShow(n))
	case t.Kind() == reflect.Struct:
		return fmt.Sprintf("value %s is not a mapping of keys such as a: b", configShow(n))
	case n.Kind != yaml.ScalarNode:
		return fmt.Sprintf("value is %s, not a single value", configShow(n))
	}
	return fmt.Sprintf("value %s does not fit a key of type %s", configShow(n), t)
}

// configTypeAt is the type of the key path in Config, nil when Config has
// no such key.
func configTypeAt(path string) reflect.Type {
	t := reflect.TypeFor[Config]()
	for _, seg := range configPathSegments.FindAllString(path, -1) {
		if strings.HasPrefix(seg, "[") {
			if t.Kind() != reflect.Slice {
				return nil
			}
			t = t.Elem()
			continue
		}
		f, ok := configField(t, seg)
		if !ok {
			return nil
		}
		t = f.Type
	}
	return t
}

var configPathSegments = regexp.MustCompile(`[^.\[]+|\[\d+\]`)

func configField(t reflect.Type, key string) (reflect.StructField, bool) {
	if t.Kind() != reflect.Struct {
		return reflect.StructField{}, false
	}
	for i := range t.NumField() {
		if f := t.Field(i); f.Tag.Get("yaml") == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// configKeys are the keys of the mapping of type t, in declaration order.
func configKeys(t reflect.Type) []string {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		if k := t.Field(i).Tag.Get("yaml"); k != "" {
			out = append(out, k)
		}
	}
	return out
}

// configValueAt is the field of c at the key path; invalid when c has
// none (a list shorter than the file's, which has errors then).
func configValueAt(c *Config, path string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for _, seg := range configPathSegments.FindAllString(path, -1) {
		if i, err := strconv.Atoi(strings.Trim(seg, "[]")); err == nil && strings.HasPrefix(seg, "[") {
			if v.Kind() != reflect.Slice || i >= v.Len() {
				return reflect.Value{}
			}
			v = v.Index(i)
			continue
		}
		f, ok := configField(v.Type(), seg)
		if !ok {
			return reflect.Value{}
		}
		v = v.FieldByIndex(f.Index)
	}
	return v
}

// configErrLine is the line an error is at, for sorting; 0 when unknown.
func configErrLine(err error) int {
	var ce *configError
	if errors.As(err, &ce) {
		return ce.line
	}
	return 0
}

// configEntryErr is what the unmarshaler of a list entry (a pool, an
// external peer) returns. yaml.v3 drops an entry whose decoding failed, so
// its complaints about the entry's scalar values are left out: the scalar
// pass judges those values again, and accepts some (a quoted number).
func configEntryErr(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	kept := slices.DeleteFunc(slices.Clone(te.Errors), configErrScalar.MatchString)
	if len(kept) == 0 {
		return nil
	}
	return &yaml.TypeError{Errors: kept}
}

var configErrScalar = regexp.MustCompile("^line \\d+: cannot unmarshal !!\\w+ `.*` into (bool|int|uint32|time.Duration)$")
