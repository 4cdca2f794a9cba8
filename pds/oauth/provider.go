// Package oauth is fakepds's atproto OAuth: the authorization server (the
// discovery documents, client metadata, PAR, the sign-in and consent page,
// token and revoke, DPoP with server nonces) and the check the resource
// server makes of a DPoP-bound access token and its scopes. It follows
// the reference PDS's provider (npm @atproto/oauth-provider) in its field
// values, lifetimes and error names; docs/known-differences.md lists where
// it does not.
//
// Token lifetimes run on the server's clock, so a test that moves it
// expires them; DPoP proof ages, nonces and client assertion ages run on
// the real time, because clients sign them with theirs.
package oauth

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/random"
)

// The reference's lifetimes (oauth-provider's oauth-constants.ts).
const (
	tokenMaxAge           = 60 * time.Minute
	parExpiresIn          = 5 * time.Minute
	codeLifetime          = 5 * time.Minute // AUTHORIZATION_INACTIVITY_TIMEOUT: a code, and a request on the page
	sessionLifetime       = 14 * 24 * time.Hour
	refreshLifetime       = 14 * 24 * time.Hour
	sessionLifetimeLong   = 2 * 8766 * time.Hour // 2 years, confidential clients
	refreshLifetimeLong   = 8766 * time.Hour / 4 // 3 months, confidential clients
	clientAssertionMaxAge = time.Minute
	// codeChallengeReplay is how long a PKCE code challenge, once
	// exchanged, is refused (CODE_CHALLENGE_REPLAY_TIMEFRAME).
	codeChallengeReplay = 24 * time.Hour
)

// Account is what the provider knows of an account.
type Account struct {
	DID, Handle string
}

// ErrBadCredentials is what Accounts.SignIn returns for a wrong identifier
// or password.
var ErrBadCredentials = errors.New("oauth: invalid identifier or password")

// Accounts is the PDS's account manager, as the provider needs it.
type Accounts interface {
	// SignIn checks a handle (or email) and the account's password (not an
	// app password).
	SignIn(ctx context.Context, identifier, password string) (Account, error)
	// Account finds an account by DID or handle.
	Account(ctx context.Context, id string) (Account, error)
	// CreateAccount makes an account as com.atproto.server.createAccount
	// does (the authorize page's sign-up, for prompt=create); its refusals
	// are *Error with the message to show.
	CreateAccount(ctx context.Context, handle, email, password, inviteCode string) (Account, error)
}

// Options configure New.
type Options struct {
	// Store is the database (OpenStore); the Provider closes it.
	Store *Store
	// Issuer is the PDS's public URL (the issuer and the resource), read
	// per request because a server knows it only once it listens.
	Issuer func() string
	// Audience is the PDS's service DID, the access tokens' aud.
	Audience string
	// Secret signs access tokens (HS256, as the reference signs them with
	// its JWT secret).
	Secret []byte
	// Clock runs the token lifetimes.
	Clock    clock.Clock
	Accounts Accounts
	// HTTPClient fetches client metadata documents; nil is a client with a
	// 10 s timeout. Every client under test lives on localhost, so
	// loopback addresses are allowed.
	HTTPClient *http.Client
	Logger     *slog.Logger
	// InviteRequired shows the sign-up form an invite code field.
	InviteRequired bool
	// PermissionSet resolves the lexicons include: scopes name; nil
	// resolves none (every include: is refused as unresolvable).
	PermissionSet PermissionSetResolver
	// Rand is where ids, codes and the nonce secret are drawn from;
	// crypto/rand when nil.
	Rand io.Reader
}

// Provider is the OAuth authorization server of one PDS.
type Provider struct {
	opts   Options
	db     db
	nonces *nonces
	replay *replay
	// challenges are the code challenges of exchanged codes.
	challenges *replay
	clients    *clientCache
	lexicons   lexicons
	signer     jose.Signer
	realNow    func() time.Time
	log        *slog.Logger
}

// New opens the provider's database.
func New(ctx context.Context, opts Options) (*Provider, error) {
	if opts.Store == nil || opts.Issuer == nil || opts.Audience == "" || len(opts.Secret) == 0 || opts.Clock == nil || opts.Accounts == nil {
		return nil, errors.New("oauth: Options need Store, Issuer, Audience, Secret, Clock and Accounts")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: opts.Secret},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return nil, fmt.Errorf("oauth: signer: %w", err)
	}
	d := opts.Store.db
	p := &Provider{opts: opts, db: d, signer: signer, realNow: time.Now, log: opts.Logger}
	p.nonces = newNonces(opts.Rand, p.realNow)
	p.replay = newReplay(p.realNow, replayWindow)
	p.challenges = newReplay(p.realNow, codeChallengeReplay)
	p.clients = newClientCache(p)
	// A database not made yet holds nothing to purge.
	if d.Opened() {
		if err := d.purgeTokens(ctx, p.now()); err != nil {
			d.Close()
			return nil, err
		}
	}
	return p, nil
}

// Close closes the database.
func (p *Provider) Close() error { return p.db.Close() }

func (p *Provider) now() time.Time { return p.opts.Clock.Now() }
func (p *Provider) issuer() string { return strings.TrimSuffix(p.opts.Issuer(), "/") }

