package pds

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/oauth"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// Scope sets of the reference's access verifiers.
var (
	// scopesStandard: what most authenticated methods accept, app
	// passwords included.
	scopesStandard = []auth.Scope{auth.ScopeAccess, auth.ScopeAppPass, auth.ScopeAppPassPrivileged}
	// scopesFull: methods only a full password session may call.
	scopesFull = []auth.Scope{auth.ScopeAccess}
)

// check says which account states a verifier refuses.
type check struct {
	takedown     bool
	deactivated  bool
	allowExpired bool // deleteSession accepts an expired refresh token
}

// caller is who called a method, as its auth found: nil for a method
// anyone may call (or an optional auth with no credentials).
type caller struct {
	DID     string // the account; a service token's issuer
	Scope   auth.Scope
	TokenID string // refresh tokens only
	Admin   bool   // the admin's Basic credentials (or, for moderator auth, a moderation service)
	Service bool   // a service auth token of DID
	// OAuth is the checked grant of a DPoP-bound OAuth token; nil for
	// password and app password sessions.
	OAuth *oauth.Grant
}

// authKind is how a method authenticates its caller.
type authKind uint8

const (
	authNone       authKind = iota + 1 // anyone; credentials are not looked at
	authAccess                         // an access token of scopes, with check
	authRefresh                        // a refresh token, with check
	authAdmin                          // the admin's HTTP Basic credentials
	authModerator                      // the admin's Basic credentials, or a moderation service's token
	authRepoReader                     // optional: none, the admin, or an access token (the sync reads)
	authMigration                      // optional: none, or a service token for the method (createAccount)
	authUploader                       // an access token, or a service token for the method (uploadBlob)
)

// authn is the auth a method declares where it is registered; the mux
// applies it (xrpc.Auth) after the params and before the input, and the
// handler receives the caller. TestAuthMatrix checks every registered
// method against its declaration.
//
// OAuth: "Authorization: DPoP" reaches Server.verifyDPoP from bearer, for
// the bearer kinds (authAccess, authRepoReader, authUploader); a method's
// OAuth scope (rpc:, repo:, blob:, account:, identity:) is checked there
// from the NSID and, for what depends on the input (repo: collections,
// blob: types), by the handler through the caller it returns.
type authn struct {
	kind   authKind
	scopes []auth.Scope // authAccess
	check  check
}

// Declarations of the reference's verifiers, by what they accept.
var (
	noAuth = authn{kind: authNone}
	// accessStandard: access tokens, app passwords included, on an account
	// not taken down.
	accessStandard = authn{kind: authAccess, scopes: scopesStandard, check: check{takedown: true}}
	// accessFull: full password sessions only, account not taken down.
	accessFull = authn{kind: authAccess, scopes: scopesFull, check: check{takedown: true}}
	adminAuth  = authn{kind: authAdmin}
	moderator  = authn{kind: authModerator}
	refresh    = authn{kind: authRefresh}
	repoReader = authn{kind: authRepoReader}
)

// access is an access-token declaration with its own scopes and checks.
func access(scopes []auth.Scope, chk check) authn {
	return authn{kind: authAccess, scopes: scopes, check: chk}
}

// boundAuth is a declaration bound to the server that verifies it.
type boundAuth struct {
	s *Server
	authn
}

func (b boundAuth) Authenticate(r *http.Request) (*caller, error) {
	s, a := b.s, b.authn
	switch a.kind {
	case authNone:
		return nil, nil
	case authAccess:
		return s.bearer(r, auth.TypeAccess, a.scopes, a.check)
	case authRefresh:
		return s.bearer(r, auth.TypeRefresh, []auth.Scope{auth.ScopeRefresh}, a.check)
	case authAdmin:
		if err := s.admin(r); err != nil {
			return nil, err
		}
		return &caller{Admin: true}, nil
	case authModerator:
		if err := s.moderator(r, xrpc.NSID(r.URL.Path)); err != nil {
			return nil, err
		}
		return &caller{Admin: true}, nil
	case authRepoReader:
		return s.repoReader(r)
	case authMigration:
		iss, err := s.optionalServiceAuth(r, xrpc.NSID(r.URL.Path))
		if err != nil || iss == "" {
			return nil, err
		}
		return &caller{DID: iss, Service: true}, nil
	case authUploader:
		return s.uploadCaller(r)
	}
	panic("pds: unknown auth kind")
}

// handle registers a method with the auth it declares.
func (s *Server) handle(x *xrpc.Mux, kind xrpc.Kind, nsid string, a authn, h xrpc.Handler[*caller]) {
	xrpc.Handle(x, kind, nsid, boundAuth{s, a}, h)
}

// authHeader splits the Authorization header into its scheme and token, as
// the reference does: "" when absent; InvalidToken when malformed or of a
// scheme it does not know.
func authHeader(r *http.Request) (scheme, token string, err error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", "", nil
	}
	// Two parts split at the one space (strings.Split's, without its slice).
	name, token, _ := strings.Cut(h, " ")
	if strings.Count(h, " ") != 1 {
		return "", "", xrpc.InvalidRequest("InvalidToken", "Malformed authorization header")
	}
	switch s := authScheme(name); s {
	case "BEARER", "BASIC", "DPOP":
		return s, token, nil
	}
	return "", "", xrpc.InvalidRequest("InvalidToken", "Unsupported authorization type: %s", name)
}

