package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/gorilla/websocket"
	"github.com/klauspost/compress/zstd"

	"github.com/fakepds/fakepds/pds/jetstream"
)

// JetstreamEvent is one event of the PDS's Jetstream, as it came on the
// wire: Kind "commit" (Commit set), "identity" or "account".
type JetstreamEvent = jetstream.Event

// JetstreamURL is the ws:// URL of the PDS's Jetstream (/subscribe, the
// JSON stream that Jetstream serves): fakepds serves its own repos there;
// the reference PDS serves none.
func (p *PDS) JetstreamURL() string {
	return jetstream.URL(p.url)
}

// JetstreamOption configures Jetstream and UpdateOptions.
type JetstreamOption func(*jetstreamOptions)

type jetstreamOptions struct {
	collections []string
	dids        []string
	cursor      *int64
	compress    bool
	wait        time.Duration
}

// WantCollections asks only for commits in these collections: NSIDs, or
// prefixes such as "app.bsky.graph.*" (Jetstream's wantedCollections).
func WantCollections(nsids ...string) JetstreamOption {
	return func(o *jetstreamOptions) { o.collections = append(o.collections, nsids...) }
}

// WantDIDs asks only for the events of these accounts (wantedDids).
func WantDIDs(dids ...syntax.DID) JetstreamOption {
	return func(o *jetstreamOptions) {
		for _, d := range dids {
			o.dids = append(o.dids, d.String())
		}
	}
}

// JetstreamCursor replays from a cursor, then goes live: an event's TimeUS
// (a unix-microsecond time: from the first event at or after it) or its
// Cursor (from that very event).
func JetstreamCursor(cursor int64) JetstreamOption {
	return func(o *jetstreamOptions) { o.cursor = &cursor }
}

// JetstreamCompressed asks for zstd-compressed frames (compress=true) and
// reads them with Jetstream's dictionary.
func JetstreamCompressed() JetstreamOption {
	return func(o *jetstreamOptions) { o.compress = true }
}

// JetstreamWaitAtMost bounds each wait of the subscription at d instead
// of DefaultWait.
func JetstreamWaitAtMost(d time.Duration) JetstreamOption {
	return func(o *jetstreamOptions) { o.wait = d }
}

// Jetstream is a subscription to the PDS's Jetstream. It ends with the
// test. It serves one wait at a time (ErrConcurrentWait otherwise), as a
// Firehose does.
type Jetstream struct {
	url    string
	wait   time.Duration
	conn   *websocket.Conn
	events chan JetstreamEvent
	done   chan struct{}
	mu     sync.Mutex // guards err and the connection's writes
	err    error
	// waiting is set while a wait runs: one at a time, as on a Firehose.
	waiting atomic.Bool
}

// Jetstream subscribes to the PDS's Jetstream: live from now, or from
// JetstreamCursor. When it returns, the subscription is in place: any
// write the test makes next is seen.
func (p *PDS) Jetstream(t testing.TB, opts ...JetstreamOption) *Jetstream {
	t.Helper()
	p.alive(t, "Jetstream")
	o := jetstreamOptions{wait: DefaultWait}
	for _, opt := range opts {
		opt(&o)
	}
	if o.wait <= 0 {
		t.Fatalf("harness.Jetstream: JetstreamWaitAtMost(%s): a wait must be positive", o.wait)
	}
	q := url.Values{"wantedCollections": o.collections, "wantedDids": o.dids}
	if o.cursor != nil {
		q.Set("cursor", strconv.FormatInt(*o.cursor, 10))
	}
	var dec *zstd.Decoder
	if o.compress {
		q.Set("compress", "true")
		var err error
		if dec, err = zstd.NewReader(nil, zstd.WithDecoderDicts(jetstream.Dictionary())); err != nil {
			t.Fatalf("harness.Jetstream: %v", err)
		}
		t.Cleanup(dec.Close)
	}
	u := p.JetstreamURL() + "?" + q.Encode()
	conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), u, nil)
	if err != nil {
		if resp != nil && resp.StatusCode == 404 {
			err = fmt.Errorf("%w (404: is %s a fakepds? the reference PDS serves no Jetstream)", err, p.url)
		}
		t.Fatalf("harness.Jetstream: %v", err)
	}
	j := &Jetstream{url: u, wait: o.wait, conn: conn, events: make(chan JetstreamEvent, 10_000), done: make(chan struct{})}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		err := j.read(dec)
		j.mu.Lock()
		j.err = err
		j.mu.Unlock()
		close(j.events)
	}()
	t.Cleanup(func() {
		close(j.done)
		conn.Close()
		<-stopped
	})
	return j
}

