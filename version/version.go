// Package version holds the build's version, stamped by the Makefile's ldflags.
package version

import "runtime/debug"

// Version and Commit are set at link time (-X); a plain `go build` leaves these.
var (
	Version = "dev"
	Commit  = "none"
)

// GoBGP says which GoBGP the binary embeds: its version, and "patched"
// when it is built from third_party/gobgp, as every build through go.mod is.
func GoBGP() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == "github.com/osrg/gobgp/v4" {
			if d.Replace != nil {
				return d.Version + " (patched: third_party/gobgp)"
			}
			return d.Version
		}
	}
	return "none"
}
