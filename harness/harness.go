package harness

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakepds/fakepds/fixtures"
	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/env"
	"github.com/fakepds/fakepds/pds/random"
)

// PDS is a running PDS a test talks to: one this process started
// in-process, or one it attached to through HARNESS_PDS_URL (or one a
// backend started, see Started).
type PDS struct {
	url           string
	plcURL        string
	adminPassword string

	mu      sync.Mutex
	srv     *pds.Server  // nil when attached; swapped by Restart
	cfg     pds.Config   // what srv was started with, for Restart
	tempDir string       // the data dir the harness made; removed by Close
	stop    func() error // what a backend started (Started)
	closed  bool
	shared  bool // Main's: only Main closes it

	domainOnce sync.Once
	domain     string
	invites    bool // createAccount needs an invite code

	rand            io.Reader        // the harness's own draws (handles, passwords)
	fixture         *fixtures.Loaded // WithFixtures
	fixtureAccounts sync.Map         // name -> *Account (fixtures.go)
}

// URL is the PDS's base URL (XRPC under /xrpc/).
func (p *PDS) URL() string { return p.url }

// PLCURL is the URL of the PLC directory the PDS registers its DIDs with.
func (p *PDS) PLCURL() string { return p.plcURL }

// AdminPassword is the password of HTTP Basic user "admin".
func (p *PDS) AdminPassword() string { return p.adminPassword }

// random is where the harness draws handles and passwords from: the seed's
// stream (WithSeed), crypto/rand otherwise.
func (p *PDS) random() io.Reader {
	if p.rand == nil {
		return rand.Reader
	}
	return p.rand
}

// Server is the in-process server, or nil when the PDS was attached to
// over HTTP (HARNESS_PDS_URL): powers that need it skip the test then.
func (p *PDS) Server() *pds.Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.srv
}

// alive fails t when the PDS was closed, saying so, rather than let the
// next call fail with "connection refused" or "database is closed".
func (p *PDS) alive(t testing.TB, what string) {
	t.Helper()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		t.Fatalf("harness: %s: the PDS at %s is closed (by Close, or by the cleanup of the test that made it with New)", what, p.url)
	}
}

// Option configures a PDS the harness starts or attaches to.
type Option func(*setup)

// setup is what the options ask for: the server's Config, and what to do
// once the PDS answers.
type setup struct {
	cfg             pds.Config
	fixtures        string // a fixture file to load (fixtures.go)
	fixtureFile     *fixtures.File
	skipUnavailable bool
}

// WithConfig edits the pds.Config the harness starts the server with, for
// anything no narrower option covers.
func WithConfig(edit func(*pds.Config)) Option { return func(s *setup) { edit(&s.cfg) } }

// WithInvites makes account creation require an invite code. NewAccount
// still works: it mints a code with the admin password for each account
// (or uses WithInviteCode's).
func WithInvites() Option { return func(s *setup) { s.cfg.InviteRequired = true } }

// WithAddr makes the server listen on addr (HOST:PORT, port 0 for a free
// one). Its URL names the host as given: "localhost:0" gives
// http://localhost:PORT, "127.0.0.1:0" gives http://127.0.0.1:PORT. The
// default, a free loopback port named localhost, is what relays and the
// reference's dev-env expect.
func WithAddr(addr string) Option { return func(s *setup) { s.cfg.Addr = addr } }

// WithPublicURL publishes url (http(s)://HOST[:PORT]) as the PDS endpoint
// of every DID document, for a PDS reached through a proxy or by a name
// other than its listen address (a container reaching the host, say).
// The harness itself still talks to URL().
func WithPublicURL(url string) Option { return func(s *setup) { s.cfg.PublicURL = url } }

// WithPLC makes the server use the PLC directory at url (another PDS's
// PLCURL, say) instead of starting its own, so several servers share one
// directory: each has its own accounts and firehose, and the DIDs of one
// resolve through the other. It serves no PLC listener then; PLCURL()
// returns url.
func WithPLC(url string) Option { return func(s *setup) { s.cfg.PLCURL = url } }

