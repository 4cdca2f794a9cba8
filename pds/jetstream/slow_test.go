package jetstream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/internal/sockbuf"
	"github.com/fakepds/fakepds/internal/stacks"
	"github.com/fakepds/fakepds/pds/jetstream"
	"github.com/fakepds/fakepds/pds/sequencer"
)

// smallBufferDialer dials with a receive buffer of n bytes: a consumer
// whose kernel holds little more than it has read.
func smallBufferDialer(n int) *websocket.Dialer {
	return &websocket.Dialer{NetDialContext: sockbuf.Dialer(n).DialContext}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
	}
}

// bigIdentities appends n identity events of about 8 KiB each (the handle
// is not checked on the way out, and v1 and v2 both send identities).
func bigIdentities(t *testing.T, f *fixture, n int) {
	t.Helper()
	evs := make([]sequencer.Event, n)
	for i := range evs {
		evs[i] = sequencer.Identity("did:plc:slow", strings.Repeat("h", 8<<10))
	}
	f.append(t, time.Now(), evs...)
}

// A consumer that reads, but slower than events come, is cut off once it
// is more than MaxBacklog events behind, at the next frame: it reads
// every frame sent before that in order, then (v2) the ConsumerTooSlow
// error frame, then the close 1008 (v1 gets the close alone: Jetstream's
// v1 has no error frames). The bound is passed while the server's writes
// wait for a full socket in the middle of a page of events, so the error
// frame and the close queue behind that socket, and a cut at the page's
// end rather than the next frame shows. The server's send buffer is
// bounded, so a blocked write wakes once the reader has taken a few frames
// (not a third of the megabytes Linux gives a loopback socket, which at
// this reader's pace takes longer than the write timeout: a cut with no
// close frame), and a subscriber that reads nothing holds little in the
// kernel.
func TestSlowConsumerIsCut(t *testing.T) {
	const bound = 100
	for _, v := range []string{"v1", "v2"} {
		t.Run(v, func(t *testing.T) {
			f, base := v2(t, jetstream.Options{MaxBacklog: bound})
			url := f.url
			if v == "v2" {
				url = "ws" + strings.TrimPrefix(base, "http") + jetstream.PathV2
			}
			conn, _, err := smallBufferDialer(4<<10).DialContext(t.Context(), url, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			// read is the next frame's seq, or its error's name, or the
			// close as "close CODE".
			read := func() (int64, string) {
				t.Helper()
				_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails, it does not time anything
				_, msg, err := conn.ReadMessage()
				if err != nil {
					var ce *websocket.CloseError
					if errors.As(err, &ce) {
						return 0, fmt.Sprint("close ", ce.Code)
					}
					t.Fatalf("read: %v", err)
				}
				var m struct {
					Cursor  int64  `json:"cursor"` // v1
					Type    string `json:"$type"`  // v2
					Error   string `json:"error"`
					Payload struct {
						Seq int64 `json:"seq"`
					} `json:"payload"`
				}
				if err := json.Unmarshal(msg, &m); err != nil {
					t.Fatalf("frame %.100s: %v", msg, err)
				}
				if v == "v1" {
					return m.Cursor / 1000, ""
				}
				if m.Type == "error" {
					return 0, m.Error
				}
				return m.Payload.Seq / 1000, ""
			}
			readUpTo := func(from, to int64, pause time.Duration) {
				t.Helper()
				for want := from; want <= to; want++ {
					time.Sleep(pause)
					if seq, name := read(); seq != want {
						t.Fatalf("frame seq %d %q, want %d", seq, name, want)
					}
				}
			}
			writing := func() bool {
				return stacks.Count("IO wait", "jetstream.(*Handler).stream", "jetstream.(*Handler).writeFrame", "waitWrite") == 1
			}
			waiting := func() bool { return stacks.Count("select", "jetstream.(*Handler).stream") == 1 }
			waitFor(t, "the subscriber to be served", waiting)
			bigIdentities(t, f, 1)
			readUpTo(1, 1, 0)

			// Fill the socket without reading, in steps under the bound,
			// each sent (the handler back waiting for events) before the
			// next, until the handler waits on the full socket.
			head := int64(1)
			for !writing() {
				if head > 2000 {
					t.Fatalf("the handler still writes after %d frames of 8 KiB to a reader that reads none", head)
				}
				bigIdentities(t, f, 10)
				head += 10
				waitFor(t, "the handler to send the frames or block", func() bool { return writing() || waiting() })
			}
			t.Logf("the handler blocked at most %d frames (%d KiB) in", head-1, (head-1)*8)
			if held := (head - 1) * 8 << 10; held > 1<<20 {
				t.Errorf("a subscriber that reads nothing took %d KiB before its writes blocked, want at most 1 MiB (the send buffer is not bounded)", held>>10)
			}

			// A page of events, the backlog within the bound when it is
			// read (the 9 at most of the last step not yet sent, and
			// these): the reader takes what the socket holds, and the
			// handler blocks again in the middle of the page, more than
			// the socket holds.
			filled, page := head, int64(bound-10)
			bigIdentities(t, f, int(page))
			head += page
			readUpTo(2, filled, 0)
			// Not "writing or waiting": on a loaded machine the handler
			// may not have woken to the page yet, and still be waiting.
			waitFor(t, fmt.Sprintf("the handler to block in the page of %d frames of 8 KiB (more than the socket holds)", page), writing)

			// Now the backlog passes the bound while a write waits.
			bigIdentities(t, f, 2*bound)
			head += 2 * bound
			want := filled + 1
			var name string
			for ; ; want++ {
				time.Sleep(100 * time.Millisecond) // slower than the events came
				var seq int64
				if seq, name = read(); name != "" {
					break
				}
				if seq != want {
					t.Fatalf("frame seq %d, want %d", seq, want)
				}
				if seq == head {
					t.Fatalf("read every frame (%d), not cut", seq)
				}
			}
			if want-1 >= filled+page {
				t.Errorf("cut after seq %d, the page's last: not at the frame after the backlog passed %d", want-1, bound)
			}
			if v == "v2" {
				if name != "ConsumerTooSlow" {
					t.Fatalf("after seq %d: %q, want the ConsumerTooSlow error frame", want-1, name)
				}
				_, name = read()
			}
			if name != "close 1008" {
				t.Fatalf("after seq %d: %q, want close 1008", want-1, name)
			}
		})
	}
}

// A subscriber that stops reading and never hangs up is let go once a
// write has waited WriteTimeout: its handler ends and closes the socket.
// The replay is far more than the sockets hold, so the writes block.
func TestStalledSubscriberIsLetGo(t *testing.T) {
	f := setup(t, jetstream.Options{WriteTimeout: 300 * time.Millisecond})
	bigIdentities(t, f, 500)
	c, _, err := smallBufferDialer(4<<10).DialContext(t.Context(), f.url+"?cursor=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, "the subscriber to be served", func() bool { return stacks.Count("", "jetstream.(*Handler).ServeHTTP") == 1 })
	// Its handler, and the reader the handler started, end.
	waitFor(t, "the server to let the stalled subscriber go", func() bool { return stacks.Count("", "jetstream.(*Handler).serve") == 0 })
}
