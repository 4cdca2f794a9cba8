// Package sockbuf sets a socket's receive buffer before it connects, for
// tests that play a network consumer whose kernel holds little more than
// it has read.
//
// The buffer is set before the connection is made so that the window is
// small from the start: one shrunk after it leaves Linux advertising a
// zero window and the sender waiting on its probes, a stall of seconds
// that is no reader's.
package sockbuf

import (
	"net"
	"syscall"
)

// Dialer is a net.Dialer whose sockets have a receive buffer of n bytes.
func Dialer(n int) *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = setReceiveBuffer(fd, n) }); err != nil {
			return err
		}
		return serr
	}}
}
