// Package pds is fakepds's server, usable as a library: New builds a Server
// from a Config, Start serves it on a loopback port, Close ends it.
//
// The pds package never reads the environment: the HARNESS_PDS_* variables
// are read by package env and turned into a Config by the binary and the
// harness.
package pds

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluesky-social/indigo/atproto/lexicon"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/faults"
	"github.com/fakepds/fakepds/pds/firehose"
	"github.com/fakepds/fakepds/pds/jetstream"
	"github.com/fakepds/fakepds/pds/k256"
	"github.com/fakepds/fakepds/pds/mail"
	"github.com/fakepds/fakepds/pds/oauth"
	"github.com/fakepds/fakepds/pds/plc"
	"github.com/fakepds/fakepds/pds/random"
	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/stats"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// Version is reported by /xrpc/_health.
const Version = "0.1.0-fakepds"

// Config configures a Server. The zero value is a working server: a
// temporary data dir, a random admin password, fsync off, handles under .test.
type Config struct {
	// Addr is the listen address of Start (HOST:PORT; port 0 picks a free
	// one). URL names the server by this host as given, a name stays a
	// name and an IP an IP; empty, Start listens on a free loopback port
	// and URL is http://localhost:PORT, as the reference's dev-env
	// publishes itself (relays accept localhost:PORT, not 127.0.0.1).
	// A wildcard host (":PORT", "0.0.0.0:PORT") is published as localhost.
	Addr string
	// DataDir holds the databases and blobs. When empty, New makes a
	// temporary one and Close removes it; a DataDir given here is kept.
	DataDir string
	// Fsync makes every database (and blob file) durable: synchronous=FULL.
	// Off, nothing waits on the disk; a process crash still loses nothing
	// acknowledged, an OS crash or power cut may.
	Fsync bool
	// AdminPassword is the password of HTTP Basic user "admin"; random
	// when empty.
	AdminPassword string
	// Hostname names the service (its did:web and the default handle
	// domain's parent); PublicURL's host, or "localhost", when empty.
	Hostname string
	// HandleDomains are the suffixes account handles may use, each with a
	// leading dot; [".test"] when empty.
	HandleDomains []string
	// InviteRequired makes createAccount demand an invite code.
	InviteRequired bool
	// BlobUploadLimit is the largest blob uploadBlob accepts, in bytes;
	// 5 MiB (the reference's default) when zero.
	BlobUploadLimit int64
	// ActorStoreCache bounds the open actor store handles; 256 when zero.
	ActorStoreCache int
	// BodyTimeout bounds how long a request's body may take to arrive,
	// counted from the end of its headers (which have 10 s): a client that
	// stalls mid-body is answered 408 past it. 60 s when zero, no bound
	// when negative. A handler's own work is not bounded by it, nor is the
	// firehose.
	BodyTimeout time.Duration
	// WriteTimeout bounds how long one write of a streamed CAR response
	// (sync.getRepo, getRecord, getBlocks; 64 KiB at a time) may wait for
	// the client to take it: a client that stops reading is cut off, and
	// the actor store handle and read snapshot the response holds are
	// freed. 10 s when zero, no bound when negative.
	WriteTimeout time.Duration
	// SlotWait bounds how long a request waits for a shared slot (an actor
	// store handle when all ActorStoreCache are in use, an importRepo
	// when ImportConcurrency run) before it answers 503
	// NotEnoughResources. 10 s when zero, no bound when negative.
	SlotWait time.Duration
	// ImportConcurrency bounds how many importRepo calls parse and write
	// their CAR at once (each holds the CAR's block index and its tree in
	// memory); 2 when zero.
	ImportConcurrency int
	// PrivacyPolicyURL, TermsOfServiceURL and ContactEmail are reported by
	// describeServer when set.
	PrivacyPolicyURL, TermsOfServiceURL, ContactEmail string
	// Logger receives the server's logs; nil discards everything below
	// warnings and writes warnings to stderr.
	Logger *slog.Logger
	// Rand is where every random byte the server draws comes from
	// (keys, secrets, tokens, codes, ids); crypto/rand when nil. A
	// random.Seeded source makes the same keys and DIDs on every run.
	Rand *random.Source
	// Clock is the server's time (token expiry, email tokens, event
	// times). When nil, a clock.Shifted: the real time until a test (or
	// the control plane) moves it forward.
	Clock clock.Clock
	// ReferencePasswordCost hashes passwords at the reference PDS's scrypt
	// cost (N=16384, ~50 ms a hash) instead of fakepds's cheap default.
	ReferencePasswordCost bool
	// PadLogins makes every createSession take at least 350 ms, as the
	// reference pads them against timing attacks. Off by default: a test
	// suite pays it on every login.
	PadLogins bool
	// PLCAddr is the listen address of the PLC directory Start serves
	// beside the PDS, named in PLCURL as Addr is in URL; a free loopback
	// port published as localhost when empty.
	PLCAddr string
	// PLCURL names an existing PLC directory (another fakepds's PLCURL,
	// or any with plc.directory's API) that this server uses instead of
	// its own, so several servers share one. The server then opens no
	// directory and serves no PLC listener (PLCAddr and NoPLCRateLimit do
	// nothing); PLCURL() returns this URL.
	PLCURL string
	// PublicURL is the PDS endpoint published in DID documents, when it is
	// not URL (a reverse proxy, a name other machines or containers
	// reach): an http or https URL without a path.
	PublicURL string
	// DIDDocWithSession puts the account's DID document in session
	// responses (the reference's PDS_ENABLE_DID_DOC_WITH_SESSION; off by
	// default there too).
	DIDDocWithSession bool
	// RecoveryDIDKey is a did:key added to every new account's rotation
	// keys, before the server's own (the reference's recoveryDidKey).
	RecoveryDIDKey string
	// NoPLCRateLimit lifts the PLC directory's per-DID operation limits.
	NoPLCRateLimit bool
	// AppViewURL and AppViewDID name an appview to which methods this
	// server does not serve (app.bsky.feed.getTimeline, ...) are proxied,
	// with a service auth token, as the reference proxies them. Unset,
	// such methods answer 501 MethodNotImplemented.
	AppViewURL, AppViewDID string
	// PermissionSets are lexicon documents (JSON, a "permission-set" as
	// the main definition) that OAuth include:<nsid> scopes may name: the
	// offline stand-in for the network resolution the reference makes. A
	// set is also found as a com.atproto.lexicon.schema record (rkey: the
	// NSID) of the account whose handle is the NSID's authority
	// (test.alice.basics: alice.test), as if its _lexicon DNS record named
	// that account.
	PermissionSets [][]byte
}

