// Package pendingdel is the on-disk queue of CNI DELs that arrived while the
// daemon was unreachable. The shim writes one file per attachment; the daemon
// drains the queue when it starts, before it serves ADD, so that a pod whose
// DEL came during an upgrade never leaks its address and the runtime never
// waits for a daemon to come back.
//
// It imports only the standard library: the shim links it and must stay small.
package pendingdel

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultDir is where the shim queues DELs unless the netconf names another
// directory ("pendingDeleteDir").
const DefaultDir = "/var/lib/reef/pending-del"

// Entry is one queued DEL: the CNI environment and the netconf as the runtime
// gave them.
type Entry struct {
	ContainerID string    `json:"containerID"`
	Netns       string    `json:"netns,omitempty"`
	IfName      string    `json:"ifName"`
	Args        string    `json:"args,omitempty"`
	Path        string    `json:"path,omitempty"`
	Netconf     []byte    `json:"netconf"`
	Queued      time.Time `json:"queued"`
}

// Queued is an entry read back from the queue with the file that holds it.
type Queued struct {
	Entry
	File string
}

// fileName is derived from the attachment, so a DEL repeated while the daemon
// is down replaces the earlier file instead of queueing twice.
func fileName(e Entry) string {
	sum := sha256.Sum256([]byte(e.ContainerID + "\x00" + e.IfName))
	return hex.EncodeToString(sum[:16]) + ".json"
}

// Put writes e atomically into dir: a reader sees either no file or the whole
// entry, even if the shim is killed half-way or the node loses power.
func Put(dir string, e Entry) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create pending-delete dir %s: %w", dir, err)
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode pending delete of %s: %w", e.ContainerID, err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("queue delete of %s in %s: %w", e.ContainerID, dir, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("queue delete of %s: write %s: %w", e.ContainerID, tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("queue delete of %s: sync %s: %w", e.ContainerID, tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("queue delete of %s: close %s: %w", e.ContainerID, tmp.Name(), err)
	}
	final := filepath.Join(dir, fileName(e))
	if err := os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("queue delete of %s: rename to %s: %w", e.ContainerID, final, err)
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}

// List returns the queued entries, oldest first. A missing dir is an empty
// queue. Files that cannot be decoded are returned in bad so the caller can
// log and remove them; they never block the rest of the queue.
func List(dir string) (entries []Queued, bad []string, err error) {
	names, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read pending-delete dir %s: %w", dir, err)
	}
	for _, n := range names {
		if n.IsDir() || !strings.HasSuffix(n.Name(), ".json") {
			continue
		}
		file := filepath.Join(dir, n.Name())
		data, err := os.ReadFile(file)
		if err != nil {
			bad = append(bad, file)
			continue
		}
		var q Queued
		if err := json.Unmarshal(data, &q.Entry); err != nil || q.ContainerID == "" {
			bad = append(bad, file)
			continue
		}
		q.File = file
		entries = append(entries, q)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Queued.Before(entries[j].Queued) })
	return entries, bad, nil
}

// Remove deletes a drained entry's file; a file already gone is fine.
func Remove(file string) error {
	if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove pending delete %s: %w", file, err)
	}
	return nil
}

// Drop removes the queued DEL of one attachment, if there is one: for a
// DEL that got done by other means first.
func Drop(dir, containerID, ifName string) error {
	return Remove(filepath.Join(dir, fileName(Entry{ContainerID: containerID, IfName: ifName})))
}
