package lab

import (
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A pod template as the suite's base manifests write it: the SCTP
// servers go, every other container and the rest of the file stay.
func TestPatchPolicyManifests(t *testing.T) {
	in := `apiVersion: apps/v1
kind: StatefulSet
spec:
  template:
    spec:
      containers:
        - name: c-client
          image: agnhost:2.45
        - name: c-80
          image: agnhost:2.45
          command: ["/bin/bash", "-c", "/agnhost serve-hostname --tcp --http=false --port 80"]
          ports:
            - containerPort: 80
              protocol: TCP
        - name: c-9003
          image: agnhost:2.45
          command: ["/bin/bash", "-c", "/agnhost porter"]
          env:
          - name: SERVE_SCTP_PORT_9003
            value: "foo"
        - name: c-9005
          image: agnhost:2.45
          command: ["/bin/bash", "-c", "/agnhost porter"]
          env:
          - name: SERVE_SCTP_PORT_9005
            value: "foo"
---
apiVersion: v1
kind: Namespace
metadata:
  name: after
`
	want := `apiVersion: apps/v1
kind: StatefulSet
spec:
  template:
    spec:
      containers:
        - name: c-client
          image: agnhost:2.45
        - name: c-80
          image: agnhost:2.45
          command: ["/bin/bash", "-c", "/agnhost serve-hostname --tcp --http=false --port 80"]
          ports:
            - containerPort: 80
              protocol: TCP
---
apiVersion: v1
kind: Namespace
metadata:
  name: after
`
	if got := string(PatchPolicyManifests([]byte(in))); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// A container that serves TCP after the SCTP ones stays.
	tail := "        - name: c-8080\n          image: agnhost:2.45\n"
	in2 := strings.Replace(in, "---\n", tail+"---\n", 1)
	want2 := strings.Replace(want, "---\n", tail+"---\n", 1)
	if got := string(PatchPolicyManifests([]byte(in2))); got != want2 {
		t.Fatalf("got\n%s\nwant\n%s", got, want2)
	}
}

func TestReadTest2JSON(t *testing.T) {
	events := `{"Action":"start","Package":"conformance"}
{"Action":"run","Test":"TestConformance"}
{"Action":"output","Test":"TestConformance","Output":"=== RUN   TestConformance\n"}
{"Action":"run","Test":"TestConformance/CNPAdminTierEgressTCP"}
{"Action":"output","Test":"TestConformance/CNPAdminTierEgressTCP/Should_deny","Output":"    helper.go:71: FAILED Command was [/agnhost connect --timeout=3s --protocol=sctp 10.1.0.5:9003]\n"}
{"Action":"output","Test":"TestConformance/CNPAdminTierEgressTCP/Should_deny","Output":"    helper.go:71: Expected connection to be dropped from x/a to 10.1.0.5, but instead it returned a different status: OTHER: protocol not supported\n"}
{"Action":"output","Test":"TestConformance/CNPAdminTierEgressTCP/Should_deny","Output":"    helper.go:71: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.1.0.5:80]\n"}
{"Action":"output","Test":"TestConformance/CNPAdminTierEgressTCP/Should_deny","Output":"        \tError:      \tCondition never satisfied\n"}
{"Action":"fail","Test":"TestConformance/CNPAdminTierEgressTCP/Should_deny","Elapsed":12.5}
{"Action":"fail","Test":"TestConformance/CNPAdminTierEgressTCP","Elapsed":13}
{"Action":"output","Test":"TestConformance/CNPAdminTierEgressNamedPort","Output":"    suite.go:209: Skipping CNPAdminTierEgressNamedPort: suite does not support ClusterNetworkPolicyNamedPorts\n"}
{"Action":"skip","Test":"TestConformance/CNPAdminTierEgressNamedPort","Elapsed":0}
{"Action":"output","Test":"TestConformance/CNPAdminTierPriorityField","Output":"    helper.go:70: reef-lab: SCTP probe not run (this kernel has no SCTP): x/a to 10.1.0.5:9003, want connect=true\n"}
{"Action":"pass","Test":"TestConformance/CNPAdminTierPriorityField","Elapsed":2}
{"Action":"fail","Test":"TestConformance","Elapsed":30}
{"Action":"fail","Package":"conformance","Elapsed":30}
`
	var out strings.Builder
	got, err := ReadTest2JSON(strings.NewReader(events), &out)
	if err != nil {
		t.Fatal(err)
	}
	want := []E2EResult{
		{"TestConformance/CNPAdminTierEgressTCP/Should_deny", "failed", "probes failed: sctp, tcp; helper.go:71: Expected connection to be dropped from x/a to 10.1.0.5, but instead it returned a different status: OTHER: protocol not supported", 12500 * time.Millisecond},
		{"TestConformance/CNPAdminTierEgressTCP", "failed", "", 13 * time.Second},
		{"TestConformance/CNPAdminTierEgressNamedPort", "skipped", "suite.go:209: Skipping CNPAdminTierEgressNamedPort: suite does not support ClusterNetworkPolicyNamedPorts", 0},
		{"TestConformance/CNPAdminTierPriorityField", "passed", "1 SCTP probes not run", 2 * time.Second},
		{"TestConformance", "failed", "", 30 * time.Second},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if FailedOnlyOn(got[0], "sctp") || !FailedOnlyOn(E2EResult{State: "failed", Message: "probes failed: sctp; x"}, "sctp") {
		t.Fatalf("FailedOnlyOn: sctp and tcp failed, or sctp alone, misread")
	}
	if !strings.Contains(out.String(), "FAILED Command was") {
		t.Fatalf("output not passed on: %q", out.String())
	}
}

func TestPolicyConformanceTests(t *testing.T) {
	src := t.TempDir()
	dir := filepath.Join(src, "conformance", "tests")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	code := `var A = suite.ConformanceTest{
	ShortName:   "CNPAdminTierEgressNamedPort",
	Description: "x",
	Features: []suite.SupportedFeature{
		suite.SupportClusterNetworkPolicy,
		suite.SupportClusterNetworkPolicyNamedPorts,
	},
}
var B = suite.ConformanceTest{
	ShortName:   "CNPAdminTierEgressSCTP",
	Features: []suite.SupportedFeature{
		suite.SupportClusterNetworkPolicy,
	},
}
`
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := PolicyConformanceTests(src)
	if err != nil {
		t.Fatal(err)
	}
	want := []PolicyConformanceTest{
		{"CNPAdminTierEgressNamedPort", []string{"ClusterNetworkPolicy", "ClusterNetworkPolicyNamedPorts"}},
		{"CNPAdminTierEgressSCTP", []string{"ClusterNetworkPolicy"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

// The patch applies to the module's helper, once, and what it writes
// still parses; a helper of another shape is refused, not half patched.
func TestPatchPolicyProbes(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", NetpolAPIModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", NetpolAPIModule, err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "conformance", "utils", "kubernetes", "helper.go")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := PatchPolicyProbes(src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parser.ParseFile(token.NewFileSet(), path, got, 0); err != nil {
		t.Fatalf("the patched helper does not parse: %v", err)
	}
	if strings.Count(string(got), SCTPNotProbed) != 1 || !strings.Contains(string(got), pokeServerHead+"\tif protocol == \"sctp\" {") {
		t.Fatalf("the guard is not at the top of PokeServer")
	}
	if _, err := PatchPolicyProbes([]byte("package kubernetes\n")); err == nil {
		t.Fatal("a helper without PokeServer patched")
	}
}
