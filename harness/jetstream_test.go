package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/api/bsky"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/jetstream/pkg/client"
	"github.com/bluesky-social/jetstream/pkg/client/schedulers/sequential"
	"github.com/bluesky-social/jetstream/pkg/models"

	"github.com/fakepds/fakepds/harness"
)

// jetstreamClient runs Jetstream's own Go client (pkg/client, with its
// default compression on) against the PDS and hands over what it reads.
func jetstreamClient(t *testing.T, p *harness.PDS, cursor *int64, dids []string, collections ...string) <-chan *models.Event {
	t.Helper()
	cfg := client.DefaultClientConfig()
	u, cut := relay(t, p.JetstreamURL())
	cfg.WebsocketURL = u
	cfg.WantedDids, cfg.WantedCollections = dids, collections
	ch := make(chan *models.Event, 1000)
	sched := sequential.NewScheduler(t.Name(), slog.New(slog.DiscardHandler), func(_ context.Context, e *models.Event) error {
		ch <- e
		return nil
	})
	c, err := client.NewClient(cfg, slog.New(slog.DiscardHandler), sched)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.ConnectAndRead(ctx, cursor)
	}()
	t.Cleanup(func() {
		cancel()
		cut()
		<-done
	})
	return ch
}

// relay is u through a relay that cut closes: the client checks its
// context only between messages, so it ends when its connection does.
func relay(t *testing.T, u string) (string, func()) {
	t.Helper()
	target, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := target.Host
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, c, up)
			mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	cut := func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}
	// The PDS answers only the host name it was given.
	target.Host = net.JoinHostPort(target.Hostname(), strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	return target.String(), cut
}

// next is the client's next event, or the test fails after a bound.
func next(t *testing.T, ch <-chan *models.Event) *models.Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(harness.DefaultWait):
		t.Fatal("Jetstream's client read no event in time")
		return nil
	}
}

// opOf names a Jetstream event for comparison: "create app.bsky.feed.post/rkey".
func opOf(e *models.Event) string {
	if e.Commit == nil {
		return e.Kind
	}
	return e.Commit.Operation + " " + e.Commit.Collection + "/" + e.Commit.RKey
}

func pathOf(uri syntax.ATURI) string {
	return uri.Collection().String() + "/" + uri.RecordKey().String()
}

// Jetstream's own client reads fakepds's Jetstream: posts and deletes
// with their records and CIDs, a collection prefix and DIDs filtering,
// identity events passing the collection filter, and a time_us cursor
// replaying from an event, inclusively.
func TestJetstreamClient(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a, b, other := p.NewAccount(t), p.NewAccount(t), p.NewAccount(t)
	since := time.Now().UnixMicro()
	ch := jetstreamClient(t, p, &since, []string{a.DID.String(), b.DID.String()}, "app.bsky.feed.*")

	post := a.Post(t, "hello & <jetstream>")
	a.Follow(t, b.DID) // app.bsky.graph: not wanted
	other.Post(t, "not a wanted DID")
	reply := b.ReplyTo(t, post, "a reply")
	a.DeletePost(t, post)
	like := a.Like(t, reply)
	handle := "js-" + a.Handle.String()
	a.SetHandle(t, handle) // identity: whatever the collections

	want := []string{"create " + pathOf(post.URI), "create " + pathOf(reply.URI), "delete " + pathOf(post.URI), "create " + pathOf(like.URI), "identity"}
	var got []*models.Event
	for range want {
		got = append(got, next(t, ch))
	}
	for i, e := range got {
		if opOf(e) != want[i] {
			t.Fatalf("event %d is %q, want %q", i, opOf(e), want[i])
		}
		if i > 0 && e.TimeUS <= got[i-1].TimeUS {
			t.Errorf("time_us %d after %d: not increasing", e.TimeUS, got[i-1].TimeUS)
		}
	}
	created := got[0]
	if created.Did != a.DID.String() || created.Commit.CID != post.CID || created.Commit.Rev == "" {
		t.Errorf("create: did %s cid %s rev %q; want %s %s and a rev", created.Did, created.Commit.CID, created.Commit.Rev, a.DID, post.CID)
	}
	if !bytes.Contains(created.Commit.Record, []byte(`"text":"hello & <jetstream>"`)) {
		t.Errorf("record %s: the text not as written", created.Commit.Record)
	}
	var rec bsky.FeedPost
	if err := json.Unmarshal(created.Commit.Record, &rec); err != nil || rec.Text != "hello & <jetstream>" || rec.LexiconTypeID != "app.bsky.feed.post" {
		t.Errorf("record %s: %+v, %v", created.Commit.Record, rec, err)
	}
	if del := got[2]; del.Commit.Record != nil || del.Commit.CID != "" {
		t.Errorf("delete carries a record %s / cid %q", del.Commit.Record, del.Commit.CID)
	}
	if id := got[4]; id.Identity == nil || id.Identity.Did != a.DID.String() || id.Identity.Handle == nil || *id.Identity.Handle != handle {
		t.Errorf("identity event %+v, want %s's new handle %s", id.Identity, a.DID, handle)
	}

	// Replay from the reply's time_us: the reply again, then what followed.
	from := got[1].TimeUS
	replay := jetstreamClient(t, p, &from, []string{a.DID.String(), b.DID.String()}, "app.bsky.feed.*")
	for i := 1; i < len(want); i++ {
		if e := next(t, replay); opOf(e) != want[i] || e.TimeUS != got[i].TimeUS {
			t.Fatalf("replayed event %q at %d, want %q at %d", opOf(e), e.TimeUS, want[i], got[i].TimeUS)
		}
	}
}

