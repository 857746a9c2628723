package cniserver

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	reefv1 "github.com/reefcni/reef/proto"
)

const (
	goodArgs    = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1"
	goodID      = "3f1c0a9e2b7d"
	goodNetns   = "/var/run/netns/cni-1234"
	goodNetconf = `{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"reef-cni"}`
)

var requestCmpOpts = cmp.Options{
	cmp.AllowUnexported(request{}),
	cmpopts.EquateComparable(netip.Prefix{}),
	cmpopts.EquateEmpty(),
}

// goodRequest is what containerd sends for ADD; edit returns a copy changed
// by f, so each case names only what it breaks.
func goodRequest(edit func(*reefv1.CNIRequest)) *reefv1.CNIRequest {
	in := &reefv1.CNIRequest{
		ContainerId: goodID,
		Netns:       goodNetns,
		Ifname:      "eth0",
		Args:        goodArgs,
		Path:        "/opt/cni/bin",
		Netconf:     []byte(goodNetconf),
	}
	if edit != nil {
		edit(in)
	}
	return in
}

func goodConf(version string) NetConf {
	var c NetConf
	c.CNIVersion = version
	c.Name = "k8s-pod-network"
	c.Type = "reef-cni"
	return c
}

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name    string
		command string
		in      *reefv1.CNIRequest
		want    *request
	}{
		{
			name:    "ADD",
			command: "ADD",
			in:      goodRequest(nil),
			want: &request{
				command: "ADD", containerID: goodID, netns: goodNetns, ifName: "eth0",
				podNamespace: "default", podName: "web-1", conf: goodConf("1.1.0"),
			},
		},
		{
			name:    "ADD with pool and unknown keys",
			command: "ADD",
			in: goodRequest(func(in *reefv1.CNIRequest) {
				in.Netconf = []byte(`{"cniVersion":"0.3.1","name":"net","type":"reef-cni","pool":"10.244.0.0/16","socket":"/run/x.sock","runtimeConfig":{"k":1},"other":true}`)
			}),
			want: &request{
				command: "ADD", containerID: goodID, netns: goodNetns, ifName: "eth0",
				podNamespace: "default", podName: "web-1",
				conf: func() NetConf {
					c := goodConf("0.3.1")
					c.Name = "net"
					c.Pool = "10.244.0.0/16"
					c.Socket = "/run/x.sock"
					c.RuntimeConfig = json.RawMessage(`{"k":1}`) // a capability reef does not know
					return c
				}(),
				pool: netip.MustParsePrefix("10.244.0.0/16"),
			},
		},
		{
			name:    "ADD without CNI_ARGS",
			command: "ADD",
			in:      goodRequest(func(in *reefv1.CNIRequest) { in.Args = "" }),
			want: &request{
				command: "ADD", containerID: goodID, netns: goodNetns, ifName: "eth0",
				conf: goodConf("1.1.0"),
			},
		},
		{
			name:    "ADD with empty pairs in CNI_ARGS",
			command: "ADD",
			in:      goodRequest(func(in *reefv1.CNIRequest) { in.Args = ";K8S_POD_NAME=web-1;;K8S_POD_NAMESPACE=default;" }),
			want: &request{
				command: "ADD", containerID: goodID, netns: goodNetns, ifName: "eth0",
				podNamespace: "default", podName: "web-1", conf: goodConf("1.1.0"),
			},
		},
		{
			name:    "ADD with longest ifname and id with punctuation",
			command: "ADD",
			in: goodRequest(func(in *reefv1.CNIRequest) {
				in.Ifname = "abcdefghijklmno"
				in.ContainerId = "a_b.c-d"
			}),
			want: &request{
				command: "ADD", containerID: "a_b.c-d", netns: goodNetns, ifName: "abcdefghijklmno",
				podNamespace: "default", podName: "web-1", conf: goodConf("1.1.0"),
			},
		},
		{
			name:    "CHECK",
			command: "CHECK",
			in: goodRequest(func(in *reefv1.CNIRequest) {
				in.Netconf = []byte(`{"cniVersion":"0.4.0","name":"k8s-pod-network","type":"reef-cni"}`)
			}),
			want: &request{
				command: "CHECK", containerID: goodID, netns: goodNetns, ifName: "eth0",
				podNamespace: "default", podName: "web-1", conf: goodConf("0.4.0"),
			},
		},
		{
			name:    "DEL",
			command: "DEL",
			in:      goodRequest(nil),
			want: &request{
				command: "DEL", containerID: goodID, netns: goodNetns, ifName: "eth0",
				podNamespace: "default", podName: "web-1", conf: goodConf("1.1.0"),
			},
		},
		{
			name:    "DEL without netns",
			command: "DEL",
			in:      goodRequest(func(in *reefv1.CNIRequest) { in.Netns = "" }),
			want: &request{
				command: "DEL", containerID: goodID, ifName: "eth0",
				podNamespace: "default", podName: "web-1", conf: goodConf("1.1.0"),
			},
		},
		{
			name:    "GC needs no container",
			command: "GC",
			in: &reefv1.CNIRequest{Netconf: []byte(
				`{"cniVersion":"1.1.0","name":"k8s-pod-network","type":"reef-cni","cni.dev/valid-attachments":[{"containerID":"abc","ifname":"eth0"}]}`)},
			want: &request{
				command: "GC",
				conf: func() NetConf {
					c := goodConf("1.1.0")
					c.ValidAttachments = []types.GCAttachment{{ContainerID: "abc", IfName: "eth0"}}
					return c
				}(),
			},
		},
		{
			name:    "STATUS needs no container",
			command: "STATUS",
			in:      &reefv1.CNIRequest{Netconf: []byte(goodNetconf)},
			want:    &request{command: "STATUS", conf: goodConf("1.1.0")},
		},
	}
	for _, v := range SupportedVersions {
		tests = append(tests, struct {
			name    string
			command string
			in      *reefv1.CNIRequest
			want    *request
		}{
			name:    "ADD cniVersion " + v,
			command: "ADD",
			in: goodRequest(func(in *reefv1.CNIRequest) {
				in.Netconf = []byte(`{"cniVersion":"` + v + `","name":"k8s-pod-network","type":"reef-cni"}`)
			}),
			want: &request{
				command: "ADD", containerID: goodID, netns: goodNetns, ifName: "eth0",
				podNamespace: "default", podName: "web-1", conf: goodConf(v),
			},
		})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequest(tt.command, tt.in)
			if err != nil {
				t.Fatalf("parseRequest(%s) = error %d %q (%s), want success", tt.command, err.Code, err.Msg, err.Details)
			}
			if diff := cmp.Diff(tt.want, got, requestCmpOpts); diff != "" {
				t.Errorf("parseRequest(%s) (-want +got):\n%s", tt.command, diff)
			}
		})
	}
}

