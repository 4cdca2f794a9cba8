// Package sockbuf sizes sockets' kernel buffers: a dialed socket's receive
// buffer, set before it connects, for tests that play a network consumer
// whose kernel holds little more than it has read; and a served
// subscriber's send buffer, which bounds what one that stops reading holds
// in the kernel.
//
// The receive buffer is set before the connection is made so that the
// window is small from the start: one shrunk after it leaves Linux
// advertising a zero window and the sender waiting on its probes, a stall
// of seconds that is no reader's.
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

// SubscriberSend is the send buffer a stream server gives a subscriber's
// socket. Left to itself Linux gives a loopback socket megabytes, and a
// blocked write wakes only once a third of it is free: a slow reader
// drains that for many seconds, so the server would see a consumer that
// reads as one that stalls (and cut it at its write timeout), and each
// stalled one would hold the megabytes.
const SubscriberSend = 128 << 10

// SetSendBuffer sets c's kernel send buffer to n bytes (SO_SNDBUF), when c
// has one (a TCP connection) and n > 0; the kernel may round it.
func SetSendBuffer(c net.Conn, n int) error {
	b, ok := c.(interface{ SetWriteBuffer(int) error })
	if !ok || n <= 0 {
		return nil
	}
	return b.SetWriteBuffer(n)
}
