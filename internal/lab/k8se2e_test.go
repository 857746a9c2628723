package lab

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReadJUnit: ginkgo's report as e2e.test writes it; the failure's text
// is in the element, specs the focus left out are dropped, and a test that
// skipped itself keeps its reason.
func TestReadJUnit(t *testing.T) {
	report := `<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="Kubernetes e2e suite">
<testcase name="[SynchronizedBeforeSuite]" status="passed" time="1"></testcase>
<testcase name="[It] [sig-network] A passes" status="passed" time="12.5"></testcase>
<testcase name="[It] [sig-network] B fails" status="failed" time="3"><failure message="" type="failed">[FAILED] timed out waiting for the condition
In [It] at: service.go:2459</failure></testcase>
<testcase name="[It] [sig-network] C filtered" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-network] D skips itself" status="skipped" time="0"><skipped message="skipped - Only supported for providers [gce]"></skipped></testcase>
</testsuite></testsuites>`
	path := filepath.Join(t.TempDir(), "junit_01.xml")
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	rs, err := ReadJUnit(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []E2EResult{
		{Name: "[sig-network] A passes", State: "passed"},
		{Name: "[sig-network] B fails", State: "failed", Message: "[FAILED] timed out waiting for the condition\nIn [It] at: service.go:2459"},
		{Name: "[sig-network] D skips itself", State: "skipped", Message: "skipped - Only supported for providers [gce]"},
	}
	if len(rs) != len(want) {
		t.Fatalf("got %d results %+v, want %d", len(rs), rs, len(want))
	}
	for i, w := range want {
		if rs[i].Name != w.Name || rs[i].State != w.State || rs[i].Message != w.Message {
			t.Errorf("result %d: %+v, want %+v", i, rs[i], w)
		}
	}
}

// TestLeftOut: the tests the focus selects and the skip leaves out, by
// name, from the JUnit report.
func TestLeftOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "junit_01.xml")
	doc := `<testsuites><testsuite>
<testcase name="[It] [sig-network] [Feature:IPv6DualStack] pod-Service: http" status="passed"></testcase>
<testcase name="[It] [sig-network] [Feature:IPv6DualStack] pod-Service: sctp [Feature:SCTPConnectivity]" status="skipped"><skipped message="skipped"></skipped></testcase>
<testcase name="[It] [sig-network] Services SCTP something" status="skipped"><skipped message="skipped"></skipped></testcase>
</testsuite></testsuites>`
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LeftOut(path, DualStackFocus, DualStackSkip)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"[sig-network] [Feature:IPv6DualStack] pod-Service: sctp [Feature:SCTPConnectivity]"}
	if !slices.Equal(got, want) {
		t.Errorf("LeftOut = %q, want %q", got, want)
	}
}
