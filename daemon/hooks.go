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
}
