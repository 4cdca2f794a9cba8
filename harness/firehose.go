package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/indigo/events"
	"github.com/bluesky-social/indigo/events/schedulers/sequential"
	"github.com/gorilla/websocket"
)

// Event is one firehose message. Exactly one of the typed fields is set,
// named by Type.
type Event struct {
	Seq  int64
	Type string     // "#commit", "#sync", "#identity", "#account", "#info", or "error"
	DID  syntax.DID // the repo's or account's; empty for #info and errors

	Commit   *comatproto.SyncSubscribeRepos_Commit
	Sync     *comatproto.SyncSubscribeRepos_Sync
	Identity *comatproto.SyncSubscribeRepos_Identity
	Account  *comatproto.SyncSubscribeRepos_Account
	Info     *comatproto.SyncSubscribeRepos_Info
	Error    *events.ErrorFrame
}

// HasOp reports whether a #commit event holds an op with this action
// ("create", "update", "delete") on a path starting with prefix
// ("app.bsky.feed.post/" or a whole "collection/rkey").
func (e Event) HasOp(action, prefix string) bool {
	if e.Commit == nil {
		return false
	}
	for _, op := range e.Commit.Ops {
		if op.Action == action && strings.HasPrefix(op.Path, prefix) {
			return true
		}
	}
	return false
}

// HasRecordOp reports whether a #commit event holds an op with this
// action ("create", "update", "delete") on the record at uri, in uri's
// repo: what a test checks after a write that returned uri.
func (e Event) HasRecordOp(action string, uri syntax.ATURI) bool {
	if e.Commit == nil || e.Commit.Repo != uri.Authority().String() {
		return false
	}
	path := uri.Collection().String() + "/" + uri.RecordKey().String()
	for _, op := range e.Commit.Ops {
		if op.Action == action && op.Path == path {
			return true
		}
	}
	return false
}

func (e Event) String() string {
	return fmt.Sprintf("%s seq=%d did=%s", e.Type, e.Seq, e.DID)
}

// Firehose is a subscription to the PDS's com.atproto.sync.subscribeRepos,
// read with indigo's own consumer. It ends with the test.
//
// It is one ordered stream: each event goes to one wait. Waits may come
// from any goroutine, one at a time; a wait begun while another is under
// way returns ErrConcurrentWait (Require fails its test) instead of
// splitting the events between them. Two readers take two subscriptions.
type Firehose struct {
	url     string
	wait    time.Duration
	events  chan Event
	done    chan struct{}
	waiting atomic.Bool
	mu      sync.Mutex
	err     error
}

// seen is what one wait skipped, for the message of a wait that found
// nothing.
type seen struct {
	skipped int
	last    Event
}

// FirehoseOption configures Firehose.
type FirehoseOption func(*firehoseOptions)

type firehoseOptions struct {
	cursor *int64
	wait   time.Duration
}

// WaitAtMost bounds each wait of the subscription (Next, WaitFor, WaitSeq,
// Require) at d instead of DefaultWait, when the context (or the test)
// has no earlier deadline.
func WaitAtMost(d time.Duration) FirehoseOption {
	return func(o *firehoseOptions) { o.wait = d }
}

// FromSeq replays every event after seq, then goes live (0: from the
// oldest retained event).
func FromSeq(seq int64) FirehoseOption {
	return func(o *firehoseOptions) { o.cursor = &seq }
}

// Firehose subscribes to the PDS's firehose: live from now, or from a seq
// (FromSeq). When it returns, the subscription is in place: any write the
// test makes next is seen.
func (p *PDS) Firehose(t testing.TB, opts ...FirehoseOption) *Firehose {
	t.Helper()
	p.alive(t, "Firehose")
	o := firehoseOptions{wait: DefaultWait}
	for _, opt := range opts {
		opt(&o)
	}
	if o.wait <= 0 {
		t.Fatalf("harness.Firehose: WaitAtMost(%s): a wait must be positive", o.wait)
	}
	u := "ws" + strings.TrimPrefix(p.url, "http") + "/xrpc/com.atproto.sync.subscribeRepos"
	if o.cursor != nil {
		u += "?cursor=" + strconv.FormatInt(*o.cursor, 10)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), u, nil)
	if err != nil {
		t.Fatalf("harness.Firehose: %v", err)
	}
	f := &Firehose{url: u, wait: o.wait, events: make(chan Event, 10_000), done: make(chan struct{})}
	send := func(e Event) error {
		select {
		case f.events <- e:
			return nil
		case <-f.done:
			return context.Canceled
		}
	}
	cb := &events.RepoStreamCallbacks{
		RepoCommit: func(e *comatproto.SyncSubscribeRepos_Commit) error {
			return send(Event{Seq: e.Seq, Type: "#commit", DID: syntax.DID(e.Repo), Commit: e})
		},
		RepoSync: func(e *comatproto.SyncSubscribeRepos_Sync) error {
			return send(Event{Seq: e.Seq, Type: "#sync", DID: syntax.DID(e.Did), Sync: e})
		},
		RepoIdentity: func(e *comatproto.SyncSubscribeRepos_Identity) error {
			return send(Event{Seq: e.Seq, Type: "#identity", DID: syntax.DID(e.Did), Identity: e})
		},
		RepoAccount: func(e *comatproto.SyncSubscribeRepos_Account) error {
			return send(Event{Seq: e.Seq, Type: "#account", DID: syntax.DID(e.Did), Account: e})
		},
		RepoInfo: func(e *comatproto.SyncSubscribeRepos_Info) error {
			return send(Event{Type: "#info", Info: e})
		},
		Error: func(e *events.ErrorFrame) error {
			return send(Event{Type: "error", Error: e})
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		err := events.HandleRepoStream(ctx, conn, sequential.NewScheduler("harness", cb.EventHandler), slog.New(slog.DiscardHandler))
		f.mu.Lock()
		f.err = err
		f.mu.Unlock()
		close(f.events)
	}()
	t.Cleanup(func() {
		close(f.done)
		cancel()
		conn.Close()
		<-stopped
	})
	return f
}

