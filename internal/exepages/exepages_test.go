package exepages

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// A block as this kernel writes it (6.18), then shorter ones.
const smapsSample = `00400000-013a1000 r-xp 00000000 fe:00 9977907                            /usr/bin/reef
Size:              16004 kB
KernelPageSize:        4 kB
MMUPageSize:           4 kB
Rss:               12524 kB
Pss:               12524 kB
Pss_Dirty:             0 kB
Shared_Clean:          0 kB
Shared_Dirty:          0 kB
Private_Clean:     12524 kB
Private_Dirty:         0 kB
Referenced:        12524 kB
Anonymous:             0 kB
KSM:                   0 kB
LazyFree:              0 kB
AnonHugePages:         0 kB
ShmemPmdMapped:        0 kB
FilePmdMapped:         0 kB
Shared_Hugetlb:        0 kB
Private_Hugetlb:       0 kB
Swap:                  0 kB
SwapPss:               0 kB
Locked:                0 kB
THPeligible:           0
ProtectionKey:         0
VmFlags: rd ex mr mw me 
0251e000-025bc000 rw-p 0211e000 fe:00 9977907                            /usr/bin/reef
Rss:                 504 kB
Anonymous:           120 kB
7ffd1000-7ffd3000 r-xp 00000000 00:00 0                                  [vdso]
Rss:                   8 kB
Anonymous:             0 kB
7f000000-7f001000 r--p 00000000 fe:00 12                                 /tmp/a  file: two
Rss:                   4 kB
Anonymous:             0 kB
Swap:                  8 kB
7f002000-7f003000 rw-p 00000000 00:00 0 
Rss:                   4 kB
`

func TestParseSmaps(t *testing.T) {
	maps, err := ParseSmaps(strings.NewReader(smapsSample))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{Start: 0x400000, End: 0x13a1000, Perms: "r-xp", Path: "/usr/bin/reef", Rss: 12524},
		{Start: 0x251e000, End: 0x25bc000, Perms: "rw-p", Path: "/usr/bin/reef", Rss: 504, Anonymous: 120},
		{Start: 0x7ffd1000, End: 0x7ffd3000, Perms: "r-xp", Path: "[vdso]", Rss: 8},
		{Start: 0x7f000000, End: 0x7f001000, Perms: "r--p", Path: "/tmp/a  file: two", Rss: 4, Swap: 8},
		{Start: 0x7f002000, End: 0x7f003000, Perms: "rw-p", Rss: 4},
	}
	if len(maps) != len(want) {
		t.Fatalf("got %d mappings, want %d: %+v", len(maps), len(want), maps)
	}
	for i := range want {
		if maps[i] != want[i] {
			t.Errorf("mapping %d: got %+v, want %+v", i, maps[i], want[i])
		}
	}

	for _, c := range []struct {
		m    Mapping
		path string
		want bool
	}{
		{maps[0], "/usr/bin/reef", true},
		{maps[0], "/usr/bin/reef (deleted)", false},
		{maps[1], "/usr/bin/reef", false},     // writable
		{maps[2], "/usr/bin/reef", false},     // another file
		{maps[3], "/tmp/a  file: two", false}, // a page in swap is private: a relocated PIE page, say
		{Mapping{Start: 1, End: 2, Perms: "r--p", Path: "/x", Anonymous: 4}, "/x", false},
		{Mapping{Start: 1, End: 2, Perms: "r--p", Path: "/x"}, "/x", true},
	} {
		if got := c.m.Releasable(c.path); got != c.want {
			t.Errorf("%+v releasable for %q = %v, want %v", c.m, c.path, got, c.want)
		}
	}

	for _, bad := range []struct{ in, want string }{
		{"Rss: 4 kB\n", `field "Rss" before the first mapping`},
		{"00400000-013a1000 r-xp 00000000 fe:00 1 /x\nRss: four kB\n", `field Rss: value "four kB" is not a size in kB`},
		{"00400000-013a1000 r-xp 00000000 fe:00 1 /x\nSwap: 4\n", `field Swap: value "4" is not a size in kB`},
		{"zz-013a1000 r-xp 00000000 fe:00 1 /x\n", `range "zz-013a1000" is not start-end in hex`},
		{"00400000-013a1000 r-xp\n", "want start-end perms offset dev inode"},
	} {
		if _, err := ParseSmaps(strings.NewReader(bad.in)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseSmaps(%q) = %v, want an error with %q", bad.in, err, bad.want)
		}
	}
}

