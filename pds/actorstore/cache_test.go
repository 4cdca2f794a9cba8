package actorstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/store"
)

func TestPathStaysInsideDir(t *testing.T) {
	dir := "/data/actors"
	for _, did := range []string{
		"did:plc:ewvi7nxzyoun6zhxrhs64oiz",
		"did:web:example.com",
		"../../etc/passwd",
		"/absolute",
		"did:plc:..%2F..",
		"",
	} {
		p := actorstore.Path(dir, did)
		rel, err := filepath.Rel(dir, p)
		if err != nil || strings.HasPrefix(rel, "..") || filepath.IsAbs(rel) {
			t.Errorf("Path(%q) = %q escapes %s", did, p, dir)
		}
		if !strings.HasSuffix(p, ".sqlite") || strings.Count(rel, string(filepath.Separator)) != 1 {
			t.Errorf("Path(%q) = %q, want <fanout>/<hash>.sqlite", did, p)
		}
	}
	if actorstore.Path(dir, "did:plc:a") == actorstore.Path(dir, "did:plc:b") {
		t.Error("two DIDs share a file")
	}
}

func TestOpenerCreatesSchema(t *testing.T) {
	dir := t.TempDir()
	c := actorstore.NewCache(2, actorstore.Opener(dir, store.Options{}))
	defer c.Close()
	h, err := c.Acquire(t.Context(), "did:plc:abc")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if h.DB.Path() != actorstore.Path(dir, "did:plc:abc") {
		t.Fatalf("opened %s", h.DB.Path())
	}
	var n int
	if err := h.DB.Reader().QueryRow(`SELECT count(*) FROM record`).Scan(&n); err != nil {
		t.Fatalf("schema missing: %v", err)
	}
}

// counted is an actor store that keeps the count of open databases honest.
type counted struct {
	*store.DB
	f *fakeOpener
}

func (c counted) Close() error {
	c.f.open.Add(-1)
	return c.DB.Close()
}

// fakeOpener opens real databases in dir, tracks how many are open at once
// (peak) and can stall the open of chosen accounts.
type fakeOpener struct {
	dir     string
	open    atomic.Int64
	peak    atomic.Int64
	opens   atomic.Int64
	mu      sync.Mutex
	stalled map[string]chan struct{}
	entered map[string]chan struct{}
}

func newFakeOpener(t *testing.T) *fakeOpener {
	return &fakeOpener{dir: t.TempDir(), stalled: map[string]chan struct{}{}, entered: map[string]chan struct{}{}}
}

func (f *fakeOpener) stall(did string) (entered, release chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stalled[did] = make(chan struct{})
	f.entered[did] = make(chan struct{})
	return f.entered[did], f.stalled[did]
}

func (f *fakeOpener) Open(ctx context.Context, did string) (counted, error) {
	n := f.open.Add(1)
	for p := f.peak.Load(); n > p && !f.peak.CompareAndSwap(p, n); p = f.peak.Load() {
	}
	f.opens.Add(1)
	f.mu.Lock()
	stall, entered := f.stalled[did], f.entered[did]
	f.mu.Unlock()
	if stall != nil {
		close(entered)
		<-stall
	}
	db, err := actorstore.Opener(f.dir, store.Options{})(ctx, did)
	if err != nil {
		f.open.Add(-1)
		return counted{}, err
	}
	return counted{db, f}, nil
}

func TestStalledOpenDoesNotBlockWarmLookup(t *testing.T) {
	f := newFakeOpener(t)
	c := actorstore.NewCache(4, f.Open)
	defer c.Close()
	ctx := t.Context()

	warm, err := c.Acquire(ctx, "did:plc:warm")
	if err != nil {
		t.Fatal(err)
	}
	warm.Release()

	entered, release := f.stall("did:plc:cold")
	coldDone := make(chan error, 1)
	go func() {
		h, err := c.Acquire(ctx, "did:plc:cold")
		if err == nil {
			h.Release()
		}
		coldDone <- err
	}()
	<-entered // the cold open is now stuck inside OpenFunc

	// The warm lookup must complete while the cold open is stalled. The
	// deadline only turns a hang into a failure; it measures nothing.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	h, err := c.Acquire(wctx, "did:plc:warm")
	if err != nil {
		t.Fatalf("warm lookup while another account's open is stalled: %v", err)
	}
	h.Release()
	select {
	case err := <-coldDone:
		t.Fatalf("cold open finished before it was released: %v", err)
	default:
	}
	close(release)
	if err := <-coldDone; err != nil {
		t.Fatal(err)
	}
	if got := f.opens.Load(); got != 2 {
		t.Fatalf("%d opens, want 2 (warm reused)", got)
	}
}

