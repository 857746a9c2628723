package main

import (
	"os"
	"testing"
)

// TestBenchCommand: a section names its command with the clone's paths
// as $PWD/..., whether a path is an argument of its own or a flag's value.
func TestBenchCommand(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	got := benchCommand("reef-lab bench-policy", []string{"--bin", wd + "/bin", "--out=" + wd + "/BENCHMARKS.md", "--images", "/tmp/images"})
	if want := "reef-lab bench-policy --bin $PWD/bin --out=$PWD/BENCHMARKS.md --images /tmp/images"; got != want {
		t.Errorf("benchCommand = %q, want %q", got, want)
	}
}