// SeedEpoch is where the clock of a seeded PDS (WithSeed) stands until a
// test moves it.
var SeedEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// SeededPublicURL is the PDS endpoint a seeded PDS (WithSeed) publishes in
// DID documents when it listens on a free port and no WithPublicURL names
// one: the DIDs name it, so it must not be the port of the run. Nothing
// answers there (.invalid never resolves).
const SeededPublicURL = "http://seeded-pds.invalid"

// WithSeed makes a run reproducible: every random choice the PDS makes
// (account keys and so DIDs, the PLC rotation key, secrets, tokens, invite
// codes, ids) and the harness makes (NewAccount's handles, emails and
// passwords) is drawn from seed, and every time the PDS writes (revs,
// record keys, createdAt of the seed helpers, event times, token times)
// comes from a frozen clock at SeedEpoch that only Clock(t).Advance
// moves. The same sequential workload then makes byte-identical repos
// (getRepo CARs) and firehose frames on every run; a concurrent one
// draws in the scheduler's order. DIDs name the PDS's public URL: a
// fixed WithAddr port or WithPublicURL is used as given, otherwise
// SeededPublicURL. docs/harness.md "Reproducible runs" says what a
// seed does not fix.
func WithSeed(seed uint64) Option {
	return func(s *setup) {
		s.cfg.Rand = random.Seeded(seed)
		s.cfg.Clock = clock.NewFrozen(SeedEpoch)
	}
}

// SkipUnavailable makes a backend that cannot run on this machine (no
// Docker engine for HARNESS_PDS_BACKEND=docker) skip the tests that need
// it, saying why, instead of failing them. Without it, Main exits 2 and
// NewBackend fails the test: a CI job must not go green having run
// nothing unless it asked to.
func SkipUnavailable() Option { return func(s *setup) { s.skipUnavailable = true } }

// Start starts an in-process PDS for use outside a test (a dev server, a
// program's own integration run, an Example), configured by opts and the
// HARNESS_PDS_* variables (a kept HARNESS_PDS_DIR included; HARNESS_PDS_URL
// and _BACKEND do not apply: it is always in-process). The caller closes
// it. Its logs go to stderr at HARNESS_PDS_LOG's level. NewStandalone
// gives the helpers a testing.TB outside a test.
func Start(opts ...Option) (*PDS, error) {
	vars, err := env.Read()
	if err != nil {
		return nil, fmt.Errorf("harness: %w", err)
	}
	vars.Backend = "inprocess"
	return start(vars, nil, opts)
}

// start builds and starts an in-process server from the environment and
// opts.
func start(vars env.Vars, logger *slog.Logger, opts []Option) (*PDS, error) {
	s := setup{cfg: ServerConfig(vars)}
	if logger != nil && s.cfg.Logger == nil {
		s.cfg.Logger = logger
	}
	c := &clock.Shifted{}
	s.cfg.Clock = c
	for _, o := range opts {
		o(&s)
	}
	if s.cfg.Rand.Seeded() {
		seededURL(&s.cfg)
	}
	p := &PDS{rand: s.cfg.Rand.Stream("harness")}
	if s.cfg.DataDir == "" {
		// The harness owns the data dir, not the server, so that Restart
		// can start a new server on the same data.
		d, err := os.MkdirTemp("", "fakepds-")
		if err != nil {
			return nil, fmt.Errorf("harness: data dir: %w", err)
		}
		s.cfg.DataDir, p.tempDir = d, d
	}
	srv, err := startServer(s.cfg)
	if err != nil {
		p.removeTemp()
		return nil, err
	}
	p.srv, p.cfg = srv, s.cfg
	p.url, p.plcURL, p.adminPassword = srv.URL(), srv.PLCURL(), srv.AdminPassword()
	if err := p.ready(&s); err != nil {
		return nil, errors.Join(err, p.close())
	}
	return p, nil
}

