// Package version holds the build's version, stamped by the Makefile's ldflags.
package version

// Version and Commit are set at link time (-X); a plain `go build` leaves these.
var (
	Version = "dev"
	Commit  = "none"
)