// Server is a running (or ready to run) fakepds.
type Server struct {
	cfg     Config
	log     *slog.Logger
	dataDir string
	tempDir bool        // remove dataDir on Close
	discard atomic.Bool // Remove: dataDir goes after Close, so no marker
	newData bool        // no account database was there before New

	accounts *account.Manager
	seq      *sequencer.Sequencer
	plc      plc.Client     // ownPLC, or a remote directory (Config.PLCURL)
	ownPLC   *plc.Directory // nil when the directory is another server's
	firehose *firehose.Handler
	plcKey   *k256.PrivateKey // signs the PLC operations of every account
	actors   *actorstore.Cache[*actor]
	spare    *actorstore.Spare // the next new actor store's files
	oauth    *oauth.Provider
	permSets map[string]*lexicon.SchemaFile // Config.PermissionSets by NSID
	imports  chan struct{}                  // a token per importRepo parsing or writing
	settings store.Settings                 // of the account database, as read back

	jetstream *jetstream.Handler // serves /subscribe and the v2 subscribeEvents

	clock  clock.Clock
	tokens *auth.Tokens
	hasher auth.Hasher
	keys   keyCache
	outbox mail.Outbox
	faults faults.Faults
	stats  stats.Stats
	// tids mints record keys for createRecord; one clock per server so
	// keys only increase.
	tids         *clock.TIDs
	repoLocks    repoLocks
	idle         idleWork     // see withActorStoreThen
	cacheRelease cacheRelease // see noteWrite
	nonces       commitNonces
	proxyClient  *http.Client

	// verifyDPoP is the OAuth seam: when set, bearer hands it requests
	// with "Authorization: DPoP <token>" and the auth the method declared
	// (token type, scopes, account checks); it returns the caller, or the
	// reference's error. Nil refuses DPoP (InvalidToken).
	verifyDPoP func(r *http.Request, token, typ string, scopes []auth.Scope, chk check) (*caller, error)

	xrpc    *xrpc.Mux // the registered methods, for TestAuthMatrix
	handler http.Handler

	mu      sync.Mutex
	http    *http.Server
	plcHTTP *http.Server
	fresh   freshConns // of both servers
	url     string
	plcURL  string

	closeOnce sync.Once
	closeErr  error
}