func TestConcurrentAcquireOpensOnce(t *testing.T) {
	f := newFakeOpener(t)
	c := actorstore.NewCache(4, f.Open)
	defer c.Close()
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			h, err := c.Acquire(t.Context(), "did:plc:same")
			if err != nil {
				t.Error(err)
				return
			}
			defer h.Release()
			if err := h.DB.Write(t.Context(), func(tx *sql.Tx) error {
				_, err := tx.Exec(`CREATE TABLE IF NOT EXISTS t (x)`)
				return err
			}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := f.opens.Load(); got != 1 {
		t.Fatalf("%d opens of one account, want 1", got)
	}
}

// More busy accounts than slots: at no moment are more than max databases
// open (counted by the opener itself, so closes are real), every acquire
// succeeds and every write lands in its own account's file.
func TestBoundHoldsUnderLoad(t *testing.T) {
	const slots, accounts, workers, rounds = 3, 12, 8, 60
	f := newFakeOpener(t)
	c := actorstore.NewCache(slots, f.Open)
	defer c.Close()

	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				did := fmt.Sprintf("did:plc:acct%02d", (w*7+i)%accounts)
				h, err := c.Acquire(t.Context(), did)
				if err != nil {
					t.Error(err)
					return
				}
				err = h.DB.Write(t.Context(), func(tx *sql.Tx) error {
					_, err := tx.Exec(`INSERT INTO account_pref (name, value_json) VALUES (?, '{}')`, did)
					return err
				})
				if err != nil {
					t.Error(err)
				}
				h.Release()
			}
		})
	}
	wg.Wait()
	if p := f.peak.Load(); p > slots {
		t.Fatalf("%d databases open at once, bound %d", p, slots)
	}
	if f.opens.Load() <= accounts {
		t.Fatalf("%d opens for %d accounts: nothing was ever evicted, so the test proved nothing", f.opens.Load(), accounts)
	}
	total := 0
	for a := range accounts {
		did := fmt.Sprintf("did:plc:acct%02d", a)
		h, err := c.Acquire(t.Context(), did)
		if err != nil {
			t.Fatal(err)
		}
		var n, wrong int
		err = h.DB.Reader().QueryRow(`SELECT count(*), count(*) FILTER (WHERE name != ?) FROM account_pref`, did).Scan(&n, &wrong)
		h.Release()
		if err != nil {
			t.Fatal(err)
		}
		if wrong != 0 {
			t.Fatalf("%s holds %d rows of other accounts", did, wrong)
		}
		total += n
	}
	if total != workers*rounds {
		t.Fatalf("%d rows in all, want %d", total, workers*rounds)
	}
	if p := f.peak.Load(); p > slots {
		t.Fatalf("%d databases open at once, bound %d", p, slots)
	}
}

// Evict closes an idle handle (deleting an account needs its file closed)
// and leaves one in use alone.
func TestEvict(t *testing.T) {
	f := newFakeOpener(t)
	c := actorstore.NewCache(4, f.Open)
	defer c.Close()
	h, err := c.Acquire(t.Context(), "did:plc:a")
	if err != nil {
		t.Fatal(err)
	}
	if c.Evict("did:plc:a") {
		t.Fatal("evicted a handle in use")
	}
	h.Release()
	if !c.Evict("did:plc:a") || f.open.Load() != 0 {
		t.Fatalf("after Evict: %d open, want 0", f.open.Load())
	}
	if !c.Evict("did:plc:never") {
		t.Fatal("Evict of an account never opened should report closed")
	}
}

func TestCloseClosesEverything(t *testing.T) {
	f := newFakeOpener(t)
	c := actorstore.NewCache(4, f.Open)
	held, err := c.Acquire(t.Context(), "did:plc:held")
	if err != nil {
		t.Fatal(err)
	}
	idle, err := c.Acquire(t.Context(), "did:plc:idle")
	if err != nil {
		t.Fatal(err)
	}
	idle.Release()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Acquire(t.Context(), "did:plc:new"); err != actorstore.ErrClosed {
		t.Fatalf("Acquire after Close: %v, want ErrClosed", err)
	}
	if n := f.open.Load(); n != 1 {
		t.Fatalf("%d open after Close, want 1 (the held one)", n)
	}
	held.Release()
	if n := f.open.Load(); n != 0 {
		t.Fatalf("%d open after the last Release, want 0", n)
	}
}

