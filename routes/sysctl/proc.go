package sysctl

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// Proc is the kernel's /proc/sys. It resolves to the network namespace of
// the thread that opens it: the daemon's, the node's.
type Proc struct{}

func (Proc) Get(key string) (string, error) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", key))
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", key, err)
	}
	return string(bytes.TrimSpace(b)), nil
}

func (Proc) Set(key, value string) error {
	if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("set sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
