package netnstest

import (
	"net"
	"os"
	"strings"
	"testing"
)

// TestNew: the namespace is not the test's own, Run works in it, and it is
// gone when the test that made it ends.
func TestNew(t *testing.T) {
	var path string
	t.Run("user", func(t *testing.T) {
		n := New(t)
		path = n.Path()
		Run(t, n, "ip", "link", "add", "reefnstest0", "type", "veth", "peer", "name", "reefnstest1")
		if out := Run(t, n, "ip", "-br", "link", "show"); !strings.Contains(out, "reefnstest0") {
			t.Errorf("the veth is not in the namespace:\n%s", out)
		}
		if _, err := net.InterfaceByName("reefnstest0"); err == nil {
			t.Error("a link made in the test namespace shows in the test's own")
		}
		if _, err := Output(n, "ip", "link", "show", "no-such-link"); err == nil {
			t.Error("Output hid a failing command")
		}
	})
	if path == "" {
		return // skipped: not root
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s after the test that made it ended: %v, want it gone", path, err)
	}
}
