package pds

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/repo"
)

// heldRequests is w counting requests that each wait for a send on
// release: serve starts one (with an Upgrade header when upgrade) and
// returns once it is in the handler, with a channel closed when it ends.
func heldRequests(w *idleWork) (serve func(upgrade bool) chan struct{}, release chan struct{}) {
	release = make(chan struct{})
	inHandler := make(chan struct{})
	h := w.count(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		inHandler <- struct{}{}
		<-release
	}))
	return func(upgrade bool) chan struct{} {
		done := make(chan struct{})
		r := httptest.NewRequest(http.MethodGet, "/xrpc/x.y.z", nil)
		if upgrade {
			r.Header.Set("Upgrade", "websocket")
		}
		go func() { h.ServeHTTP(httptest.NewRecorder(), r); close(done) }()
		<-inHandler
		return done
	}, release
}

// TestIdleWorkWaitsForQuiet: work started while a request is being
// answered runs once it has been, not beside it; a subscription (an
// Upgrade) does not hold it back; and under requests that never end it
// runs after maxIdleWait all the same.
func TestIdleWorkWaitsForQuiet(t *testing.T) {
	var w idleWork
	defer w.close()
	serve, release := heldRequests(&w)

	ended := serve(false)
	ran := make(chan time.Time, 1)
	w.start(func() { ran <- time.Now() })
	select {
	case <-ran:
		t.Fatal("the work ran while a request was being answered")
	case <-time.After(5 * time.Millisecond):
	}
	answered := time.Now()
	release <- struct{}{}
	<-ended
	if at := <-ran; at.Before(answered) {
		t.Fatal("the work ran before the request ended")
	}

	sub := serve(true) // a subscription: not counted
	w.start(func() { ran <- time.Now() })
	select {
	case <-ran:
	case <-time.After(time.Second):
		t.Fatal("the work waited for a subscription")
	}
	release <- struct{}{}
	<-sub

	stuck := serve(false)
	start := time.Now()
	w.start(func() { ran <- time.Now() })
	if at := <-ran; at.Sub(start) < maxIdleWait {
		t.Fatalf("the work ran after %v beside a request, want it to wait %v", at.Sub(start), maxIdleWait)
	}
	release <- struct{}{}
	<-stuck
	if n := w.busy.Load(); n != 0 {
		t.Fatalf("%d requests counted after all ended", n)
	}
}

