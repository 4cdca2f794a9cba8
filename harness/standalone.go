package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// NewStandalone returns a testing.TB for the harness's helpers outside a test: a
// program that seeds a dev server (with Start), a tool, an Example. A
// Fatal or Skip prints its message to stderr and exits 1, as log.Fatal
// does (outside a test nothing can be skipped: what was asked did not
// happen); Error prints and marks it failed; Cleanup functions run, last
// first, at Close; Context ends at Close. Log goes to the writer given
// (os.Stderr when nil). Methods a helper never calls outside a test
// (Setenv, Chdir) fail.
func NewStandalone(log io.Writer) *Standalone {
	if log == nil {
		log = os.Stderr
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Standalone{w: log, ctx: ctx, cancel: cancel}
}

// Standalone is the testing.TB NewStandalone returns; Close it when done.
type Standalone struct {
	// testing.TB is embedded only for its unexported method: every method
	// the harness calls is defined here, so the nil interface is never
	// called.
	testing.TB

	w      io.Writer
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

func (s *Standalone) Helper()                  {}
func (s *Standalone) Name() string             { return "harness.Standalone" }
func (s *Standalone) Context() context.Context { return s.ctx }

func (s *Standalone) Log(args ...any)                 { fmt.Fprintln(s.w, args...) }
func (s *Standalone) Logf(format string, args ...any) { fmt.Fprintf(s.w, format+"\n", args...) }

func (s *Standalone) Error(args ...any)                 { s.Log(args...); s.Fail() }
func (s *Standalone) Errorf(format string, args ...any) { s.Logf(format, args...); s.Fail() }

func (s *Standalone) Fatal(args ...any)                 { s.Log(args...); s.FailNow() }
func (s *Standalone) Fatalf(format string, args ...any) { s.Logf(format, args...); s.FailNow() }
func (s *Standalone) Skip(args ...any)                  { s.Fatal(args...) }
func (s *Standalone) Skipf(format string, args ...any)  { s.Fatalf(format, args...) }
func (s *Standalone) SkipNow()                          { s.FailNow() }
func (s *Standalone) Skipped() bool                     { return false }

func (s *Standalone) Fail() {
	s.mu.Lock()
	s.failed = true
	s.mu.Unlock()
}

func (s *Standalone) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// FailNow runs the cleanups (closing what the helpers started) and exits 1.
func (s *Standalone) FailNow() {
	s.Close()
	os.Exit(1)
}

func (s *Standalone) Cleanup(f func()) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

func (s *Standalone) TempDir() string {
	d, err := os.MkdirTemp("", "harness-")
	if err != nil {
		s.Fatalf("TempDir: %v", err)
	}
	s.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func (s *Standalone) Setenv(key, value string) {
	s.Fatalf("harness.Standalone: Setenv(%s) is for tests", key)
}
func (s *Standalone) Chdir(dir string) { s.Fatalf("harness.Standalone: Chdir(%s) is for tests", dir) }

// Close ends the context and runs the cleanups, last first: a private PDS
// from New closes here. Later calls do nothing.
func (s *Standalone) Close() {
	s.cancel()
	for {
		s.mu.Lock()
		n := len(s.cleanups)
		if n == 0 {
			s.mu.Unlock()
			return
		}
		f := s.cleanups[n-1]
		s.cleanups = s.cleanups[:n-1]
		s.mu.Unlock()
		f()
	}
}
