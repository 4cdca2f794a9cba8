package firehose_test

import (
	"os"
	"runtime"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/internal/stacks"
	"github.com/fakepds/fakepds/pds/firehose"
	"github.com/fakepds/fakepds/pds/sequencer"
)

// blockedWriters counts the handler goroutines stuck writing a frame to a
// subscriber that does not read.
func blockedWriters() int {
	return stacks.Count("", "firehose.(*Handler).write", "poll.(*pollDesc).waitWrite")
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
	}
}

// Subscribers replaying from cursor 0 that never read: each one stalls
// its handler mid-replay, and each holds no more than its bounded buffer
// (a page of frames), not a page of 500 events; once they hang up, the
// handlers end and the heap is back where it was.
//
// FAKEPDS_SOAK=1 runs 200 subscribers.
func TestStalledSubscribersHoldBoundedMemory(t *testing.T) {
	subscribers := 20
	if os.Getenv("FAKEPDS_SOAK") == "1" {
		subscribers = 200
	}
	const frames, frameSize = 3000, 8 << 10
	f := setup(t, firehose.Options{WriteTimeout: time.Minute})
	blocks := make([]byte, frameSize)
	var batch []sequencer.Event
	for i := range frames {
		batch = append(batch, sequencer.Sync(&comatproto.SyncSubscribeRepos_Sync{Did: "did:plc:big", Rev: "3k2aaaaaaaaaa", Blocks: blocks}))
		if len(batch) == 100 || i == frames-1 {
			f.append(t, batch...)
			batch = batch[:0]
		}
	}
	base := liveHeap()

	// Each client asks for a small receive buffer, so the replay, 24 MiB,
	// is far more than the sockets absorb.
	dialer := smallBufferDialer(4 << 10)
	var conns []*websocket.Conn
	for range subscribers {
		c, _, err := dialer.DialContext(t.Context(), f.url+"?cursor=0", nil)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	waitFor(t, "every subscriber's handler to stall", func() bool { return blockedWriters() == subscribers })
	now := liveHeap()
	held := now - min(base, now)
	t.Logf("%d stalled subscribers hold %.1f MiB of heap (%.0f KiB each)", subscribers, float64(held)/(1<<20), float64(held)/float64(subscribers)/1024)
	if perSub := held / uint64(subscribers); perSub > 1<<20 {
		t.Errorf("each stalled subscriber holds %d KiB, want at most 1 MiB", perSub/1024)
	}

	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "the stalled handlers to end", func() bool { return blockedWriters() == 0 })
	if after := liveHeap(); after > base+(2<<20) {
		t.Errorf("after the subscribers left the heap is %.1f MiB above where it was", float64(after-base)/(1<<20))
	}
}

// A subscriber that stops reading is let go by the server once a write
// has waited WriteTimeout on its full socket, though it never hangs up:
// the many subscribers a machine could not hold do not pile up, each is
// held for that long at most (there is no cap on subscribers; the
// reference has none).
func TestStalledSubscriberIsLetGo(t *testing.T) {
	f := setup(t, firehose.Options{WriteTimeout: 300 * time.Millisecond})
	blocks := make([]byte, 8<<10)
	var batch []sequencer.Event
	for range 500 {
		batch = append(batch, sequencer.Sync(&comatproto.SyncSubscribeRepos_Sync{Did: "did:plc:big", Rev: "3k2aaaaaaaaaa", Blocks: blocks}))
	}
	f.append(t, batch...)
	c, _, err := smallBufferDialer(4<<10).DialContext(t.Context(), f.url+"?cursor=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	waitFor(t, "the subscriber to be served", func() bool { return f.h.Subscribers() == 1 })
	waitFor(t, "the server to let the stalled subscriber go", func() bool { return f.h.Subscribers() == 0 })
}