// SeedConfig makes cfg a seeded server's, as WithSeed does, for a server
// started without the harness (fakepds serve --seed). Call it once cfg's
// Addr and PublicURL are final.
func SeedConfig(cfg *pds.Config, seed uint64) {
	var s setup
	WithSeed(seed)(&s)
	cfg.Rand, cfg.Clock = s.cfg.Rand, s.cfg.Clock
	seededURL(cfg)
}

// seededURL publishes SeededPublicURL when nothing else names a URL that
// is the same on every run.
func seededURL(cfg *pds.Config) {
	if cfg.PublicURL != "" || fixedPort(cfg.Addr) {
		return
	}
	cfg.PublicURL = SeededPublicURL
	if cfg.Hostname == "" {
		cfg.Hostname = "localhost" // not the public URL's host
	}
}

// fixedPort reports whether addr names a port other than 0: a URL that
// is the same on every run.
func fixedPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port != "" && port != "0"
}

func startServer(cfg pds.Config) (*pds.Server, error) {
	srv, err := pds.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, errors.Join(err, srv.Close())
	}
	return srv, nil
}

func (p *PDS) removeTemp() {
	if p.tempDir != "" {
		os.RemoveAll(p.tempDir)
	}
}

// Attach returns a PDS for one already running elsewhere (a fakepds
// binary, another process's server): its URL, its PLC directory's URL and
// its admin password. Main does this when HARNESS_PDS_URL is set. The
// powers (clock, faults, emails, stats) go through the fakepds control
// plane; against another PDS they skip the test.
func Attach(url, plcURL, adminPassword string) *PDS {
	return &PDS{url: strings.TrimSuffix(url, "/"), plcURL: strings.TrimSuffix(plcURL, "/"), adminPassword: adminPassword}
}

// Started is Attach for a PDS that a backend started (a subprocess, a
// container): Close runs stop, once.
func Started(url, plcURL, adminPassword string, stop func() error) *PDS {
	p := Attach(url, plcURL, adminPassword)
	p.stop = stop
	return p
}

// errSharedClose is what Close of Main's PDS answers: a test closing it
// would break every later test in the binary.
var errSharedClose = errors.New("harness: Close: this is the shared PDS of the test binary; Main closes it after the last test")

// Close stops a PDS this process started (in-process, or by a backend);
// an attached one is left running. Later calls do nothing. The shared PDS
// refuses: Main closes it.
func (p *PDS) Close() error {
	if p.shared {
		return errSharedClose
	}
	return p.close()
}

func (p *PDS) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	srv, stop := p.srv, p.stop
	p.mu.Unlock()
	var err error
	switch {
	case srv != nil && p.tempDir != "":
		// The data dir goes with the server: no marker for a next start.
		err = srv.Remove()
	case srv != nil:
		err = srv.Close()
	}
	if stop != nil {
		err = errors.Join(err, stop())
	}
	p.removeTemp()
	return err
}