// With every slot held, an Acquire of another account gives up: with
// ErrBusy after Wait, or with the context's error when that ends first.
// Once a slot frees, Acquire succeeds again.
func TestAcquireWaitIsBounded(t *testing.T) {
	f := newFakeOpener(t)
	c := actorstore.NewCache(2, f.Open)
	c.Wait = 50 * time.Millisecond
	defer c.Close()
	ctx := t.Context()
	var held []*actorstore.Handle[counted]
	for _, did := range []string{"did:plc:a", "did:plc:b"} {
		h, err := c.Acquire(ctx, did)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	if _, err := c.Acquire(ctx, "did:plc:c"); !errors.Is(err, actorstore.ErrBusy) {
		t.Fatalf("Acquire with every slot held = %v, want ErrBusy", err)
	}
	c.Wait = -1 // no bound: only the context ends the wait
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Acquire(cctx, "did:plc:c")
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire after cancel = %v, want context.Canceled", err)
	}
	held[0].Release()
	h, err := c.Acquire(ctx, "did:plc:c")
	if err != nil {
		t.Fatalf("Acquire after a release: %v", err)
	}
	h.Release()
	held[1].Release()
}

// TestAcquireOpen: AcquireOpen hands out a store only while it is open
// (in use or idle), never opens one, nor one being opened; the handle
// keeps it from Evict like any other.
func TestAcquireOpen(t *testing.T) {
	f := newFakeOpener(t)
	c := actorstore.NewCache(4, f.Open)
	defer c.Close()
	if h := c.AcquireOpen("did:plc:a"); h != nil {
		t.Fatal("AcquireOpen of a store never opened returned a handle")
	}
	if n := f.opens.Load(); n != 0 {
		t.Fatalf("AcquireOpen opened %d stores", n)
	}
	h, err := c.Acquire(t.Context(), "did:plc:a")
	if err != nil {
		t.Fatal(err)
	}
	busy := c.AcquireOpen("did:plc:a") // in use
	if busy == nil || busy.DB != h.DB {
		t.Fatal("AcquireOpen of a store in use: no handle, or another store")
	}
	h.Release()
	if c.Evict("did:plc:a") {
		t.Fatal("Evict closed a store AcquireOpen holds")
	}
	busy.Release()
	idle := c.AcquireOpen("did:plc:a") // open, unused
	if idle == nil {
		t.Fatal("AcquireOpen of an idle open store returned nil")
	}
	idle.Release()
	if !c.Evict("did:plc:a") {
		t.Fatal("Evict after every release")
	}
	if h := c.AcquireOpen("did:plc:a"); h != nil {
		t.Fatal("AcquireOpen reopened an evicted store")
	}

	entered, release := f.stall("did:plc:b")
	opened := make(chan error, 1)
	go func() {
		h, err := c.Acquire(t.Context(), "did:plc:b")
		if err == nil {
			h.Release()
		}
		opened <- err
	}()
	<-entered
	if h := c.AcquireOpen("did:plc:b"); h != nil {
		t.Fatal("AcquireOpen handed out a store still being opened")
	}
	close(release)
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	if n := f.opens.Load(); n != 2 {
		t.Fatalf("%d opens, want the two Acquires'", n)
	}
}

// gated is a database whose Close waits for gate and then reports its DID.
type gated struct {
	did    string
	gate   <-chan struct{}
	closed chan<- string
}

func (g gated) Close() error {
	<-g.gate
	g.closed <- g.did
	return nil
}

// TestFullCacheClosesAhead: the Acquire that takes the last slot closes the
// least recently used store in the background, not on its own path, so
// the next account finds a slot free; a reopen of the store being closed
// waits for the close.
func TestFullCacheClosesAhead(t *testing.T) {
	gate, closed := make(chan struct{}), make(chan string, 8)
	c := actorstore.NewCache(3, func(_ context.Context, did string) (gated, error) {
		return gated{did: did, gate: gate, closed: closed}, nil
	})
	acquire := func(did string) *actorstore.Handle[gated] {
		t.Helper()
		h, err := c.Acquire(t.Context(), did)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	acquire("a").Release()
	acquire("b").Release()
	hc := acquire("c") // the last slot: a is closed ahead, its Close held at the gate
	reopened := make(chan *actorstore.Handle[gated])
	go func() {
		h, _ := c.Acquire(context.Background(), "a")
		reopened <- h
	}()
	select {
	case <-reopened:
		t.Fatal("a answered while its close was held: nothing closed it ahead, or its reopen did not wait for the close")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	select {
	case did := <-closed:
		if did != "a" {
			t.Fatalf("closed %s ahead, want a (least recently used)", did)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing closed ahead once the cache was full")
	}
	ha := <-reopened // took the slot a's close freed, and closed b ahead
	if did := <-closed; did != "b" {
		t.Fatalf("closed %s, want b", did)
	}
	ha.Release()
	hc.Release()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.Len(); n != 0 {
		t.Fatalf("%d stores left after Close", n)
	}
}
