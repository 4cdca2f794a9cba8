// Package clock is the server's sense of time. Tokens, email tokens and the
// firehose's retention all read it, so a test can move it forward (Fake)
// instead of waiting.
package clock

import (
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// Real is the system clock.
type Real struct{}

// Now is time.Now.
func (Real) Now() time.Time { return time.Now() }

// Shifted runs with the real clock, shifted by an offset a test moves with
// Advance. Time keeps flowing, so a shared server stays usable by other
// tests while one of them jumps ahead to expire a token. Safe for
// concurrent use; the zero value is the real time.
type Shifted struct {
	mu     sync.Mutex
	offset time.Duration
}

// Now is the real time plus the offset.
func (s *Shifted) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.offset)
}

// Advance moves the clock forward by d. Moving it back (d < 0) is allowed
// but makes no promise about what already happened.
func (s *Shifted) Advance(d time.Duration) {
	s.mu.Lock()
	s.offset += d
	s.mu.Unlock()
}

// Offset is how far the clock is ahead of the real time.
func (s *Shifted) Offset() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.offset
}

// Frozen stands still until Advance moves it: the clock of a seeded run,
// so every time the server writes (revs, record keys, event times, token
// times) is the same on every run. Safe for concurrent use.
type Frozen struct {
	start time.Time
	moved Shifted // only its offset
}

// NewFrozen is a clock stopped at t.
func NewFrozen(t time.Time) *Frozen { return &Frozen{start: t} }

// Now is the start time plus every Advance.
func (f *Frozen) Now() time.Time { return f.start.Add(f.moved.Offset()) }

// Advance moves the clock by d.
func (f *Frozen) Advance(d time.Duration) { f.moved.Advance(d) }

// Offset is how far Advance has moved the clock from its start.
func (f *Frozen) Offset() time.Duration { return f.moved.Offset() }

// Movable is a clock a test (or the control plane) moves: Shifted, Frozen.
type Movable interface {
	Clock
	Advance(d time.Duration)
	Offset() time.Duration
}

// TIDs mints TIDs (record keys) from a Clock, each after the last, as
// indigo's syntax.TIDClock does from time.Now. Safe for concurrent use.
type TIDs struct {
	Clock Clock

	mu   sync.Mutex
	last int64 // unix microseconds of the last TID
}

// Next is the TID of now, or one microsecond after the last when the
// clock has not moved past it.
func (t *TIDs) Next() syntax.TID {
	now := t.Clock.Now().UnixMicro()
	t.mu.Lock()
	now = max(now, t.last+1)
	t.last = now
	t.mu.Unlock()
	return syntax.NewTID(now, 0)
}
