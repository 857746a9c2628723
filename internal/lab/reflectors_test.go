package lab

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The example of docs/bgp.md: reflectors at 192.168.10.2, clients on
// 192.168.10.0/24, reef's default timers.
var (
	docsReflector = netip.MustParseAddr("192.168.10.2")
	docsClients   = netip.MustParsePrefix("192.168.10.0/24")
)

// TestReflectorConfigsInDocs: docs/bgp.md shows exactly the BIRD and FRR
// configurations the lab runs (with the docs' addresses and timers), so the
// page cannot drift from what e2e/rr_test.go proves.
func TestReflectorConfigsInDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bgp.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, conf := range map[string]string{
		"BIRD": BirdConfig(docsReflector, 64512, docsClients, 30*time.Second),
		"FRR":  FRRConfig(docsReflector, 64512, docsClients, 30*time.Second),
	} {
		if !strings.Contains(string(doc), "```\n"+conf+"```\n") {
			t.Errorf("docs/bgp.md does not show the %s configuration the lab writes; it should have, in a ``` block:\n%s", name, conf)
		}
	}
}

// TestReflectorConfigsParse: BIRD and FRR accept the configurations of
// docs/bgp.md.
func TestReflectorConfigsParse(t *testing.T) {
	dir := t.TempDir()
	t.Run("BIRD", func(t *testing.T) {
		birdParses(t, dir, "bird.conf", BirdConfig(docsReflector, 64512, docsClients, 30*time.Second))
	})
	t.Run("FRR", func(t *testing.T) { frrParses(t, dir, FRRConfig(docsReflector, 64512, docsClients, 30*time.Second)) })
	t.Run("BIRD IPv6-only", func(t *testing.T) {
		conf := BirdConfigAt(docsReflector, netip.MustParseAddr("fd77::11"), 64512, netip.MustParsePrefix("fd77::/64"), 30*time.Second)
		if n := strings.Count(conf, "gateway recursive;"); n != 2 || !strings.Contains(conf, "local fd77::11 as") {
			t.Errorf("the IPv6-only BIRD reflector: %d VPN channels with gateway recursive, want 2; or no local fd77::11:\n%s", n, conf)
		}
		birdParses(t, dir, "bird6.conf", conf)
	})
}

// birdParses checks that BIRD takes conf (bird -p), written to dir/name.
func birdParses(t *testing.T, dir, name, conf string) {
	t.Helper()
	if _, err := os.Stat(BirdBinary); err != nil {
		t.Skip("bird2 not installed (make deps-test installs it)")
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(BirdBinary, "-p", "-c", path).CombinedOutput(); err != nil {
		t.Errorf("bird -p %s: %v\n%s", name, err, out)
	}
}

// frrParses checks that FRR takes conf: vtysh --dryrun and bgpd -C, which
// exit 0 but print "No such command" on a line bgpd does not know.
func frrParses(t *testing.T, dir, conf string) {
	t.Helper()
	if _, err := os.Stat(Vtysh); err != nil {
		t.Skip("frr not installed (make deps-test installs it)")
	}
	if os.Geteuid() != 0 {
		t.Skip("vtysh --dryrun needs root (FRR's groups)")
	}
	path := filepath.Join(dir, "frr.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{Vtysh, "--dryrun", "-f", path}, {filepath.Join(FRRDir, "bgpd"), "-C", "-f", path}} {
		out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
		if err != nil || strings.Contains(string(out), "No such command") || strings.Contains(string(out), "Unknown command") {
			t.Errorf("%s: %v\n%s", strings.Join(cmd, " "), err, out)
		}
	}
}