func TestRequestHandle(t *testing.T) {
	r, err := parseRequest("ADD", goodRequest(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.handle(), "k8s-pod-network."+goodID; got != want {
		t.Errorf("handle() = %q, want %q", got, want)
	}
}

// padded is a valid netconf of exactly n bytes.
func padded(n int) string {
	const head, tail = `{"cniVersion":"1.0.0","name":"n","x":"`, `"}`
	return head + strings.Repeat("a", n-len(head)-len(tail)) + tail
}

// withUnknown appends empty string fields of the given numbers, which
// CNIRequest does not have, as a newer shim would send them.
func withUnknown(in *reefv1.CNIRequest, nums ...protowire.Number) *reefv1.CNIRequest {
	var b []byte
	for _, n := range nums {
		b = protowire.AppendTag(b, n, protowire.BytesType)
		b = protowire.AppendString(b, "")
	}
	in.ProtoReflect().SetUnknown(b)
	return in
}

// TestParseRequestLimits: what is refused at ADD only, or only past the
// limit, passes otherwise.
func TestParseRequestLimits(t *testing.T) {
	ok := []struct {
		command, netconf string
	}{
		{"ADD", padded(reefv1.MaxNetconfSize)},
		{"DEL", `{"cniVersion":"1.0.0","name":"n","ipam":{"type":"host-local"},"mtu":1400}`},
		{"CHECK", `{"cniVersion":"1.0.0","name":"n","ipam":{}}`},
		{"ADD", `{"cniVersion":"1.0.0","name":"n","ipamx":1,"capabilities":{"portMappings":true},"prevResult":{}}`},
	}
	for _, tc := range ok {
		if _, err := parseRequest(tc.command, goodRequest(func(in *reefv1.CNIRequest) { in.Netconf = []byte(tc.netconf) })); err != nil {
			t.Errorf("%s of %.60s: error %d %q, want success", tc.command, tc.netconf, err.Code, err.Msg)
		}
	}
}

func TestParseRequestErrors(t *testing.T) {
	withNetconf := func(s string) *reefv1.CNIRequest {
		return goodRequest(func(in *reefv1.CNIRequest) { in.Netconf = []byte(s) })
	}
	tests := []struct {
		name     string
		command  string
		in       *reefv1.CNIRequest
		wantCode uint
		wantMsg  string // a substring of Msg naming what is wrong
	}{
		{"malformed JSON", "ADD", withNetconf(`{"cniVersion":`), types.ErrDecodingFailure, "JSON"},
		{"netconf not an object", "ADD", withNetconf(`[1,2]`), types.ErrDecodingFailure, "JSON"},
		{"empty netconf", "ADD", withNetconf(``), types.ErrDecodingFailure, "JSON"},
		{"malformed JSON on GC", "GC", &reefv1.CNIRequest{Netconf: []byte(`{`)}, types.ErrDecodingFailure, "JSON"},
		{"name of wrong type", "ADD", withNetconf(`{"cniVersion":"1.0.0","name":7}`), types.ErrDecodingFailure, "JSON"},
		{"unknown cniVersion", "ADD", withNetconf(`{"cniVersion":"9.9.9","name":"n"}`), types.ErrIncompatibleCNIVersion, `"9.9.9"`},
		{"0.2.0 is not supported", "ADD", withNetconf(`{"cniVersion":"0.2.0","name":"n"}`), types.ErrIncompatibleCNIVersion, `"0.2.0"`},
		{"empty cniVersion", "ADD", withNetconf(`{"name":"n"}`), types.ErrIncompatibleCNIVersion, `cniVersion ""`},
		{"null netconf", "ADD", withNetconf(`null`), types.ErrIncompatibleCNIVersion, `cniVersion ""`},
		{"unknown cniVersion on STATUS", "STATUS", &reefv1.CNIRequest{Netconf: []byte(`{"cniVersion":"2.0.0","name":"n"}`)}, types.ErrIncompatibleCNIVersion, `"2.0.0"`},
		{"missing name", "ADD", withNetconf(`{"cniVersion":"1.0.0"}`), types.ErrInvalidNetworkConfig, `"name"`},
		{"missing name on GC", "GC", &reefv1.CNIRequest{Netconf: []byte(`{"cniVersion":"1.1.0"}`)}, types.ErrInvalidNetworkConfig, `"name"`},
		{"pool not a CIDR", "ADD", withNetconf(`{"cniVersion":"1.0.0","name":"n","pool":"10.244.0.0"}`), types.ErrInvalidNetworkConfig, `"10.244.0.0"`},
		{"pool garbage", "DEL", withNetconf(`{"cniVersion":"1.0.0","name":"n","pool":"blue"}`), types.ErrInvalidNetworkConfig, `"blue"`},
		{"empty container ID", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.ContainerId = "" }), types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID is empty"},
		{"empty container ID on DEL", "DEL", goodRequest(func(in *reefv1.CNIRequest) { in.ContainerId = "" }), types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID is empty"},
		{"container ID starts with dash", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.ContainerId = "-abc" }), types.ErrInvalidEnvironmentVariables, `"-abc"`},
		{"container ID starts with dot", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.ContainerId = ".abc" }), types.ErrInvalidEnvironmentVariables, `".abc"`},
		{"container ID with slash", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.ContainerId = "ab/../cd" }), types.ErrInvalidEnvironmentVariables, `"ab/../cd"`},
		{"container ID with space", "CHECK", goodRequest(func(in *reefv1.CNIRequest) { in.ContainerId = "ab cd" }), types.ErrInvalidEnvironmentVariables, `"ab cd"`},
		{"container ID not ASCII", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.ContainerId = "abcé" }), types.ErrInvalidEnvironmentVariables, `"abcé"`},
		{"empty ifname", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = "" }), types.ErrInvalidEnvironmentVariables, `CNI_IFNAME ""`},
		{"empty ifname on DEL", "DEL", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = "" }), types.ErrInvalidEnvironmentVariables, `CNI_IFNAME ""`},
		{"ifname 16 bytes", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = "abcdefghijklmnop" }), types.ErrInvalidEnvironmentVariables, `"abcdefghijklmnop"`},
		{"ifname lo", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = "lo" }), types.ErrInvalidEnvironmentVariables, `"lo" is the sandbox's loopback`},
		{"ifname with slash", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = "a/b" }), types.ErrInvalidEnvironmentVariables, `"a/b"`},
		{"ifname with colon", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = "eth0:1" }), types.ErrInvalidEnvironmentVariables, `"eth0:1"`},
		{"ifname with space", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = "eth 0" }), types.ErrInvalidEnvironmentVariables, `"eth 0"`},
		{"ifname dot", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = "." }), types.ErrInvalidEnvironmentVariables, `"."`},
		{"ifname dotdot", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Ifname = ".." }), types.ErrInvalidEnvironmentVariables, `".."`},
		{"relative netns", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Netns = "var/run/netns/x" }), types.ErrInvalidEnvironmentVariables, `"var/run/netns/x"`},
		{"relative netns on DEL", "DEL", goodRequest(func(in *reefv1.CNIRequest) { in.Netns = "netns/x" }), types.ErrInvalidEnvironmentVariables, `"netns/x"`},
		{"empty netns on ADD", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Netns = "" }), types.ErrInvalidEnvironmentVariables, "CNI_NETNS is empty; ADD"},
		{"empty netns on CHECK", "CHECK", goodRequest(func(in *reefv1.CNIRequest) { in.Netns = "" }), types.ErrInvalidEnvironmentVariables, "CNI_NETNS is empty; CHECK"},
		{"CNI_ARGS pair without =", "ADD", goodRequest(func(in *reefv1.CNIRequest) { in.Args = "IgnoreUnknown=1;K8S_POD_NAME" }), types.ErrInvalidEnvironmentVariables, `"K8S_POD_NAME"`},
		{"CNI_ARGS empty key", "DEL", goodRequest(func(in *reefv1.CNIRequest) { in.Args = "=web-1" }), types.ErrInvalidEnvironmentVariables, `"=web-1"`},
		{"netconf over the limit", "ADD", withNetconf(padded(reefv1.MaxNetconfSize + 1)), types.ErrInvalidNetworkConfig, "1048577 bytes; reef accepts at most 1048576"},
		{"netconf over the limit on DEL", "DEL", withNetconf(padded(reefv1.MaxNetconfSize + 1)), types.ErrInvalidNetworkConfig, "at most 1048576"},
		{"unknown request field", "ADD", withUnknown(goodRequest(nil), 99, 7), reefv1.CodeVersionMismatch, "(field 7, field 99)"},
		{"unknown request field on STATUS", "STATUS", withUnknown(&reefv1.CNIRequest{Netconf: []byte(goodNetconf)}, 12), reefv1.CodeVersionMismatch, "(field 12)"},
		{"ipam of another plugin", "ADD", withNetconf(`{"cniVersion":"1.0.0","name":"n","ipam":{"type":"calico-ipam"}}`), types.ErrUnsupportedField, `"ipam" (value {"type":"calico-ipam"})`},
		{"mtu in the netconf", "ADD", withNetconf(`{"cniVersion":"1.0.0","name":"n","MTU":1400}`), types.ErrUnsupportedField, `"MTU" (value 1400)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequest(tt.command, tt.in)
			if err == nil {
				t.Fatalf("parseRequest(%s) = %+v, want error code %d", tt.command, got, tt.wantCode)
			}
			if got != nil {
				t.Errorf("parseRequest(%s) returned a request with the error: %+v", tt.command, got)
			}
			if err.Code != tt.wantCode {
				t.Errorf("code = %d (%q), want %d", err.Code, err.Msg, tt.wantCode)
			}
			if !strings.Contains(err.Msg, tt.wantMsg) {
				t.Errorf("message %q does not contain %q", err.Msg, tt.wantMsg)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []struct {
		command, id, netns, ifname, args, netconf string
	}{
		{"ADD", goodID, goodNetns, "eth0", goodArgs, goodNetconf},
		{"DEL", goodID, "", "eth0", "", `{"cniVersion":"0.3.0","name":"n","pool":"10.0.0.0/8"}`},
		{"CHECK", "a_b.c-d", "/proc/1/ns/net", "net1", "K=V;;", `{"cniVersion":"0.4.0","name":"n","dns":{"nameservers":["10.96.0.10"]}}`},
		{"GC", "", "", "", "", `{"cniVersion":"1.1.0","name":"n","cni.dev/valid-attachments":[{"containerID":"x","ifname":"eth0"}]}`},
		{"STATUS", "", "", "", "", `{"cniVersion":"1.1.0","name":"n"}`},
		{"ADD", "-x", "rel", "..", "=x", `{"cniVersion":"1.0.0","name":"n","pool":"bad"}`},
		{"ADD", "x", "/x", "a/b", "k", `{`},
		{"VERSION", "é", "/", "abcdefghijklmnop", ";", `null`},
	} {
		f.Add(s.command, s.id, s.netns, s.ifname, s.args, []byte(s.netconf))
	}
	f.Fuzz(func(t *testing.T, command, id, netns, ifname, args string, netconf []byte) {
		in := &reefv1.CNIRequest{ContainerId: id, Netns: netns, Ifname: ifname, Args: args, Netconf: netconf}
		r, err := parseRequest(command, in)
		switch {
		case r == nil && err == nil:
			t.Fatal("parseRequest returned neither a request nor an error")
		case r != nil && err != nil:
			t.Fatalf("parseRequest returned both a request and error %q", err.Msg)
		case err != nil:
			if err.Code == 0 || err.Msg == "" {
				t.Fatalf("error without code or message: %+v", err)
			}
			// gRPC refuses to send a reply whose strings are not UTF-8:
			// the caller would get an internal error instead of this one.
			if _, merr := proto.Marshal(reply(nil, err)); merr != nil {
				t.Fatalf("the error %+v cannot be sent: %v", err, merr)
			}
			return
		}
		// What a request promises to the handlers.
		if r.command != command || r.conf.Name == "" {
			t.Fatalf("request %+v: wrong command or empty network name", r)
		}
		if command == "GC" || command == "STATUS" {
			return
		}
		if validateContainerID(r.containerID) != nil || validateIfName(r.ifName) != nil {
			t.Fatalf("request %+v passed with an invalid container ID or ifname", r)
		}
		if r.netns != "" && !strings.HasPrefix(r.netns, "/") {
			t.Fatalf("request %+v passed with a relative netns", r)
		}
		if command != "DEL" && r.netns == "" {
			t.Fatalf("%s request passed without netns", command)
		}
		if strings.ContainsAny(r.containerID, "/") || len(r.ifName) > 15 {
			t.Fatalf("request %+v: container ID or ifname unsafe for a file name", r)
		}
	})
}
