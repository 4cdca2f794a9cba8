package actorstore

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// OpenFunc opens the database of one account. The cache calls it outside its
// lock, at most once at a time per account.
type OpenFunc[T io.Closer] func(ctx context.Context, did string) (T, error)

// Cache is a bounded LRU of open actor store handles (T is *store.DB in the
// server; tests put a counting wrapper in its place).
//
// Its lock only picks, inserts and removes slots. Opening and closing a
// database (which may checkpoint and sync) run outside it, serialized per
// account, so a cold open or an eviction of one account never stalls a warm
// lookup of another. The bound is strict: at most Max databases are open at
// any moment, counting those being opened and those being closed; an Acquire
// that finds every slot in use waits for a Release, at most Wait. Once full,
// the cache closes its least recently used idle store ahead of need, in the
// background, so one slot is usually free for the next account.
//
// Callers hold a handle only for their database work, never while a client
// sends or reads a body, so a wait is short unless the server is
// overloaded; Wait turns that into an error (ErrBusy) instead of a hang.
type Cache[T io.Closer] struct {
	// Wait bounds how long an Acquire waits for a free slot (the context
	// bounds it too); DefaultWait when zero, no bound when negative. Set
	// it before the first Acquire.
	Wait time.Duration

	open OpenFunc[T]
	max  int

	ahead sync.WaitGroup // closes started ahead of need (see Acquire); Close waits for them

	mu      sync.Mutex
	slots   map[string]*slot[T]
	lru     list.List                // of *slot[T] with refs == 0, most recently used at the front
	closing map[string]chan struct{} // accounts whose handle is being closed
	freed   chan struct{}            // closed and replaced whenever capacity may have freed
	closed  bool
}

type slot[T io.Closer] struct {
	did   string
	refs  int
	elem  *list.Element // in lru while refs == 0
	ready chan struct{} // closed once open finished
	db    T
	ok    bool // db was opened
	err   error
}

// ErrClosed is returned by Acquire after Close.
var ErrClosed = errors.New("actorstore: cache closed")

// ErrBusy is returned by an Acquire that waited Wait for a free slot.
var ErrBusy = errors.New("actorstore: every actor store handle stayed in use")

// DefaultWait is the Wait of a Cache that sets none.
const DefaultWait = 10 * time.Second

// NewCache returns a cache of at most max open handles.
func NewCache[T io.Closer](max int, open OpenFunc[T]) *Cache[T] {
	if max < 1 {
		max = 1
	}
	return &Cache[T]{
		open:    open,
		max:     max,
		slots:   make(map[string]*slot[T]),
		closing: make(map[string]chan struct{}),
		freed:   make(chan struct{}),
	}
}

// Handle is an acquired actor store. Release it when done; the database
// stays open in the cache for the next caller.
type Handle[T io.Closer] struct {
	DB T
	c  *Cache[T]
	s  *slot[T]
}

// Release returns the handle to the cache. It must be called exactly once.
func (h *Handle[T]) Release() { h.c.release(h.s) }

// Acquire returns the open database of did, opening it if needed.
func (c *Cache[T]) Acquire(ctx context.Context, did string) (*Handle[T], error) {
	var timeout <-chan time.Time // made on the first wait for a slot
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClosed
		}
		if s, ok := c.slots[did]; ok {
			// Warm (or being opened by someone else): take a reference.
			s.refs++
			if s.elem != nil {
				c.lru.Remove(s.elem)
				s.elem = nil
			}
			c.mu.Unlock()
			select {
			case <-s.ready:
			case <-ctx.Done():
				c.release(s)
				return nil, ctx.Err()
			}
			if s.err != nil {
				c.release(s)
				return nil, s.err
			}
			return &Handle[T]{DB: s.db, c: c, s: s}, nil
		}
		if done, ok := c.closing[did]; ok {
			// Serialize per account: reopen only after the close finished.
			c.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		var victim *slot[T]
		var victimDone chan struct{}
		if len(c.slots)+len(c.closing) >= c.max {
			if c.lru.Len() == 0 {
				// Every slot is in use: wait for a release or a close.
				freed := c.freed
				c.mu.Unlock()
				if timeout == nil {
					timeout = c.waitTimer()
				}
				select {
				case <-freed:
					continue
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-timeout:
					return nil, ErrBusy
				}
			}
			// The victim's capacity passes to s; it still counts through
			// s until its close finishes, which happens before s opens.
			victim, victimDone = c.takeLRU()
		}
		s := &slot[T]{did: did, refs: 1, ready: make(chan struct{})}
		c.slots[did] = s
		// s took the last slot: close the least recently used store now,
		// beside s's open, so that the next account's Acquire finds a
		// slot free instead of closing one itself (a close checkpoints:
		// ~0.4 ms of every createAccount once a suite's accounts passed
		// the bound). It counts until closed, so the bound stays strict.
		var ahead *slot[T]
		var aheadDone chan struct{}
		if c.lru.Len() > 0 && len(c.slots)+len(c.closing) >= c.max {
			ahead, aheadDone = c.takeLRU()
			c.ahead.Add(1)
		}
		c.mu.Unlock()

		if ahead != nil {
			go func() {
				defer c.ahead.Done()
				c.closeSlot(ahead, aheadDone)
			}()
		}
		if victim != nil {
			c.closeSlot(victim, victimDone)
		}
		// The open serves every caller waiting on s, so one caller giving
		// up must not fail it for the others.
		s.db, s.err = c.open(context.WithoutCancel(ctx), did)
		s.ok = s.err == nil
		if s.err != nil {
			s.err = fmt.Errorf("actorstore: open %s: %w", did, s.err)
			c.mu.Lock()
			delete(c.slots, did)
			c.mu.Unlock()
		}
		close(s.ready)
		if s.err != nil {
			c.release(s)
			return nil, s.err
		}
		return &Handle[T]{DB: s.db, c: c, s: s}, nil
	}
}

