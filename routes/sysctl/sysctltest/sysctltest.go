// Package sysctltest is a fake of the kernel's sysctls for tests of the
// sysctl owner and of what drives it: a map that prints itself as text.
package sysctltest

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/reefcni/reef/routes/sysctl"
)

// Kernel holds forwarding and the settings of the links that exist, with
// the kernel's defaults for a new link (0). Safe for concurrent use.
type Kernel struct {
	mu     sync.Mutex
	values map[string]string
	writes int
}

// New returns a node with forwarding off and no links.
func New() *Kernel {
	return &Kernel{values: map[string]string{sysctl.Forwarding: "0"}}
}

// AddLink creates a link's settings with the kernel's defaults.
func (k *Kernel) AddLink(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.values[sysctl.ProxyARP(name)] = "0"
	k.values[sysctl.RouteLocalnet(name)] = "0"
}

// DelLink removes a link and its settings.
func (k *Kernel) DelLink(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.values, sysctl.ProxyARP(name))
	delete(k.values, sysctl.RouteLocalnet(name))
}

// Put sets a value behind the owner's back (drift), as an operator would.
func (k *Kernel) Put(key, value string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.values[key] = value
}

func (k *Kernel) Get(key string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.values[key]
	if !ok {
		return "", fmt.Errorf("read sysctl %s: %w", key, fs.ErrNotExist)
	}
	return v, nil
}

func (k *Kernel) Set(key, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.values[key]; !ok {
		return fmt.Errorf("set sysctl %s: %w", key, fs.ErrNotExist)
	}
	k.values[key] = value
	k.writes++
	return nil
}

// Writes is how many values the owner wrote.
func (k *Kernel) Writes() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.writes
}

// String is every value, one "key = value" line each, sorted by key.
func (k *Kernel) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	for _, key := range slices.Sorted(maps.Keys(k.values)) {
		fmt.Fprintf(&b, "%s = %s\n", key, k.values[key])
	}
	return b.String()
}
