//go:build unix

package firehose_test

import (
	"errors"
	"net"
	"syscall"

	"github.com/gorilla/websocket"
)

// smallBufferDialer dials with a receive buffer of n bytes: a consumer
// whose kernel holds little more than it has read. The buffer is set
// before the connection is made, so the window is small from the start; a
// buffer shrunk after it (as elsewhere) leaves Linux advertising a zero
// window and the sender waiting on its probes, a stall that is no reader's.
func smallBufferDialer(n int) *websocket.Dialer {
	return &websocket.Dialer{NetDialContext: (&net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n) })
		return errors.Join(err, serr)
	}}).DialContext}
}
