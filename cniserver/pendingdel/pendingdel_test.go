package pendingdel

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPutListRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	a := Entry{ContainerID: "aaa", IfName: "eth0", Netns: "/var/run/netns/x", Netconf: []byte(`{"name":"n"}`), Queued: time.Unix(200, 0).UTC()}
	b := Entry{ContainerID: "bbb", IfName: "eth0", Netconf: []byte(`{}`), Queued: time.Unix(100, 0).UTC()}
	for _, e := range []Entry{a, b, a} { // a twice: one file, not two
		if err := Put(dir, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.json"), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, bad, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var entries []Entry
	for _, q := range got {
		entries = append(entries, q.Entry)
	}
	if diff := cmp.Diff([]Entry{b, a}, entries); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	if len(bad) != 1 || filepath.Base(bad[0]) != "junk.json" {
		t.Errorf("bad = %v, want junk.json", bad)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v, %v; want 0700", st.Mode().Perm(), err)
	}
	for _, q := range got {
		if err := Remove(q.File); err != nil {
			t.Fatal(err)
		}
		if err := Remove(q.File); err != nil {
			t.Fatalf("second Remove: %v", err)
		}
	}
	got, _, _ = List(dir)
	if len(got) != 0 {
		t.Errorf("after Remove: %d entries left", len(got))
	}
}

func TestListMissingDir(t *testing.T) {
	got, bad, err := List(filepath.Join(t.TempDir(), "none"))
	if err != nil || got != nil || bad != nil {
		t.Errorf("List(missing) = %v, %v, %v; want empty, nil", got, bad, err)
	}
}
