// Package clock is the server's sense of time. Tokens, email tokens and the
// firehose's retention all read it, so a test can move it forward (Fake)
// instead of waiting.
package clock

import (
	"sync"
	"time"
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
