package daemon

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigKeysAreYAMLv3s: which keys a file may have is yaml.v3's
// decision (KnownFields, and its refusal of duplicate keys); ParseConfig
// puts each of its findings into words at the key's path, with the key
// meant (issue 28, point 9; docs/design.md, "Configuration").
func TestConfigKeysAreYAMLv3s(t *testing.T) {
	for _, c := range []struct {
		name, file string
		yamlv3     []string // what yaml.v3's strict decode finds
		reef       []string // ParseConfig's error, whole
	}{{
		name:   "an unknown key",
		file:   "nodname: n1\n",
		yamlv3: []string{"line 1: field nodname not found in type "},
		reef:   []string{`line 1: unknown key "nodname" (did you mean "nodeName"?)`},
	}, {
		name:   "the same unknown key in two pools on one line",
		file:   "pools: [{cidr: 10.1.0.0/16, size: 24}, {cidr: 10.2.0.0/16, size: 25}]\n",
		yamlv3: []string{"line 1: field size not found", "line 1: field size not found"},
		reef:   []string{`line 1: pools[0]: unknown key "size" (known keys: cidr, `, `line 1: pools[1]: unknown key "size" (known keys: cidr, `},
	}, {
		name:   "three copies of a key: yaml.v3 names the third once for each copy before it",
		file:   "bgp: {port: 1, port: 2, port: 3}\n",
		yamlv3: []string{`line 1: mapping key "port" already defined at line 1`, `line 1: mapping key "port" already defined at line 1`, `line 1: mapping key "port" already defined at line 1`},
		reef:   []string{`line 1: bgp: duplicate key "port" (first at line 1)`, `line 1: bgp: duplicate key "port" (first at line 1)`},
	}, {
		name:   "yaml.v3 stops at a mapping's duplicate; the unknown keys after it, and inside it, are still named",
		file:   "bgp:\n  asn: 64512\n  asn: 64513\n  asm: 1\n  externalPeers: [{address: 10.0.0.1, asm: 65000}]\nmtuu: 1\n",
		yamlv3: []string{`line 3: mapping key "asn" already defined at line 2`, "line 6: field mtuu not found"},
		reef: []string{`line 3: bgp: duplicate key "asn" (first at line 2)`, `line 4: bgp: unknown key "asm" (did you mean "asn"?)`,
			`line 5: bgp.externalPeers[0]: unknown key "asm" (did you mean "asn"?)`, `line 6: unknown key "mtuu" (did you mean "mtu"?)`},
	}, {
		name:   "a duplicate key hides none of its mapping's value errors",
		file:   "bgp:\n  asn: 64512\n  asn: 64513\n  holdTime: x\n",
		yamlv3: []string{`line 3: mapping key "asn" already defined at line 2`},
		reef:   []string{`line 3: bgp: duplicate key "asn" (first at line 2)`, `line 4: bgp.holdTime: value "x" is not a duration`},
	}, {
		name: "a null key, which yaml.v3 passes over",
		file: "~: 1\n",
		reef: []string{`line 1: unknown key "~" (known keys: nodeName, `},
	}, {
		name: "a !!binary key, which yaml.v3 takes for the key its base64 spells (nodeName)",
		file: "!!binary bm9kZU5hbWU=: n1\n",
		reef: []string{`line 1: a key must be a plain name, not !!binary`},
	}, {
		name: "a merge key, which yaml.v3 would merge",
		file: "bgp:\n  <<: {asn: 65001}\n",
		reef: []string{`line 2: bgp: unknown key "<<" (merge keys are not supported; write the keys out)`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			findings := configStrictness([]byte(c.file))
			if len(findings) != len(c.yamlv3) {
				t.Errorf("yaml.v3 found %+v, want %d findings %q", findings, len(c.yamlv3), c.yamlv3)
			}
			for i := range min(len(findings), len(c.yamlv3)) {
				if !strings.HasPrefix(findings[i].msg, c.yamlv3[i]) {
					t.Errorf("yaml.v3's finding %d is %q, want %q", i, findings[i].msg, c.yamlv3[i])
				}
			}
			_, err := ParseConfig("f", []byte(c.file))
			var got []string
			if err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if len(got) != len(c.reef) {
				t.Fatalf("ParseConfig's error:\n%v\nwant %d lines: %q", err, len(c.reef), c.reef)
			}
			for i, want := range c.reef {
				if !strings.HasPrefix(got[i], "config f: "+want) {
					t.Errorf("ParseConfig's error line %d is %q, want %q", i+1, got[i], want)
				}
			}
		})
	}
}

