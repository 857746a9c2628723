package lab

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// gobgpNeighborRestarting is `gobgp neighbor 192.168.77.11` of gobgpd
// 3.10 after the node's daemon restarted from a SIGTERM (e2e
// TestRestartFlagGobgpd): its second OPEN, with the R bit.
const gobgpNeighborRestarting = `BGP neighbor is 192.168.77.11, remote AS 64512
  BGP version 4, remote router ID 192.168.77.11
  BGP state = ESTABLISHED, up for 00:00:00
  BGP OutQ = 0, Flops = 0
  Hold time is 3, keepalive interval is 1 seconds
  Configured hold time is 9, keepalive interval is 3 seconds
  
  Neighbor capabilities:
    multiprotocol:
        ipv4-unicast:	advertised and received
    route-refresh:	advertised and received
    extended-nexthop:	advertised and received
        Local:  nlri: ipv4-unicast, nexthop: ipv6
        Remote: nlri: ipv4-unicast, nexthop: ipv6
    UnknownCapability(6):	received
    graceful-restart:	received
        Remote: restart time 120 sec, restart flag set
	    ipv4-unicast, forward flag set
    4-octet-as:	advertised and received
    fqdn:	advertised and received
      Local:
         name: vm, domain: 
      Remote:
         name: a1, domain: 
  Message statistics:
                         Sent       Rcvd
    Opens:                  2          2
    Notifications:          0          0
    Updates:                0          0
    Keepalives:             2          2
    Route Refresh:          0          0
    Discarded:              0          0
    Total:                  4          4
  Route statistics:
    Advertised:             0
    Received:               0
    Accepted:               0
`

// TestParseGobgpNeighbor: the state, the messages received and the
// graceful-restart flags come out of gobgp's text, and a text without
// them is an error, not a session without the R bit.
func TestParseGobgpNeighbor(t *testing.T) {
	for _, c := range []struct {
		name string
		text string
		want GobgpNeighbor
		err  bool
	}{
		{"restarting", gobgpNeighborRestarting, GobgpNeighbor{State: "ESTABLISHED", OpensReceived: 2, GracefulRestart: true, RestartFlag: true}, false},
		{"not restarting", strings.Replace(gobgpNeighborRestarting, "120 sec, restart flag set", "120 sec", 1),
			GobgpNeighbor{State: "ESTABLISHED", OpensReceived: 2, GracefulRestart: true}, false},
		// The flag of the local side (gobgpd's own OPEN) is not the peer's.
		{"local flag only", strings.Replace(gobgpNeighborRestarting, "Remote: restart time 120 sec, restart flag set", "Local: restart time 120 sec, restart flag set", 1),
			GobgpNeighbor{State: "ESTABLISHED", OpensReceived: 2, GracefulRestart: true}, false},
		{"no capability", strings.Replace(strings.Replace(gobgpNeighborRestarting, "    graceful-restart:\treceived\n", "", 1), "Remote: restart time 120 sec, restart flag set", "", 1),
			GobgpNeighbor{State: "ESTABLISHED", OpensReceived: 2}, false},
		{"down, a notification", strings.Replace(strings.Replace(gobgpNeighborRestarting, "ESTABLISHED", "ACTIVE", 1), "Notifications:          0          0", "Notifications:          0          1", 1),
			GobgpNeighbor{State: "ACTIVE", OpensReceived: 2, NotificationsReceived: 1, GracefulRestart: true, RestartFlag: true}, false},
		{"an error message", "rpc error: code = Unavailable desc = connection refused\n", GobgpNeighbor{}, true},
		{"no counters", strings.Split(gobgpNeighborRestarting, "Message statistics")[0], GobgpNeighbor{}, true},
	} {
		got, err := ParseGobgpNeighbor(c.text)
		if (err != nil) != c.err {
			t.Errorf("%s: error %v, want one: %v", c.name, err, c.err)
			continue
		}
		if c.err {
			continue
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}
