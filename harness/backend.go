package harness

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/env"
)

// The backends behind the harness API (HARNESS_PDS_BACKEND): inprocess,
// the default, is fakepds in this process and always here. The others
// live in packages of their own, so that importing harness costs a test
// binary only the in-process PDS: a binary that imports
//
//	_ "github.com/fakepds/fakepds/harness/backend/reference" // the npm reference PDS
//	_ "github.com/fakepds/fakepds/harness/backend/docker"    // the official image
//
// can run its tests on that backend (HARNESS_PDS_BACKEND=reference, or
// NewBackend(t, "reference")). They answer over HTTP like a PDS attached
// to with Attach: every helper works, the powers (clock, faults, emails,
// stats) skip the test because the PDS is not fakepds.

// ErrBackendUnavailable is wrapped by the error of a backend that cannot
// run on this machine (no Docker engine reachable). Tests fail with it
// unless they asked to skip (SkipUnavailable).
var ErrBackendUnavailable = errors.New("backend unavailable on this machine")

// A Backend starts a PDS of one kind for the harness, from the
// HARNESS_PDS_* variables (vars.Backend names it), logging to logger
// (nil: only what HARNESS_PDS_LOG asks for). The PDS it returns is made
// with Started, so that Close stops what it started.
type Backend func(vars env.Vars, logger *slog.Logger) (*PDS, error)

var (
	backendsMu sync.Mutex
	backends   = map[string]Backend{}
)

// backendPackages are where the backends HARNESS_PDS_BACKEND accepts live,
// for the error that says which import is missing.
var backendPackages = map[string]string{
	"reference": "github.com/fakepds/fakepds/harness/backend/reference",
	"docker":    "github.com/fakepds/fakepds/harness/backend/docker",
}

// RegisterBackend makes a backend available by name to
// HARNESS_PDS_BACKEND and NewBackend. Backend packages call it from init;
// registering a name twice panics, as database/sql's Register does.
func RegisterBackend(name string, b Backend) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if _, dup := backends[name]; dup || name == "inprocess" {
		panic("harness: RegisterBackend called twice for " + name)
	}
	backends[name] = b
}

func backend(name string) (Backend, error) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if b, ok := backends[name]; ok {
		return b, nil
	}
	if pkg, ok := backendPackages[name]; ok {
		return nil, fmt.Errorf("harness: the %s backend is not linked into this test binary: add to one of its _test.go files\n\n\timport _ %q", name, pkg)
	}
	names := []string{"inprocess"}
	for n := range backends {
		names = append(names, n)
	}
	slices.Sort(names[1:])
	return nil, fmt.Errorf("harness: unknown backend %q (linked here: %s)", name, strings.Join(names, ", "))
}

// startBackend starts the PDS of vars.Backend. Options that edit the
// server's Config (WithConfig, WithInvites, WithAddr, WithPublicURL, WithSeed) only
// exist in-process: with another backend they are an error rather than
// silently ignored. Fixtures load as on any PDS.
func startBackend(vars env.Vars, logger *slog.Logger, opts []Option) (*PDS, error) {
	if vars.Backend == "" || vars.Backend == "inprocess" {
		return start(vars, logger, opts)
	}
	s := apply(opts)
	if !reflect.DeepEqual(s.cfg, pds.Config{}) {
		return nil, fmt.Errorf("harness: WithConfig, WithInvites, WithAddr, WithPublicURL and WithSeed need the inprocess backend; %s=%s runs with its own configuration", env.Backend, vars.Backend)
	}
	b, err := backend(vars.Backend)
	if err != nil {
		return nil, err
	}
	p, err := b(vars, logger)
	if err != nil {
		return nil, err
	}
	if err := p.ready(s); err != nil {
		return nil, errors.Join(err, p.close())
	}
	return p, nil
}

// NewBackend starts a private PDS of the named backend (inprocess, or one
// linked in: reference, docker) for this test, closed by t.Cleanup,
// whatever HARNESS_PDS_BACKEND says; the other HARNESS_PDS_* variables
// apply as for New. A backend that cannot run on this machine (no Docker
// engine) fails the test, or skips it with SkipUnavailable. Starting the
// reference takes seconds: start one per test binary or per suite, not
// per test.
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
	p, err := startBackend(vars, testLogger(t), opts)
	if errors.Is(err, ErrBackendUnavailable) && apply(opts).skipUnavailable {
		t.Skipf("harness.NewBackend(%s): %v", backend, err)
	}
	if err != nil {
		t.Fatalf("harness.NewBackend(%s): %v", backend, err)
	}
	t.Cleanup(func() {
		if err := p.close(); err != nil {
			t.Errorf("harness: close %s PDS: %v", backend, err)
		}
	})
	return p
}
