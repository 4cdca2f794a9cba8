package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/events"
	"github.com/bluesky-social/indigo/events/schedulers/sequential"
	"github.com/gorilla/websocket"
)

// Event is one firehose message. Exactly one of the typed fields is set,
// named by Type.
type Event struct {
	Seq  int64
	Type string // "#commit", "#sync", "#identity", "#account", "#info", or "error"
	DID  string

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

func (e Event) String() string {
	return fmt.Sprintf("%s seq=%d did=%s", e.Type, e.Seq, e.DID)
}

// Firehose is a subscription to the PDS's com.atproto.sync.subscribeRepos,
// read with indigo's own consumer. It ends with the test.
type Firehose struct {
	t      testing.TB
	events chan Event
	done   chan struct{}
	mu     sync.Mutex
	err    error
}

// FirehoseOption configures Firehose.
type FirehoseOption func(*firehoseOptions)

type firehoseOptions struct{ cursor *int64 }

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
	var o firehoseOptions
	for _, opt := range opts {
		opt(&o)
	}
	u := "ws" + strings.TrimPrefix(p.url, "http") + "/xrpc/com.atproto.sync.subscribeRepos"
	if o.cursor != nil {
		u += "?cursor=" + strconv.FormatInt(*o.cursor, 10)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(t.Context(), u, nil)
	if err != nil {
		t.Fatalf("harness.Firehose: %v", err)
	}
	f := &Firehose{t: t, events: make(chan Event, 10_000), done: make(chan struct{})}
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
			return send(Event{Seq: e.Seq, Type: "#commit", DID: e.Repo, Commit: e})
		},
		RepoSync: func(e *comatproto.SyncSubscribeRepos_Sync) error {
			return send(Event{Seq: e.Seq, Type: "#sync", DID: e.Did, Sync: e})
		},
		RepoIdentity: func(e *comatproto.SyncSubscribeRepos_Identity) error {
			return send(Event{Seq: e.Seq, Type: "#identity", DID: e.Did, Identity: e})
		},
		RepoAccount: func(e *comatproto.SyncSubscribeRepos_Account) error {
			return send(Event{Seq: e.Seq, Type: "#account", DID: e.Did, Account: e})
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

// DefaultWait bounds the waits of a Firehose when the context has no
// deadline of its own: long enough for a loaded CI machine, short enough
// that a missing event fails the test instead of hanging it.
const DefaultWait = 10 * time.Second

func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, DefaultWait)
}

// ErrFirehoseClosed: the subscription ended (the server closed it, or the
// test did).
var ErrFirehoseClosed = errors.New("harness: firehose closed")

// Next returns the next event, waiting at most until ctx ends (or
// DefaultWait when ctx has no deadline).
func (f *Firehose) Next(ctx context.Context) (Event, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	select {
	case e, ok := <-f.events:
		if !ok {
			f.mu.Lock()
			defer f.mu.Unlock()
			return Event{}, fmt.Errorf("%w: %v", ErrFirehoseClosed, f.err)
		}
		return e, nil
	case <-ctx.Done():
		return Event{}, fmt.Errorf("harness: no firehose event: %w", ctx.Err())
	}
}

// WaitFor skips events until one satisfies match and returns it.
func (f *Firehose) WaitFor(ctx context.Context, match func(Event) bool) (Event, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	for {
		e, err := f.Next(ctx)
		if err != nil {
			return Event{}, err
		}
		if match(e) {
			return e, nil
		}
	}
}

// WaitSeq skips events until the one with seq (or a later one) arrives.
func (f *Firehose) WaitSeq(ctx context.Context, seq int64) (Event, error) {
	return f.WaitFor(ctx, func(e Event) bool { return e.Seq >= seq })
}

// Require is WaitFor that fails the test when no event matches in time.
func (f *Firehose) Require(match func(Event) bool) Event {
	f.t.Helper()
	e, err := f.WaitFor(f.t.Context(), match)
	if err != nil {
		f.t.Fatalf("harness: firehose: %v", err)
	}
	return e
}