// options_update replaces a live subscription's filters; the harness's
// helper reads the stream, compressed as Jetstream's client asks.
func TestJetstreamOptionsUpdate(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a, b := p.NewAccount(t), p.NewAccount(t)
	js := p.Jetstream(t, harness.WantDIDs(a.DID), harness.WantCollections("app.bsky.feed.post"), harness.JetstreamCompressed(),
		harness.JetstreamWaitAtMost(time.Second))
	first := a.Post(t, "a, wanted")
	b.Post(t, "b, not yet wanted")
	if e, err := js.Next(t.Context()); err != nil || !harness.JetstreamOp("create", first.URI)(e) {
		t.Fatalf("first event %+v, %v; want a's post", e, err)
	}

	js.UpdateOptions(t, harness.WantDIDs(b.DID))
	// The server applies the update when it reads it: b posts until one
	// of its posts comes, which proves the new filter is in force.
	var marker harness.Ref
	for i := 0; ; i++ {
		marker = b.Post(t, "b, wanted now")
		if _, err := js.WaitFor(t.Context(), harness.JetstreamOp("create", marker.URI)); err == nil {
			break
		} else if i == 20 {
			t.Fatal(err)
		}
	}
	a.Post(t, "a, not wanted any more")
	follow := b.Follow(t, a.DID) // any collection now
	if e, err := js.Next(t.Context()); err != nil || !harness.JetstreamOp("create", follow.URI)(e) {
		t.Fatalf("after the update: %+v, %v; want b's follow", e, err)
	}

	// A cursor from an event's Cursor replays from that very event.
	again := p.Jetstream(t, harness.WantDIDs(b.DID), harness.JetstreamCursor(0))
	e := again.Require(t, harness.JetstreamOp("create", marker.URI))
	exact := p.Jetstream(t, harness.WantDIDs(b.DID), harness.JetstreamCursor(e.Cursor))
	if got, err := exact.Next(t.Context()); err != nil || got.Cursor != e.Cursor || !harness.JetstreamOp("create", marker.URI)(got) {
		t.Fatalf("from cursor %d: %s, %v", e.Cursor, harness.JetstreamString(got), err)
	}
}

// A Jetstream, like a Firehose, serves one wait at a time: a second wait
// would split the events between them and race on what the first saw.
func TestJetstreamRefusesConcurrentWaits(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	a := p.NewAccount(t)
	js := p.Jetstream(t, harness.WantDIDs(a.DID), harness.JetstreamWaitAtMost(5*time.Second))
	inside, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := js.WaitFor(t.Context(), func(harness.JetstreamEvent) bool {
			close(inside)
			<-release
			return true
		})
		first <- err
	}()
	a.Post(t, "one")
	a.Post(t, "two")
	<-inside
	if _, err := js.Next(t.Context()); !errors.Is(err, harness.ErrConcurrentWait) {
		t.Errorf("Next during a WaitFor: err = %v, want ErrConcurrentWait", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first wait: %v", err)
	}
	if _, err := js.Next(t.Context()); err != nil {
		t.Fatalf("a wait after the first ended: %v", err)
	}
}
