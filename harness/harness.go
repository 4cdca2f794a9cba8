package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/fakepds/fakepds/fixtures"
	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/env"
	"github.com/fakepds/fakepds/pds/stats"
)

// PDS is a running PDS a test talks to: one this process started
// in-process, or one it attached to through HARNESS_PDS_URL.
type PDS struct {
	srv           *pds.Server // nil when attached
	clock         *clock.Shifted
	url           string
	plcURL        string
	adminPassword string

	domainOnce sync.Once
	domain     string

	fixture         *fixtures.Loaded // WithFixtures
	fixtureAccounts sync.Map         // name -> *Account (fixtures.go)
}

// URL is the PDS's base URL (XRPC under /xrpc/).
func (p *PDS) URL() string { return p.url }

// PLCURL is the URL of the PLC directory the PDS registers its DIDs with.
func (p *PDS) PLCURL() string { return p.plcURL }

// AdminPassword is the password of HTTP Basic user "admin".
func (p *PDS) AdminPassword() string { return p.adminPassword }

// Server is the in-process server, or nil when the PDS was attached to
// over HTTP (HARNESS_PDS_URL): powers that need it skip the test then.
func (p *PDS) Server() *pds.Server { return p.srv }

// Option configures a PDS the harness starts or attaches to.
type Option func(*setup)

// setup is what the options ask for: the server's Config, and what to do
// once the PDS answers.
type setup struct {
	cfg      pds.Config
	fixtures string // a fixture file to load (fixtures.go)
}

// WithConfig edits the pds.Config the harness starts the server with, for
// anything no narrower option covers.
func WithConfig(edit func(*pds.Config)) Option { return func(s *setup) { edit(&s.cfg) } }

// WithInvites makes account creation require an invite code.
func WithInvites() Option { return func(s *setup) { s.cfg.InviteRequired = true } }

// start builds and starts a server from the environment and opts.
func start(vars env.Vars, logger *slog.Logger, opts []Option) (*PDS, error) {
	if vars.Backend != "" && vars.Backend != "inprocess" {
		return startBackend(vars, logger, opts)
	}
	s := setup{cfg: ServerConfig(vars)}
	if logger != nil && s.cfg.Logger == nil {
		s.cfg.Logger = logger
	}
	c := &clock.Shifted{}
	s.cfg.Clock = c
	for _, o := range opts {
		o(&s)
	}
	srv, err := pds.New(s.cfg)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return nil, err
	}
	p := &PDS{srv: srv, clock: c, url: srv.URL(), plcURL: srv.PLCURL(), adminPassword: srv.AdminPassword()}
	if err := p.ready(&s); err != nil {
		srv.Close()
		return nil, err
	}
	return p, nil
}

// Attach returns a PDS for one already running elsewhere (a fakepds
// binary, another process's server): its URL, its PLC directory's URL and
// its admin password. Main does this when HARNESS_PDS_URL is set. The
// powers (clock, faults, emails, stats) go through the fakepds control
// plane; against another PDS they skip the test.
func Attach(url, plcURL, adminPassword string) *PDS {
	return &PDS{url: strings.TrimSuffix(url, "/"), plcURL: strings.TrimSuffix(plcURL, "/"), adminPassword: adminPassword}
}

// Close stops a PDS this process started; an attached one is left running.
func (p *PDS) Close() error {
	if p.srv == nil {
		return closeBackend(p) // a subprocess or container this process started, if any
	}
	return p.srv.Close()
}

var (
	sharedMu   sync.Mutex
	shared     *PDS
	sharedSkip string // why Shared skips: the backend asked for cannot run here
)

// Main starts one PDS for the test binary, runs the tests, closes the PDS
// and exits with the tests' status. Call it from TestMain:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// With HARNESS_PDS_URL set it attaches to that running PDS instead (with
// HARNESS_PDS_PLC_URL and HARNESS_PDS_ADMIN_PASSWORD), so one PDS can serve
// every test binary of a CI job.
func Main(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts []Option) int {
	vars, err := env.Read()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 2
	}
	var p *PDS
	if vars.URL != "" {
		p = Attach(vars.URL, vars.PLCURL, vars.AdminPassword)
		if err := p.ready(apply(opts)); err != nil {
			fmt.Fprintln(os.Stderr, "harness: attach to PDS:", err)
			return 2
		}
	} else if p, err = start(vars, nil, opts); errors.Is(err, ErrBackendUnavailable) {
		// No engine for this backend here: every test that needs the
		// shared PDS skips, saying why, instead of the binary failing.
		sharedMu.Lock()
		sharedSkip = fmt.Sprintf("%s backend: %v", vars.Backend, err)
		sharedMu.Unlock()
		return m.Run()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "harness: start PDS:", err)
		return 2
	}
	sharedMu.Lock()
	shared = p
	sharedMu.Unlock()

	code := m.Run()

	if vars.Stats {
		if p.srv != nil {
			statsTable(os.Stderr, p.srv.Stats().Snapshot())
		} else {
			var out struct {
				Methods []stats.Method `json:"methods"`
			}
			if err := p.control(context.Background(), "GET", "stats", nil, &out); err != nil {
				fmt.Fprintln(os.Stderr, "harness: stats:", err)
			} else {
				statsTable(os.Stderr, out.Methods)
			}
		}
	}
	if err := p.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "harness: close PDS:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Shared returns the PDS that Main started or attached to. Without Main in
// the test binary's TestMain it fails the test and says so.
func Shared(t testing.TB) *PDS {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if sharedSkip != "" {
		t.Skip(sharedSkip)
	}
	if shared == nil {
		t.Fatalf("harness.Shared: no shared PDS; add to this package:\n\n\tfunc TestMain(m *testing.M) { harness.Main(m) }")
	}
	return shared
}

// New starts a private PDS for this test (or benchmark), closed by
// t.Cleanup. Its logs go to t.Log: hidden when the test passes, shown when
// it fails. It ignores HARNESS_PDS_URL: a private PDS is always in-process.
func New(t testing.TB, opts ...Option) *PDS {
	t.Helper()
	vars, err := env.Read()
	if err != nil {
		t.Fatalf("harness.New: %v", err)
	}
	vars.Dir = ""              // a private PDS never shares a kept data dir
	vars.Backend = "inprocess" // NewBackend starts a private one of another backend
	p, err := start(vars, slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})), opts)
	if err != nil {
		t.Fatalf("harness.New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("harness: close PDS: %v", err)
		}
	})
	return p
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
