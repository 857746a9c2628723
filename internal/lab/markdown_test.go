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

func TestWriteHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	head := "# Benchmarks\n\nnew intro\n\n## A\n\nnew a\n\n## B\n\nnew b\n"
	// No file yet: head is the whole file.
	if err := WriteHead(path, head); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != head {
		t.Fatalf("new file:\n%q\nwant\n%q", got, head)
	}
	// The old title and sections A and B are replaced; the other
	// benches' sections (C, D) stay as they were.
	doc := "# Benchmarks\n\nold intro\n\n## A\n\nold a\n\n## B\n\nold b\n\n## C\n\nc\n\n## D\n\nd\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteHead(path, head); err != nil {
		t.Fatal(err)
	}
	want := head + "\n## C\n\nc\n\n## D\n\nd\n"
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Fatalf("over an old file:\n%q\nwant\n%q", got, want)
	}
	// Twice gives the same file.
	if err := WriteHead(path, head); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Fatalf("second write:\n%q\nwant\n%q", got, want)
	}
}
