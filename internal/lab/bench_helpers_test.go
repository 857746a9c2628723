package lab

import (
	"os"
	"testing"
)

// The benches' memory figures come from ProcMemory; a field it misses
// would read as 0 kB and pass every aim.
func TestProcMemory(t *testing.T) {
	m, err := ProcMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.HWM <= 0 || m.Anon <= 0 || m.File <= 0 || m.Anon+m.File > m.RSS+m.RSS/10 {
		t.Errorf("this test's own memory: %+v kB; want every field above 0 and RssAnon + RssFile about VmRSS", m)
	}
}
