package lab

import (
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
)

func docsToRConfigs() map[string]string {
	return map[string]string{
		"BIRD": ToRBirdConfig(docsToR, 65000, docsToRNodes, 64512, docsPool, 26, 30*time.Second),
		"FRR":  ToRFRRConfig(docsToR, 65000, docsToRNodes, 64512, docsPool, 26, 30*time.Second),
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

// TestToRConfigsParse: BIRD and FRR accept the ToR configurations of
// docs/bgp.md, and BIRD the hostile one of the lab.
func TestToRConfigsParse(t *testing.T) {
	dir := t.TempDir()
	confs := docsToRConfigs()
	t.Run("BIRD", func(t *testing.T) {
		hostile := ToRBirdHostile(confs["BIRD"], docsPool, docsToRNodes[1])
		if !strings.Contains(hostile, "export all;") || strings.Contains(hostile, "export none;") {
			t.Errorf("the hostile BIRD configuration still exports nothing:\n%s", hostile)
		}
		birdParses(t, dir, "bird.conf", confs["BIRD"])
		birdParses(t, dir, "hostile.conf", hostile)
	})
	t.Run("FRR", func(t *testing.T) { frrParses(t, dir, confs["FRR"]) })
}