// ParseSmaps never panics, and what it parses names real ranges.
func FuzzParseSmaps(f *testing.F) {
	f.Add(smapsSample)
	f.Add("00400000-013a1000 r-xp 00000000 fe:00 1\n")
	f.Add("1-2 r 0 0 0 /p\nRss:\n")
	f.Fuzz(func(t *testing.T, in string) {
		maps, err := ParseSmaps(strings.NewReader(in))
		if err != nil {
			return
		}
		for _, m := range maps {
			if m.Perms == "" || strings.HasPrefix(m.Path, " ") {
				t.Errorf("parsed %+v from %q", m, in)
			}
		}
	})
}

var sink byte // keeps the reads of mapFile

// mapFile maps path private and read-only, as the loader maps a binary's
// code, and reads every page of it.
func mapFile(t *testing.T, path string, write bool) []byte {
	t.Helper()
	flag, prot := os.O_RDONLY, unix.PROT_READ
	if write {
		flag, prot = os.O_RDWR, unix.PROT_READ|unix.PROT_WRITE
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), prot, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	for i := 0; i < len(b); i += 4096 {
		sink += b[i]
	}
	return b
}

// smaps is this process's mappings now.
func smaps(t *testing.T) []Mapping {
	t.Helper()
	maps, err := readSmaps("self")
	if err != nil {
		t.Fatal(err)
	}
	return maps
}

func mappingOf(t *testing.T, path string) Mapping {
	t.Helper()
	for _, m := range smaps(t) {
		if m.Path == path {
			return m
		}
	}
	t.Fatalf("no mapping of %s in /proc/self/smaps", path)
	return Mapping{}
}

// A read-only private mapping gives its pages back and reads the same
// afterwards; one with a private (written) page keeps it.
func TestReleaseFile(t *testing.T) {
	dir := t.TempDir()
	content := bytes.Repeat([]byte("reef"), 256<<10) // 1 MiB
	clean, dirty := filepath.Join(dir, "clean"), filepath.Join(dir, "dirty")
	for _, p := range []string{clean, dirty} {
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	c := mapFile(t, clean, false)
	if m := mappingOf(t, clean); m.Rss == 0 {
		t.Fatalf("the mapping of %s holds no page after reading it: %+v", clean, m)
	}
	kB, err := ReleaseFile(clean)
	if err != nil {
		t.Fatal(err)
	}
	if kB == 0 {
		t.Errorf("ReleaseFile(%s) reports 0 kB released", clean)
	}
	if m := mappingOf(t, clean); m.Rss != 0 {
		t.Errorf("the mapping of %s holds %d kB after Release, want 0", clean, m.Rss)
	}
	if !bytes.Equal(c, content) {
		t.Errorf("the mapping of %s reads differently after Release", clean)
	}

	// Written, then made read-only: the written page is the mapping's own
	// (Anonymous), not the file's; dropping it would lose the write.
	d := mapFile(t, dirty, true)
	d[0] = 'X'
	if err := unix.Mprotect(d, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	before := mappingOf(t, dirty)
	if before.Anonymous == 0 {
		t.Fatalf("the written mapping of %s has no private page: %+v", dirty, before)
	}
	if before.Releasable(dirty) {
		t.Errorf("a mapping with %d kB of private pages is releasable", before.Anonymous)
	}
	if _, err := ReleaseFile(dirty); err != nil {
		t.Fatal(err)
	}
	if d[0] != 'X' {
		t.Errorf("the write to the mapping of %s was lost: reads %q", dirty, d[0])
	}
	if after := mappingOf(t, dirty); after.Rss < before.Rss {
		t.Errorf("the mapping of %s went from %d to %d kB resident: a mapping with private pages was released", dirty, before.Rss, after.Rss)
	}
}

// The test binary's own code and read-only data: fewer pages are resident
// after Release, and the code still runs (this test goes on).
func TestReleaseExecutable(t *testing.T) {
	resident := func() int64 {
		kB, err := Resident("self")
		if err != nil {
			t.Fatal(err)
		}
		return kB
	}
	before := resident()
	if before == 0 {
		t.Fatal("no read-only page of the test binary is resident")
	}
	released, err := Release()
	if err != nil {
		t.Fatal(err)
	}
	after := resident()
	t.Logf("%d kB resident read-only, Release reports %d kB, %d kB resident after", before, released, after)
	if released < before/2 {
		t.Errorf("Release reports %d kB of %d kB resident", released, before)
	}
	if after >= before {
		t.Errorf("%d kB resident after Release, %d kB before", after, before)
	}
}
