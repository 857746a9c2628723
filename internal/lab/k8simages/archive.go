package k8simages

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// imageConfig is the part of an image's config a container runs with.
type imageConfig struct {
	Entrypoint   []string
	Cmd          []string
	Env          []string
	User         string
	WorkingDir   string
	ExposedPorts []string // "80/tcp"
}

// builtImage is an image whose layers are written.
type builtImage struct {
	refs         []string
	config       []byte // the image config JSON
	configDigest string // hex sha256 of config
	layers       []builtLayer
}

// defaultPath is the PATH of the Debian and busybox images.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ociConfig is the image config (the OCI image spec's, which is docker's).
type ociConfig struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Created      string          `json:"created"`
	Config       ociRunConfig    `json:"config"`
	RootFS       ociRootFS       `json:"rootfs"`
	History      []ociHistoryRow `json:"history"`
}

type ociRunConfig struct {
	User         string              `json:"User,omitempty"`
	ExposedPorts map[string]struct{} `json:"ExposedPorts,omitempty"`
	Env          []string            `json:"Env,omitempty"`
	Entrypoint   []string            `json:"Entrypoint,omitempty"`
	Cmd          []string            `json:"Cmd,omitempty"`
	WorkingDir   string              `json:"WorkingDir,omitempty"`
}

type ociRootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type ociHistoryRow struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// newImage makes the config of an image of the given layers.
func newImage(refs []string, cfg imageConfig, layers []builtLayer, layerNames []string) (builtImage, error) {
	rc := ociRunConfig{User: cfg.User, Env: cfg.Env, Entrypoint: cfg.Entrypoint, Cmd: cfg.Cmd, WorkingDir: cfg.WorkingDir}
	if len(cfg.ExposedPorts) > 0 {
		rc.ExposedPorts = map[string]struct{}{}
		for _, p := range cfg.ExposedPorts {
			rc.ExposedPorts[p] = struct{}{}
		}
	}
	c := ociConfig{
		Architecture: "amd64",
		OS:           "linux",
		Created:      epoch.Format("2006-01-02T15:04:05Z"),
		Config:       rc,
		RootFS:       ociRootFS{Type: "layers"},
	}
	for i, l := range layers {
		c.RootFS.DiffIDs = append(c.RootFS.DiffIDs, "sha256:"+l.digest)
		c.History = append(c.History, ociHistoryRow{Created: c.Created, CreatedBy: "reef k8simages: " + layerNames[i]})
	}
	b, err := json.Marshal(c)
	if err != nil {
		return builtImage{}, err
	}
	sum := sha256.Sum256(b)
	return builtImage{refs: refs, config: b, configDigest: hex.EncodeToString(sum[:]), layers: layers}, nil
}

// archiveManifest is one image of a docker-archive's manifest.json.
type archiveManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeArchive writes images into one docker-archive tar at out (the
// format of `docker save`, which `ctr images import` and containerd's
// CRI import read): each layer once, each image's config, and
// manifest.json naming each image's tags. The file is written beside out
// and renamed, so a reader never sees half of it.
func writeArchive(out string, images []builtImage) error {
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := writeArchiveTo(tmp, images); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

func writeArchiveTo(w io.Writer, images []builtImage) error {
	tw := tar.NewWriter(w)
	seen := map[string]bool{}
	var manifest []archiveManifest
	for _, img := range images {
		m := archiveManifest{Config: img.configDigest + ".json", RepoTags: img.refs}
		for _, l := range img.layers {
			name := l.digest + "/layer.tar"
			m.Layers = append(m.Layers, name)
			if seen[name] {
				continue
			}
			seen[name] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: l.digest + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return err
			}
			if err := copyInto(tw, name, l); err != nil {
				return err
			}
		}
		if !seen[m.Config] {
			seen[m.Config] = true
			if err := writeBytes(tw, m.Config, img.config); err != nil {
				return err
			}
		}
		manifest = append(manifest, m)
	}
	b, err := json.Marshal(manifest)
	if err != nil {
		return err
	}
	if err := writeBytes(tw, "manifest.json", b); err != nil {
		return err
	}
	// repositories: the pre-1.10 index some readers still look for.
	repos := map[string]map[string]string{}
	for _, img := range images {
		top := img.layers[len(img.layers)-1].digest
		for _, ref := range img.refs {
			name, tag := splitRef(ref)
			if repos[name] == nil {
				repos[name] = map[string]string{}
			}
			repos[name][tag] = top
		}
	}
	b, err = json.Marshal(repos)
	if err != nil {
		return err
	}
	if err := writeBytes(tw, "repositories", b); err != nil {
		return err
	}
	return tw.Close()
}

func copyInto(tw *tar.Writer, name string, l builtLayer) error {
	f, err := os.Open(l.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: l.size, ModTime: epoch}); err != nil {
		return err
	}
	n, err := io.Copy(tw, f)
	if err != nil {
		return err
	}
	if n != l.size {
		return fmt.Errorf("layer %s: %d bytes, want %d (changed in the cache?)", l.path, n, l.size)
	}
	return nil
}

func writeBytes(tw *tar.Writer, name string, b []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(b)), ModTime: epoch}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}

// splitRef splits "registry/name:tag" at the tag's colon (not a port's).
func splitRef(ref string) (name, tag string) {
	slash := -1
	for i := len(ref) - 1; i >= 0; i-- {
		if ref[i] == '/' {
			slash = i
			break
		}
	}
	for i := len(ref) - 1; i > slash; i-- {
		if ref[i] == ':' {
			return ref[:i], ref[i+1:]
		}
	}
	return ref, "latest"
}
