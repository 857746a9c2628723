package lab

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteSection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	doc := "# Benchmarks\n\nintro\n\n## A\n\nold a\n\n## B\n\nold b\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct{ section, want string }{
		{"## A\n\nnew a\n", "# Benchmarks\n\nintro\n\n## A\n\nnew a\n\n## B\n\nold b\n"},
		{"## B\n\nnew b\n", "# Benchmarks\n\nintro\n\n## A\n\nnew a\n\n## B\n\nnew b\n"},
		{"## C\n\nc\n", "# Benchmarks\n\nintro\n\n## A\n\nnew a\n\n## B\n\nnew b\n\n## C\n\nc\n"},
	}
	for _, st := range steps {
		if err := WriteSection(path, st.section); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != st.want {
			t.Fatalf("after %q:\n%q\nwant\n%q", st.section, got, st.want)
		}
	}
}
