package daemon

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest function the daemon package may have
// (issue 28: a function that does more than fits on a screen is split).
const maxFuncLines = 80

// TestFunctionLength: no function of the package (tests aside) is longer
// than maxFuncLines, counted from its func line to its closing brace.
func TestFunctionLength(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fs := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fs, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			checked++
			start, end := fs.Position(fd.Pos()), fs.Position(fd.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines, more than %d: split it", name, start.Line, fd.Name.Name, n, maxFuncLines)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no function found: the test reads the wrong directory")
	}
}