// New opens the server's databases and builds its handler. It does not
// listen: call Start, or serve Handler yourself.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, tids: &clock.TIDs{Clock: cfg.Clock},
		proxyClient: &http.Client{Timeout: 30 * time.Second}}
	sets, err := parsePermissionSets(cfg.PermissionSets)
	if err != nil {
		return nil, err
	}
	s.permSets = sets
	s.hasher = auth.Hasher{N: auth.CheapScryptN, Rand: s.rand("password-salts")}
	if !cfg.Rand.Seeded() { // a seeded server signs reproducibly: RFC 6979
		s.nonces.pool = k256.NewNonces(firstNonces, maxNonces, s.rand("commit-nonces"))
	}
	if cfg.ReferencePasswordCost {
		s.hasher.N = auth.ReferenceScryptN
	}
	ctx := context.Background()

	s.dataDir = cfg.DataDir
	if s.dataDir == "" {
		d, err := os.MkdirTemp("", "fakepds-")
		if err != nil {
			return nil, fmt.Errorf("pds: data dir: %w", err)
		}
		s.dataDir, s.tempDir = d, true
	} else if err := os.MkdirAll(s.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("pds: data dir: %w", err)
	}

	err = s.open(ctx)
	if err == nil {
		err = s.recoverFirehose(ctx)
	}
	if err != nil {
		s.closeStores()
		if s.tempDir {
			os.RemoveAll(s.dataDir)
		}
		return nil, fmt.Errorf("pds: %w", err)
	}
	s.handler = s.idle.count(s.routes())
	return s, nil
}

func (s *Server) open(ctx context.Context) error {
	if err := s.resetTmpDir(); err != nil {
		return err
	}
	opts := store.Options{Fsync: s.cfg.Fsync, Logger: s.log}
	if _, err := os.Lstat(filepath.Join(s.dataDir, account.File)); errors.Is(err, fs.ErrNotExist) {
		s.newData = true
	}
	// Opening a database is mostly file-creation syscalls: open them side
	// by side.
	var wg sync.WaitGroup
	var errAcc, errSeq, errPLC, errOAuth error
	var oauthStore *oauth.Store
	wg.Go(func() { s.accounts, errAcc = account.Open(ctx, s.dataDir, opts) })
	wg.Go(func() { oauthStore, errOAuth = oauth.OpenStore(ctx, s.dataDir, opts) })
	wg.Go(func() { s.seq, errSeq = sequencer.Open(ctx, s.dataDir, opts) })
	if s.cfg.PLCURL != "" {
		s.plc = plc.NewRemote(s.cfg.PLCURL, &http.Client{Timeout: 30 * time.Second})
	} else {
		wg.Go(func() {
			s.ownPLC, errPLC = plc.Open(ctx, s.dataDir, plc.Options{Store: opts, Now: s.clock.Now, NoRateLimit: s.cfg.NoPLCRateLimit})
		})
	}
	wg.Wait()
	if s.ownPLC != nil {
		s.plc = s.ownPLC
	}
	if err := errors.Join(errAcc, errSeq, errPLC, errOAuth); err != nil {
		if oauthStore != nil {
			oauthStore.Close()
		}
		return err
	}
	s.accounts.Rand = s.rand("email-tokens")
	spare, err := actorstore.NewSpare(s.actorDir(), opts, warmSpare)
	if err != nil {
		oauthStore.Close()
		return err
	}
	s.spare = spare
	s.actors = actorstore.NewCache(s.cfg.ActorStoreCache, actorOpener(spare.Opener()))
	s.actors.Wait = s.cfg.SlotWait
	s.imports = make(chan struct{}, s.cfg.ImportConcurrency)
	s.firehose = firehose.New(s.seq, firehose.Options{Clock: s.clock, Logger: s.log})
	s.jetstream = jetstream.New(s.seq, jetstream.Options{Clock: s.clock, Logger: s.log})
	s.settings = s.accounts.DB().Settings()

	// The JWT secret lives in the account database so sessions survive a
	// restart on a kept data dir.
	secret, err := s.accounts.Secret(ctx, "jwt_secret", account.RandomSecret(s.rand("jwt-secret"), 32))
	if err != nil {
		oauthStore.Close()
		return err
	}
	s.tokens = auth.NewTokens(secret, s.ServiceDID(), s.clock)
	// OAuth access tokens are signed with the same secret, as the
	// reference signs them.
	if err := s.openOAuth(ctx, oauthStore, secret); err != nil {
		return err
	}
	// The rotation key too: the PLC log in a kept data dir names it.
	rot, err := s.accounts.Secret(ctx, "plc_rotation_key", func() ([]byte, error) {
		k, err := k256.Generate(s.rand("plc-rotation-key"))
		if err != nil {
			return nil, err
		}
		return k.Bytes(), nil
	})
	if err != nil {
		return err
	}
	if s.plcKey, err = k256.Parse(rot); err != nil {
		return fmt.Errorf("plc rotation key: %w", err)
	}
	return nil
}

