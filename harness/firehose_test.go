package harness_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/events"
	"github.com/bluesky-social/indigo/events/schedulers/sequential"
	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/harness"
)

// Issue 11.4: a subscription made in a parent test serves its subtests;
// a subtest's failed wait fails the subtest (its t), not the parent.
func TestFirehoseInSubtests(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	fh := p.Firehose(t, harness.WaitAtMost(200*time.Millisecond))
	a := p.NewAccount(t)
	t.Run("sees the post", func(t *testing.T) {
		post := a.Post(t, "in a subtest")
		e := fh.Require(t, func(e harness.Event) bool { return e.HasRecordOp("create", post.URI) })
		if e.DID != a.DID {
			t.Fatalf("event DID %s, want %s", e.DID, a.DID)
		}
	})
	t.Run("a wait that fails", func(t *testing.T) {
		expectFatal(t, "Require of an event that never comes", func(tb testing.TB) {
			fh.Require(tb, func(harness.Event) bool { return false })
		}, "no matching event")
	})
	if t.Failed() {
		t.Fatal("the parent failed")
	}
}

// Issue 11.7: a wait that finds nothing says how long it waited, what
// bounded it, how many events it skipped and the last one; one prefix.
func TestFirehoseWaitFailureSaysWhatItSaw(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	fh := p.Firehose(t, harness.WaitAtMost(300*time.Millisecond))
	a := p.NewAccount(t) // #identity, #account, #commit, #sync
	post := a.Post(t, "not what the wait wants")
	_, err := fh.WaitFor(t.Context(), func(harness.Event) bool { return false })
	if !errors.Is(err, harness.ErrNoEvent) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrNoEvent and DeadlineExceeded", err)
	}
	msg := err.Error()
	for _, want := range []string{"5 skipped", "the last: #commit seq=", string(a.DID), "harness.WaitAtMost", "300ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Count(msg, "harness:") != 1 {
		t.Errorf("message %q: want exactly one harness: prefix", msg)
	}
	_ = post

	// A context deadline shorter than the bound is named as such.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := fh.Next(ctx); err == nil || !strings.Contains(err.Error(), "the context's deadline") || !strings.Contains(err.Error(), "no event arrived") {
		t.Fatalf("Next with a short context: %v", err)
	}
	expectFatal(t, "WaitAtMost(0)", func(tb testing.TB) { p.Firehose(tb, harness.WaitAtMost(0)) }, "positive")
}

// Issue 11.13: a consumer under test can be waited for: connected
// (WaitSubscribers), then caught up with the PDS's head (WaitCaughtUp).
func TestWaitForAConsumer(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	if n := p.FirehoseSubscribers(t); n != 0 {
		t.Fatalf("%d subscribers on a new PDS", n)
	}
	consumer := startConsumer(t, p) // connects in its own time
	p.WaitSubscribers(t, 1)
	a := p.NewAccount(t)
	a.Post(t, "one")
	a.Post(t, "two")
	p.WaitCaughtUp(t, consumer.lastSeq)
	if got := consumer.posts(); got != 2 {
		t.Fatalf("the consumer saw %d posts, want 2: connected before the first write, it misses none", got)
	}
	msg := expectFatal(t, "WaitCaughtUp of a consumer that never moves", func(tb testing.TB) {
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		p.WaitCaughtUp(deadlineTB{tb, ctx}, func() int64 { return 3 })
	}, "the consumer is at seq 3")
	if !strings.Contains(msg, "head was") {
		t.Errorf("message %q does not give the head", msg)
	}
}

// deadlineTB is a testing.TB whose Context ends early, to fail a wait fast.
type deadlineTB struct {
	testing.TB
	ctx context.Context
}

func (d deadlineTB) Context() context.Context { return d.ctx }

// consumer stands for the code under test: an indexer reading the
// firehose with indigo's client, in its own goroutine.
type consumer struct {
	seq, postCount atomic.Int64
}

func (c *consumer) lastSeq() int64 { return c.seq.Load() }
func (c *consumer) posts() int64   { return c.postCount.Load() }

func startConsumer(t *testing.T, p *harness.PDS) *consumer {
	c := &consumer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		u := "ws" + strings.TrimPrefix(p.URL(), "http") + "/xrpc/com.atproto.sync.subscribeRepos"
		conn, _, err := websocket.DefaultDialer.DialContext(ctx, u, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		go func() { <-ctx.Done(); conn.Close() }()
		cb := &events.RepoStreamCallbacks{
			RepoCommit: func(e *comatproto.SyncSubscribeRepos_Commit) error {
				for _, op := range e.Ops {
					if op.Action == "create" && strings.HasPrefix(op.Path, "app.bsky.feed.post/") {
						c.postCount.Add(1)
					}
				}
				c.seq.Store(e.Seq)
				return nil
			},
			RepoSync:     func(e *comatproto.SyncSubscribeRepos_Sync) error { c.seq.Store(e.Seq); return nil },
			RepoIdentity: func(e *comatproto.SyncSubscribeRepos_Identity) error { c.seq.Store(e.Seq); return nil },
			RepoAccount:  func(e *comatproto.SyncSubscribeRepos_Account) error { c.seq.Store(e.Seq); return nil },
		}
		_ = events.HandleRepoStream(ctx, conn, sequential.NewScheduler("consumer", cb.EventHandler), slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// One subscription, one wait at a time: a wait begun while another is
// under way is refused, not handed a share of the events (and the two
// do not race on what the waits saw).
func TestFirehoseRefusesConcurrentWaits(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	fh := p.Firehose(t, harness.WaitAtMost(5*time.Second))
	inside, release := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		_, err := fh.WaitFor(t.Context(), func(harness.Event) bool {
			close(inside)
			<-release
			return true
		})
		first <- err
	}()
	p.NewAccount(t)
	<-inside
	_, err := fh.Next(t.Context())
	if !errors.Is(err, harness.ErrConcurrentWait) {
		t.Errorf("Next during a WaitFor: err = %v, want ErrConcurrentWait", err)
	}
	_, err = fh.WaitFor(t.Context(), func(harness.Event) bool { return true })
	if !errors.Is(err, harness.ErrConcurrentWait) {
		t.Errorf("WaitFor during a WaitFor: err = %v, want ErrConcurrentWait", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatalf("the first wait: %v", err)
	}
	// Once it ended, the next wait is served, with the events left.
	if _, err := fh.Next(t.Context()); err != nil {
		t.Fatalf("a wait after the first ended: %v", err)
	}
}
