package store

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged is what a damaged state file is refused with (errors.Is).
var ErrDamaged = errors.New("store damaged")

// DamagedError says a state file cannot be trusted: bbolt's consistency
// check failed, bbolt panicked reading it, or it is empty or truncated. It
// names the file, what is wrong and what to run, because under systemd it
// is the last line an operator sees before reef stops.
type DamagedError struct {
	Path    string
	Problem string
	// panicked: bbolt panicked or faulted (guard), rather than a check
	// that named the damage; a reef bug in a store call would look the
	// same, so the caller checks the file again before it says damaged.
	panicked bool
}

func (e *DamagedError) Error() string {
	return fmt.Sprintf("store %s is damaged: %s. Pods keep their traffic (the dataplane is not touched). "+
		"Stop reef and run `reef store recover`: it moves the file aside and rebuilds the store from the kernel "+
		"(docs/ipam.md, \"A damaged store\")", e.Path, e.Problem)
}

// Is makes errors.Is(err, ErrDamaged) true.
func (e *DamagedError) Is(target error) bool { return target == ErrDamaged }

// maxCheckErrors is how many of bbolt's consistency errors a DamagedError
// names; the rest are counted.
const maxCheckErrors = 3

// guard runs fn and turns a bbolt panic, or a fault reading the mapped
// file, into a DamagedError of path: bbolt asserts its invariants with
// panics, and a page that points past the end of a truncated file faults.
func guard(path string, fn func() error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if r := recover(); r != nil {
			err = &DamagedError{Path: path, Problem: fmt.Sprintf("bbolt failed reading it (%v)", r), panicked: true}
		}
	}()
	return fn()
}

// precheck refuses a file that exists but cannot be a bbolt file before
// bbolt sees it: bbolt would quietly turn an empty file into a new store,
// and every address in use on the node would be handed out again.
func precheck(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open store %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("open store %s: not a regular file (%s)", path, fi.Mode().Type())
	}
	page := int64(os.Getpagesize())
	switch {
	case fi.Size() == 0:
		return &DamagedError{Path: path, Problem: "the file is empty (0 bytes)"}
	case fi.Size() < 4*page:
		// A bbolt file starts with two meta pages, a freelist and a root
		// page: anything shorter was cut off.
		return &DamagedError{Path: path, Problem: fmt.Sprintf("the file is truncated (%d bytes, a bbolt file has at least %d)", fi.Size(), 4*page)}
	case fi.Size()%page != 0:
		return &DamagedError{Path: path, Problem: fmt.Sprintf("the file is truncated (%d bytes, not a whole number of %d-byte pages)", fi.Size(), page)}
	}
	return nil
}

// check runs bbolt's consistency check of the whole file (every page
// reachable once, freelist consistent, keys in order) and returns a
// DamagedError naming the first problems it found.
func check(db *bolt.DB, path string) error {
	var problems []string
	n := 0
	err := guard(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			// The file must hold every page the meta page names: a page
			// past its end faults when it is read.
			fi, err := os.Stat(path)
			if err != nil {
				return fmt.Errorf("check store %s: %w", path, err)
			}
			if fi.Size() < tx.Size() {
				problems = append(problems, fmt.Sprintf("the file is truncated (%d bytes, its pages reach %d)", fi.Size(), tx.Size()))
				n++
				return nil
			}
			// Every bucket, key and value read here first, on this
			// goroutine, where guard turns a fault into an error: bbolt's
			// Check walks the pages in a goroutine of its own, where a
			// page id that points outside the file would crash the
			// process.
			if err := tx.ForEach(func(_ []byte, b *bolt.Bucket) error { return walk(b) }); err != nil {
				return err
			}
			for e := range tx.Check() {
				if n < maxCheckErrors {
					// bbolt reports its assertions as "panic: ...".
					problems = append(problems, strings.TrimPrefix(e.Error(), "panic: "))
				}
				n++
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	msg := "bbolt's consistency check failed: " + strings.Join(problems, "; ")
	if n > len(problems) {
		msg += fmt.Sprintf(" (and %d more)", n-len(problems))
	}
	return &DamagedError{Path: path, Problem: msg}
}

// walk reads every key and value of b and its nested buckets.
func walk(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nb := b.Bucket(k); nb != nil {
				return walk(nb)
			}
			return nil
		}
		if len(v) > 0 {
			_ = v[len(v)-1] // the end of a value on overflow pages
		}
		return nil
	})
}

