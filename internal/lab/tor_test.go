package lab

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// The example of docs/bgp.md, "Routers": a ToR at 192.168.10.1 in AS 65000,
// three nodes on its subnet, reef's default timers and pool.
var (
	docsToR      = netip.MustParseAddr("192.168.10.1")
	docsToRNodes = []netip.Addr{netip.MustParseAddr("192.168.10.11"), netip.MustParseAddr("192.168.10.12"), netip.MustParseAddr("192.168.10.13")}
	docsPool     = netip.MustParsePrefix("10.244.0.0/16")
	// The dual-stack example adds README's IPv6 pool.
	docsPool6 = netip.MustParsePrefix("fd00:10:244::/56")
	// The IPv6-only example ("Routers at IPv6 addresses"): the nodes of
	// "IPv6-only nodes: sessions over IPv6", their pool, and the router's
	// ID (it has no IPv4 address either).
	docsToRID6    = netip.MustParseAddr("10.255.0.254")
	docsToRNodes6 = []netip.Addr{netip.MustParseAddr("fd77::11"), netip.MustParseAddr("fd77::12"), netip.MustParseAddr("fd77::13")}
	docsPool6Only = netip.MustParsePrefix("fd00:10:247::/56")
)

func docsToRConfigs() map[string]string {
	v4, dual, v6only := []ToRPool{{docsPool, 26}}, []ToRPool{{docsPool, 26}, {docsPool6, 122}}, []ToRPool{{docsPool6Only, 122}}
	return map[string]string{
		"BIRD":            ToRBirdConfig(docsToR, 65000, docsToRNodes, 64512, v4, 30*time.Second),
		"FRR":             ToRFRRConfig(docsToR, 65000, docsToRNodes, 64512, v4, 30*time.Second),
		"BIRD dual-stack": ToRBirdConfig(docsToR, 65000, docsToRNodes, 64512, dual, 30*time.Second),
		"FRR dual-stack":  ToRFRRConfig(docsToR, 65000, docsToRNodes, 64512, dual, 30*time.Second),
		"BIRD IPv6-only":  ToRBirdConfig(docsToRID6, 65000, docsToRNodes6, 64512, v6only, 30*time.Second),
		"FRR IPv6-only":   ToRFRRConfig(docsToRID6, 65000, docsToRNodes6, 64512, v6only, 30*time.Second),
	}
}

// TestToRConfigsInDocs: docs/bgp.md shows exactly the ToR configurations
// the lab runs (with the docs' addresses and timers), so the page cannot
// drift from what e2e/tor_test.go proves.
func TestToRConfigsInDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bgp.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, conf := range docsToRConfigs() {
		if !strings.Contains(string(doc), "```\n"+conf+"```\n") {
			t.Errorf("docs/bgp.md does not show the %s ToR configuration the lab writes; it should have, in a ``` block:\n%s", name, conf)
		}
	}
}

// TestToRSnippetsInREADME: every line of README's IPv6 ToR snippets (the
// indented lines between "beside its IPv4 parts" and "In the lab, BIRD and
// FRR ToRs") is a line of the dual-stack configuration docs/bgp.md shows.
func TestToRSnippetsInREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, part, _ := strings.Cut(string(readme), "beside its IPv4 parts")
	part, _, found := strings.Cut(part, "In the lab, BIRD and FRR ToRs")
	if !found {
		t.Fatal("README.md has no IPv6 ToR snippets")
	}
	confs := docsToRConfigs()
	lines := map[string]bool{}
	for _, c := range []string{confs["BIRD dual-stack"], confs["FRR dual-stack"]} {
		for _, l := range strings.Split(c, "\n") {
			lines[strings.TrimSpace(l)] = true
		}
	}
	n := 0
	for _, l := range strings.Split(part, "\n") {
		if !strings.HasPrefix(l, "    ") || strings.TrimSpace(l) == "" {
			continue
		}
		n++
		if !lines[strings.TrimSpace(l)] {
			t.Errorf("README.md's IPv6 ToR snippet line %q is in neither dual-stack configuration of docs/bgp.md", strings.TrimSpace(l))
		}
	}
	if n < 20 {
		t.Errorf("README.md's IPv6 ToR snippets: %d lines, want the BIRD and FRR ones", n)
	}
}

// TestToRConfigsParse: BIRD and FRR accept the ToR configurations of
// docs/bgp.md (sessions to IPv4 and to IPv6 addresses) and one with an
// IPv6 pool alone, and BIRD the hostile ones of the lab.
func TestToRConfigsParse(t *testing.T) {
	dir := t.TempDir()
	confs := docsToRConfigs()
	v6 := []ToRPool{{docsPool6, 122}}
	confs["BIRD IPv6"] = ToRBirdConfig(docsToR, 65000, docsToRNodes, 64512, v6, 30*time.Second)
	confs["FRR IPv6"] = ToRFRRConfig(docsToR, 65000, docsToRNodes, 64512, v6, 30*time.Second)
	node6 := netip.MustParseAddr("2001:db8:10::12")
	for _, name := range []string{"BIRD", "BIRD dual-stack", "BIRD IPv6", "BIRD IPv6-only"} {
		t.Run(name, func(t *testing.T) {
			var routes []netip.Prefix
			if name != "BIRD IPv6" && name != "BIRD IPv6-only" {
				routes = HostileRoutes(ToRPool{docsPool, 26}, docsToRNodes[1])
			}
			if name != "BIRD" {
				routes = append(routes, HostileRoutes(ToRPool{docsPool6, 122}, node6)...)
			}
			hostile := ToRBirdHostile(confs[name], routes)
			if !strings.Contains(hostile, "export all;") || strings.Contains(hostile, "export none;") {
				t.Errorf("the hostile BIRD configuration still exports nothing:\n%s", hostile)
			}
			birdParses(t, dir, "bird.conf", confs[name])
			birdParses(t, dir, "hostile.conf", hostile)
		})
	}
	for _, name := range []string{"FRR", "FRR dual-stack", "FRR IPv6", "FRR IPv6-only"} {
		t.Run(name, func(t *testing.T) { frrParses(t, dir, confs[name]) })
	}
}

// TestHostileRoutes: one route for each reason reef refuses, in the
// pool's family.
func TestHostileRoutes(t *testing.T) {
	for _, c := range []struct {
		pool ToRPool
		node netip.Addr
		want string
	}{
		{ToRPool{docsPool, 26}, docsToRNodes[1], "[0.0.0.0/0 10.244.0.0/16 192.168.10.12/32 10.244.0.5/32 10.244.255.192/26]"},
		{ToRPool{docsPool6, 122}, netip.MustParseAddr("2001:db8:10::12"), "[::/0 fd00:10:244::/56 2001:db8:10::12/128 fd00:10:244::5/128 fd00:10:244:ff:ffff:ffff:ffff:ffc0/122]"},
	} {
		if got := fmt.Sprint(HostileRoutes(c.pool, c.node)); got != c.want {
			t.Errorf("HostileRoutes(%v, %s) = %s, want %s", c.pool, c.node, got, c.want)
		}
	}
}
