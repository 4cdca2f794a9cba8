package firehose_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/events"
	"github.com/bluesky-social/indigo/events/schedulers/sequential"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/firehose"
	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
)

type fixture struct {
	h     *firehose.Handler
	seq   *sequencer.Sequencer
	clock *clock.Shifted
	url   string
}

func setup(t *testing.T, opts firehose.Options) *fixture {
	t.Helper()
	seq, err := sequencer.Open(t.Context(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seq.Close() })
	c := &clock.Shifted{}
	opts.Clock = c
	opts.Logger = slog.New(slog.DiscardHandler)
	h := firehose.New(seq, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{h: h, seq: seq, clock: c, url: "ws" + strings.TrimPrefix(srv.URL, "http")}
}

// got is what a subscriber received, in order, as "type:seq:did" strings,
// plus errors and infos by name.
type got struct {
	ch chan string
}

// subscribe consumes the stream with indigo's own firehose consumer, so the
// frames are checked by the code relays run.
func (f *fixture) subscribe(t *testing.T, query string) *got {
	t.Helper()
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), f.url+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &got{ch: make(chan string, 1000)}
	cb := &events.RepoStreamCallbacks{
		RepoIdentity: func(e *comatproto.SyncSubscribeRepos_Identity) error {
			g.ch <- fmt.Sprintf("identity:%d:%s", e.Seq, e.Did)
			return nil
		},
		RepoAccount: func(e *comatproto.SyncSubscribeRepos_Account) error {
			g.ch <- fmt.Sprintf("account:%d:%s", e.Seq, e.Did)
			return nil
		},
		RepoInfo: func(e *comatproto.SyncSubscribeRepos_Info) error {
			g.ch <- "info:" + e.Name
			return nil
		},
		Error: func(e *events.ErrorFrame) error {
			g.ch <- "error:" + e.Error
			return nil
		},
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		events.HandleRepoStream(ctx, conn, sequential.NewScheduler("test", cb.EventHandler), slog.New(slog.DiscardHandler))
		g.ch <- "closed"
	}()
	t.Cleanup(func() { cancel(); conn.Close(); <-done })
	return g
}

// next waits for the next item; the deadline only turns a hang into a
// failure.
func (g *got) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-g.ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
		return ""
	}
}

func (g *got) expect(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		if s := g.next(t); s != w {
			t.Fatalf("got %q, want %q", s, w)
		}
	}
}

func (f *fixture) append(t *testing.T, evs ...sequencer.Event) {
	t.Helper()
	if _, err := f.seq.Append(t.Context(), f.clock.Now(), evs...); err != nil {
		t.Fatal(err)
	}
}

func TestLiveAndReplay(t *testing.T) {
	f := setup(t, firehose.Options{})
	f.append(t, sequencer.Identity("did:plc:a", "a.test"), sequencer.Account("did:plc:a", ""))

	live := f.subscribe(t, "")
	// Subscribing is asynchronous; an event appended after the connection
	// is up reaches the live subscriber, earlier ones do not.
	replay := f.subscribe(t, "?cursor=1")
	replay.expect(t, "account:2:did:plc:a")

	f.append(t, sequencer.Identity("did:plc:b", "b.test"))
	replay.expect(t, "identity:3:did:plc:b")
	live.expect(t, "identity:3:did:plc:b")

	all := f.subscribe(t, "?cursor=0")
	all.expect(t, "identity:1:did:plc:a", "account:2:did:plc:a", "identity:3:did:plc:b")
}

func TestFutureCursor(t *testing.T) {
	f := setup(t, firehose.Options{})
	f.append(t, sequencer.Identity("did:plc:a", "a.test"))
	f.subscribe(t, "?cursor=5").expect(t, "error:FutureCursor", "closed")
}

func TestOutdatedCursor(t *testing.T) {
	f := setup(t, firehose.Options{Retention: time.Hour})
	f.append(t, sequencer.Identity("did:plc:old", ""))
	f.append(t, sequencer.Identity("did:plc:old", ""))
	f.clock.Advance(2 * time.Hour)
	f.append(t, sequencer.Identity("did:plc:new", ""))
	g := f.subscribe(t, "?cursor=0")
	g.expect(t, "info:OutdatedCursor", "identity:3:did:plc:new")
	// A cursor inside the window replays without the info.
	f.subscribe(t, "?cursor=2").expect(t, "identity:3:did:plc:new")
}

func TestConsumerTooSlow(t *testing.T) {
	f := setup(t, firehose.Options{MaxBacklog: 5})
	g := f.subscribe(t, "")
	// Let the subscriber get live: one event it sees.
	f.append(t, sequencer.Identity("did:plc:a", ""))
	g.expect(t, "identity:1:did:plc:a")
	burst := make([]sequencer.Event, 10)
	for i := range burst {
		burst[i] = sequencer.Identity("did:plc:b", "")
	}
	f.append(t, burst...)
	g.expect(t, "error:ConsumerTooSlow", "closed")
}
