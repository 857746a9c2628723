// Package exepages gives back the pages of the daemon's own executable
// that only its start-up touched.
//
// A Go binary's code and read-only data are mapped from its file. Package
// initialisers (client-go's schemes, GoBGP's, protobuf's descriptors) run
// once but sit in every part of the text, and the kernel maps the cached
// pages around each fault (fault-around: 64 KiB by default; one touch of
// the reef binary mapped 256 KiB on the lab's kernel), so a started daemon
// keeps most of a 35 MB binary mapped although its steady work touches far
// less. Release drops this process's mappings of those pages once, at the
// end of start-up. Nothing is freed by that: the pages stay in the page
// cache, clean and reclaimable like any other, charged to the cgroup that
// read them first; what leaves is the daemon's own RSS, and a page that is
// needed again is mapped again by the next fault, from the same file.
//
// Only a mapping that is read-only and holds no private page, in memory
// (Anonymous) or swapped out (Swap), is released: dropping it loses
// nothing, because every page of it is the file's. A writable mapping, or
// one whose pages were relocated when a PIE binary was loaded, or patched
// by a debugger or a uprobe before Release read smaps, is left alone. (A
// probe set in the instant between that read and the madvise would be
// lost: the probe stops, the daemon does not.)
package exepages

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one line of /proc/self/smaps with the fields Release reads.
type Mapping struct {
	Start, End uintptr
	Perms      string // "r-xp"
	Path       string
	Rss        int64 // kB
	Anonymous  int64 // kB: private pages that are no longer the file's
	Swap       int64 // kB: private pages swapped out
}

// Releasable reports whether dropping m's pages loses nothing: it maps
// path, is not writable, and holds no private page, in memory or in swap.
func (m Mapping) Releasable(path string) bool {
	return m.Path == path && len(m.Perms) == 4 && m.Perms[1] != 'w' && m.Anonymous == 0 && m.Swap == 0 && m.End > m.Start
}

// Release drops the resident pages of the executable's read-only
// mappings from this process and returns how many kB were resident in
// them.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("release the executable's start-up pages: %w", err)
	}
	return ReleaseFile(exe)
}

// ReleaseFile is Release for the read-only private mappings of any file
// (path as /proc/self/maps spells it).
func ReleaseFile(path string) (int64, error) {
	maps, err := readSmaps("self")
	if err != nil {
		return 0, fmt.Errorf("release the pages of %s: %w", path, err)
	}
	var kB int64
	for _, m := range maps {
		if !m.Releasable(path) {
			continue
		}
		// The raw call: the range is a mapping the Go heap does not own,
		// and no Go slice has to be made over it.
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, m.Start, m.End-m.Start, unix.MADV_DONTNEED); errno != 0 {
			return kB, fmt.Errorf("release the pages of %s at %#x-%#x: madvise: %w", path, m.Start, m.End, errno)
		}
		kB += m.Rss
	}
	return kB, nil
}

// Resident returns how many kB of the mappings that Release drops are
// resident now in process proc (a pid, or "self").
func Resident(proc string) (int64, error) {
	exe, err := os.Readlink("/proc/" + proc + "/exe")
	if err != nil {
		return 0, err
	}
	maps, err := readSmaps(proc)
	if err != nil {
		return 0, err
	}
	var kB int64
	for _, m := range maps {
		if m.Releasable(exe) {
			kB += m.Rss
		}
	}
	return kB, nil
}

// readSmaps reads the mappings of process proc (a pid, or "self").
func readSmaps(proc string) ([]Mapping, error) {
	name := "/proc/" + proc + "/smaps"
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	maps, err := ParseSmaps(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return maps, nil
}

// ParseSmaps reads the mappings of a /proc/PID/smaps.
func ParseSmaps(r io.Reader) ([]Mapping, error) {
	var maps []Mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(line, ":")
		if ok && !strings.Contains(key, " ") && !strings.Contains(key, "-") {
			if len(maps) == 0 {
				return nil, fmt.Errorf("field %q before the first mapping", key)
			}
			m := &maps[len(maps)-1]
			switch key {
			case "Rss":
				m.Rss, ok = kiloBytes(val)
			case "Anonymous":
				m.Anonymous, ok = kiloBytes(val)
			case "Swap":
				m.Swap, ok = kiloBytes(val)
			}
			if !ok {
				return nil, fmt.Errorf("mapping %#x: field %s: value %q is not a size in kB", m.Start, key, strings.TrimSpace(val))
			}
			continue
		}
		m, err := parseHeader(line)
		if err != nil {
			return nil, err
		}
		maps = append(maps, m)
	}
	return maps, sc.Err()
}

// parseHeader reads "start-end perms offset dev inode [path]". The path is
// the rest of the line as the kernel wrote it, after the padding: a path
// with runs of spaces in it stays as it is.
func parseHeader(line string) (Mapping, error) {
	var f [5]string
	rest := line
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		end := strings.IndexByte(rest, ' ')
		if end < 0 {
			end = len(rest)
		}
		f[i], rest = rest[:end], rest[end:]
		if f[i] == "" {
			return Mapping{}, fmt.Errorf("mapping line %q: want start-end perms offset dev inode [path]", line)
		}
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if !ok || err1 != nil || err2 != nil {
		return Mapping{}, fmt.Errorf("mapping line %q: range %q is not start-end in hex", line, f[0])
	}
	return Mapping{Start: uintptr(start), End: uintptr(end), Perms: f[1], Path: strings.TrimLeft(rest, " ")}, nil
}

func kiloBytes(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	num, ok := strings.CutSuffix(s, " kB")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(num, 10, 64)
	return n, err == nil
}
