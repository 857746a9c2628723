package daemon

import "time"

// testHooks bend the daemon for the lab's tests; zero is production.
type testHooks struct {
	// pauseAfterVeth holds every ADD between creating the veth and wiring
	// it (REEF_TEST_PAUSE_AFTER_VETH), so that a test can make the netns
	// vanish mid-ADD.
	pauseAfterVeth time.Duration
	// bgpRestartTime replaces bgpRestartTime (REEF_TEST_BGP_RESTART_TIME),
	// so that a test sees a ToR flush a dead node's routes in seconds.
	bgpRestartTime time.Duration
	// passLoop asks for a whole pass right after each one
	// (REEF_TEST_PASS_LOOP=1), so that a test's CNI operations meet passes
	// at every point of their way.
	passLoop bool
	// firstPassDelay holds the first reconcile pass, and so the node's
	// first announcement, for this long after the speaker connects
	// (REEF_TEST_FIRST_PASS_DELAY): a node with a slow first pass, whose
	// sessions come up before its table is in.
	firstPassDelay time.Duration
	// lbResync replaces the resync of LoadBalancer address assignment
	// (REEF_TEST_LB_RESYNC, lbipam's 30 s), so that a test sees what a
	// round does without the resync's help.
	lbResync time.Duration
}
