package linkname

import "testing"

func TestOurs(t *testing.T) {
	for name, want := range map[string]bool{"reef0123456789a": true, "reefb0123456789": true, "reef": false, "eth0": false, "": false, "vxlan.reef": false} {
		if got := Ours(name); got != want {
			t.Errorf("Ours(%q) = %v, want %v", name, got, want)
		}
	}
}