// Mount registers the provider's routes on mux.
func (p *Provider) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /.well-known/oauth-protected-resource", p.protectedResource)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", p.serverMetadata)
	mux.HandleFunc("GET /oauth/jwks", p.jwks)
	mux.HandleFunc("POST /oauth/par", p.asEndpoint(p.par))
	mux.HandleFunc("POST /oauth/token", p.asEndpoint(p.token))
	mux.HandleFunc("POST /oauth/revoke", p.asEndpoint(p.revoke))
	for _, path := range []string{"/oauth/par", "/oauth/token", "/oauth/revoke"} {
		mux.HandleFunc("OPTIONS "+path, preflight)
	}
	mux.HandleFunc("GET /oauth/authorize", p.authorizePage)
	mux.HandleFunc("POST /oauth/authorize/sign-in", p.signInForm)
	mux.HandleFunc("POST /oauth/authorize/sign-up", p.signUpForm)
	mux.HandleFunc("POST /oauth/authorize/consent", p.consentForm)
}

// Error is an OAuth error: {"error", "error_description"} with a status,
// and for the errors RFC 6750 and RFC 9449 send in WWW-Authenticate, the
// scheme whose challenge carries it.
type Error struct {
	Status      int
	Code        string
	Description string
	// Challenge is "DPoP" or "Bearer" for errors with a WWW-Authenticate
	// challenge; "" for none.
	Challenge string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// WWWAuthenticate is the challenge header's value, as the reference
// formats it ("" when the error has none).
func (e *Error) WWWAuthenticate() string {
	if e.Challenge == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString(e.Challenge)
	b.WriteString(" ")
	if e.Challenge == "DPoP" {
		fmt.Fprintf(&b, `algs="%s", `, strings.Join(algNames(), " "))
	}
	fmt.Fprintf(&b, `error="%s"`, e.Code)
	if e.Description != "" && !strings.Contains(e.Description, `"`) {
		fmt.Fprintf(&b, `, error_description="%s"`, e.Description)
	}
	return b.String()
}

func oerr(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Description: fmt.Sprintf(format, args...)}
}

func errInvalidRequest(format string, args ...any) *Error {
	return oerr(400, "invalid_request", format, args...)
}
func errInvalidGrant(format string, args ...any) *Error {
	return oerr(400, "invalid_grant", format, args...)
}
func errInvalidClient(format string, args ...any) *Error {
	return oerr(400, "invalid_client", format, args...)
}
func errClientMetadata(format string, args ...any) *Error {
	return oerr(400, "invalid_client_metadata", format, args...)
}
func errDPoP(format string, args ...any) *Error {
	e := oerr(401, "invalid_dpop_proof", format, args...)
	e.Challenge = "DPoP"
	return e
}

// errUseNonce is 400 on the authorization server; the resource server
// turns it into a 401 challenge (RFC 9449 sections 8 and 9).
func errUseNonce(desc string) *Error { return oerr(400, "use_dpop_nonce", "%s", desc) }

func (p *Provider) writeError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		p.log.Error("oauth: request failed", "err", err)
		e = oerr(500, "server_error", "Server error")
	}
	if h := e.WWWAuthenticate(); h != "" {
		w.Header().Set("WWW-Authenticate", h)
	}
	writeJSON(w, e.Status, map[string]string{"error": e.Code, "error_description": e.Description})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// asEndpoint wraps the endpoints a client calls with DPoP: each answer
// carries a fresh nonce, CORS headers (browser apps call them too) and the
// error envelope.
func (p *Provider) asEndpoint(fn func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Expose-Headers", "DPoP-Nonce, WWW-Authenticate")
		h.Set("DPoP-Nonce", p.nonces.next())
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		if err := r.ParseForm(); err != nil {
			p.writeError(w, errInvalidRequest("Invalid request body"))
			return
		}
		if err := fn(w, r); err != nil {
			p.writeError(w, err)
		}
	}
}

func preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, DPoP, Authorization")
	h.Set("Access-Control-Max-Age", "86400")
	w.WriteHeader(http.StatusNoContent)
}

// randomID is prefix + 2n hex characters drawn from r (crypto/rand when
// nil), the shape of the reference's ids ("req-", "cod-", "tok-", "ref-").
func randomID(r io.Reader, prefix string, n int) string {
	b := make([]byte, n)
	random.Read(r, b)
	return prefix + hex.EncodeToString(b)
}

// Session is an account's OAuth session (a token family), as the
// account side sees it.
type Session struct {
	ClientID  string    `json:"clientId"`
	Scope     string    `json:"scope"`
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is the last sign-in or refresh.
	UpdatedAt time.Time `json:"updatedAt"`
}

// Sessions lists the account's OAuth sessions, newest first: what the
// reference's account page shows as the apps signed in.
func (p *Provider) Sessions(ctx context.Context, did string) ([]Session, error) {
	rows, err := p.db.tokensOf(ctx, did)
	if err != nil {
		return nil, err
	}
	out := make([]Session, 0, len(rows))
	for _, t := range rows {
		out = append(out, Session{ClientID: t.ClientID, Scope: t.Scope, CreatedAt: t.CreatedAt.UTC(), UpdatedAt: t.UpdatedAt.UTC()})
	}
	return out, nil
}

// RevokeSessions ends the account's OAuth sessions with one client (all
// clients when clientID is ""), as signing an app out on the account page
// does: their refresh tokens stop working at once; access tokens already
// issued run out (as on the reference, they are not looked up).
func (p *Provider) RevokeSessions(ctx context.Context, did, clientID string) (int, error) {
	n, err := p.db.deleteTokensOf(ctx, did, clientID)
	return int(n), err
}
