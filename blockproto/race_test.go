//go:build race

package blockproto_test

// raceEnabled: the race detector slows the simulator several times over,
// so the property tests run fewer seeds under it (make test runs them
// again without it, with thousands).
const raceEnabled = true
