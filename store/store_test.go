package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// openTest opens a store in a fresh directory that Open must create itself,
// and closes it when the test ends.
func openTest(t *testing.T, node string) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "state", "reef.db"), Options{Node: node})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// withRaw runs fn in a write transaction on the closed file at path, to
// set up states the API does not produce.
func withRaw(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatalf("raw open %s: %v", path, err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatalf("raw update %s: %v", path, err)
	}
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	s := openTest(t, "node-a")
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("file mode = %o, want 600", got)
	}
	di, err := os.Stat(filepath.Dir(s.Path()))
	if err != nil {
		t.Fatal(err)
	}
	if got := di.Mode().Perm(); got != 0o700 {
		t.Errorf("directory mode = %o, want 700", got)
	}
	var schema string
	s.db.View(func(tx *bolt.Tx) error {
		schema = string(tx.Bucket(bucketMeta).Get(keySchema))
		return nil
	})
	if schema != strconv.Itoa(schemaVersion) {
		t.Errorf("schema = %q, want \"1\"", schema)
	}
}

// TestOpenCreated: Created says whether this Open made the file; the
// next Open of it did not.
func TestOpenCreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "reef.db")
	for i, want := range []bool{true, false} {
		s, err := Open(path, Options{Node: "node-a"})
		if err != nil {
			t.Fatal(err)
		}
		if s.Created() != want {
			t.Errorf("Open %d: Created %v, want %v", i+1, s.Created(), want)
		}
		s.Close()
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		path string
		opts Options
	}{
		{"empty path", "", Options{Node: "n"}},
		{"empty node", filepath.Join(dir, "reef.db"), Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := Open(tc.path, tc.opts); err == nil {
				s.Close()
				t.Fatal("Open succeeded, want an error")
			}
		})
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reef.db")
	pool := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/24"), BlockSize: 28}
	s, err := Open(path, Options{Node: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	a, _, _, err := allocAuto(s, Endpoint{Handle: "net.a", PodName: "a"}, pool)
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := s.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(path, Options{Node: "node-a"})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	got, ok, err := s.Endpoint("net.a")
	if err != nil || !ok {
		t.Fatalf("Endpoint(net.a) = %v, %v after reopen", ok, err)
	}
	if diff := cmp.Diff(a, got, netipEqual); diff != "" {
		t.Errorf("endpoint after reopen (-before +after):\n%s", diff)
	}
	gotBlocks, err := s.Blocks()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(blocks, gotBlocks, netipEqual); diff != "" {
		t.Errorf("blocks after reopen (-before +after):\n%s", diff)
	}
	b, _, newBlock, err := allocAuto(s, Endpoint{Handle: "net.b"}, pool)
	if err != nil {
		t.Fatal(err)
	}
	if newBlock || b.Block != a.Block || b.IP != a.IP.Next() {
		t.Errorf("after reopen got %s in %s (new block %v), want %s in %s", b.IP, b.Block, newBlock, a.IP.Next(), a.Block)
	}
}

func TestSecondOpenFailsWhileLocked(t *testing.T) {
	s := openTest(t, "node-a")
	start := time.Now()
	s2, err := Open(s.Path(), Options{Node: "node-a", Timeout: 200 * time.Millisecond})
	if err == nil {
		s2.Close()
		t.Fatal("second Open succeeded while the first holds the lock")
	}
	if elapsed := time.Since(start); elapsed > 2*time.Second {
		t.Errorf("second Open took %v, want about the 200ms timeout", elapsed)
	}
	if !errors.Is(err, ErrLocked) {
		t.Errorf("error %q is not ErrLocked", err)
	}
	want := "store " + s.Path() + " is locked by another process (is another reef daemon running?)"
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	s := openTest(t, "node-a")
	path := s.Path()
	s.Close()
	withRaw(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(strconv.Itoa(schemaIPv6+1)))
	})

	s2, err := Open(path, Options{Node: "node-a"})
	if err == nil {
		s2.Close()
		t.Fatal("Open accepted a file with a newer schema version")
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("error %q is not ErrSchemaTooNew", err)
	}
	for _, want := range []string{path, fmt.Sprintf("schema version %d", schemaIPv6+1), fmt.Sprintf("up to %d", schemaIPv6)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// The refusal must leave the file as the newer reef wrote it.
	withRaw(t, path, func(tx *bolt.Tx) error {
		if got := string(tx.Bucket(bucketMeta).Get(keySchema)); got != strconv.Itoa(schemaIPv6+1) {
			t.Errorf("schema after refused Open = %q, want %d", got, schemaIPv6+1)
		}
		return nil
	})
}

