package cniserver

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/protobuf/encoding/protowire"

	reefv1 "github.com/reefcni/reef/proto"
	"github.com/reefcni/reef/store"
	"github.com/reefcni/reef/version"
)

// SupportedVersions are the CNI spec versions reef answers in.
var SupportedVersions = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

// NetConf is the network configuration reef reads. Keys reef does not know
// are ignored, as the spec allows (the runtime adds its own), except the
// few of ignoredKeys that ADD refuses.
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
	if err := checkEnvelope(in); err != nil {
		return nil, err
	}
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
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_NETNS is empty; "+strings.ToValidUTF8(command, "?")+" needs the pod's network namespace", "")
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
		if r.ifName == "lo" {
			// Every netns has it; DEL and CHECK of it find no attachment.
			return nil, types.NewError(types.ErrInvalidEnvironmentVariables,
				`CNI_IFNAME "lo" is the sandbox's loopback device: `+ifNameNew+" (eth0, usually)", "")
		}
		if err := checkIgnoredKeys(in.GetNetconf()); err != nil {
			return nil, err
		}
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

// checkEnvelope refuses a request too large for reef, or one that carries
// fields this daemon's CNIRequest does not have. Protobuf would drop those
// silently, but every field of a CNI call matters: a shim newer than the
// daemon must say so rather than be half understood.
func checkEnvelope(in *reefv1.CNIRequest) *types.Error {
	if n := len(in.GetNetconf()); n > reefv1.MaxNetconfSize {
		return types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("the network configuration is %d bytes; reef accepts at most %d: shorten the plugin's config in the conflist", n, reefv1.MaxNetconfSize), "")
	}
	if unknown := in.ProtoReflect().GetUnknown(); len(unknown) > 0 {
		return types.NewError(reefv1.CodeVersionMismatch,
			fmt.Sprintf("the request carries fields this reef daemon does not know (%s): the caller is newer than the daemon; restart reef (`systemctl restart reef`) so that daemon and reef-cni are the same version", unknownFields(unknown)),
			"reef daemon "+version.Version)
	}
	return nil
}

// unknownFields names the field numbers in raw protobuf wire data.
func unknownFields(b []byte) string {
	var nums []protowire.Number
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			break
		}
		nums = append(nums, num)
		b = b[n+m:]
	}
	if len(nums) == 0 {
		return "undecodable bytes"
	}
	slices.Sort(nums)
	var names []string
	for _, n := range slices.Compact(nums) {
		names = append(names, fmt.Sprintf("field %d", n))
	}
	return strings.Join(names, ", ")
}

// ignoredKeys are netconf keys of other plugins that reef would otherwise
// ignore, as the spec lets it, while the operator expects them to act: a
// config carried over from Calico or the reference plugins. ADD refuses them
// with code 2, as the spec asks of an unsupported field (key and value in
// the message); DEL and CHECK do not, so a pod added before this check can
// still go.
var ignoredKeys = map[string]string{
	"ipam": "reef allocates from the pools in /etc/reef/config.yaml (pick one with \"pool\"); remove \"ipam\" from the conflist",
	"mtu":  "reef sets the MTU from mtu in /etc/reef/config.yaml (derived from the uplink when unset); remove \"mtu\" from the conflist",
}

func checkIgnoredKeys(netconf []byte) *types.Error {
	var keys map[string]json.RawMessage
	if json.Unmarshal(netconf, &keys) != nil {
		return nil // decoded once already; nothing to add
	}
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if fix, ok := ignoredKeys[strings.ToLower(k)]; ok {
			v := string(keys[k])
			if len(v) > 64 {
				v = v[:64] + "…"
			}
			return types.NewError(types.ErrUnsupportedField, fmt.Sprintf("netconf key %q (value %s) is not supported: %s", k, strings.ToValidUTF8(v, "?"), fix), "")
		}
	}
	return nil
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

// ifNameNew is why CNI_IFNAME may not name an interface the sandbox has.
const ifNameNew = "reef creates the interface CNI_IFNAME names, so it must be one the sandbox does not have"

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
