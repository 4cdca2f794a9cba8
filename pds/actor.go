package pds

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/blob"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// actor is an open actor store as the cache holds it: the database and
// the prepared statements of repo writes (the repo engine's and the blob
// refs'), made at the first write that runs them (so createAccount's cold
// open does not pay for them, and read-only accounts never do), those of
// updates and deletes once the first write has answered (prepareRest).
type actor struct {
	*store.DB
	mu     sync.Mutex
	writer *repo.Writer
	refs   *blob.RefStmts
	rest   bool // prepareRest is due or done
	// bigCAR: a whole export of the repo was past smallCAR, so exports
	// stream from a reader without trying memory first (answerSmallCAR).
	bigCAR atomic.Bool
}

// writeStmts are the account's repo.Writer, with what writes run
// prepared (current: the write calls Writer.Current), and its
// blob.RefStmts with what writes run prepared: only an update or delete
// (whose record may have had blobs) or a record with blobs runs any.
// Call it before the write's transaction: preparing needs the writer
// connection.
func (a *actor) writeStmts(ctx context.Context, writes []prepared, current bool) (*repo.Writer, *blob.RefStmts, error) {
	ctx = context.WithoutCancel(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.writer == nil {
		w, err := repo.NewWriter(ctx, a.Writer())
		if err != nil {
			return nil, nil, err
		}
		a.writer = w
	}
	ws := make([]repo.Write, len(writes))
	var dissociate, associate bool
	for i, w := range writes {
		ws[i] = w.Write
		dissociate = dissociate || w.Action != repo.ActionCreate
		associate = associate || len(w.blobs) > 0
	}
	if err := a.writer.Prepare(ctx, ws, current); err != nil {
		return nil, nil, err
	}
	if a.refs == nil {
		a.refs = blob.NewRefStmts(a.Writer())
	}
	if err := a.refs.Prepare(ctx, dissociate, associate); err != nil {
		return nil, nil, err
	}
	return a.writer, a.refs, nil
}

// prepareWriter makes the account's repo.Writer, with what a first
// write of creates runs prepared (repo.NewWriter), and prepares its first
// upload's statements (blob.UploadQueries), in the background after
// createAccount: its first createRecord or uploadBlob prepared them
// itself, on caches gone cold by the time it came (see createAccount). A
// failure is left to that call, which tries again.
func (a *actor) prepareWriter(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.writer == nil {
		if w, err := repo.NewWriter(ctx, a.Writer()); err == nil {
			a.writer = w
		}
	}
	_ = a.PrepareQueries(ctx, blob.UploadQueries()...)
}

// restDue reports, once, that the account has had its first write and
// the statements of its updates and deletes are for prepareRest.
func (a *actor) restDue() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.writer == nil || a.rest {
		return false
	}
	a.rest = true
	return true
}

// prepareRest prepares the statements of small updates and deletes, the
// repo's and the blob refs', in the background after the account's first
// write, while its connection is warm (see repo.Writer.PrepareRest:
// prepared by the first update or delete itself, on caches gone cold,
// they were 53-90 µs each of its answer), and those of the commonest
// reads (store.DB.PrepareQueries). A failure is left to the call that
// needs them, which prepares what it runs.
func (a *actor) prepareRest(ctx context.Context) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.writer == nil { // closed and opened again since the write
		return
	}
	_ = a.writer.PrepareRest(ctx)
	if a.refs != nil {
		_ = a.refs.Prepare(ctx, true, false)
	}
	_ = a.PrepareQueries(ctx, repo.CommonQueries()...)
}

// Close closes the statements, then the database.
func (a *actor) Close() error {
	var errs []error
	if a.writer != nil {
		errs = append(errs, a.writer.Close())
	}
	if a.refs != nil {
		errs = append(errs, a.refs.Close())
	}
	return errors.Join(append(errs, a.DB.Close())...)
}

// acquire takes did's actor store from the cache. A wait for a free
// handle is bounded (Config.SlotWait): past it the call answers 503
// NotEnoughResources rather than hang.
func (s *Server) acquire(ctx context.Context, did string) (*actorstore.Handle[*actor], error) {
	h, err := s.actors.Acquire(ctx, did)
	if errors.Is(err, actorstore.ErrBusy) {
		return nil, xrpc.Errorf(http.StatusServiceUnavailable, "NotEnoughResources", "every actor store is in use; try again")
	}
	return h, err
}

