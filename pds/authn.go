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

// caller is an authenticated session.
type caller struct {
	DID     string
	Scope   auth.Scope
	TokenID string // refresh tokens only
}

// authHeader splits the Authorization header into its scheme and token, as
// the reference does: "" when absent; InvalidToken when malformed or of a
// scheme it does not know.
func authHeader(r *http.Request) (scheme, token string, err error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", "", nil
	}
	parts := strings.Split(h, " ")
	if len(parts) != 2 {
		return "", "", xrpc.InvalidRequest("InvalidToken", "Malformed authorization header")
	}
	switch s := strings.ToUpper(parts[0]); s {
	case "BEARER", "BASIC", "DPOP":
		return s, parts[1], nil
	}
	return "", "", xrpc.InvalidRequest("InvalidToken", "Unsupported authorization type: %s", parts[0])
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
	if claims.Aud != s.ServiceDID() || !strings.HasPrefix(claims.Sub, "did:") {
		return nil, xrpc.InvalidRequest("InvalidToken", "Malformed token")
	}
	if chk.takedown {
		// A takendown-scope token never passes a takedown check.
		scopes = slices.DeleteFunc(slices.Clone(scopes), func(s auth.Scope) bool { return s == auth.ScopeTakendown })
	}
	if !slices.Contains(scopes, claims.Scope) {
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

// access is the common case: an access token of the standard scopes on a
// live account.
func (s *Server) access(r *http.Request, scopes []auth.Scope) (*caller, error) {
	return s.bearer(r, auth.TypeAccess, scopes, check{takedown: true})
}

// admin checks HTTP Basic admin credentials.
func (s *Server) admin(r *http.Request) error {
	user, pass, ok := r.BasicAuth()
	if !ok || user != "admin" || subtle.ConstantTimeCompare([]byte(pass), []byte(s.cfg.AdminPassword)) != 1 {
		return xrpc.AuthRequired("", "")
	}
	return nil
}
