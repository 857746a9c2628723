package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	reefv1 "github.com/reefcni/reef/proto"
)

// TestCallError: only a daemon that is not there, or did not answer in
// time, is "try again later" (11); what it refused for what it is gets a
// permanent code.
func TestCallError(t *testing.T) {
	for _, tc := range []struct {
		command     string
		err         error
		code        uint
		contains    string
		unreachable bool // DEL is queued
	}{
		{"ADD", status.Error(codes.Unavailable, "connection refused"), types.ErrTryAgainLater, "not reachable at /s", true},
		{"DEL", status.Error(codes.Unavailable, "connection refused"), types.ErrTryAgainLater, "not reachable at /s", true},
		{"STATUS", status.Error(codes.Unavailable, "connection refused"), types.ErrPluginNotAvailable, "not reachable at /s", false},
		{"ADD", status.Error(codes.DeadlineExceeded, "context deadline exceeded"), types.ErrTryAgainLater, "did not answer the ADD call within 2m0s", false},
		{"ADD", status.Error(codes.Canceled, "canceled"), types.ErrTryAgainLater, "did not answer", false},
		{"ADD", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (10485800 vs. 2097152)"), types.ErrInvalidNetworkConfig, "at most 2097152 bytes; shorten", false},
		{"ADD", status.Error(codes.InvalidArgument, "bad"), types.ErrInvalidNetworkConfig, "refused the ADD call as invalid", false},
		{"GC", status.Error(codes.Unimplemented, "unknown method GC for service reef.v1.CNI"), reefv1.CodeVersionMismatch, "(version 0.9.0) does not serve GC", false},
		{"ADD", status.Error(codes.Internal, "grpc: error unmarshalling request"), types.ErrInternal, "gRPC Internal", false},
		{"ADD", errors.New("not a status"), types.ErrInternal, "gRPC Unknown", false},
	} {
		err := callError("/s", tc.command, tc.err, func() string { return "0.9.0" })
		var e *types.Error
		if !errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Msg, tc.contains) {
			t.Errorf("%s %v: got %v, want code %d mentioning %q", tc.command, tc.err, err, tc.code, tc.contains)
		}
		var u *unreachableError
		if errors.As(err, &u) != tc.unreachable {
			t.Errorf("%s %v: unreachable = %v, want %v", tc.command, tc.err, !tc.unreachable, tc.unreachable)
		}
	}
}

func TestCheckInput(t *testing.T) {
	netconf := func(n int) []byte {
		return []byte(`{"name":"n","x":"` + strings.Repeat("a", n-len(`{"name":"n","x":""}`)) + `"}`)
	}
	for _, tc := range []struct {
		name     string
		args     skel.CmdArgs
		code     uint // 0: accepted
		contains string
	}{
		{"at the limit", skel.CmdArgs{StdinData: netconf(reefv1.MaxNetconfSize)}, 0, ""},
		{"10 MB", skel.CmdArgs{StdinData: netconf(10 << 20)}, types.ErrInvalidNetworkConfig, "10485760 bytes; reef accepts at most 1048576"},
		{"CNI_ARGS not UTF-8", skel.CmdArgs{Args: "K8S_POD_NAME=\xff"}, types.ErrInvalidEnvironmentVariables, `CNI_ARGS "K8S_POD_NAME=\xff" is not valid UTF-8`},
		{"CNI_NETNS not UTF-8", skel.CmdArgs{Netns: "/run/netns/\xc3"}, types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
	} {
		err := checkInput(&tc.args)
		var e *types.Error
		switch {
		case tc.code == 0 && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.code != 0 && (!errors.As(err, &e) || e.Code != tc.code || !strings.Contains(e.Msg, tc.contains)):
			t.Errorf("%s: got %v, want code %d mentioning %q", tc.name, err, tc.code, tc.contains)
		}
	}
}
