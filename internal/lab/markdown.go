package lab

import (
	"errors"
	"os"
	"strings"
)

// WriteSection puts section, which starts with its "## " heading line, into
// the markdown file at path: in place of the section with the same heading
// (up to the next "## "), or at the end. The other sections stay as they
// are, so each bench of `make bench` (and `make bench-failover`) refreshes only its
// own.
func WriteSection(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	doc := string(old)
	section = strings.TrimRight(section, "\n") + "\n"
	head, _, _ := strings.Cut(section, "\n")
	head += "\n"
	i := -1
	if strings.HasPrefix(doc, head) {
		i = 0
	} else if k := strings.Index(doc, "\n"+head); k >= 0 {
		i = k + 1
	}
	var out string
	if i >= 0 {
		end := len(doc)
		if k := strings.Index(doc[i+len(head):], "\n## "); k >= 0 {
			end = i + len(head) + k + 1
		}
		rest := doc[end:]
		if rest != "" {
			section += "\n"
		}
		out = doc[:i] + section + rest
	} else {
		sep := ""
		if doc != "" {
			sep = "\n"
			if !strings.HasSuffix(doc, "\n") {
				sep = "\n\n"
			}
		}
		out = doc + sep + section
	}
	return os.WriteFile(path, []byte(out), 0o644)
}

// WriteHead puts head, the file's title and the first sections (those of
// `reef-lab bench`, the first step of `make bench`), at the top of the
// markdown file at path. It replaces the old title and every "## " section
// head names again, up to the first section it does not name; that section
// and all after it (the other benches') stay as they are. Without a file,
// head is the whole file.
func WriteHead(path, head string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	head = strings.TrimRight(head, "\n") + "\n"
	own := map[string]bool{}
	for _, l := range strings.Split(head, "\n") {
		if strings.HasPrefix(l, "## ") {
			own[l] = true
		}
	}
	doc := string(old)
	rest := ""
	for i := 0; i < len(doc); {
		line, _, _ := strings.Cut(doc[i:], "\n")
		if strings.HasPrefix(line, "## ") && !own[line] {
			rest = doc[i:]
			break
		}
		i += len(line) + 1
	}
	if rest != "" {
		head += "\n"
	}
	return os.WriteFile(path, []byte(head+rest), 0o644)
}
