package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckRuntime(t *testing.T) {
	conf, bin := t.TempDir(), t.TempDir()
	write := func(dir, name, body string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	kinds := func() string {
		var ks []string
		for _, p := range checkRuntime(conf, bin) {
			ks = append(ks, p.Kind)
		}
		return strings.Join(ks, ",")
	}
	reef := `{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[{"type":"reef-cni"}]}`
	if got := kinds(); got != "conflist-not-reef,plugin-missing" {
		t.Errorf("empty dirs: %s", got)
	}
	write(conf, "10-reef.conflist", reef, 0o644)
	write(bin, "reef-cni", "#!/bin/sh\n", 0o755)
	write(conf, "README", "not a config", 0o644)
	if got := kinds(); got != "" {
		t.Errorf("reef's conflist alone: %s", got)
	}
	write(conf, "05-flannel.conflist", `{"cniVersion":"1.0.0","name":"cbr0","plugins":[{"type":"flannel"}]}`, 0o644)
	ps := checkRuntime(conf, bin)
	if len(ps) != 1 || ps[0].Kind != "conflist-shadowed" || !strings.Contains(ps[0].Message, "05-flannel.conflist sorts before reef's 10-reef.conflist") {
		t.Errorf("another conflist first: %+v", ps)
	}
	os.Remove(filepath.Join(conf, "05-flannel.conflist"))
	write(conf, "00-reef.conf", `{"cniVersion":"0.4.0","name":"x","type":"reef-cni"}`, 0o644)
	if got := kinds(); got != "" {
		t.Errorf("a single .conf of reef's first: %s", got)
	}
	os.Chmod(filepath.Join(bin, "reef-cni"), 0o644)
	if got := kinds(); got != "plugin-missing" {
		t.Errorf("reef-cni not executable: %s", got)
	}
}
