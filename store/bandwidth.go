package store

import (
	"fmt"
	"strconv"
)

// String writes the limits as `reef ipam show` does: "in 10Mbit/s (burst
// 80kbit), out -".
func (b Bandwidth) String() string {
	dir := func(rate, burst uint64) string {
		if rate == 0 {
			return "-"
		}
		return fmt.Sprintf("%s/s (burst %s)", bits(rate), bits(burst))
	}
	return "in " + dir(b.IngressRate, b.IngressBurst) + ", out " + dir(b.EgressRate, b.EgressBurst)
}

// bits writes a count of bits with tc's SI units: 10Mbit, 80kbit, 1500bit.
func bits(v uint64) string {
	for _, u := range []struct {
		div  uint64
		name string
	}{{1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "kbit"}} {
		if v >= u.div {
			return strconv.FormatFloat(float64(v)/float64(u.div), 'f', -1, 64) + u.name
		}
	}
	return strconv.FormatUint(v, 10) + "bit"
}