// DefaultWait bounds each wait of the harness (a Firehose's, WaitCaughtUp,
// WaitSubscribers) when the context or test has no earlier deadline: long
// enough for a loaded CI machine, short enough that a missing event fails
// the test instead of hanging it. A Firehose takes another bound with
// WaitAtMost.
const DefaultWait = 10 * time.Second

// bounded is ctx cut at d from now, unless its own deadline comes first.
func bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// ErrFirehoseClosed: the subscription ended (the server closed it, or the
// test did).
var ErrFirehoseClosed = errors.New("harness: firehose closed")

// ErrNoEvent is wrapped by the error of a wait that ended (its bound, its
// context) before an event it wanted came.
var ErrNoEvent = errors.New("harness: no matching event")

// ErrConcurrentWait: a wait began while another wait on the same Firehose
// (or Jetstream) was under way.
var ErrConcurrentWait = errors.New("harness: another wait on this subscription is under way (one wait at a time; subscribe again for a second reader)")

// begin claims the subscription for one wait; end releases it.
func (f *Firehose) begin() error {
	if !f.waiting.CompareAndSwap(false, true) {
		return ErrConcurrentWait
	}
	return nil
}

func (f *Firehose) end() { f.waiting.Store(false) }

// Next returns the next event, waiting at most until ctx ends or the
// subscription's bound (DefaultWait, or WaitAtMost's) passes.
func (f *Firehose) Next(ctx context.Context) (Event, error) {
	if err := f.begin(); err != nil {
		return Event{}, err
	}
	defer f.end()
	ctx, cancel := bounded(ctx, f.wait)
	defer cancel()
	return f.next(ctx, time.Now(), &seen{})
}

func (f *Firehose) next(ctx context.Context, began time.Time, s *seen) (Event, error) {
	select {
	case e, ok := <-f.events:
		if !ok {
			f.mu.Lock()
			defer f.mu.Unlock()
			return Event{}, fmt.Errorf("%w (%s): %v", ErrFirehoseClosed, f.url, f.err)
		}
		return e, nil
	case <-ctx.Done():
		return Event{}, f.timeout(ctx, began, s)
	}
}

// timeout says what a wait saw before it gave up, and what bounded it.
func (f *Firehose) timeout(ctx context.Context, began time.Time, s *seen) error {
	bound := fmt.Sprintf("the wait's bound (%s; harness.WaitAtMost changes it)", f.wait)
	if f.wait == DefaultWait {
		bound = fmt.Sprintf("harness.DefaultWait (%s; harness.WaitAtMost or a context deadline changes it)", DefaultWait)
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		bound = "its context"
	} else if dl, ok := ctx.Deadline(); ok && dl.Sub(began) < f.wait-time.Millisecond {
		bound = "the context's deadline"
	}
	last := "no event arrived"
	if s.last.Type != "" {
		last = fmt.Sprintf("%d skipped; the last: %s", s.skipped, s.last)
	}
	return fmt.Errorf("%w on the firehose after %s, ended by %s: %s: %w", ErrNoEvent, time.Since(began).Round(time.Millisecond), bound, last, ctx.Err())
}

// WaitFor skips events until one satisfies match and returns it. When
// none comes in time its error says how many it skipped and the last one.
func (f *Firehose) WaitFor(ctx context.Context, match func(Event) bool) (Event, error) {
	if err := f.begin(); err != nil {
		return Event{}, err
	}
	defer f.end()
	ctx, cancel := bounded(ctx, f.wait)
	defer cancel()
	began := time.Now()
	var s seen
	for {
		e, err := f.next(ctx, began, &s)
		if err != nil {
			return Event{}, err
		}
		if match(e) {
			return e, nil
		}
		s.skipped++
		s.last = e
	}
}

// WaitSeq skips events until the one with seq (or a later one) arrives.
func (f *Firehose) WaitSeq(ctx context.Context, seq int64) (Event, error) {
	return f.WaitFor(ctx, func(e Event) bool { return e.Seq >= seq })
}

// Require is WaitFor that fails t (the test that calls it: a subtest may
// use its parent's subscription) when no event matches in time.
func (f *Firehose) Require(t testing.TB, match func(Event) bool) Event {
	t.Helper()
	e, err := f.WaitFor(t.Context(), match)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
