package harness

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds/env"
)

func TestStartBackendRefusesConfig(t *testing.T) {
	for _, backend := range []string{"reference", "docker"} {
		_, err := startBackend(env.Vars{Backend: backend}, nil, []Option{WithInvites()})
		if err == nil || !strings.Contains(err.Error(), "inprocess") {
			t.Errorf("%s with WithInvites: err = %v, want a refusal naming inprocess", backend, err)
		}
	}
}

// A backend this binary does not link says which import brings it.
func TestBackendNotLinked(t *testing.T) {
	_, err := startBackend(env.Vars{Backend: "docker"}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `import _ "github.com/fakepds/fakepds/harness/backend/docker"`) {
		t.Fatalf("err = %v, want the import that links the docker backend", err)
	}
	if _, err := startBackend(env.Vars{Backend: "nope"}, nil, nil); err == nil || !strings.Contains(err.Error(), "inprocess") {
		t.Fatalf("unknown backend: err = %v", err)
	}
}

// A backend's PDS is closed by Close through what it started (Started),
// once; and NewBackend fails on an unavailable backend unless the test
// asked to skip.
func TestRegisteredBackend(t *testing.T) {
	local := New(t)
	stops := 0
	startedBackend = func() *PDS {
		return Started(local.URL(), local.PLCURL(), local.AdminPassword(), func() error { stops++; return nil })
	}
	p, err := startBackend(env.Vars{Backend: "test-started"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Server() != nil {
		t.Fatal("a backend's PDS has an in-process server")
	}
	if err := p.Close(); err != nil || stops != 1 {
		t.Fatalf("Close = %v, %d stops", err, stops)
	}
	if err := p.Close(); err != nil || stops != 1 {
		t.Fatalf("second Close = %v, %d stops", err, stops)
	}

	for _, tc := range []struct {
		opts       []Option
		skip, fail bool
	}{
		{nil, false, true},
		{[]Option{SkipUnavailable()}, true, false},
	} {
		r := &recorder{TB: t}
		func() {
			defer func() { _ = recover() }()
			NewBackend(r, "test-unavailable", tc.opts...)
		}()
		if r.skipped != tc.skip || r.failed != tc.fail || !strings.Contains(r.msg, "no engine here") {
			t.Errorf("NewBackend(unavailable, %d opts): skipped %v, failed %v (%s)", len(tc.opts), r.skipped, r.failed, r.msg)
		}
	}
}

// The test backends are registered once per binary (-count=2 runs the
// tests twice); startedBackend is what test-started returns.
var startedBackend func() *PDS

func init() {
	RegisterBackend("test-started", func(env.Vars, *slog.Logger) (*PDS, error) { return startedBackend(), nil })
	RegisterBackend("test-unavailable", func(env.Vars, *slog.Logger) (*PDS, error) {
		return nil, fmt.Errorf("%w: no engine here", ErrBackendUnavailable)
	})
}

// recorder observes a testing.TB's Skipf and Fatalf instead of obeying
// them (they panic, to stop the helper as Goexit would).
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	panic("skip")
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	panic("fatal")
}