// TestYAMLv3ValuesFallShort keeps the evidence for decoding the values in
// the walk (config_decode.go) rather than with yaml.v3: for each file,
// what yaml.v3's strict decode into Config makes of it, and what
// ParseConfig does. Should a yaml.v3 upgrade change what it does with one
// of them, this fails, and the choice is to be made again.
func TestYAMLv3ValuesFallShort(t *testing.T) {
	for _, c := range []struct {
		name, file string
		yamlv3     func(Config, error) bool // what yaml.v3 is known to do
		reef       []string                 // what ParseConfig's error says
	}{{
		name:   "a null list entry is dropped, and the next pool takes its place",
		file:   "pools: [~, {cidr: 10.244.0.0/16}]\n",
		yamlv3: func(c Config, err error) bool { return err == nil && len(c.Pools) == 1 },
		reef:   []string{"line 1: pools[0].cidr: missing"},
	}, {
		name:   "a leading zero is octal: 01450 is an MTU of 808",
		file:   "mtu: 01450\n",
		yamlv3: func(c Config, err error) bool { return err == nil && c.MTU == 808 },
	}, {
		name:   "a fraction is cut off without a word",
		file:   "mtu: 1450.5\n",
		yamlv3: func(c Config, err error) bool { return err == nil && c.MTU == 1450 },
		reef:   []string{`line 1: mtu: value "1450.5" is not a whole number`},
	}, {
		name: "an address's error stops the decode, without a line",
		file: "nodeAddress: 10.0.0.300\nmtu: x\n",
		yamlv3: func(_ Config, err error) bool {
			return err != nil && !strings.Contains(err.Error(), "line") && !strings.Contains(err.Error(), `"x"`)
		},
		reef: []string{`line 1: nodeAddress: value "10.0.0.300": not an IP address`, `line 2: mtu: value "x" is not a number`},
	}, {
		name: "a pool entry starts from zero, not from the pool defaults",
		file: "pools: [{cidr: 10.244.0.0/16}]\n",
		yamlv3: func(c Config, err error) bool {
			return err == nil && len(c.Pools) == 1 && c.Pools[0].BlockSize == 0 && !c.Pools[0].NATOutgoing
		},
	}} {
		t.Run(c.name, func(t *testing.T) {
			var got Config
			dec := yaml.NewDecoder(bytes.NewReader([]byte(c.file)))
			dec.KnownFields(true)
			err := dec.Decode(&got)
			if !c.yamlv3(got, err) {
				t.Errorf("yaml.v3 with KnownFields no longer does this with\n%s(it returned %+v, error %v):\nreconsider the config decoder (docs/design.md, Configuration)", c.file, got, err)
			}
			cfg, err := ParseConfig("/etc/reef/config.yaml", []byte(c.file))
			if len(c.reef) == 0 {
				if err != nil || len(cfg.Pools) != 1 || cfg.Pools[0].BlockSize != 26 || cfg.MTU != 0 && cfg.MTU != 1450 {
					t.Errorf("ParseConfig: MTU %d, pools %+v, error %v; want 1450 (decimal) or unset, the pool defaults, no error", cfg.MTU, cfg.Pools, err)
				}
				return
			}
			for _, want := range c.reef {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("ParseConfig's error %v does not say %q", err, want)
				}
			}
		})
	}
}