func (c *Config) fill() error {
	if c.PublicURL != "" {
		u, err := url.Parse(c.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			return fmt.Errorf("pds: Config.PublicURL %q: want http(s)://HOST[:PORT] without a path", c.PublicURL)
		}
		c.PublicURL = strings.TrimSuffix(c.PublicURL, "/")
		if c.Hostname == "" {
			// As the reference derives both from PDS_HOSTNAME: the
			// service's did:web names the public host.
			c.Hostname = u.Hostname()
		}
	}
	if c.PLCURL != "" {
		u, err := url.Parse(c.PLCURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return fmt.Errorf("pds: Config.PLCURL %q: want the http(s) URL of a PLC directory", c.PLCURL)
		}
		c.PLCURL = strings.TrimSuffix(c.PLCURL, "/")
	}
	if c.AdminPassword == "" {
		b := make([]byte, 18)
		random.Read(c.Rand.Stream("admin-password"), b)
		c.AdminPassword = base64.RawURLEncoding.EncodeToString(b)
	}
	if c.Hostname == "" {
		c.Hostname = "localhost"
	}
	if len(c.HandleDomains) == 0 {
		c.HandleDomains = []string{".test"}
	}
	for i, d := range c.HandleDomains {
		if !strings.HasPrefix(d, ".") {
			return fmt.Errorf("pds: handle domain %q must start with a dot", d)
		}
		c.HandleDomains[i] = strings.ToLower(d)
	}
	if c.BlobUploadLimit == 0 {
		c.BlobUploadLimit = 5 << 20
	}
	if c.AppViewURL != "" && c.AppViewDID == "" {
		return errors.New("pds: Config.AppViewURL needs AppViewDID (the appview's service DID)")
	}
	if c.ActorStoreCache == 0 {
		c.ActorStoreCache = 256
	}
	if c.BodyTimeout == 0 {
		c.BodyTimeout = 60 * time.Second
	}
	if c.SlotWait == 0 {
		c.SlotWait = actorstore.DefaultWait
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 10 * time.Second
	}
	if c.ImportConcurrency <= 0 {
		c.ImportConcurrency = 2
	}
	if c.Clock == nil {
		// Shifted, so the control plane can move it; it runs with the
		// real time until someone does.
		c.Clock = &clock.Shifted{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return nil
}

// Start listens on the configured addresses and serves the PDS and its PLC
// directory. When it returns without error both answer: their sockets are
// bound and accepting.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return errors.New("pds: already started")
	}
	ln, u, err := listen(s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("pds: %w", err)
	}
	s.http = s.newHTTPServer(s.handler)
	serve := map[*http.Server]net.Listener{s.http: ln}
	s.url = u
	if s.ownPLC != nil {
		plcLn, plcU, err := listen(s.cfg.PLCAddr)
		if err != nil {
			ln.Close()
			return fmt.Errorf("pds: %w (PLC)", err)
		}
		s.plcURL = plcU
		s.plcHTTP = s.newHTTPServer(s.ownPLC.Handler())
		serve[s.plcHTTP] = plcLn
	}
	for srv, l := range serve {
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				s.log.Error("pds: serve", "addr", l.Addr(), "err", err)
			}
		}()
	}
	s.log.Info("fakepds listening", "url", s.url, "plc_url", s.plcURLLocked(), "data_dir", s.dataDir,
		"fsync", s.settings.Fsync(), "synchronous", s.settings.SyncName(), "journal_mode", s.settings.JournalMode)
	return nil
}

