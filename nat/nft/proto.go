package nft

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ProtoName is the protocol as nft writes it.
func ProtoName(p uint8) string {
	switch p {
	case unix.IPPROTO_TCP:
		return "tcp"
	case unix.IPPROTO_UDP:
		return "udp"
	case unix.IPPROTO_SCTP:
		return "sctp"
	}
	return fmt.Sprint(p)
}

// Proto is the protocol number of nft's name for it: tcp, udp, sctp.
func Proto(name string) (uint8, bool) {
	switch name {
	case "tcp":
		return unix.IPPROTO_TCP, true
	case "udp":
		return unix.IPPROTO_UDP, true
	case "sctp":
		return unix.IPPROTO_SCTP, true
	}
	return 0, false
}