// The first IPv6 key raises the file to schemaIPv6, which a reef that
// knows only schemaVersion refuses (its migrate with target 4 and no
// knowledge of 5); IPv4 keys leave it at schemaVersion, and a reopen keeps
// the raised version.
func TestIPv6KeysRaiseSchema(t *testing.T) {
	s := openTest(t, "node-a")
	path := s.Path()
	schema := func() string {
		t.Helper()
		var v string
		s.db.View(func(tx *bolt.Tx) error {
			v = string(tx.Bucket(bucketMeta).Get(keySchema))
			return nil
		})
		return v
	}
	pool4 := Pool{CIDR: netip.MustParsePrefix("10.244.0.0/16"), BlockSize: 26}
	if _, _, _, err := allocAuto(s, Endpoint{Handle: "net.a"}, pool4); err != nil {
		t.Fatal(err)
	}
	if got := schema(); got != strconv.Itoa(schemaVersion) {
		t.Fatalf("schema after an IPv4 allocation = %q, want %d", got, schemaVersion)
	}
	pool6 := Pool{CIDR: netip.MustParsePrefix("fd00:10:244::/56"), BlockSize: 122}
	ep, _, _, err := allocAuto(s, Endpoint{Handle: "net.b"}, pool6)
	if err != nil {
		t.Fatal(err)
	}
	if !ep.IP.Is6() {
		t.Fatalf("allocated %s from %s", ep.IP, pool6.CIDR)
	}
	if got := schema(); got != strconv.Itoa(schemaIPv6) {
		t.Fatalf("schema after an IPv6 allocation = %q, want %d", got, schemaIPv6)
	}
	s.Close()

	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return migrate(tx, 4, 4, migrations[:4]) })
	db.Close()
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Errorf("a reef that knows schema 4 only: migrate = %v, want ErrSchemaTooNew", err)
	}
	if s, err = Open(path, Options{Node: "node-a"}); err != nil {
		t.Fatalf("reopen: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if got := schema(); got != strconv.Itoa(schemaIPv6) {
		t.Errorf("schema after reopening = %q, want %d", got, schemaIPv6)
	}
	if _, ok, err := s.Endpoint("net.b"); err != nil || !ok {
		t.Errorf("IPv6 endpoint after reopening: found %v, %v", ok, err)
	}
}

func TestOpenRefusesGarbledSchema(t *testing.T) {
	s := openTest(t, "node-a")
	path := s.Path()
	s.Close()
	withRaw(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("one"))
	})
	s2, err := Open(path, Options{Node: "node-a"})
	if err == nil {
		s2.Close()
		t.Fatal("Open accepted schema version \"one\"")
	}
	if !strings.Contains(err.Error(), `"one"`) {
		t.Errorf("error %q does not quote the bad value", err)
	}
}

func TestMigrate(t *testing.T) {
	var ran []int
	step := func(v int) migration {
		return func(tx *bolt.Tx) error {
			ran = append(ran, v)
			_, err := tx.CreateBucket([]byte{byte('a' + v)})
			return err
		}
	}
	fail := func(tx *bolt.Tx) error { return errors.New("boom") }

	for _, tc := range []struct {
		name       string
		from       string // stored schema; "" for none
		target     int
		steps      []migration
		wantRan    []int
		wantSchema string // after the transaction, committed or not
		wantErr    string
	}{
		{"new file", "", 1, []migration{step(0)}, []int{0}, "1", ""},
		{"up to date", "3", 3, nil, nil, "3", ""},
		{"two steps", "1", 3, []migration{nil, step(1), step(2)}, []int{1, 2}, "3", ""},
		{"missing step", "1", 3, []migration{nil, step(1)}, []int{1}, "1", "no migration from schema version 2 to 3"},
		{"failing step", "1", 3, []migration{nil, step(1), fail}, []int{1}, "1", "migrate schema version 2 to 3: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = nil
			db, err := bolt.Open(filepath.Join(t.TempDir(), "m.db"), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if tc.from != "" {
				db.Update(func(tx *bolt.Tx) error {
					b, _ := tx.CreateBucket(bucketMeta)
					return b.Put(keySchema, []byte(tc.from))
				})
			}
			err = db.Update(func(tx *bolt.Tx) error { return migrate(tx, tc.target, tc.target, tc.steps) })
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Errorf("migrate error = %q, want %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantRan, ran); diff != "" {
				t.Errorf("steps run (-want +got):\n%s", diff)
			}
			var schema string
			var leftovers int
			db.View(func(tx *bolt.Tx) error {
				if b := tx.Bucket(bucketMeta); b != nil {
					schema = string(b.Get(keySchema))
				}
				// A failed migration must roll back every step.
				return tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
					if len(name) == 1 {
						leftovers++
					}
					return nil
				})
			})
			if schema != tc.wantSchema {
				t.Errorf("schema = %q, want %q", schema, tc.wantSchema)
			}
			if tc.wantErr != "" && leftovers != 0 {
				t.Errorf("failed migration left %d buckets behind", leftovers)
			}
		})
	}
}