var errAuthMissing = xrpc.AuthRequired("AuthMissing", "")

// bearer checks the request's bearer token of type typ (access or refresh)
// against the allowed scopes and the account checks.
func (s *Server) bearer(r *http.Request, typ string, scopes []auth.Scope, chk check) (*caller, error) {
	scheme, token, err := authHeader(r)
	if err != nil {
		return nil, err
	}
	switch scheme {
	case "":
		return nil, errAuthMissing
	case "BEARER":
		if token == "" {
			return nil, errAuthMissing
		}
	case "DPOP":
		if s.verifyDPoP != nil {
			return s.verifyDPoP(r, token, typ, scopes, chk)
		}
		return nil, xrpc.InvalidRequest("InvalidToken", "OAuth (DPoP) tokens are not supported by fakepds")
	default:
		return nil, xrpc.InvalidRequest("InvalidToken", "Unexpected authorization type")
	}
	claims, err := s.tokens.Verify(token, typ)
	switch {
	case errors.Is(err, auth.ErrExpired) && chk.allowExpired:
	case errors.Is(err, auth.ErrExpired):
		return nil, xrpc.InvalidRequest("ExpiredToken", "Token has expired")
	case err != nil:
		return nil, xrpc.InvalidRequest("InvalidToken", "Token could not be verified")
	}
	// An OAuth access token sent as Bearer has a cnf claim (the reference's
	// proof-of-possession check comes first).
	if claims.Bound || claims.Aud != s.ServiceDID() || !strings.HasPrefix(claims.Sub, "did:") {
		return nil, xrpc.InvalidRequest("InvalidToken", "Malformed token")
	}
	// A takendown-scope token never passes a takedown check.
	if chk.takedown && claims.Scope == auth.ScopeTakendown || !slices.Contains(scopes, claims.Scope) {
		return nil, xrpc.InvalidRequest("InvalidToken", "Bad token scope")
	}
	if typ == auth.TypeRefresh && claims.Jti == "" {
		return nil, xrpc.AuthRequired("MissingTokenId", "Unexpected missing refresh token id")
	}
	if chk.takedown || chk.deactivated {
		if _, err := s.checkAccount(r.Context(), claims.Sub, chk); err != nil {
			return nil, err
		}
	}
	return &caller{DID: claims.Sub, Scope: claims.Scope, TokenID: claims.Jti}, nil
}

// checkAccount finds the account and refuses the states chk names.
func (s *Server) checkAccount(ctx context.Context, did string, chk check) (*account.Account, error) {
	acc, err := s.accounts.ByDID(ctx, did)
	if errors.Is(err, account.ErrNotFound) {
		return nil, xrpc.Errorf(http.StatusForbidden, "AccountNotFound", "Account not found")
	}
	if err != nil {
		return nil, err
	}
	if chk.takedown && acc.TakedownRef != "" {
		return nil, xrpc.AuthRequired("AccountTakedown", "Account has been taken down")
	}
	if chk.deactivated && acc.DeactivatedAt != "" {
		return nil, xrpc.AuthRequired("AccountDeactivated", "Account is deactivated")
	}
	return acc, nil
}

// accessToken is the common case: an access token of scopes on an account
// not taken down.
func (s *Server) accessToken(r *http.Request, scopes []auth.Scope) (*caller, error) {
	return s.bearer(r, auth.TypeAccess, scopes, check{takedown: true})
}

// authScheme is strings.ToUpper(name) when that is a scheme authHeader
// knows, without ToUpper's copy for an ASCII name.
func authScheme(name string) string {
	for i := 0; i < len(name); i++ {
		if name[i] >= 0x80 {
			// ToUpper maps some non-ASCII letters to ASCII ones ("ſ" to
			// "S", "ı" to "I"), which an ASCII comparison would miss.
			return strings.ToUpper(name)
		}
	}
	for _, s := range [...]string{"BEARER", "BASIC", "DPOP"} {
		if strings.EqualFold(name, s) { // both ASCII: ASCII case folding
			return s
		}
	}
	return ""
}

// admin checks HTTP Basic admin credentials.
func (s *Server) admin(r *http.Request) error {
	user, pass, ok := r.BasicAuth()
	if !ok || user != "admin" || subtle.ConstantTimeCompare([]byte(pass), []byte(s.cfg.AdminPassword)) != 1 {
		return xrpc.AuthRequired("", "")
	}
	return nil
}

// handleInput registers a procedure with JSON input (at most limit bytes)
// and the auth it declares: the mux checks and decodes the input, the
// handler gets it typed.
func handleInput[In any](s *Server, x *xrpc.Mux, nsid string, limit int64, a authn, h xrpc.InputHandler[*caller, In]) {
	xrpc.HandleInput(x, nsid, limit, boundAuth{s, a}, h)
}
