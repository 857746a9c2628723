//go:build !race

package blockproto_test

const raceEnabled = false
