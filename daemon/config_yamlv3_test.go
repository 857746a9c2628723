package daemon

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestYAMLv3StrictnessFallsShort keeps the evidence behind the config
// decoder's own walk (docs/design.md, "Configuration"; issue 28, point 9,
// asked for yaml.v3's KnownFields instead): for each file, what yaml.v3's
// strict decode into Config makes of it, and what ParseConfig reports.
// Should a yaml.v3 upgrade change what it does with one of them, this
// fails, and the choice is to be made again.
func TestYAMLv3StrictnessFallsShort(t *testing.T) {
	for _, c := range []struct {
		name, file string
		yamlv3     func(Config, error) bool // what yaml.v3 is known to do
		reef       []string                 // what ParseConfig's error says
	}{{
		name: "a duplicate key hides the rest of its mapping's errors",
		file: "bgp:\n  asn: 64512\n  asn: 64513\n  holdTime: x\n",
		yamlv3: func(_ Config, err error) bool {
			return err != nil && strings.Contains(err.Error(), `mapping key "asn" already defined`) && !strings.Contains(err.Error(), "line 4")
		},
		reef: []string{`line 3: bgp: duplicate key "asn" (first at line 2)`, `line 4: bgp.holdTime: value "x" is not a duration`},
	}, {
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
		name: "an unknown key is named by its Go type, without the key meant",
		file: "pool:\n  - cidr: 10.0.0.0/8\n",
		yamlv3: func(_ Config, err error) bool {
			return err != nil && strings.Contains(err.Error(), "field pool not found in type daemon.Config")
		},
		reef: []string{`line 1: unknown key "pool" (did you mean "pools"?)`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			var got Config
			dec := yaml.NewDecoder(bytes.NewReader([]byte(c.file)))
			dec.KnownFields(true)
			err := dec.Decode(&got)
			if !c.yamlv3(got, err) {
				t.Errorf("yaml.v3 with KnownFields no longer does this with\n%s(it returned %+v, error %v):\nreconsider the config decoder (issue 28, point 9; docs/design.md, Configuration)", c.file, got, err)
			}
			cfg, err := ParseConfig("/etc/reef/config.yaml", []byte(c.file))
			if len(c.reef) == 0 {
				if err != nil || cfg.MTU != 1450 {
					t.Errorf("ParseConfig: MTU %d, error %v; want 1450 (decimal), no error", cfg.MTU, err)
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
