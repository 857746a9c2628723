package cniserver

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/store"
)

// SupportedVersions are the CNI spec versions reef answers in.
var SupportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// NetConf is the network configuration reef reads. Keys reef does not know
// are ignored, as the spec asks; the runtime adds its own.
type NetConf struct {
	types.NetConf
	// Socket and PendingDeleteDir are read by the shim; listed here so that
	// they are known keys.
	Socket           string `json:"socket,omitempty"`
	PendingDeleteDir string `json:"pendingDeleteDir,omitempty"`
	// Pool picks one of the daemon's pools by CIDR; empty means the first.
	Pool string `json:"pool,omitempty"`
	// RuntimeConfig is the runtime's, for the capabilities the conflist
	// declares; decoded for ADD only (RuntimeConfig), so that DEL never
	// fails on it.
	RuntimeConfig json.RawMessage `json:"runtimeConfig,omitempty"`
}

// request is a validated CNI invocation.
type request struct {
	command      string
	containerID  string
	netns        string
	ifName       string
	podNamespace string
	podName      string
	conf         NetConf
	pool         netip.Prefix // zero: the daemon's default
	ports        []store.PortMapping
	bandwidth    *store.Bandwidth
}

func (r *request) handle() string { return r.conf.Name + "." + r.containerID }

// parseRequest validates what the shim forwarded. Every refusal is a CNI
// error whose code the spec assigns and whose message says what to fix.
func parseRequest(command string, in *reefv1.CNIRequest) (*request, *types.Error) {
	r := &request{command: command, containerID: in.GetContainerId(), netns: in.GetNetns(), ifName: in.GetIfname()}
	if err := json.Unmarshal(in.GetNetconf(), &r.conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "cannot decode the network configuration (stdin) as JSON", err.Error())
	}
	if !slices.Contains(SupportedVersions, r.conf.CNIVersion) {
		return nil, types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("unsupported cniVersion %q; reef supports %s", r.conf.CNIVersion, strings.Join(SupportedVersions, ", ")), "")
	}
	if r.conf.Name == "" {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, `network configuration has no "name"`, "")
	}
	if r.conf.Pool != "" {
		p, err := netip.ParsePrefix(r.conf.Pool)
		if err != nil {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("netconf key \"pool\": value %q is not a CIDR", r.conf.Pool), err.Error())
		}
		r.pool = p
	}
	switch command {
	case "GC", "STATUS":
		return r, nil
	}
	if err := validateContainerID(r.containerID); err != nil {
		return nil, err
	}
	if err := validateIfName(r.ifName); err != nil {
		return nil, err
	}
	if command != "DEL" && r.netns == "" {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_NETNS is empty; "+command+" needs the pod's network namespace", "")
	}
	if r.netns != "" && !strings.HasPrefix(r.netns, "/") {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_NETNS %q is not an absolute path", r.netns), "")
	}
	args, err := parseArgs(in.GetArgs())
	if err != nil {
		return nil, err
	}
	r.podNamespace, r.podName = args["K8S_POD_NAMESPACE"], args["K8S_POD_NAME"]
	if command == "ADD" {
		// DEL works from the store's record: a runtimeConfig it cannot
		// read must not keep a pod from going.
		var rc RuntimeConfig
		if len(r.conf.RuntimeConfig) > 0 {
			if err := json.Unmarshal(r.conf.RuntimeConfig, &rc); err != nil {
				return nil, types.NewError(types.ErrDecodingFailure, "cannot decode runtimeConfig (portMappings, bandwidth) in the network configuration", err.Error())
			}
		}
		if r.ports, err = portMappings(rc.PortMappings); err != nil {
			return nil, err
		}
		if r.bandwidth, err = bandwidth(rc.Bandwidth); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// validateContainerID follows the spec: not empty, alphanumerics plus
// '_', '.', '-', starting with an alphanumeric.
func validateContainerID(id string) *types.Error {
	if id == "" {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID is empty", "")
	}
	for i, c := range id {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '_' && c != '.' && c != '-') {
			return types.NewError(types.ErrInvalidEnvironmentVariables,
				fmt.Sprintf("CNI_CONTAINERID %q is invalid: use letters, digits, '_', '.', '-', starting with a letter or digit", id), "")
		}
	}
	return nil
}

// validateIfName checks CNI_IFNAME against the kernel's rules for names.
func validateIfName(name string) *types.Error {
	bad := func(why string) *types.Error {
		return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_IFNAME %q is invalid: %s", name, why), "")
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > 15:
		return bad(fmt.Sprintf("%d bytes long, the kernel allows 15", len(name)))
	case name == "." || name == "..":
		return bad("reserved name")
	case strings.ContainsAny(name, "/: \t\n\v\f\r"):
		return bad("contains '/', ':' or whitespace")
	}
	return nil
}

// parseArgs reads CNI_ARGS ("K=V;K=V"). A malformed pair is an error: it
// usually means a runtime bug that would otherwise hide the pod's name.
func parseArgs(s string) (map[string]string, *types.Error) {
	m := map[string]string{}
	if s == "" {
		return m, nil
	}
	for _, kv := range strings.Split(s, ";") {
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("CNI_ARGS: %q is not KEY=VALUE", kv), "")
		}
		m[k] = v
	}
	return m, nil
}