// actorOpener opens actor stores for the cache.
func actorOpener(open actorstore.OpenFunc[*store.DB]) actorstore.OpenFunc[*actor] {
	return func(ctx context.Context, did string) (*actor, error) {
		db, err := open(ctx, did)
		if err != nil {
			return nil, err
		}
		return &actor{DB: db}, nil
	}
}

// withActor runs fn on did's actor store.
func (s *Server) withActor(ctx context.Context, did string, fn func(db *store.DB) error) error {
	return s.withActorStore(ctx, did, func(a *actor) error { return fn(a.DB) })
}

// withActorStore runs fn on did's open actor store, repo writer included.
func (s *Server) withActorStore(ctx context.Context, did string, fn func(a *actor) error) error {
	h, err := s.acquire(ctx, did)
	if err != nil {
		return err
	}
	defer h.Release()
	return fn(h.DB)
}

// withActorStoreThen is withActorStore for an fn that may leave work no
// answer waits for: the idle func it returns runs in the background
// (s.idle) on the store if it is still open then (see idleOn).
func (s *Server) withActorStoreThen(ctx context.Context, did string, fn func(a *actor) (idle func(a *actor), err error)) error {
	h, err := s.acquire(ctx, did)
	if err != nil {
		return err
	}
	idle, err := fn(h.DB)
	h.Release()
	if idle != nil {
		s.idleOn(did, idle)
	}
	return err
}

// idleOn runs fn in the background, once no request is being answered, on
// did's actor store if it is still open then: held only while fn runs, not
// while it waits, so that the store stays free to close (an account
// deleted meanwhile is evicted, not held open on its deleted files), and
// never reopened for it.
func (s *Server) idleOn(did string, fn func(a *actor)) {
	s.idle.start(func() {
		h := s.actors.AcquireOpen(did)
		if h == nil {
			return
		}
		defer h.Release()
		fn(h.DB)
	})
}

// idleWork runs work no answer waits for, one piece at a time in the
// order given, each once no request is being answered, and lets Close
// wait for it. Started at once, such work (an account's statements
// prepared after its first write) ran beside the answer that started it
// and the next request: ~0.18 ms more on a createRecord of
// BenchmarkSuiteShaped, in process on 2 cores. One at a time: pieces that
// waited out the same request would otherwise all start when it ended.
type idleWork struct {
	mu      sync.Mutex
	closed  bool
	queue   []func()
	running bool // a goroutine is working through queue
	wg      sync.WaitGroup

	busy  atomic.Int64  // requests being answered (count)
	quiet chan struct{} // closed when busy drops to 0; nil: no one waits

	ended atomic.Int64  // when a request last ended (UnixNano)
	done  chan struct{} // closed by close, ending afterQuiet's waits; made by the first
}

// maxIdleQueue bounds the work waiting: each piece only saves later
// answers some time, so past it new pieces are dropped.
const maxIdleQueue = 1024

// maxIdleWait is how long a piece of work waits for a moment with no
// request: under a steady load there is none.
const maxIdleWait = 20 * time.Millisecond

// count is h counting the requests it answers for the work to wait out,
// but subscriptions: a firehose consumer's stays open for as long as it
// listens.
func (w *idleWork) count(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "" {
			h.ServeHTTP(rw, r)
			return
		}
		w.busy.Add(1)
		defer w.leave()
		h.ServeHTTP(rw, r)
	})
}

func (w *idleWork) leave() {
	w.ended.Store(time.Now().UnixNano())
	if w.busy.Add(-1) != 0 {
		return
	}
	w.mu.Lock()
	if w.quiet != nil {
		close(w.quiet)
		w.quiet = nil
	}
	w.mu.Unlock()
}