// guarded runs a store call under guard. A panic is taken for damage only
// if the file then fails its check; the store is then latched damaged and
// takes no more writes (Allocate would trust a file it knows is wrong).
// Otherwise it was a reef bug, reported as one.
func (s *Store) guarded(fn func() error) error {
	err := guard(s.path, fn)
	var de *DamagedError
	if !errors.As(err, &de) || !de.panicked {
		return err
	}
	if cerr := check(s.db, s.path); cerr != nil {
		var checked *DamagedError
		if errors.As(cerr, &checked) {
			s.damaged.CompareAndSwap(nil, checked)
		}
		return cerr
	}
	return fmt.Errorf("store %s: a store call failed although the file checks sound (a reef bug; please report it): %s", s.path, de.Problem)
}

// ErrNotWritable is what a write refused by the file system is (errors.Is):
// the state dir is full, over quota or read-only.
var ErrNotWritable = errors.New("state file not writable")

// StorageError is a write of the state file that the file system refused
// (ENOSPC, EDQUOT, EROFS). Nothing was written: bbolt's transaction is all
// or nothing, and the store works again as soon as the file system takes
// writes, without a restart.
type StorageError struct {
	Path string
	Err  error
}

func (e *StorageError) Error() string {
	return fmt.Sprintf("cannot write the state file %s (%v): free space on its file system, or remount it read-write; "+
		"nothing was half-written, and reef works again as soon as it can write", e.Path, e.Err)
}

func (e *StorageError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNotWritable) true.
func (e *StorageError) Is(target error) bool { return target == ErrNotWritable }

// storageError wraps err in a StorageError when the file system refused
// the write; other errors pass through.
func storageError(path string, err error) error {
	if err == nil || errors.Is(err, ErrNotWritable) {
		return err
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS} {
		// bbolt formats the error of growing the file with %s ("file
		// resize error: ..."): the errno is then only in the text.
		if errors.Is(err, errno) {
			return &StorageError{Path: path, Err: unwrapPath(err)}
		}
		if strings.Contains(err.Error(), errno.Error()) {
			return &StorageError{Path: path, Err: err}
		}
	}
	return err
}

// unwrapPath drops the *PathError's own path and op: StorageError names
// the file.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// CheckFile checks the state file at path as Open does, without changing
// it or waiting for its lock: nil when Open would find no damage (a file
// of an older schema, which Open migrates, included), a DamagedError when
// it would refuse the file as damaged, and another error when it cannot
// tell (a missing file, a lock held).
func CheckFile(path string) error {
	if err := precheck(path); err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("check store %s: %w", path, err)
	}
	var db *bolt.DB
	err := guard(path, func() (err error) {
		db, err = bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
		return err
	})
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return fmt.Errorf("store %s is %w", path, ErrLocked)
	case errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) || errors.Is(err, berrors.ErrVersionMismatch):
		return &DamagedError{Path: path, Problem: fmt.Sprintf("bbolt cannot read its meta pages (%v)", err)}
	case err != nil:
		return err
	}
	defer db.Close()
	if err := check(db, path); err != nil {
		return err
	}
	return guard(path, func() error {
		return db.View(func(tx *bolt.Tx) error {
			meta := tx.Bucket(bucketMeta)
			if meta == nil || string(meta.Get(keySchema)) != strconv.Itoa(schemaVersion) && string(meta.Get(keySchema)) != strconv.Itoa(schemaIPv6) {
				return nil // new, or of an older schema: Open migrates it
			}
			if err := checkBuckets(tx); err != nil {
				return &DamagedError{Path: path, Problem: err.Error()}
			}
			if _, _, ok := readIncarnation(tx); !ok {
				return &DamagedError{Path: path, Problem: fmt.Sprintf("no incarnation in bucket %s although schema version is %d", bucketMeta, schemaVersion)}
			}
			// As Open's identity check (keepIdentity) finds it.
			if v := meta.Get(keyNodeIdentity); v != nil {
				if id, ok := netip.AddrFromSlice(v); !ok || !id.Is4() {
					return &DamagedError{Path: path, Problem: fmt.Sprintf("node identity %x in bucket %s is not 4 bytes", v, bucketMeta)}
				}
			}
			return nil
		})
	})
}
