// Command fakepds runs an AT Protocol PDS for tests.
//
//	fakepds serve [--addr HOST:PORT] [--plc-addr HOST:PORT | --plc URL] [--public-url URL] [--dir DIR] [--actor-store-cache N] [--fixtures FILE] [--seed N] [--env]
//	fakepds exec  [--addr HOST:PORT] [--plc-addr HOST:PORT | --plc URL] [--public-url URL] [--dir DIR] [--actor-store-cache N] [--fixtures FILE] [--seed N] -- CMD ARGS...
//
// Once the server answers, serve prints exactly one JSON line on stdout
// (see docs/development.md: tools in other languages rely on it) and runs
// until SIGINT or SIGTERM, then shuts down and exits 0. Logs go to stderr.
//
// exec starts one PDS, runs CMD with HARNESS_PDS_URL and friends set (so
// every test binary CMD starts attaches to that PDS), stops the PDS when
// CMD ends and exits with CMD's status.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fakepds/fakepds/fixtures"
	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/env"
	"github.com/fakepds/fakepds/pds/jetstream"
	"github.com/fakepds/fakepds/pds/stats"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit statuses of exec when fakepds itself, not CMD, fails (as env(1)
// and docker run do): 125 the PDS did not start, 126 CMD could not be
// run, 127 CMD was not found.
const (
	exitPDSFailed  = 125
	exitCannotRun  = 126
	exitNotFound   = 127
	exitUsageError = 2
)

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsageError
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return 0
	case "serve":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := serve(ctx, args[1:], stdout, stderr); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			fmt.Fprintln(stderr, "fakepds:", err)
			return 1
		}
		return 0
	case "exec":
		return execute(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "fakepds: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsageError
}

// Ready is the JSON line serve prints once the server answers. Its fields
// are a stable interface: add, never rename or remove.
type Ready struct {
	URL           string `json:"url"`
	PLCURL        string `json:"plcUrl"`
	AdminPassword string `json:"adminPassword"`
	Fsync         bool   `json:"fsync"`
	Dir           string `json:"dir"`

	// JetstreamURL is the ws:// URL of the PDS's Jetstream (/subscribe).
	JetstreamURL string `json:"jetstreamUrl"`
	// Accounts are the fixture's accounts, with --fixtures.
	Accounts []ReadyAccount `json:"accounts,omitempty"`
}

// ReadyAccount is one fixture account in the Ready line.
type ReadyAccount struct {
	Name     string `json:"name"`
	Handle   string `json:"handle"`
	DID      string `json:"did"`
	Password string `json:"password"`
}

// server holds the flags serve and exec share.
type server struct {
	cfg      pds.Config
	fixtures string
	seed     *uint64 // --seed
}

func (s *server) flags(fs *flag.FlagSet) {
	fs.StringVar(&s.cfg.Addr, "addr", s.cfg.Addr, "listen address HOST:PORT, named in the URL as given (default: a free loopback port named localhost, or "+env.Addr+")")
	fs.StringVar(&s.cfg.PLCAddr, "plc-addr", s.cfg.PLCAddr, "listen address of the PLC directory (default: a free loopback port named localhost)")
	fs.StringVar(&s.cfg.PLCURL, "plc", s.cfg.PLCURL, "`URL` of an existing PLC directory (another fakepds's plcUrl) to use instead of serving one")
	fs.StringVar(&s.cfg.PublicURL, "public-url", s.cfg.PublicURL, "PDS endpoint published in DID documents when it is not the listen URL (a proxy, a name containers reach)")
	fs.StringVar(&s.cfg.DataDir, "dir", s.cfg.DataDir, "data directory, kept after exit (default: a temporary one, removed; or "+env.Dir+")")
	fs.Func("actor-store-cache", "how many actor stores (a SQLite file per account) are kept open at once; a request for another account waits for one once all are in use (default 256, or "+env.ActorStoreCache+")", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return errors.New("want a positive integer")
		}
		s.cfg.ActorStoreCache = n
		return nil
	})
	fs.StringVar(&s.fixtures, "fixtures", "", "fixture `FILE` to load once the server answers (see fixtures/README.md)")
	fs.Func("seed", "reproducible run: keys, DIDs, tokens and ids drawn from `N`, the clock frozen at "+harness.SeedEpoch.Format(time.RFC3339)+" (moved by the control plane); DID documents name "+harness.SeededPublicURL+" unless --addr has a fixed port or --public-url is set; from an empty data dir (docs/harness.md)", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return errors.New("want an unsigned integer")
		}
		s.seed = &n
		return nil
	})
}

