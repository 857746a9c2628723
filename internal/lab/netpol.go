package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/reefcni/reef/internal/poll"
)

// The NetworkPolicy probe agent is `reef-lab serve-ports` and `reef-lab
// probe` (cmd/reef-lab/netpol_agent.go), run in pod namespaces: the lab's
// pods have no containers, so the agent is the "server" and the "client" of
// the upstream Netpol suite's agnhost.

// ServePortsArgs are the ports every pod of the NetworkPolicy model serves:
// TCP, UDP and SCTP 80 and 81, as the upstream Netpol suite's pods.
var ServePortsArgs = []string{"--tcp", "80,81", "--udp", "80,81", "--sctp", "80,81"}

// ServePortsReady is the line serve-ports prints once every port listens.
const ServePortsReady = "serve-ports: ready"

// ErrNoSCTP is a probe's error when the kernel has no SCTP (the module is
// not loaded, or not built): `socket(AF_INET, SOCK_STREAM, IPPROTO_SCTP)`
// fails with EPROTONOSUPPORT. A test should skip its SCTP expectations then.
var ErrNoSCTP = errors.New("sctp: the kernel has no SCTP")

// ProbeResult is one target's outcome, as `reef-lab probe --json` prints it.
type ProbeResult struct {
	Target string `json:"target"`          // proto:addr:port, as given
	OK     bool   `json:"ok"`              // connected and got the server's reply
	Err    string `json:"err,omitempty"`   // why not
	Reply  string `json:"reply,omitempty"` // the server's line (TCP, SCTP) or the echo (UDP)
}

// NoSCTP tells a probe that could not run from one that failed.
func (r ProbeResult) NoSCTP() bool { return r.Err == ErrNoSCTP.Error() }

// reefLab is the reef-lab binary next to reef and reef-cni.
func (l *Lab) reefLab() (string, error) {
	bin := filepath.Join(l.BinDir, "reef-lab")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("lab: reef-lab not built in %s (run make build): %w", l.BinDir, err)
	}
	return bin, nil
}

// ServePorts starts `reef-lab serve-ports` with ServePortsArgs in netns and
// returns once every port listens; stop kills it (Lab.Close does too).
// Without SCTP in the kernel it serves TCP and UDP, and says so in its log.
func (l *Lab) ServePorts(netns string) (stop func(), err error) {
	return l.ServePortsOn(netns, ServePortsArgs...)
}

// ServePortsOn is ServePorts with serve-ports' own flags ("--tcp",
// "53,80", ...): a kube-dns stand-in serves port 53 besides the model's.
func (l *Lab) ServePortsOn(netns string, args ...string) (stop func(), err error) {
	bin, err := l.reefLab()
	if err != nil {
		return nil, err
	}
	logName := "serve-ports-" + netns + ".log"
	stop, err = l.Spawn(netns, logName, append([]string{bin, "serve-ports"}, args...)...)
	if err != nil {
		return nil, fmt.Errorf("serve-ports in %s: %w", netns, err)
	}
	if err := poll.Until(10*time.Second, func() error {
		log, _ := os.ReadFile(filepath.Join(l.Dir, logName))
		if !bytes.Contains(log, []byte(ServePortsReady)) {
			return fmt.Errorf("not ready: %s", bytes.TrimSpace(log))
		}
		return nil
	}); err != nil {
		stop()
		return nil, fmt.Errorf("serve-ports in %s: %v", netns, err)
	}
	return stop, nil
}

// Probe runs `reef-lab probe` in netns: all targets ("tcp:10.244.1.5:80",
// "udp:...", "sctp:...") in parallel, each given timeout. An error means the
// probe could not run; a target that does not answer is a result with OK
// false.
func (l *Lab) Probe(netns string, timeout time.Duration, targets []string) ([]ProbeResult, error) {
	return l.probe(netns, timeout, nil, targets)
}

// ProbeUDPFrom is Probe of one UDP target ("udp:10.244.1.5:81") sent
// from local port sport: a probe from the same port again is the same
// conntrack flow.
func (l *Lab) ProbeUDPFrom(netns string, timeout time.Duration, sport int, target string) (ProbeResult, error) {
	res, err := l.probe(netns, timeout, []string{"--udp-source-port", strconv.Itoa(sport)}, []string{target})
	if err != nil {
		return ProbeResult{}, err
	}
	return res[0], nil
}

func (l *Lab) probe(netns string, timeout time.Duration, flags, targets []string) ([]ProbeResult, error) {
	bin, err := l.reefLab()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	args := append([]string{"--net=" + NetnsPath(netns), "--", bin, "probe", "--json", "--timeout", timeout.String()}, flags...)
	args = append(args, targets...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("probe from %s: %w: %s", netns, err, bytes.TrimSpace(stderr.Bytes()))
	}
	var res []ProbeResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("probe from %s: %w: %q", netns, err, stdout.String())
	}
	if len(res) != len(targets) {
		return nil, fmt.Errorf("probe from %s: %d results for %d targets: %s", netns, len(res), len(targets), strings.TrimSpace(stdout.String()))
	}
	return res, nil
}