// AcquireOpen is Acquire of a database that is open now, or nil: it never
// opens one, nor waits for one being opened or closed. For work that is
// worth doing only on a store still open (statements prepared ahead),
// which must not reopen what the cache has evicted.
func (c *Cache[T]) AcquireOpen(did string) *Handle[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.slots[did]
	if !ok || c.closed {
		return nil
	}
	select {
	case <-s.ready:
	default:
		return nil // being opened
	}
	if !s.ok {
		return nil
	}
	s.refs++
	if s.elem != nil {
		c.lru.Remove(s.elem)
		s.elem = nil
	}
	return &Handle[T]{DB: s.db, c: c, s: s}
}

// waitTimer fires when an Acquire has waited long enough for a slot; it
// never fires with a negative Wait.
func (c *Cache[T]) waitTimer() <-chan time.Time {
	switch {
	case c.Wait < 0:
		return make(chan time.Time)
	case c.Wait == 0:
		return time.After(DefaultWait)
	}
	return time.After(c.Wait)
}

// takeLRU takes the least recently used idle slot out of the cache to be
// closed: it counts in c.closing until closeSlot is done with it. The
// caller holds c.mu and has seen c.lru non-empty.
func (c *Cache[T]) takeLRU() (*slot[T], chan struct{}) {
	back := c.lru.Back()
	s := back.Value.(*slot[T])
	c.lru.Remove(back)
	s.elem = nil
	delete(c.slots, s.did)
	done := make(chan struct{})
	c.closing[s.did] = done
	return s, done
}

func (c *Cache[T]) closeSlot(s *slot[T], done chan struct{}) {
	if s.ok {
		_ = s.db.Close() // nothing to do with the error but forget the handle
	}
	c.mu.Lock()
	delete(c.closing, s.did)
	c.signalLocked()
	c.mu.Unlock()
	close(done)
}

func (c *Cache[T]) release(s *slot[T]) {
	c.mu.Lock()
	s.refs--
	switch {
	case s.refs > 0:
		c.mu.Unlock()
	case c.slots[s.did] != s:
		// A failed open already removed it.
		c.signalLocked()
		c.mu.Unlock()
	case c.closed:
		delete(c.slots, s.did)
		c.mu.Unlock()
		if s.ok {
			_ = s.db.Close()
		}
	default:
		s.elem = c.lru.PushFront(s)
		c.signalLocked()
		c.mu.Unlock()
	}
}

func (c *Cache[T]) signalLocked() {
	close(c.freed)
	c.freed = make(chan struct{})
}

// Evict closes did's handle if it is open and unused, waiting for the close.
// A handle in use is left alone; Evict reports whether did is now closed.
// Deleting an account evicts before removing its file.
func (c *Cache[T]) Evict(did string) bool {
	c.mu.Lock()
	if done, ok := c.closing[did]; ok {
		c.mu.Unlock()
		<-done
		return true
	}
	s, ok := c.slots[did]
	if !ok {
		c.mu.Unlock()
		return true
	}
	if s.refs > 0 {
		c.mu.Unlock()
		return false
	}
	c.lru.Remove(s.elem)
	s.elem = nil
	delete(c.slots, did)
	done := make(chan struct{})
	c.closing[did] = done
	c.mu.Unlock()
	c.closeSlot(s, done)
	return true
}

// Len is the number of databases open or being opened or closed.
func (c *Cache[T]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.slots) + len(c.closing)
}

// Close closes every unused handle and makes later Acquires fail; handles
// still in use close on their Release.
func (c *Cache[T]) Close() error {
	c.mu.Lock()
	c.closed = true
	var idle []*slot[T]
	for e := c.lru.Front(); e != nil; e = e.Next() {
		s := e.Value.(*slot[T])
		idle = append(idle, s)
		delete(c.slots, s.did)
	}
	c.lru.Init()
	c.mu.Unlock()
	var errs []error
	for _, s := range idle {
		if s.ok {
			errs = append(errs, s.db.Close())
		}
	}
	c.ahead.Wait()
	return errors.Join(errs...)
}