// TestCreateAccountPreparesFirstWrite: once createAccount has answered,
// the account's repo writer (the statements of its first write) is made
// in the background, so that write does not prepare them itself.
func TestCreateAccountPreparesFirstWrite(t *testing.T) {
	s := startAt(t, t.TempDir())
	createAccount(t, s, "earlier.test", "earlier-pass") // makes the first spare
	s.spare.Wait()
	out := createAccount(t, s, "prepared.test", "prepared-pass")
	deadline := time.Now().Add(5 * time.Second)
	for {
		h, err := s.acquire(t.Context(), out.Did)
		if err != nil {
			t.Fatal(err)
		}
		h.DB.mu.Lock()
		made := h.DB.writer != nil
		h.DB.mu.Unlock()
		// The spare's createAccount statements (warmSpare) are gone once
		// they have run.
		kept := h.DB.Kept(repo.CreateQueries()[0])
		h.Release()
		if made {
			if kept {
				t.Fatal("the store keeps createAccount's statements after createAccount")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no repo writer 5 s after createAccount answered")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestRemoveAccountWaitsForStoreInUse: deleting an account whose actor
// store is in use (a request finishing, background work running) closes
// the store once it is released, before removing its files, so the cache
// holds no store open on deleted files for a later account of that DID.
func TestRemoveAccountWaitsForStoreInUse(t *testing.T) {
	s := startAt(t, t.TempDir())
	out := createAccount(t, s, "removed.test", "removed-pass")
	h, err := s.acquire(t.Context(), out.Did)
	if err != nil {
		t.Fatal(err)
	}
	removed := make(chan error, 1)
	go func() { removed <- s.removeAccount(context.Background(), out.Did) }()
	time.Sleep(5 * time.Millisecond)
	h.Release()
	if err := <-removed; err != nil {
		t.Fatal(err)
	}
	if h := s.actors.AcquireOpen(out.Did); h != nil {
		h.Release()
		t.Fatal("the deleted account's store is still open in the cache")
	}
	if _, err := os.Stat(actorstore.Path(s.actorDir(), out.Did)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the deleted account's store file: %v", err)
	}
}

// TestIdleWorkOneAtATime: pieces of work that waited out the same request
// run one after another, in the order started, not all at once when it
// ends; past maxIdleQueue waiting, more are refused; close drops what has
// not started.
func TestIdleWorkOneAtATime(t *testing.T) {
	var w idleWork
	serve, release := heldRequests(&w)

	ended := serve(false)
	var running, most atomic.Int32
	var order []int
	var mu sync.Mutex
	done := make(chan struct{}, 5)
	for i := range 5 {
		w.start(func() {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			running.Add(-1)
			done <- struct{}{}
		})
	}
	release <- struct{}{}
	<-ended
	for range 5 {
		<-done
	}
	if m := most.Load(); m != 1 {
		t.Fatalf("%d pieces ran at once, want 1", m)
	}
	if !slices.Equal(order, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("ran in the order %v", order)
	}

	stuck := serve(false)
	var ran atomic.Int32
	accepted := 0
	for range maxIdleQueue + 2 {
		if w.start(func() { ran.Add(1) }) {
			accepted++
		}
	}
	if accepted < maxIdleQueue || accepted > maxIdleQueue+1 {
		t.Fatalf("accepted %d pieces with one request in flight, want %d (+1 taken off the queue)", accepted, maxIdleQueue)
	}
	w.close()
	if n := ran.Load(); n > 1 {
		t.Fatalf("%d pieces ran after close, want at most the one under way", n)
	}
	release <- struct{}{}
	<-stuck
}

// TestIdleWorkAfterQuiet: afterQuiet's fn waits out a request in flight,
// then a quiet d after it ended; close ends the wait without running it.
func TestIdleWorkAfterQuiet(t *testing.T) {
	var w idleWork
	serve, release := heldRequests(&w)
	ended := serve(false)
	const d = 30 * time.Millisecond
	ran := make(chan time.Time, 1)
	if !w.afterQuiet(d, func() { ran <- time.Now() }) {
		t.Fatal("afterQuiet refused before close")
	}
	select {
	case <-ran:
		t.Fatal("fn ran while a request was being answered")
	case <-time.After(3 * d):
	}
	release <- struct{}{}
	<-ended
	answered := time.Now()
	if at := <-ran; at.Sub(answered) < d-time.Millisecond {
		t.Fatalf("fn ran %v after the request ended, want at least %v", at.Sub(answered), d)
	}

	never := make(chan struct{})
	w.afterQuiet(time.Hour, func() { close(never) })
	closed := make(chan struct{})
	go func() { w.close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("close waited for afterQuiet's hour")
	}
	select {
	case <-never:
		t.Fatal("fn ran at close")
	default:
	}
	if w.afterQuiet(d, func() {}) {
		t.Fatal("afterQuiet took work after close")
	}
	w.close() // again: a no-op
}

// TestWritesReleaseSQLiteCaches: past releaseCachesAfter writes, SQLite's
// cached pages go once the server has answered nothing for
// releaseCachesQuiet, and not before.
func TestWritesReleaseSQLiteCaches(t *testing.T) {
	s := startAt(t, t.TempDir())
	out := createAccount(t, s, "releases.test", "releases-pass")
	c := login(t, s, "releases.test", "releases-pass")
	cached := func() int {
		n, err := s.seq.DB().WriterCacheBytes(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i := range releaseCachesAfter { // and createAccount: one past it
		post(t, c, out.Did, fmt.Sprint(i))
	}
	last := time.Now()
	if n := cached(); n < 64<<10 {
		t.Fatalf("the sequencer's writer caches %d bytes after the writes: the test shows nothing", n)
	}
	deadline := last.Add(10 * time.Second)
	for cached() > 16<<10 {
		if time.Now().After(deadline) {
			t.Fatalf("the caches still hold %d bytes 10 s after the last write", cached())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if quiet := time.Since(last); quiet < releaseCachesQuiet {
		t.Fatalf("released %v after the last write, before a quiet %v", quiet, releaseCachesQuiet)
	}
}
