package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reefcni/reef/internal/lab"
)

// TestConformanceSummaries: make conformance rewrites the top of
// docs/conformance.md and keeps the dual-stack and network-policy-api
// sections; make conformance-dualstack and make conformance-policy
// rewrite their own section and keep the rest.
func TestConformanceSummaries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conformance.md")
	run := func(name, state string, dual bool) conformanceRun {
		r := conformanceRun{results: []lab.E2EResult{{Name: name, State: state}}, focus: lab.ConformanceFocus, skip: lab.ConformanceSkip,
			junit: "conformance-junit.xml.gz", up: time.Second, took: time.Minute, reef: "reef 1a2b3c4 (commit 1a2b3c4)"}
		if dual {
			r.focus, r.skip, r.junit = lab.DualStackFocus, lab.DualStackSkip, "conformance-dualstack-junit.xml.gz"
			r.leftOut = []string{"[Feature:IPv6DualStack] an sctp one [Feature:SCTPConnectivity]"}
		}
		return r
	}
	main := func(name string) {
		var b strings.Builder
		writeConformance(&b, run(name, "passed", false))
		if err := writeConformanceHead(path, b.String()); err != nil {
			t.Fatal(err)
		}
	}
	dual := func(name string) {
		var b strings.Builder
		writeDualStackConformance(&b, run(name, "failed", true))
		if err := lab.WriteSection(path, b.String()); err != nil {
			t.Fatal(err)
		}
	}
	policy := func(name, state string) {
		r := policyConformanceRun{results: []lab.E2EResult{{Name: "TestConformance", State: state}, {Name: "TestConformance/" + name, State: state},
			{Name: "TestConformance/" + name + "/a_subtest", State: state, Message: "a line\n## not a heading"}},
			tests: []lab.PolicyConformanceTest{{Name: name}, {Name: "CNPLeftOut"}}, version: "v0.3.0", features: lab.PolicyConformanceFeatures,
			skip: lab.SkipExpr(lab.PolicyConformanceSkips), cmdline: []string{"netpol-conformance.test"}, events: "conformance-policy-events.json.gz", nodes: 3}
		var b strings.Builder
		writePolicyConformance(&b, r)
		if n := strings.Count("\n"+b.String(), "\n## "); n != 1 || !strings.HasPrefix(b.String(), policySection+"\n") {
			t.Fatalf("the network-policy-api section has %d \"## \" lines, want its heading only, first:\n%s", n, b.String())
		}
		if err := lab.WriteSection(path, b.String()); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	main("[sig-network] main one")
	policy("CNPPolicyOne", "failed")
	dual("[Feature:IPv6DualStack] dual one")
	main("[sig-network] main two")
	policy("CNPPolicyTwo", "passed")
	dual("[Feature:IPv6DualStack] dual two")
	doc := read()
	for _, want := range []string{"# Upstream conformance\n", "| passed | [sig-network] main two |", "\n## Dual-stack\n",
		"| failed | [Feature:IPv6DualStack] dual two |", "`docs/conformance-dualstack-junit.xml.gz`", "`docs/conformance-junit.xml.gz`",
		"left out by the skip (1):\n\n- [Feature:IPv6DualStack] an sctp one [Feature:SCTPConnectivity]\n",
		"\n" + policySection + "\n", "| passed | CNPPolicyTwo |", "**1 passed, 0 failed, 0 skipped** of the suite's 2 tests; 1 left out by the skip.",
		"Left out: CNPLeftOut.", "`docs/conformance-policy-events.json.gz`",
		"tests ran for 1m0s. `reef version`: reef 1a2b3c4 (commit 1a2b3c4).\n"} {
		if !strings.Contains(doc, want) {
			t.Errorf("the summary lacks %q:\n%s", want, doc)
		}
	}
	for _, gone := range []string{"main one", "dual one", "CNPPolicyOne"} {
		if strings.Contains(doc, gone) {
			t.Errorf("the summary still has the earlier run's %q:\n%s", gone, doc)
		}
	}
	if strings.Count(doc, "## Dual-stack") != 1 || strings.Count(doc, "# Upstream conformance") != 1 || strings.Count(doc, policySection) != 1 {
		t.Errorf("the summary has its parts more than once:\n%s", doc)
	}
	if i, j := strings.Index(doc, "main two"), strings.Index(doc, "## Dual-stack"); i > j {
		t.Errorf("the dual-stack section is not after the main summary:\n%s", doc)
	}
	if i, j := strings.Index(doc, "main two"), strings.Index(doc, policySection); i > j {
		t.Errorf("the network-policy-api section is not after the main summary:\n%s", doc)
	}
}
