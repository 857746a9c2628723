package routes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// /proc/sys/net resolves to the network namespace of the thread that opens
// it, so these read and write the caller's namespace (use ns.Do for a pod's).

func sysctlPath(name string) string { return filepath.Join("/proc/sys", name) }

// readSysctl returns the value of a sysctl such as "net/ipv4/ip_forward".
func readSysctl(name string) (string, error) {
	b, err := os.ReadFile(sysctlPath(name))
	if err != nil {
		return "", fmt.Errorf("read sysctl %s: %w", name, err)
	}
	return string(bytes.TrimSpace(b)), nil
}

// ensureSysctl writes value only if the kernel holds another one, and says
// whether it changed anything.
func ensureSysctl(name, value string) (changed bool, err error) {
	cur, err := readSysctl(name)
	if err != nil {
		return false, err
	}
	if cur == value {
		return false, nil
	}
	if err := os.WriteFile(sysctlPath(name), []byte(value), 0o644); err != nil {
		return false, fmt.Errorf("set sysctl %s=%s: %w", name, value, err)
	}
	return true, nil
}

// EnsureForwarding turns on IPv4 forwarding in the caller's namespace: the
// node routes between its pods and the rest of the network.
func EnsureForwarding() (changed bool, err error) {
	return ensureSysctl("net/ipv4/ip_forward", "1")
}

func proxyARPSysctl(dev string) string { return "net/ipv4/conf/" + dev + "/proxy_arp" }

func routeLocalnetSysctl(dev string) string { return "net/ipv4/conf/" + dev + "/route_localnet" }
