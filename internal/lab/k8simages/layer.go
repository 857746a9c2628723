package k8simages

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// epoch is the time of every file, directory and image: the same inputs
// give the same layer and image digests on every run and machine.
var epoch = time.Unix(0, 0).UTC()

// A layer is a file system change set, written as an uncompressed tar
// whose bytes depend on nothing but its entries.
type layer struct {
	name    string // for messages and the cache file
	entries map[string]entry
}

type entry struct {
	typ    byte  // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	mode   int64 // permission bits, with the sticky bit for /tmp
	src    string
	data   []byte // the content when src is empty
	link   string
	xattrs map[string]string
}

func newLayer(name string) *layer {
	return &layer{name: name, entries: map[string]entry{}}
}

// clean turns an image path into a tar name: relative, no trailing slash.
func clean(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

// dir adds a directory and its parents.
func (l *layer) dir(p string, mode int64) {
	p = clean(p)
	if p == "" {
		return
	}
	l.parents(p)
	l.entries[p] = entry{typ: tar.TypeDir, mode: mode}
}

// parents adds the missing parent directories of p, 0755.
func (l *layer) parents(p string) {
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := l.entries[d]; ok {
			return
		}
		l.entries[d] = entry{typ: tar.TypeDir, mode: 0o755}
	}
}

// file adds the host file src at p (its content, not a link to it).
func (l *layer) file(p, src string, mode int64) {
	p = clean(p)
	l.parents(p)
	l.entries[p] = entry{typ: tar.TypeReg, mode: mode, src: src}
}

// data adds a file with the given content.
func (l *layer) data(p string, b []byte, mode int64) {
	p = clean(p)
	l.parents(p)
	l.entries[p] = entry{typ: tar.TypeReg, mode: mode, data: b}
}

// symlink adds p pointing at target.
func (l *layer) symlink(p, target string) {
	p = clean(p)
	l.parents(p)
	l.entries[p] = entry{typ: tar.TypeSymlink, mode: 0o777, link: target}
}

// setXattr sets an extended attribute on an entry added before.
func (l *layer) setXattr(p, key, value string) {
	p = clean(p)
	e := l.entries[p]
	if e.xattrs == nil {
		e.xattrs = map[string]string{}
	}
	e.xattrs[key] = value
	l.entries[p] = e
}

// fileCapNetBindService is the security.capability xattr value of
// `setcap cap_net_bind_service=+ep`: struct vfs_cap_data, revision 2,
// the effective flag, CAP_NET_BIND_SERVICE (10) permitted.
func fileCapNetBindService() string {
	const (
		vfsCapRevision2   = 0x02000000
		vfsCapFlagsEffect = 0x000001
		capNetBindService = 10
	)
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], vfsCapRevision2|vfsCapFlagsEffect)
	binary.LittleEndian.PutUint32(b[4:], 1<<capNetBindService) // permitted, low word
	// inheritable low word, permitted and inheritable high words: 0
	return string(b)
}

// writeTo writes the layer as a tar, entries sorted by name so that a
// parent comes before its children and the bytes never vary.
func (l *layer) writeTo(w io.Writer) error {
	names := make([]string, 0, len(l.entries))
	for n := range l.entries {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := l.entries[n]
		h := &tar.Header{Typeflag: e.typ, Name: n, Mode: e.mode, ModTime: epoch, Format: tar.FormatPAX}
		var content []byte
		switch e.typ {
		case tar.TypeDir:
			h.Name += "/"
		case tar.TypeSymlink:
			h.Linkname = e.link
		case tar.TypeReg:
			content = e.data
			if e.src != "" {
				b, err := os.ReadFile(e.src)
				if err != nil {
					return fmt.Errorf("layer %s: %w", l.name, err)
				}
				content = b
			}
			h.Size = int64(len(content))
		}
		if len(e.xattrs) > 0 {
			h.PAXRecords = map[string]string{}
			for k, v := range e.xattrs {
				h.PAXRecords["SCHILY.xattr."+k] = v
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer %s: %s: %w", l.name, n, err)
		}
		if _, err := tw.Write(content); err != nil {
			return fmt.Errorf("layer %s: %s: %w", l.name, n, err)
		}
	}
	return tw.Close()
}

// A builtLayer is a layer written into the cache: its tar file, named
// by its digest, which is also its diff ID (the tar is not compressed).
type builtLayer struct {
	path   string
	digest string // hex sha256 of the tar
	size   int64
}

// write writes the layer into dir as <digest>.tar, unless a file of that
// digest is there already.
func (l *layer) write(dir string) (builtLayer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return builtLayer{}, err
	}
	tmp, err := os.CreateTemp(dir, "."+l.name+"-*.tar")
	if err != nil {
		return builtLayer{}, err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(tmp, h)}
	if err := l.writeTo(cw); err != nil {
		tmp.Close()
		return builtLayer{}, err
	}
	if err := tmp.Close(); err != nil {
		return builtLayer{}, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return builtLayer{}, err
	}
	digest := hex.EncodeToString(h.Sum(nil))
	final := filepath.Join(dir, digest+".tar")
	if _, err := os.Stat(final); err != nil {
		if err := os.Rename(tmp.Name(), final); err != nil {
			return builtLayer{}, err
		}
	}
	return builtLayer{path: final, digest: digest, size: cw.n}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
