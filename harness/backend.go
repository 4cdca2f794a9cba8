package harness

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/env"
)

// The backends behind the harness API (HARNESS_PDS_BACKEND): inprocess,
// the default, is fakepds in this process (harness.go); reference is the
// npm reference PDS run by scripts/reference-pds (backend_reference.go);
// docker is the official image ghcr.io/bluesky-social/pds
// (backend_docker.go). The last two answer over HTTP like a PDS attached
// to with Attach: every helper works, the powers (clock, faults, emails,
// stats) skip the test because the PDS is not fakepds.

// ErrBackendUnavailable is wrapped by the error of a backend that cannot
// run on this machine (no Docker engine reachable): a test skips with it,
// it does not fail.
var ErrBackendUnavailable = errors.New("backend unavailable on this machine")

// backendClosers holds how to stop what startBackend started for a PDS
// (a launcher subprocess, a container), so that PDS needs no field for it.
var backendClosers sync.Map // *PDS -> func() error

// startBackend starts the PDS of vars.Backend. For reference with
// vars.URL set it attaches instead. Options that edit the server's Config
// (WithConfig, WithInvites) only exist in-process: with another backend
// they are an error rather than silently ignored. Fixtures load as on any
// PDS.
func startBackend(vars env.Vars, logger *slog.Logger, opts []Option) (*PDS, error) {
	s := apply(opts)
	if vars.Backend != "inprocess" && !reflect.DeepEqual(s.cfg, pds.Config{}) {
		return nil, fmt.Errorf("harness: WithConfig and WithInvites need the inprocess backend; %s=%s runs with its own configuration", env.Backend, vars.Backend)
	}
	var (
		p      *PDS
		closer func() error
		err    error
	)
	switch vars.Backend {
	case "", "inprocess":
		return start(vars, logger, opts)
	case "reference":
		if vars.URL != "" {
			p = Attach(vars.URL, vars.PLCURL, vars.AdminPassword)
			break
		}
		p, closer, err = startReference(vars, logger)
	case "docker":
		p, closer, err = startDocker(vars, logger)
	default:
		return nil, fmt.Errorf("harness: %s=%q: accepted values are inprocess, reference, docker", env.Backend, vars.Backend)
	}
	if err != nil {
		return nil, err
	}
	if closer != nil {
		backendClosers.Store(p, closer)
	}
	if err := p.ready(s); err != nil {
		return nil, errors.Join(err, closeBackend(p))
	}
	return p, nil
}

// closeBackend stops what startBackend started for p: the launcher, the
// container. For any other PDS it does nothing. PDS.Close should call it
// for a PDS without an in-process server.
func closeBackend(p *PDS) error {
	c, ok := backendClosers.LoadAndDelete(p)
	if !ok {
		return nil
	}
	return c.(func() error)()
}

// NewBackend starts a private PDS of the named backend (inprocess,
// reference or docker) for this test, closed by t.Cleanup, whatever
// HARNESS_PDS_BACKEND says; the other HARNESS_PDS_* variables apply as for
// New. A backend that cannot run on this machine (no Docker engine) skips
// the test and says why. Starting the reference takes seconds: start one
// per test binary or per suite, not per test.
func NewBackend(t testing.TB, backend string, opts ...Option) *PDS {
	t.Helper()
	vars, err := env.Read()
	if err != nil {
		t.Fatalf("harness.NewBackend: %v", err)
	}
	vars.Backend = backend
	vars.Dir = "" // a private PDS never shares a kept data dir
	if backend != "reference" {
		vars.URL = ""
	}
	p, err := startBackend(vars, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})), opts)
	if errors.Is(err, ErrBackendUnavailable) {
		t.Skipf("harness.NewBackend(%s): %v", backend, err)
	}
	if err != nil {
		t.Fatalf("harness.NewBackend(%s): %v", backend, err)
	}
	t.Cleanup(func() {
		var err error
		if p.srv != nil {
			err = p.Close()
		} else {
			err = closeBackend(p)
		}
		if err != nil {
			t.Errorf("harness: close %s PDS: %v", backend, err)
		}
	})
	return p
}

// tail keeps the last bytes written to it: a subprocess's stderr, for the
// error that says why it did not start.
type tail struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (w *tail) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, b...)
	if len(w.buf) > w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(b), nil
}

func (w *tail) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.TrimSpace(string(w.buf))
}
