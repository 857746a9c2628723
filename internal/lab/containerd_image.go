package lab

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// PauseImage is the tag of the lab's sandbox image in every lab containerd
// (its sandbox_image). No registry is reachable, so the image is built
// here from a static binary and imported as a tar.
const PauseImage = "reef.lab/pause:1"

//go:embed image/pause.c
var pauseSource []byte

// buildPause compiles the static pause binary once per lab.
func (l *Lab) buildPause() (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bin := filepath.Join(l.Dir, "pause")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	src := filepath.Join(l.Dir, "pause.c")
	if err := os.WriteFile(src, pauseSource, 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command("gcc", "-static", "-Os", "-s", "-o", bin, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the pause binary (gcc -static): %v: %s", err, out)
	}
	return bin, nil
}

// writePauseImage writes a docker-archive tar (the format of `docker
// save`, which `ctr images import` reads) of a one-layer image holding
// /pause, tagged PauseImage. The entrypoint passes mark as an argument
// pause ignores: it puts the lab's work dir on the command line of every
// sandbox and container process, so that CleanStale finds and kills them
// after a killed run, as it does the daemons.
func writePauseImage(pauseBin, mark, out string) error {
	bin, err := os.ReadFile(pauseBin)
	if err != nil {
		return err
	}
	// The layer: /pause, with a fixed time so the same binary gives the
	// same digest.
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	epoch := time.Unix(0, 0)
	if err := lw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(bin)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(bin); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	layerSum := sha256.Sum256(layer.Bytes())
	layerHex := hex.EncodeToString(layerSum[:])

	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"created":      epoch.UTC().Format(time.RFC3339),
		"config": map[string]any{
			"Entrypoint": []string{"/pause", mark},
			"WorkingDir": "/",
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + layerHex}},
	})
	if err != nil {
		return err
	}
	configSum := sha256.Sum256(config)
	configName := hex.EncodeToString(configSum[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{
		"Config":   configName,
		"RepoTags": []string{PauseImage},
		"Layers":   []string{layerHex + "/layer.tar"},
	}})
	if err != nil {
		return err
	}

	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	files := []struct {
		name string
		data []byte
	}{
		{layerHex + "/layer.tar", layer.Bytes()},
		{configName, config},
		{"manifest.json", manifest},
	}
	for _, file := range files {
		if err := tw.WriteHeader(&tar.Header{Name: file.name, Mode: 0o644, Size: int64(len(file.data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(file.data); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