func (j *Jetstream) read(dec *zstd.Decoder) error {
	for {
		typ, msg, err := j.conn.ReadMessage()
		if err != nil {
			return err
		}
		if typ == websocket.BinaryMessage && dec != nil {
			if msg, err = dec.DecodeAll(msg, nil); err != nil {
				return fmt.Errorf("zstd frame: %w", err)
			}
		}
		var e JetstreamEvent
		if err := json.Unmarshal(msg, &e); err != nil {
			return fmt.Errorf("event %q: %w", msg, err)
		}
		select {
		case j.events <- e:
		case <-j.done:
			return context.Canceled
		}
	}
}

// UpdateOptions replaces the subscription's filters with an options_update
// message (WantCollections and WantDIDs; none: everything). Events
// sequenced after the server reads it are filtered anew; a wait that must
// not see older ones skips them (WaitFor).
func (j *Jetstream) UpdateOptions(t testing.TB, opts ...JetstreamOption) {
	t.Helper()
	var o jetstreamOptions
	for _, opt := range opts {
		opt(&o)
	}
	msg, err := json.Marshal(map[string]any{"type": "options_update", "payload": jetstream.OptionsUpdate{
		WantedCollections: o.collections, WantedDIDs: o.dids,
	}})
	if err == nil {
		j.mu.Lock()
		err = j.conn.WriteMessage(websocket.TextMessage, msg)
		j.mu.Unlock()
	}
	if err != nil {
		t.Fatalf("harness.Jetstream: options_update: %v", err)
	}
}

// ErrJetstreamClosed: the subscription ended (the server closed it, or
// the test did).
var ErrJetstreamClosed = errors.New("harness: jetstream closed")

// Next returns the next event, waiting at most until ctx ends or the
// subscription's bound passes.
func (j *Jetstream) Next(ctx context.Context) (JetstreamEvent, error) {
	return j.WaitFor(ctx, func(JetstreamEvent) bool { return true })
}

// WaitFor skips events until one satisfies match and returns it. When
// none comes in time its error says how many it skipped and the last one.
func (j *Jetstream) WaitFor(ctx context.Context, match func(JetstreamEvent) bool) (JetstreamEvent, error) {
	if !j.waiting.CompareAndSwap(false, true) {
		return JetstreamEvent{}, ErrConcurrentWait
	}
	defer j.waiting.Store(false)
	ctx, cancel := bounded(ctx, j.wait)
	defer cancel()
	began := time.Now()
	var skipped int
	var lastSeen JetstreamEvent
	for {
		select {
		case e, ok := <-j.events:
			if !ok {
				j.mu.Lock()
				defer j.mu.Unlock()
				return JetstreamEvent{}, fmt.Errorf("%w (%s): %v", ErrJetstreamClosed, j.url, j.err)
			}
			if match(e) {
				return e, nil
			}
			skipped++
			lastSeen = e
		case <-ctx.Done():
			bound := fmt.Sprintf("the wait's bound (%s; harness.JetstreamWaitAtMost or a context deadline changes it)", j.wait)
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				bound = "its context"
			}
			last := "no event arrived"
			if lastSeen.Kind != "" {
				last = fmt.Sprintf("%d skipped; the last: %s", skipped, JetstreamString(lastSeen))
			}
			return JetstreamEvent{}, fmt.Errorf("%w on the Jetstream after %s, ended by %s: %s: %w", ErrNoEvent,
				time.Since(began).Round(time.Millisecond), bound, last, ctx.Err())
		}
	}
}

// Require is WaitFor that fails t when no event matches in time.
func (j *Jetstream) Require(t testing.TB, match func(JetstreamEvent) bool) JetstreamEvent {
	t.Helper()
	e, err := j.WaitFor(t.Context(), match)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// JetstreamOp matches the commit event of operation ("create", "update",
// "delete") on the record at uri.
func JetstreamOp(operation string, uri syntax.ATURI) func(JetstreamEvent) bool {
	return func(e JetstreamEvent) bool {
		return e.Commit != nil && e.Commit.Operation == operation && e.DID == uri.Authority().String() &&
			e.Commit.Collection == uri.Collection().String() && e.Commit.RKey == uri.RecordKey().String()
	}
}

func JetstreamString(e JetstreamEvent) string {
	s := fmt.Sprintf("%s did=%s time_us=%d cursor=%d", e.Kind, e.DID, e.TimeUS, e.Cursor)
	if e.Commit != nil {
		s += fmt.Sprintf(" %s %s/%s", e.Commit.Operation, e.Commit.Collection, e.Commit.RKey)
	}
	return s
}