// listen listens on addr (a free loopback port when empty) and returns the
// URL that names it: addr's host as given, with the port bound, and
// localhost for an empty or wildcard host.
func listen(addr string) (net.Listener, string, error) {
	bind := addr
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, "", fmt.Errorf("listen address %q: %w", addr, err)
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, "", fmt.Errorf("listen %s: %w", bind, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); addr == "" || host == "" || ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return ln, "http://" + net.JoinHostPort(host, port), nil
}

// newHTTPServer bounds what a slow or stalled client can hold: headers
// must arrive within 10 s, the whole request within Config.BodyTimeout
// (see bodyDeadline), and an idle keep-alive connection closes after two
// minutes.
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           bodyDeadline(h, s.cfg.BodyTimeout),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState:         s.fresh.track,
	}
}

// freshConns are the connections that have not begun a request. Shutdown
// counts such a connection as idle only once it is 5 s old, and an HTTP
// client's pool often dials a connection it never uses, so a Close while
// a client was busy waited out its whole 5 s and reported a timeout
// (fakepds serve then exited 1 on SIGTERM). Close ends them first, and a
// connection accepted after that is ended as it arrives.
type freshConns struct {
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
}

func (f *freshConns) track(c net.Conn, st http.ConnState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case st != http.StateNew:
		delete(f.conns, c)
	case f.closing:
		c.Close()
	default:
		if f.conns == nil {
			f.conns = map[net.Conn]struct{}{}
		}
		f.conns[c] = struct{}{}
	}
}

// close ends every connection that has not begun a request, and every one
// accepted from now on.
func (f *freshConns) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closing = true
	for c := range f.conns {
		c.Close()
	}
	clear(f.conns)
}

// bodyDeadline gives a request's body a read deadline d after its headers
// arrived, which the client cannot move, and lifts it once the body has
// been read to its end (a request without a body has none). Lifting it
// matters: net/http
// watches a connection whose body is done with a background read, and a
// deadline expiring under that read would cancel the context of a handler
// still at work. The firehose's websocket is never cut by it: its upgrade
// request has no body, and the upgrade clears every deadline anyway.
//
// http.Server.ReadTimeout would bound the body the same way, but it stays
// on the connection for the whole of the handler's work.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	if d < 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			if rc.SetReadDeadline(time.Now().Add(d)) == nil {
				r.Body = &liftAtEOF{ReadCloser: r.Body, rc: rc}
			}
		}
		h.ServeHTTP(w, r)
	})
}

// liftAtEOF clears the read deadline when the body has been read whole.
type liftAtEOF struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *liftAtEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// PLCURL is the base URL of the PLC directory: its own, "" before Start,
// or Config.PLCURL.
func (s *Server) PLCURL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.plcURLLocked()
}

func (s *Server) plcURLLocked() string {
	if s.cfg.PLCURL != "" {
		return s.cfg.PLCURL
	}
	return s.plcURL
}

// publicURL is the PDS endpoint DID documents name.
func (s *Server) publicURL() string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	return s.URL()
}