// Restart stops the in-process server and starts a new one on the same
// data, addresses and admin password, as miniredis's Restart does: every
// account, record, blob and firehose event is kept; firehose subscribers
// are disconnected, and what lives only in memory (fault rules, stats,
// captured emails) starts empty. The clock keeps its offset. Use it on a
// private PDS (New): the shared one refuses.
func (p *PDS) Restart(t testing.TB) {
	t.Helper()
	p.alive(t, "Restart")
	if p.shared {
		t.Fatalf("harness: Restart: this is the shared PDS of the test binary; restart a private one (harness.New)")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv == nil {
		t.Skipf("harness: Restart needs an in-process PDS; %s is attached", p.url)
	}
	cfg := p.cfg
	cfg.Addr = sameAddr(p.cfg.Addr, p.url)
	if cfg.PLCURL == "" { // its own directory, not another's (WithPLC)
		cfg.PLCAddr = sameAddr(p.cfg.PLCAddr, p.plcURL)
	}
	cfg.AdminPassword = p.adminPassword
	if err := p.srv.Close(); err != nil {
		t.Fatalf("harness: Restart: close: %v", err)
	}
	srv, err := startServer(cfg)
	if err != nil {
		p.closed = true
		t.Fatalf("harness: Restart: %v", err)
	}
	p.srv = srv
}

// sameAddr is the listen address that binds the port of u again with the
// host asked for at first (localhost for the default).
func sameAddr(asked, u string) string {
	host := "localhost"
	if asked != "" {
		host, _, _ = net.SplitHostPort(asked)
	}
	pu, _ := url.Parse(u)
	return net.JoinHostPort(host, pu.Port())
}

var (
	sharedMu   sync.Mutex
	shared     *PDS
	sharedSkip string // why Shared skips: the backend asked for cannot run here (SkipUnavailable)
)

// Main starts one PDS for the test binary, runs the tests, closes the PDS
// and exits with the tests' status. Call it from TestMain:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
// With HARNESS_PDS_URL set it attaches to that running PDS instead (with
// HARNESS_PDS_PLC_URL and HARNESS_PDS_ADMIN_PASSWORD), so one PDS can serve
// every test binary of a CI job; it checks first that a PDS answers there.
// A PDS that cannot start, or a URL where none answers, exits 2 before
// any test runs.
func Main(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts))
}

func run(m *testing.M, opts []Option) int {
	vars, err := env.Read()
	if err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		return 2
	}
	s := apply(opts)
	var p *PDS
	if vars.URL != "" {
		p = Attach(vars.URL, vars.PLCURL, vars.AdminPassword)
		if err := p.ping(context.Background()); err != nil {
			fmt.Fprintf(os.Stderr, "harness: %s=%s: %v\n", env.URL, vars.URL, err)
			return 2
		}
		if err := p.ready(s); err != nil {
			fmt.Fprintln(os.Stderr, "harness: attach to PDS:", err)
			return 2
		}
	} else if p, err = startBackend(vars, nil, opts); errors.Is(err, ErrBackendUnavailable) && s.skipUnavailable {
		// Asked for: every test that needs the shared PDS skips, saying
		// why, instead of the binary failing.
		sharedMu.Lock()
		sharedSkip = fmt.Sprintf("%s backend: %v", vars.Backend, err)
		sharedMu.Unlock()
		return m.Run()
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "harness: start PDS:", err)
		if errors.Is(err, ErrBackendUnavailable) {
			fmt.Fprintf(os.Stderr, "harness: no test ran. To skip them instead where the %s backend cannot run: harness.Main(m, harness.SkipUnavailable())\n", vars.Backend)
		}
		return 2
	}
	p.shared = true
	sharedMu.Lock()
	shared = p
	sharedMu.Unlock()

	code := m.Run()

	if vars.Stats {
		if methods, err := p.stats(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "harness: stats:", err)
		} else {
			statsTable(os.Stderr, methods)
		}
	}
	if err := p.close(); err != nil {
		fmt.Fprintln(os.Stderr, "harness: close PDS:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// ping checks that a PDS answers at p's URL, so a wrong HARNESS_PDS_URL
// fails once, at start, instead of every test.
func (p *PDS) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+"/xrpc/_health", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("no PDS answers there: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /xrpc/_health answered %s: not a PDS", resp.Status)
	}
	return nil
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
	p, err := start(vars, testLogger(t), opts)
	if err != nil {
		t.Fatalf("harness.New: %v", err)
	}
	t.Cleanup(func() {
		if err := p.close(); err != nil {
			t.Errorf("harness: close PDS: %v", err)
		}
	})
	return p
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testWriter sends log lines to t.Log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}