// newServer is command name's server, configured from vars, and its flags
// (which, once parsed, override vars).
func newServer(name string, vars env.Vars, stderr io.Writer) (*server, *flag.FlagSet) {
	s := &server{cfg: harness.ServerConfig(vars)}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	s.flags(fs)
	return s, fs
}

// start starts the server and loads the fixture, if any.
func (s *server) start(ctx context.Context) (*pds.Server, *fixtures.Loaded, error) {
	if s.cfg.PLCURL != "" && s.cfg.PLCAddr != "" {
		return nil, nil, errors.New("--plc and --plc-addr: a server that uses another's PLC directory serves none")
	}
	if s.seed != nil {
		harness.SeedConfig(&s.cfg, *s.seed)
	}
	srv, err := pds.New(s.cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := srv.Start(); err != nil {
		srv.Close()
		return nil, nil, err
	}
	if s.fixtures == "" {
		return srv, nil, nil
	}
	loaded, err := loadFixture(ctx, srv, s.fixtures, s.cfg.DataDir != "")
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return srv, loaded, nil
}

// fixtureState is what a kept data dir remembers of the fixture loaded
// into it, so that serving the same dir again does not load it twice.
type fixtureState struct {
	Fixture string           `json:"fixture"`
	SHA256  string           `json:"sha256"`
	Loaded  *fixtures.Loaded `json:"loaded"`
}

const fixtureStateFile = "fakepds-fixture.json"

// loadFixture loads the fixture at path into srv with the file's own
// handles. In a kept data dir that already holds this fixture (same file
// content) it loads nothing and returns what was loaded then.
func loadFixture(ctx context.Context, srv *pds.Server, path string, kept bool) (*fixtures.Loaded, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fixtures: %w", err)
	}
	sum := sha256.Sum256(data)
	state := fixtureState{Fixture: path, SHA256: hex.EncodeToString(sum[:])}
	statePath := filepath.Join(srv.DataDir(), fixtureStateFile)
	if kept {
		if b, err := os.ReadFile(statePath); err == nil {
			var old fixtureState
			if err := json.Unmarshal(b, &old); err != nil || old.Loaded == nil {
				return nil, fmt.Errorf("fixtures: %s: unreadable (%v); remove the data dir", statePath, err)
			}
			if old.SHA256 != state.SHA256 {
				return nil, fmt.Errorf("fixtures: the data dir %s already holds fixture %s as it was when loaded; %s differs: remove the data dir or use another", srv.DataDir(), old.Fixture, path)
			}
			old.Loaded.PDS = srv.URL()
			return old.Loaded, nil
		}
	}
	f, err := fixtures.Open(path)
	if err != nil {
		return nil, err
	}
	// {{now}} is the server's time: a seeded server's stands still.
	if state.Loaded, err = fixtures.Load(ctx, srv.URL(), f, fixtures.WithAdminPassword(srv.AdminPassword()), fixtures.WithClock(srv.Clock().Now)); err != nil {
		return nil, err
	}
	if kept {
		b, _ := json.MarshalIndent(state, "", "  ")
		if err := os.WriteFile(statePath, b, 0o600); err != nil {
			return nil, fmt.Errorf("fixtures: %w", err)
		}
	}
	return state.Loaded, nil
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	vars, err := env.Read()
	if err != nil {
		return err
	}
	s, fs := newServer("serve", vars, stderr)
	envLines := fs.Bool("env", false, "print `export HARNESS_PDS_...` lines for a shell instead of the JSON line")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}

	srv, loaded, err := s.start(ctx)
	if err != nil {
		return err
	}
	if *envLines {
		io.WriteString(stdout, exports(srv, loaded))
	} else {
		ready := Ready{URL: srv.URL(), PLCURL: srv.PLCURL(), AdminPassword: srv.AdminPassword(), JetstreamURL: jetstream.URL(srv.URL()), Fsync: srv.Fsync(), Dir: srv.DataDir()}
		if loaded != nil {
			for _, a := range loaded.Accounts {
				ready.Accounts = append(ready.Accounts, ReadyAccount{Name: a.Name, Handle: a.Handle.String(), DID: a.DID.String(), Password: a.Password})
			}
		}
		line, _ := json.Marshal(ready)
		fmt.Fprintf(stdout, "%s\n", line)
	}

	<-ctx.Done()
	return srv.Close()
}

