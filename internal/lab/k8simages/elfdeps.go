package k8simages

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// libDirs are where Debian's dynamic loader looks for libraries when
// there is no ld.so.cache, the way it finds them in the images.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// sharedLibs returns the host paths of what the dynamic ELF binary bin
// needs to run: its loader (PT_INTERP) and every DT_NEEDED library,
// recursively, found the way the loader finds them (RUNPATH, then
// libDirs). A static binary needs nothing. Libraries opened with
// dlopen are not seen; glibc 2.34 on has files and dns of NSS in libc.
func sharedLibs(bin string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	queue := []string{bin}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		f, err := elf.Open(cur)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cur, err)
		}
		interp, needed, runpath, err := dynamicInfo(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cur, err)
		}
		if interp != "" && !seen[interp] {
			seen[interp] = true
			out = append(out, interp)
		}
		dirs := libDirs
		for _, rp := range runpath {
			for _, d := range strings.Split(rp, ":") {
				d = strings.ReplaceAll(d, "$ORIGIN", filepath.Dir(cur))
				dirs = append([]string{d}, dirs...)
			}
		}
		for _, soname := range needed {
			p, err := findLib(soname, dirs)
			if err != nil {
				return nil, fmt.Errorf("%s needs %s: %w", cur, soname, err)
			}
			if seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, p)
			queue = append(queue, p)
		}
	}
	return out, nil
}

func dynamicInfo(f *elf.File) (interp string, needed, runpath []string, err error) {
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return "", nil, nil, err
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	if f.Section(".dynamic") == nil {
		return interp, nil, nil, nil // static
	}
	if needed, err = f.ImportedLibraries(); err != nil {
		return "", nil, nil, err
	}
	rp, _ := f.DynString(elf.DT_RUNPATH)
	if len(rp) == 0 {
		rp, _ = f.DynString(elf.DT_RPATH)
	}
	return interp, needed, rp, nil
}

// findLib finds soname in dirs, skipping files of another class or
// machine (an i386 library of the same name).
func findLib(soname string, dirs []string) (string, error) {
	for _, d := range dirs {
		p := filepath.Join(d, soname)
		f, err := elf.Open(p)
		if err != nil {
			continue
		}
		ok := f.Class == elf.ELFCLASS64 && f.Machine == elf.EM_X86_64
		f.Close()
		if ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("not found in %s", strings.Join(dirs, ", "))
}

// isStatic reports whether bin is an ELF binary with no loader.
func isStatic(bin string) (bool, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return false, err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false, nil
		}
	}
	return true, nil
}

// imagePath is where a host file goes in a usr-merged image: /lib,
// /lib64, /bin and /sbin are symlinks into /usr there, as on Debian 12.
func imagePath(host string) string {
	for _, d := range []string{"/lib/", "/lib64/", "/bin/", "/sbin/"} {
		if strings.HasPrefix(host, d) {
			return "/usr" + host
		}
	}
	return host
}

// exists reports whether p is there (following symlinks).
func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
