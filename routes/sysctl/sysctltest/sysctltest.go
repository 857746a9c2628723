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

// Kernel holds forwarding of both families and the settings of the links
// that exist, with the kernel's defaults for a new link. Safe for
// concurrent use.
type Kernel struct {
	mu       sync.Mutex
	values   map[string]string
	defaults map[string]string // what each key held when it was made
	writes   int
}

// New returns a node with forwarding off and no links.
func New() *Kernel {
	k := &Kernel{values: map[string]string{}, defaults: map[string]string{}}
	k.make(sysctl.Forwarding, "0")
	k.make(sysctl.Forwarding6, "0")
	return k
}

// make creates key at its default value.
func (k *Kernel) make(key, value string) {
	k.values[key], k.defaults[key] = value, value
}

// linkKeys are a link's settings, each with the kernel's default for a new
// link (net.ipv6.conf.default's on an untouched node: DAD on, EUI-64).
func linkKeys(name string) [][2]string {
	return [][2]string{
		{sysctl.ProxyARP(name), "0"}, {sysctl.RouteLocalnet(name), "0"},
		{sysctl.AcceptDAD(name), "1"}, {sysctl.AddrGenMode(name), "0"}, {sysctl.DisableIPv6(name), "0"},
	}
}

// AddLink creates a link's settings with the kernel's defaults.
func (k *Kernel) AddLink(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, kv := range linkKeys(name) {
		k.make(kv[0], kv[1])
	}
}

// DelLink removes a link and its settings.
func (k *Kernel) DelLink(name string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, kv := range linkKeys(name) {
		delete(k.values, kv[0])
		delete(k.defaults, kv[0])
	}
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
func (k *Kernel) String() string { return k.text(true) }

// Changed is String without the values still at the default they were
// made with: what was written, by the owner or by Put.
func (k *Kernel) Changed() string { return k.text(false) }

func (k *Kernel) text(defaults bool) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var b strings.Builder
	for _, key := range slices.Sorted(maps.Keys(k.values)) {
		if defaults || k.values[key] != k.defaults[key] {
			fmt.Fprintf(&b, "%s = %s\n", key, k.values[key])
		}
	}
	return b.String()
}