// readyMarker ends serve --env's output: once a reader sees it, every
// line before it is complete.
const readyMarker = "# fakepds ready"

// exports is serve --env's output: shell lines setting the variables a
// harness attaches with, then comments (the fixture accounts), then
// readyMarker. It is written in one piece.
func exports(srv *pds.Server, loaded *fixtures.Loaded) string {
	var b strings.Builder
	for _, kv := range attachVars(srv) {
		name, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s=%s\n", name, shellQuote(value))
	}
	fmt.Fprintf(&b, "# fsync: %v, data dir: %s\n", srv.Fsync(), srv.DataDir())
	if loaded != nil {
		for _, a := range loaded.Accounts {
			fmt.Fprintf(&b, "# account %s: handle %s, did %s, password %s\n", a.Name, a.Handle, a.DID, a.Password)
		}
	}
	b.WriteString(readyMarker + "\n")
	return b.String()
}

// attachVars are the variables that make a harness attach to srv.
func attachVars(srv *pds.Server) []string {
	return []string{env.URL + "=" + srv.URL(), env.PLCURL + "=" + srv.PLCURL(), env.AdminPassword + "=" + srv.AdminPassword()}
}

// shellQuote quotes s for sh: in single quotes, with each single quote
// in s closed, escaped and reopened.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// forwarded are the signals exec passes on to CMD rather than acting on.
var forwarded = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// notInherited are the variables that configure the PDS exec starts; CMD
// does not get them, so that a harness in CMD attaches rather than start
// a second server on the same address or data dir, and stats are printed
// once, by exec.
var notInherited = []string{env.URL, env.PLCURL, env.AdminPassword, env.Dir, env.Addr, env.Stats}

func execute(args []string, stdout, stderr io.Writer) int {
	// Until CMD runs, a signal stops the start; after, signals go to CMD.
	ctx, stop := signal.NotifyContext(context.Background(), forwarded...)
	defer stop()
	vars, err := env.Read()
	if err != nil {
		fmt.Fprintln(stderr, "fakepds:", err)
		return exitPDSFailed
	}
	s, fs := newServer("exec", vars, stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: fakepds exec [flags] -- CMD ARGS...")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return exitUsageError
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "fakepds exec: no command: fakepds exec [flags] -- CMD ARGS...")
		return exitUsageError
	}

	srv, _, err := s.start(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "fakepds:", err)
		return exitPDSFailed
	}
	defer srv.Close()

	cmd := exec.Command(fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(notInherited, name)
	}), attachVars(srv)...)
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(stderr, "fakepds exec:", err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-sigs:
				_ = cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	_ = cmd.Wait() // the status is in ProcessState
	close(done)
	code := exitStatus(cmd.ProcessState)

	if vars.Stats {
		writeStats(stderr, srv.Stats().Snapshot())
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintln(stderr, "fakepds: close PDS:", err)
	}
	return code
}

