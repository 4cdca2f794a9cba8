package firehose_test

import (
	"bytes"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/events"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/internal/sockbuf"
	"github.com/fakepds/fakepds/internal/stacks"
	"github.com/fakepds/fakepds/pds/firehose"
	"github.com/fakepds/fakepds/pds/sequencer"
)

// smallBufferDialer dials with a receive buffer of n bytes: a consumer
// whose kernel holds little more than it has read.
func smallBufferDialer(n int) *websocket.Dialer {
	return &websocket.Dialer{NetDialContext: sockbuf.Dialer(n).DialContext}
}

// frameSeq is a frame's seq, or its error's name.
func frameSeq(t *testing.T, msg []byte) (int64, string) {
	t.Helper()
	var e events.XRPCStreamEvent
	if err := e.Deserialize(bytes.NewReader(msg)); err != nil {
		t.Fatal(err)
	}
	if e.Error != nil {
		return 0, e.Error.Error
	}
	return e.Sequence(), ""
}

// A consumer that reads, but slower than events come, is cut off with
// ConsumerTooSlow once it is more than MaxBacklog events behind, and it
// reads that error frame after every frame sent before it, then the close
// (1008). Its socket fills first: the backlog passes the bound while the
// server's writes wait for it, so the error frame goes behind a full
// socket. The server's send buffer is bounded, so a blocked write wakes
// after the reader has taken a few frames (not a third of the megabytes
// Linux gives a loopback socket, which at this reader's pace takes longer
// than the write timeout: the old cut without the frame), and a stalled
// subscriber holds little in the kernel.
func TestSlowConsumerReadsConsumerTooSlow(t *testing.T) {
	const bound = 50
	f := setup(t, firehose.Options{MaxBacklog: bound})
	conn, _, err := smallBufferDialer(4<<10).DialContext(t.Context(), f.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	blocks := make([]byte, 8<<10)
	big := func(n int) {
		evs := make([]sequencer.Event, n)
		for i := range evs {
			evs[i] = sequencer.Sync(&comatproto.SyncSubscribeRepos_Sync{Did: "did:plc:slow", Rev: "3k2aaaaaaaaaa", Blocks: blocks})
		}
		f.append(t, evs...)
	}
	read := func() (int64, string) {
		t.Helper()
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang fails, it does not time anything
		_, msg, err := conn.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		return frameSeq(t, msg)
	}
	big(1)
	if seq, name := read(); seq != 1 {
		t.Fatalf("first frame: seq %d %q", seq, name)
	}

	// Fill the socket without reading, in steps under the bound, each
	// sent (the handler back waiting for events) before the next, until
	// the handler waits on the full socket.
	head := int64(1)
	writing := func() int { return stacks.Count("IO wait", "(*Handler).stream", "(*Handler).write", "waitWrite") }
	for writing() == 0 {
		if head > 2000 {
			t.Fatalf("the handler still writes after %d frames of 8 KiB to a reader that reads none", head)
		}
		big(10)
		head += 10
		waitFor(t, "the handler to send the frames or block", func() bool {
			return writing() == 1 || stacks.Count("select", "(*Handler).stream") == 1
		})
	}
	t.Logf("the handler blocked at most %d frames (%d KiB) in", head-1, (head-1)*8)
	if held := (head - 1) * 8 << 10; held > 1<<20 {
		t.Errorf("a subscriber that reads nothing took %d KiB before its writes blocked, want at most 1 MiB (the send buffer is not bounded)", held>>10)
	}

	// Now the backlog passes the bound while the writes wait.
	filled := head
	big(3 * bound)
	head += 3 * bound
	for want := int64(2); ; want++ {
		time.Sleep(100 * time.Millisecond) // slower than the events came
		seq, name := read()
		if name != "" {
			if name != "ConsumerTooSlow" {
				t.Fatalf("error frame %q after seq %d, want ConsumerTooSlow", name, want-1)
			}
			if want-1 > filled {
				t.Errorf("cut after seq %d, the last frame before the backlog passed %d", want-1, bound)
			}
			break
		}
		if seq != want {
			t.Fatalf("frame seq %d, want %d", seq, want)
		}
		if seq == head {
			t.Fatalf("read every frame (%d), no ConsumerTooSlow", seq)
		}
	}
	_, _, err = conn.ReadMessage()
	if !websocket.IsCloseError(err, websocket.ClosePolicyViolation) {
		t.Fatalf("after the error frame: %v, want a close 1008", err)
	}
}
