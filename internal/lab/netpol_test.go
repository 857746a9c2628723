package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// agentLab is a lab without nodes, for the probe agent: New wants reef and
// reef-cni, which these tests do not run, so only reef-lab is built (or
// taken from $REEF_BIN_DIR, as make test passes it).
func agentLab(t *testing.T) *Lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	for _, tool := range []string{"ip", "nsenter", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	bin := os.Getenv("REEF_BIN_DIR")
	if _, err := os.Stat(filepath.Join(bin, "reef-lab")); bin == "" || err != nil {
		bin = t.TempDir()
		cmd := exec.Command("go", "build", "-o", filepath.Join(bin, "reef-lab"), "../../cmd/reef-lab")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build reef-lab: %v\n%s", err, out)
		}
	}
	CleanStale()
	prefix := fmt.Sprintf("rl%dx%d", os.Getpid(), labSeq.Add(1))
	l := &Lab{Prefix: prefix, Dir: filepath.Join(BaseDir, prefix), BinDir: bin}
	if err := os.MkdirAll(l.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab cleanup: %v", err)
		}
	})
	return l
}

// TestProbeAgent: serve-ports in one namespace, probes from another over a
// veth. An open port answers, a closed one refuses, UDP echoes, SCTP answers
// or says the kernel has none, and an nftables drop in the server's
// namespace makes the probes of the dropped ports fail within the timeout
// while the others still answer.
func TestProbeAgent(t *testing.T) {
	l := agentLab(t)
	server, client := l.Prefix+"-srv", l.Prefix+"-cli"
	for _, ns := range []string{server, client} {
		if err := l.AddNetns(ns); err != nil {
			t.Fatal(err)
		}
	}
	const serverIP, clientIP = "10.244.250.1", "10.244.250.2"
	for _, s := range []struct {
		ns   string
		args []string
	}{
		{client, []string{"link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", NetnsPath(server)}},
		{client, []string{"addr", "add", clientIP + "/24", "dev", "eth0"}},
		{server, []string{"addr", "add", serverIP + "/24", "dev", "eth0"}},
		{client, []string{"link", "set", "eth0", "up"}},
		{server, []string{"link", "set", "eth0", "up"}},
	} {
		if err := l.IP(s.ns, s.args...); err != nil {
			t.Fatal(err)
		}
	}
	stop, err := l.ServePorts(server)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	const timeout = time.Second
	targets := []string{
		"tcp:" + serverIP + ":80", "tcp:" + serverIP + ":81", "tcp:" + serverIP + ":82",
		"udp:" + serverIP + ":80", "udp:" + serverIP + ":81", "udp:" + serverIP + ":82",
		"sctp:" + serverIP + ":80",
	}
	probe := func() (map[string]ProbeResult, time.Duration) {
		t.Helper()
		start := time.Now()
		res, err := l.Probe(client, timeout, targets)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		byTarget := map[string]ProbeResult{}
		for _, r := range res {
			byTarget[r.Target] = r
		}
		return byTarget, took
	}
	check := func(res map[string]ProbeResult, target string, ok bool, errHas string) {
		t.Helper()
		r := res[target]
		if r.OK != ok || !strings.Contains(r.Err, errHas) {
			t.Errorf("%s = %+v, want ok %v and an error with %q", target, r, ok, errHas)
		}
	}

	res, took := probe()
	check(res, "tcp:"+serverIP+":80", true, "")
	if want := serverIP + ":80 " + clientIP + ":"; !strings.Contains(res["tcp:"+serverIP+":80"].Reply, want) {
		t.Errorf("TCP reply %q, want the server's and the client's address (%q)", res["tcp:"+serverIP+":80"].Reply, want)
	}
	check(res, "tcp:"+serverIP+":81", true, "")
	check(res, "tcp:"+serverIP+":82", false, "connection refused")
	check(res, "udp:"+serverIP+":80", true, "")
	if want := " from " + clientIP + ":"; !strings.Contains(res["udp:"+serverIP+":80"].Reply, want) {
		t.Errorf("UDP reply %q, want the client's address (%q)", res["udp:"+serverIP+":80"].Reply, want)
	}
	check(res, "udp:"+serverIP+":81", true, "")
	check(res, "udp:"+serverIP+":82", false, "connection refused")
	if r := res["sctp:"+serverIP+":80"]; r.NoSCTP() {
		t.Logf("SCTP: %s (this kernel has no SCTP; not checked)", r.Err)
	} else {
		check(res, "sctp:"+serverIP+":80", true, "")
	}
	if took > timeout {
		t.Errorf("probes took %v, more than their timeout %v, though nothing was dropped", took, timeout)
	}

	// Drop TCP and UDP 81 in the server's namespace only: the probes must
	// fail, and within the timeout (plus nsenter's start).
	drop := "table inet reeflab_probe {\n  chain input {\n    type filter hook input priority 0; policy accept;\n" +
		"    tcp dport 81 drop\n    udp dport 81 drop\n  }\n}\n"
	cmd := exec.Command("nsenter", "--net="+NetnsPath(server), "--", "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(drop)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft in %s: %v: %s", server, err, out)
	}
	res, took = probe()
	t.Logf("with TCP and UDP 81 dropped, in %v: tcp 81: %s; udp 81: %s", took.Round(time.Millisecond), res["tcp:"+serverIP+":81"].Err, res["udp:"+serverIP+":81"].Err)
	check(res, "tcp:"+serverIP+":80", true, "")
	check(res, "tcp:"+serverIP+":81", false, "timeout")
	check(res, "udp:"+serverIP+":80", true, "")
	check(res, "udp:"+serverIP+":81", false, "no echo within the timeout")
	if took < timeout || took > timeout+2*time.Second {
		t.Errorf("probes with a drop took %v, want about the timeout %v", took, timeout)
	}
}

// TestServePortsNeedsReefLab: a lab whose bin dir has no reef-lab says so.
func TestServePortsNeedsReefLab(t *testing.T) {
	l := &Lab{BinDir: t.TempDir()}
	if _, err := l.ServePorts("nowhere"); err == nil || !strings.Contains(err.Error(), "reef-lab not built") {
		t.Errorf("ServePorts without reef-lab: %v", err)
	}
	if _, err := l.Probe("nowhere", time.Second, nil); err == nil || !strings.Contains(err.Error(), "reef-lab not built") {
		t.Errorf("Probe without reef-lab: %v", err)
	}
}
