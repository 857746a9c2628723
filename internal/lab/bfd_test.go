package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestToROptionsParse: the ToR configurations with BFD and graceful
// shutdown are what BIRD (bird -p) and FRR (vtysh --dryrun) accept, and
// docs/bgp.md shows the pieces the lab adds.
func TestToROptionsParse(t *testing.T) {
	o := ToROptions{Hold: 90 * time.Second, BFD: 300 * time.Millisecond, GracefulShutdown: true}
	pools := []ToRPool{{docsPool, 26}, {docsPool6, 122}}
	dir := t.TempDir()
	for _, kind := range []string{"bird", "frr"} {
		base := ToRBirdConfig(docsToR, 65000, docsToRNodes, 64512, pools, o.Hold)
		bin, check := BirdBinary, []string{"-p", "-c"}
		if kind == "frr" {
			base = ToRFRRConfig(docsToR, 65000, docsToRNodes, 64512, pools, o.Hold)
			bin, check = Vtysh, []string{"--dryrun", "-f"}
		}
		conf, err := withToROptions(kind, base, o)
		if err != nil {
			t.Fatal(err)
		}
		if kind == "frr" {
			conf += FRRBFD(o.BFD, 3) // bfdd's part, in the integrated frr.conf an operator writes
		}
		for _, want := range map[string][]string{"bird": {BirdBFD(o.BFD, 3), BirdBFDOn, BirdGracefulShutdown}, "frr": {FRRBFDOn, FRRGracefulShutdown}}[kind] {
			if !strings.Contains(conf, want) {
				t.Errorf("%s: the config lacks %q:\n%s", kind, want, conf)
			}
		}
		if _, err := os.Stat(bin); err != nil {
			t.Logf("%s not installed: not parsed", bin)
			continue
		}
		path := filepath.Join(dir, kind+".conf")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin, append(check, path)...).CombinedOutput(); err != nil {
			t.Errorf("%s %v: %v\n%s\n%s", bin, check, err, out, conf)
		}
	}
}

// TestToROptionsInDocs: docs/bgp.md shows the pieces the lab adds for BFD
// and graceful shutdown, at the lab's BFD timers.
func TestToROptionsInDocs(t *testing.T) {
	doc, err := os.ReadFile("../../docs/bgp.md")
	if err != nil {
		t.Fatal(err)
	}
	for name, piece := range map[string]string{
		"BirdBFD": "```" + BirdBFD(300*time.Millisecond, 3) + "```\n", "BirdBFDOn": BirdBFDOn, "BirdGracefulShutdown": BirdGracefulShutdown,
		"FRRBFD": "```\n" + FRRBFD(300*time.Millisecond, 3) + "```\n", "FRRBFDOn": FRRBFDOn, "FRRGracefulShutdown": "```\n" + FRRGracefulShutdown + "```\n",
	} {
		if !strings.Contains(string(doc), piece) {
			t.Errorf("docs/bgp.md does not show lab.%s:\n%s", name, piece)
		}
	}
}
