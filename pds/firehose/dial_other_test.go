//go:build !unix

package firehose_test

import (
	"context"
	"net"

	"github.com/gorilla/websocket"
)

// smallBufferDialer dials with a receive buffer of n bytes, set once the
// connection is made.
func smallBufferDialer(n int) *websocket.Dialer {
	return &websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).SetReadBuffer(n)
		}
		return c, err
	}}
}
