package pds_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/events"
	"github.com/gorilla/websocket"
)

// FuzzSubscribeReposCursor subscribes with any query string. The upgrade is
// never refused with a 5xx; a cursor that cannot be replayed is a named
// error frame (InvalidRequest, FutureCursor); a past cursor replays from
// the event after it; and the subscription ends when the client goes,
// within callTimeout.
func FuzzSubscribeReposCursor(f *testing.F) {
	p := newFuzzPDS(f)
	ln := newPipeListener()
	ended := make(chan struct{}, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { ended <- struct{}{} }()
		p.s.Handler().ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	f.Cleanup(func() { srv.Close() })
	for _, q := range []string{"", "cursor=0", "cursor=1", "cursor=5", "cursor=-1", "cursor=abc", "cursor=99999999",
		"cursor=9223372036854775807", "cursor=9223372036854775808", "cursor=1&cursor=2", "cursor=%zz", "cursor=+3",
		"cursor=%203", "cursor=3.0", "cursor=1e3", "cursor=0x10", "cursor"} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, query string) {
		u, err := url.Parse("ws://pipe/xrpc/com.atproto.sync.subscribeRepos?" + query)
		if err != nil || strings.ContainsAny(query, "# \x00\r\n\t") {
			return // no request carries it
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		d := websocket.Dialer{NetDialContext: ln.Dial, HandshakeTimeout: callTimeout}
		conn, resp, err := d.DialContext(ctx, u.String(), nil)
		if err != nil {
			if resp == nil {
				t.Fatalf("%q: %v", query, err)
			}
			if resp.StatusCode >= 500 {
				t.Fatalf("%q: upgrade answered %d", query, resp.StatusCode)
			}
			waitEnded(t, query, ended)
			return
		}
		head, err := p.s.Seq(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cursor := u.Query().Get("cursor")
		n, perr := strconv.ParseInt(cursor, 10, 64)
		if cursor != "" && (perr != nil || n != head) {
			// Something must come: an error frame or the replay.
			_ = conn.SetReadDeadline(time.Now().Add(callTimeout))
			_, frame, err := conn.ReadMessage()
			if err != nil {
				t.Fatalf("%q (head %d): no frame: %v", query, head, err)
			}
			checkFrame(t, query, frame, n, head, perr == nil && n >= 0)
		}
		conn.Close()
		waitEnded(t, query, ended)
	})
}

// checkFrame holds a subscription's first frame to what the cursor asks:
// a replay from after it (an #info OutdatedCursor may come first), or,
// for an invalid or future cursor, an error frame naming why.
func checkFrame(t *testing.T, query string, frame []byte, cursor, head int64, valid bool) {
	t.Helper()
	r := bytes.NewReader(frame)
	var h events.EventHeader
	if err := h.UnmarshalCBOR(r); err != nil {
		t.Fatalf("%q: frame header: %v", query, err)
	}
	switch {
	case h.Op == events.EvtKindErrorFrame:
		var e events.ErrorFrame
		if err := e.UnmarshalCBOR(r); err != nil {
			t.Fatalf("%q: error frame: %v", query, err)
		}
		want := "InvalidRequest"
		if valid && cursor > head {
			want = "FutureCursor"
		}
		if e.Error != want {
			t.Fatalf("%q (head %d): error frame %s %q, want %s", query, head, e.Error, e.Message, want)
		}
	case h.Op == events.EvtKindMessage && valid && cursor < head:
		rest := frame[len(frame)-r.Len():]
		body, err := atdata.UnmarshalCBOR(rest)
		if err != nil {
			t.Fatalf("%q: %s body: %v", query, h.MsgType, err)
		}
		if h.MsgType == "#info" {
			return
		}
		seq, _ := body["seq"].(int64)
		if seq <= cursor || seq > head {
			t.Fatalf("%q (head %d): first event %s seq %d", query, head, h.MsgType, seq)
		}
	default:
		t.Fatalf("%q (head %d): first frame op %d %s", query, head, h.Op, h.MsgType)
	}
}

// waitEnded waits for the subscription's handler to return.
func waitEnded(t *testing.T, query string, ended <-chan struct{}) {
	t.Helper()
	select {
	case <-ended:
	case <-time.After(callTimeout):
		t.Fatalf("%q: the subscription did not end within %v of the client leaving", query, callTimeout)
	}
}
