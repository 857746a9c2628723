package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// populated writes a store with a confirmed block and enough endpoints to
// span several pages, closes it and returns its path.
func populated(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	claimConfirmed(t, s, protoPool)
	for i := range 40 {
		h := fmt.Sprintf("net.%02d-%s", i, strings.Repeat("x", 100))
		if _, _, err := s.Allocate(Endpoint{Handle: h, ContainerID: h, IfName: "eth0"}, protoPool); err != nil {
			break // the block is full: enough pages either way
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func overwritePages(t *testing.T, path string, pages ...int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	junk := []byte(strings.Repeat("\xde\xad\xbe\xef", os.Getpagesize()/4))
	for _, p := range pages {
		if _, err := f.WriteAt(junk, int64(p*os.Getpagesize())); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenRefusesDamagedFile(t *testing.T) {
	page := os.Getpagesize()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
		want   string
	}{
		{"two pages in use overwritten", func(t *testing.T, path string) {
			used := usedPages(t, path)
			overwritePages(t, path, used[0], used[len(used)-1])
		}, ""},
		{"the freelist overwritten", func(t *testing.T, path string) { overwritePages(t, path, pagesOf(t, path, "freelist")...) }, ""},
		{"both meta pages overwritten", func(t *testing.T, path string) { overwritePages(t, path, 0, 1) }, "meta pages"},
		{"zero-length", func(t *testing.T, path string) { truncate(t, path, 0) }, "empty (0 bytes)"},
		{"truncated to a page", func(t *testing.T, path string) { truncate(t, path, int64(page)) }, "truncated"},
		{"truncated mid-page", func(t *testing.T, path string) { truncate(t, path, 5*int64(page)+100) }, "truncated"},
		{"truncated before its last page in use", func(t *testing.T, path string) {
			used := usedPages(t, path)
			truncate(t, path, int64(used[len(used)-1]*page))
		}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := populated(t)
			tc.damage(t, path)
			s, err := Open(path, Options{Node: "node-a", Address: protoSelf})
			if err == nil {
				s.Close()
				t.Fatal("Open of a damaged file succeeded")
			}
			var de *DamagedError
			if !errors.As(err, &de) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("Open: %v, want a DamagedError", err)
			}
			msg := err.Error()
			t.Log(msg)
			for _, want := range []string{path, "reef store recover", tc.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
		})
	}
}

// pagesOf lists the file's pages of a bbolt page type ("leaf", "branch",
// "freelist", "meta").
func pagesOf(t *testing.T, path string, types ...string) []int {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []int
	err = db.View(func(tx *bolt.Tx) error {
		for id := 0; ; id++ {
			p, err := tx.Page(id)
			if err != nil || p == nil {
				return err
			}
			if slices.Contains(types, p.Type) {
				out = append(out, id)
			}
		}
	})
	if err != nil || len(out) == 0 {
		t.Fatalf("pages of type %v in %s: %v %v", types, path, out, err)
	}
	return out
}

// usedPages are the pages that hold the buckets' data.
func usedPages(t *testing.T, path string) []int { return pagesOf(t, path, "leaf", "branch") }

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

func TestOpenAcceptsUndamagedFile(t *testing.T) {
	path := populated(t)
	s, err := Open(path, Options{Node: "node-a", Address: protoSelf})
	if err != nil {
		t.Fatalf("Open of a sound file: %v", err)
	}
	s.Close()
}