// URL is the base URL the server answers on, "" before Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Handler serves every route of the server; use it to serve without a
// socket (httptest, an in-memory RoundTripper).
func (s *Server) Handler() http.Handler { return s.handler }

// Fsync reports whether commits wait for the disk, from the pragmas SQLite
// reported, not from the Config.
func (s *Server) Fsync() bool { return s.settings.Fsync() }

// DataDir is the directory holding the server's databases.
func (s *Server) DataDir() string { return s.dataDir }

// AdminPassword is the password of HTTP Basic user "admin".
func (s *Server) AdminPassword() string { return s.cfg.AdminPassword }

// Close stops serving (waiting up to 5 s for requests in flight), closes
// the databases and removes a temporary data dir. It is safe to call more
// than once; later calls return the first call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		s.mu.Lock()
		servers := []*http.Server{s.http, s.plcHTTP}
		s.mu.Unlock()
		s.fresh.close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		idle := true // every request ended (see recover.go)
		for _, srv := range servers {
			if srv == nil {
				continue
			}
			if err := srv.Shutdown(ctx); err != nil {
				idle = false
				errs = append(errs, err, srv.Close())
			}
		}
		cancel()
		if s.firehose != nil {
			s.firehose.Close()
		}
		if s.jetstream != nil {
			s.jetstream.Close()
		}
		s.idle.close()
		errs = append(errs, s.closeStoresMarked(idle))
		if s.tempDir {
			errs = append(errs, os.RemoveAll(s.dataDir))
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

// Remove is Close, and then removes the data dir: for a data dir made for
// this server alone, that no later start reads (a harness.New's). It writes
// no clean-shutdown marker there, which Close does for a kept data dir.
func (s *Server) Remove() error {
	s.discard.Store(true)
	return errors.Join(s.Close(), os.RemoveAll(s.dataDir))
}

// actorDir holds the actor stores.
func (s *Server) actorDir() string { return filepath.Join(s.dataDir, "actors") }

// closeStores is nil-safe so a New that failed halfway can clean up.
func (s *Server) closeStores() error {
	var errs []error
	if s.actors != nil {
		errs = append(errs, s.actors.Close())
	}
	if s.spare != nil {
		s.spare.Close()
	}
	if s.seq != nil {
		errs = append(errs, s.seq.Close())
	}
	if s.ownPLC != nil {
		errs = append(errs, s.ownPLC.Close())
	}
	if s.oauth != nil {
		errs = append(errs, s.oauth.Close())
	}
	if s.accounts != nil {
		errs = append(errs, s.accounts.Close())
	}
	return errors.Join(errs...)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	x := xrpc.NewMux(s.log)
	x.Faults, x.Stats, x.Fallback = &s.faults, &s.stats, s.proxy
	s.registerServer(x)
	s.registerSession(x)
	s.registerAppPasswords(x)
	s.registerIdentity(x)
	s.registerAccount(x)
	s.registerLifecycle(x)
	s.registerRepo(x)
	s.registerBlobs(x)
	s.registerSync(x)
	s.registerPrefs(x)
	s.registerAdmin(x)
	s.handle(x, xrpc.Subscription, "com.atproto.sync.subscribeRepos", noAuth, func(w http.ResponseWriter, r *http.Request, _ *caller) error {
		s.firehose.ServeHTTP(w, r)
		return nil
	})
	s.xrpc = x
	mux.Handle("/xrpc/", x)
	mux.Handle("GET "+jetstream.Path, s.jetstream)
	mux.Handle("GET "+jetstream.PathV2, s.jetstream.V2()) // more specific than /xrpc/
	mux.HandleFunc("GET "+jetstream.PathDictionary, s.jetstream.ServeDictionary)
	mux.HandleFunc("GET /xrpc/_health", s.health)
	mux.HandleFunc("GET /{$}", s.root)
	mux.HandleFunc("GET /robots.txt", s.robots)
	mux.HandleFunc("GET /.well-known/atproto-did", s.wellKnownDID)
	mux.HandleFunc("/", notFound)
	s.oauth.Mount(mux)
	s.controlRoutes(mux)
	return s.oauth.Middleware(mux)
}
