package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	reefv1 "github.com/reefcni/reef/proto"
)

// reef peer reset takes one address, with the client flags before or
// after it; anything else is a usage error (exit 2) that says what to give.
func TestParsePeerReset(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   string // the address, or "" for a usage error
		output string
		socket string
		err    string
	}{
		{args: []string{"192.168.77.60"}, want: "192.168.77.60", output: "table"},
		{args: []string{"fd77::60", "-o", "json"}, want: "fd77::60", output: "json"},
		{args: []string{"--socket", "/run/x.sock", "192.168.77.60"}, want: "192.168.77.60", output: "table", socket: "/run/x.sock"},
		{args: []string{"::ffff:192.168.77.60"}, want: "::ffff:192.168.77.60", output: "table"},
		{args: nil, err: "reef peer reset takes one address"},
		{args: []string{"192.168.77.60", "192.168.77.61"}, err: "reef peer reset takes one address"},
		{args: []string{"node3"}, err: `reef peer reset: "node3" is not an IP address`},
		{args: []string{"192.168.77.60/32"}, err: `"192.168.77.60/32" is not an IP address`},
		{args: []string{"192.168.77.60", "-o", "yaml"}, err: `-o "yaml": use table or json`},
		{args: []string{"--bogus", "192.168.77.60"}, err: "flag provided but not defined: -bogus"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var c clientFlags
			fs := flag.NewFlagSet("reef peer reset", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c.register(fs)
			addr, err := parsePeerReset(fs, &c, tc.args)
			if tc.err != "" {
				var usage UsageError
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &usage) {
					t.Fatalf("error %v, want a usage error saying %q", err, tc.err)
				}
				return
			}
			if err != nil || addr != netip.MustParseAddr(tc.want) || c.output != tc.output || c.socket != tc.socket {
				t.Errorf("address %v, output %q, socket %q, error %v; want %s, %q, %q", addr, c.output, c.socket, err, tc.want, tc.output, tc.socket)
			}
		})
	}
}

// fakeNode answers PeerReset as a daemon with one peer cut off
// (192.168.77.60) and one up (192.168.77.12) would.
type fakeNode struct {
	reefv1.UnimplementedNodeServer
}

func (fakeNode) PeerReset(_ context.Context, req *reefv1.PeerResetRequest) (*reefv1.PeerResetReply, error) {
	switch req.GetAddress() {
	case "192.168.77.60":
		return &reefv1.PeerResetReply{Address: req.GetAddress(), CutOff: true, State: "idle", Type: "external"}, nil
	case "192.168.77.12":
		return &reefv1.PeerResetReply{Address: req.GetAddress(), State: "established", Type: "mesh"}, nil
	}
	return nil, status.Errorf(codes.NotFound, "%s: no BGP peer of this node", req.GetAddress())
}

// serveFakeNode serves fakeNode on a unix socket at sock until the test ends.
func serveFakeNode(t *testing.T, sock string) {
	t.Helper()
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	reefv1.RegisterNodeServer(srv, fakeNode{})
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
}

// What reef peer reset says and its exit status, against a daemon: a
// peer cut off is let in (0), one that is not is left alone and says so
// (0), an address that is no peer is an error (1).
func TestPeerResetAnswers(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "reef.sock")
	serveFakeNode(t, sock)
	for _, tc := range []struct {
		addr   string
		status int
		out    string
	}{
		{"192.168.77.60", 0, "BGP peer 192.168.77.60 may connect again; its prefix limit still holds"},
		{"192.168.77.12", 0, "BGP peer 192.168.77.12 is not cut off by its prefix limit (state established): nothing to do"},
		{"192.168.77.99", 1, "reef: peer reset: 192.168.77.99: no BGP peer of this node\n"},
	} {
		var stdout, stderr bytes.Buffer
		st := Report(Run(context.Background(), []string{"peer", "reset", tc.addr, "--socket", sock}, &stdout, &stderr), &stderr)
		if st != tc.status || !strings.Contains(stdout.String()+stderr.String(), tc.out) || strings.Contains(stderr.String(), "rpc error") {
			t.Errorf("reef peer reset %s: exit %d, stdout %q, stderr %q; want %d and %q", tc.addr, st, stdout.String(), stderr.String(), tc.status, tc.out)
		}
	}
}

// TestRelativeSocket: --socket takes a path relative to the working
// directory, as a shell user gives it (reef status --socket n1/reef.sock).
// gRPC used to refuse it before dialling: "invalid (non-empty) authority:
// n1".
func TestRelativeSocket(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "n1"), 0o755); err != nil {
		t.Fatal(err)
	}
	serveFakeNode(t, filepath.Join(dir, "n1", "reef.sock"))
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"peer", "reset", "192.168.77.60", "--socket", "n1/reef.sock"}, &stdout, &stderr); err != nil {
		t.Errorf("reef peer reset --socket n1/reef.sock: %v\n%s", err, &stderr)
	}
}