// exitStatus is a shell's $? for a finished process: its exit code, or
// 128 + the signal that killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// writeStats prints the server's per-method stats, as the harness does at
// the end of a test binary with HARNESS_PDS_STATS=1.
func writeStats(w io.Writer, methods []stats.Method) {
	fmt.Fprintf(w, "\nfakepds server-side stats\n%-50s %8s %6s %10s %10s %10s\n", "method", "count", "errors", "p50", "p95", "mean")
	for _, m := range methods {
		fmt.Fprintf(w, "%-50s %8d %6d %10s %10s %10s\n", m.Name, m.Count, m.Errors,
			m.P50.Round(time.Microsecond), m.P95.Round(time.Microsecond), m.Mean.Round(time.Microsecond))
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `fakepds: an AT Protocol PDS for tests

Usage:
  fakepds serve [--addr HOST:PORT] [--plc-addr HOST:PORT | --plc URL]
                [--public-url URL] [--dir DIR] [--actor-store-cache N]
                [--fixtures FILE] [--seed N] [--env]
      Serve until SIGINT or SIGTERM. Once the server answers (and the
      fixture, if any, is loaded), print one JSON line on stdout:
      {"url", "plcUrl", "adminPassword", "fsync", "dir", "jetstreamUrl",
      "accounts"}
      ("accounts": the fixture's, each {"name", "handle", "did",
      "password"}). Logs go to stderr.
      --addr HOST:PORT the URL names HOST as given (a name stays a name);
                       by default a free loopback port named localhost,
                       as the reference's dev-env (relays accept
                       localhost:PORT, not 127.0.0.1).
      --plc URL        use the PLC directory at URL (another fakepds's
                       plcUrl) instead of serving one: several servers
                       share it, DIDs of one resolve through the other,
                       and account migration works between them. This
                       server serves no PLC listener; its plcUrl is URL.
      --public-url URL the PDS endpoint DID documents publish, when it
                       is not the listen URL.
      --actor-store-cache N
                       keep N actor stores (a SQLite file per account)
                       open, default 256 (HARNESS_PDS_ACTOR_STORE_CACHE):
                       with all N in use, a request for another account
                       waits, then answers 503 NotEnoughResources.
      --fixtures FILE  load a fixture (fixtures/README.md) with its own
                       handles; a kept --dir remembers it and is not
                       loaded twice.
      --seed N         a reproducible run: keys (so DIDs), secrets,
                       tokens and ids are drawn from N, the clock stands
                       at 2025-01-01T00:00:00Z until the control plane
                       moves it; the same requests in the same order give
                       the same repos and firehose frames. DID documents
                       name http://seeded-pds.invalid unless --addr has a
                       fixed port or --public-url is given. From an empty
                       data dir (docs/harness.md "Reproducible runs").
      --env            print shell lines instead of the JSON line:
                       export HARNESS_PDS_URL=..., HARNESS_PDS_PLC_URL,
                       HARNESS_PDS_ADMIN_PASSWORD, comments, and last
                       "# fakepds ready". In a shell:
          fakepds serve --env > pds.env &
          until grep -q '^# fakepds ready' pds.env 2>/dev/null; do sleep 0.1; done
          . ./pds.env    # go test ./... now attaches to it; kill %1 ends it

  fakepds exec [--addr HOST:PORT] [--plc-addr HOST:PORT | --plc URL]
               [--public-url URL] [--dir DIR] [--actor-store-cache N]
               [--fixtures FILE] [--seed N] -- CMD ARGS...
      Start one PDS, run CMD with HARNESS_PDS_URL, HARNESS_PDS_PLC_URL and
      HARNESS_PDS_ADMIN_PASSWORD set (so "fakepds exec -- go test ./..."
      shares one PDS among all packages), stop the PDS when CMD ends and
      exit with CMD's status (128+N if signal N killed it). SIGINT,
      SIGTERM, SIGHUP and SIGQUIT are passed on to CMD. CMD does not get
      HARNESS_PDS_DIR, _ADDR or _STATS: with HARNESS_PDS_STATS=1, exec
      prints the server's per-method stats once, on stderr, after CMD.
      Exit status 125: the PDS did not start; 126: CMD could not run;
      127: CMD was not found.

  fakepds help
      This text.

Environment:
`)
	for _, v := range env.Table {
		fmt.Fprintf(w, "  %s (default: %s)\n      %s\n", v.Name, v.Default, wrap(v.Meaning, 72, "      "))
	}
}

func wrap(s string, width int, indent string) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(s) {
		if i > 0 {
			if n+1+len(word) > width {
				b.WriteString("\n" + indent)
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
