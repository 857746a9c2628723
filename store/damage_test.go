package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
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

// A branch element pointing far outside the file: bbolt's own check
// would fault in a goroutine of its own and crash the process; Open walks
// the file first, where the fault is an error.
func TestOpenRefusesPagePointingOutside(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	s := openProtoAt(t, path)
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 20}
	claimConfirmed(t, s, pool)
	for i := range 300 {
		h := fmt.Sprintf("net.%03d-%s", i, strings.Repeat("x", 60))
		if _, _, err := s.Allocate(Endpoint{Handle: h}, pool); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	branches := pagesOf(t, path, "branch")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The first element's page id: after the 16-byte page header, the
	// element's pos and ksize.
	far := make([]byte, 8) // page 1<<20: 4 GiB into a file of a few hundred KiB, past its mapping
	binary.LittleEndian.PutUint64(far, 1<<20)
	if _, err := f.WriteAt(far, int64(branches[0]*os.Getpagesize()+16+8)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, err = Open(path, Options{Node: "node-a", Address: protoSelf})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open: %v, want a DamagedError", err)
	}
	t.Log(err)
}

// Damage found while the store is open latches it: no more writes.
func TestDamageWhileOpenStopsWrites(t *testing.T) {
	path := populated(t)
	used := usedPages(t, path) // before Open: it locks the file
	s := openProtoAt(t, path)
	defer s.Close()
	overwritePages(t, path, used...) // the mapping shows the file as it is now
	if _, err := s.Endpoints(); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Endpoints on a file damaged under it: %v, want ErrDamaged", err)
	}
	if _, _, err := s.Allocate(Endpoint{Handle: "net.after"}, protoPool); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Allocate after the damage was found: %v, want ErrDamaged", err)
	}
}

// TestCheckFile: CheckFile finds what Open would refuse, and only that,
// without changing the file.
func TestCheckFile(t *testing.T) {
	sound := populated(t)
	before, err := os.ReadFile(sound)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(sound); err != nil {
		t.Errorf("CheckFile of a sound file: %v", err)
	}
	if after, _ := os.ReadFile(sound); !bytes.Equal(before, after) {
		t.Error("CheckFile changed the file")
	}
	damaged := populated(t)
	used := usedPages(t, damaged)
	overwritePages(t, damaged, used[0], used[len(used)-1])
	if err := CheckFile(damaged); !errors.Is(err, ErrDamaged) {
		t.Errorf("CheckFile of a file with two pages overwritten: %v, want a DamagedError", err)
	}
	empty := filepath.Join(t.TempDir(), "reef.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckFile(empty); !errors.Is(err, ErrDamaged) {
		t.Errorf("CheckFile of an empty file: %v, want a DamagedError", err)
	}
	if err := CheckFile(filepath.Join(t.TempDir(), "reef.db")); err == nil || errors.Is(err, ErrDamaged) {
		t.Errorf("CheckFile of a missing file: %v, want an error that is not damage", err)
	}
	// A node identity that is not 4 bytes: Open refuses it as damaged.
	badID := populated(t)
	db, err := bolt.Open(badID, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyNodeIdentity, []byte{10, 0, 0}) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(badID, Options{Node: "node-a", Address: protoSelf}); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Open of a file with a 3-byte identity: %v, want a DamagedError", err)
	}
	if err := CheckFile(badID); !errors.Is(err, ErrDamaged) {
		t.Errorf("CheckFile of a file with a 3-byte identity: %v, want a DamagedError as Open finds", err)
	}
}