// waitQuiet returns once no request is being answered, or after
// maxIdleWait.
func (w *idleWork) waitQuiet() {
	var timeout <-chan time.Time
	for w.busy.Load() > 0 {
		w.mu.Lock()
		if w.quiet == nil {
			w.quiet = make(chan struct{})
		}
		quiet := w.quiet
		w.mu.Unlock()
		if w.busy.Load() == 0 { // the last one left before quiet was made
			return
		}
		if timeout == nil {
			t := time.NewTimer(maxIdleWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-quiet:
		case <-timeout:
			return
		}
	}
}

// start queues fn to run once no request is being answered (see
// waitQuiet), after the work queued before it; false when fn will not run
// (close has been called, or maxIdleQueue pieces wait).
func (w *idleWork) start(fn func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed || len(w.queue) >= maxIdleQueue {
		return false
	}
	w.queue = append(w.queue, fn)
	if !w.running {
		w.running = true
		w.wg.Go(w.work)
	}
	return true
}

// work runs the queue until it is empty, or close is called.
func (w *idleWork) work() {
	for {
		w.mu.Lock()
		if w.closed || len(w.queue) == 0 {
			w.queue, w.running = nil, false
			w.mu.Unlock()
			return
		}
		fn := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.mu.Unlock()
		w.waitQuiet()
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		if !closed {
			fn()
		}
	}
}

// afterQuiet runs fn in a goroutine of its own once no request has been
// answered for d, however long that takes; false when close has been
// called (fn will not run). For work that would cost the next requests
// more than it saves if it ran between two of them.
func (w *idleWork) afterQuiet(d time.Duration, fn func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if w.done == nil {
		w.done = make(chan struct{})
	}
	done := w.done
	w.wg.Go(func() {
		t := time.NewTimer(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			since := time.Since(time.Unix(0, w.ended.Load()))
			if w.busy.Load() == 0 && since >= d {
				fn()
				return
			}
			t.Reset(max(d-since, d/8))
		}
	})
	return true
}

// close refuses more work, drops what has not started, and waits for what
// has.
func (w *idleWork) close() {
	w.mu.Lock()
	if !w.closed && w.done != nil {
		close(w.done)
	}
	w.closed = true
	w.mu.Unlock()
	w.wg.Wait()
}

// cacheRelease is when the server gives SQLite's cached pages back:
// writes counts those since the last release, armed that one waits.
type cacheRelease struct {
	writes atomic.Int64
	armed  atomic.Bool
}

// releaseCachesAfter is how many writes (createAccount included) make a
// release worth doing, and releaseCachesQuiet how long the server must
// have answered nothing before it.
const (
	releaseCachesAfter = 128
	releaseCachesQuiet = time.Second
)

// noteWrite counts a write and, past releaseCachesAfter of them, arms the
// release of SQLite's cached pages for the server's next quiet second.
// Those pages are one LRU list in this build, bounded only by the sum of
// every connection's cache_size, and freed only all at once
// (store.DB.ReleaseMemory): so it waits until the server is idle, when
// the next reads re-read what they need (a getRecord's first read of an
// account ~30 µs more) rather than in the middle of a suite. Freed every
// 128 events as soon as no request was in flight, a suite's getRecord
// read its pages again from the files: 28-32 -> 55-60 µs.
func (s *Server) noteWrite() {
	if s.cacheRelease.writes.Add(1) < releaseCachesAfter || !s.cacheRelease.armed.CompareAndSwap(false, true) {
		return
	}
	armed := s.idle.afterQuiet(releaseCachesQuiet, func() {
		s.cacheRelease.writes.Store(0)
		s.cacheRelease.armed.Store(false)
		if err := s.seq.DB().ReleaseMemory(context.Background()); err != nil {
			s.log.Warn("releasing SQLite's cached pages", "err", err)
		}
	})
	if !armed {
		s.cacheRelease.armed.Store(false)
	}
}

// errNoRepo is an actor store that does not exist.
var errNoRepo = errors.New("pds: repo not found")

// withExistingActor runs fn on did's actor store, errNoRepo when did has
// none (without creating one, as Acquire would).
func (s *Server) withExistingActor(ctx context.Context, did string, fn func(db *store.DB) error) error {
	if _, err := syntax.ParseDID(did); err != nil {
		// A handle in an at:// URI: the reference fails to open a store
		// named by it, a 500.
		return fmt.Errorf("pds: actor store of %q: not a DID", did)
	}
	if _, err := os.Stat(actorstore.Path(s.actorDir(), did)); err != nil {
		return errNoRepo
	}
	return s.withActor(ctx, did, fn)
}
