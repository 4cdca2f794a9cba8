package pds

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// loginPadding is the least time the reference spends on a login.
const loginPadding = 350 * time.Millisecond

func (s *Server) registerSession(x *xrpc.Mux) {
	handleInput(s, x, "com.atproto.server.createSession", xrpc.JSONLimit, noAuth, s.createSession)
	s.handle(x, xrpc.Query, "com.atproto.server.getSession", access(append(scopesStandard, auth.ScopeSignupQueued), check{}), s.getSession)
	s.handle(x, xrpc.Procedure, "com.atproto.server.refreshSession", refresh, s.refreshSession)
	s.handle(x, xrpc.Procedure, "com.atproto.server.deleteSession", authn{kind: authRefresh, check: check{allowExpired: true}}, s.deleteSession)
}

// session is a freshly minted pair of tokens.
type session struct {
	access, refresh string
}

// newSession mints an access and a refresh token for did and stores the
// refresh token. appPass names the app password logged in with, if any;
// takendown gives the token the takendown scope (allowTakendown logins).
func (s *Server) newSession(ctx context.Context, did string, appPass *account.AppPass, takendown bool) (session, error) {
	scope := auth.ScopeAccess
	switch {
	case takendown:
		scope = auth.ScopeTakendown
	case appPass != nil && appPass.Privileged:
		scope = auth.ScopeAppPassPrivileged
	case appPass != nil:
		scope = auth.ScopeAppPass
	}
	// A takendown session's refresh token is never stored, so it cannot
	// be refreshed: it lives as long as its access token.
	return s.mintSession(ctx, did, scope, auth.NewRefreshID(s.rand("refresh-ids")), appPass, !takendown)
}

func (s *Server) mintSession(ctx context.Context, did string, scope auth.Scope, jti string, appPass *account.AppPass, store bool) (session, error) {
	acc, err := s.tokens.Access(did, scope)
	if err != nil {
		return session{}, err
	}
	ref, exp, err := s.tokens.Refresh(did, jti)
	if err != nil {
		return session{}, err
	}
	if store {
		if err := s.accounts.StoreRefresh(ctx, account.RefreshToken{ID: jti, DID: did, ExpiresAt: exp, AppPass: appPass}); err != nil {
			return session{}, err
		}
	}
	return session{access: acc, refresh: ref}, nil
}

// accountStatus is the (active, status) pair of session outputs.
func accountStatus(a *account.Account) (*bool, *string) {
	active := a.Active()
	if active {
		return &active, nil
	}
	st := string(a.Status())
	return &active, &st
}

func handleOrInvalid(a *account.Account) string {
	if a.Handle == "" {
		return "handle.invalid"
	}
	return a.Handle
}

type createSessionInput struct {
	Identifier      string `json:"identifier"`
	Password        string `json:"password"`
	AuthFactorToken string `json:"authFactorToken"`
	AllowTakendown  bool   `json:"allowTakendown"`
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request, _ *caller, in *createSessionInput) error {
	if len(in.Password) > auth.OldPasswordMaxLength {
		return xrpc.AuthRequired("", "Password too long. Consider resetting your password.")
	}
	if s.cfg.PadLogins {
		// Padded from the start, as the reference: success and failure
		// take the same time.
		defer padUntil(time.Now().Add(loginPadding))
	}
	acc, appPass, err := s.login(r.Context(), in.Identifier, in.Password)
	if err != nil {
		return err
	}
	takendown := acc.TakedownRef != ""
	if takendown && !in.AllowTakendown {
		return xrpc.AuthRequired("AccountTakedown", "Account has been taken down")
	}
	sess, err := s.newSession(r.Context(), acc.DID, appPass, takendown)
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, s.sessionView(r.Context(), acc, sess))
	return nil
}

// sessionView is the output createSession, getSession and refreshSession
// share: the tokens (when new ones were minted) and the account.
type sessionView struct {
	AccessJwt      string  `json:"accessJwt,omitempty"`
	RefreshJwt     string  `json:"refreshJwt,omitempty"`
	Did            string  `json:"did"`
	DidDoc         *any    `json:"didDoc,omitempty"`
	Handle         string  `json:"handle"`
	Email          *string `json:"email,omitempty"`
	EmailConfirmed *bool   `json:"emailConfirmed,omitempty"`
	Active         bool    `json:"active"`
	Status         *string `json:"status,omitempty"`
}

func (s *Server) sessionView(ctx context.Context, acc *account.Account, sess session) sessionView {
	active, status := accountStatus(acc)
	confirmed := acc.EmailConfirmedAt != ""
	return sessionView{
		AccessJwt: sess.access, RefreshJwt: sess.refresh,
		Did: acc.DID, DidDoc: s.didDocForSession(ctx, acc.DID), Handle: handleOrInvalid(acc),
		Email: optional(acc.Email), EmailConfirmed: &confirmed,
		Active: *active, Status: status,
	}
}

// optional is nil for "", so JSON leaves the field out.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func padUntil(t time.Time) { time.Sleep(time.Until(t)) }

var errBadLogin = xrpc.AuthRequired("", "Invalid identifier or password")

// login checks an identifier (handle, email or DID) and a password or app
// password, as the reference's account manager does.
func (s *Server) login(ctx context.Context, identifier, password string) (*account.Account, *account.AppPass, error) {
	ident := strings.ToLower(identifier)
	if !strings.Contains(ident, "@") {
		if _, err := syntax.ParseAtIdentifier(ident); err != nil {
			return nil, nil, errBadLogin
		}
	}
	acc, err := s.accounts.ByIdentifier(ctx, ident)
	if errors.Is(err, account.ErrNotFound) {
		return nil, nil, errBadLogin
	}
	if err != nil {
		return nil, nil, err
	}
	ok, err := auth.Verify(password, acc.PasswordScrypt)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		return acc, nil, nil
	}
	// Taken-down accounts cannot log in with an app password.
	if acc.TakedownRef != "" {
		return nil, nil, errBadLogin
	}
	h, err := s.hasher.HashAppPassword(acc.DID, password)
	if err != nil {
		return nil, nil, err
	}
	ap, err := s.accounts.FindAppPassword(ctx, acc.DID, h)
	if errors.Is(err, account.ErrNotFound) {
		return nil, nil, errBadLogin
	}
	if err != nil {
		return nil, nil, err
	}
	return acc, ap, nil
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request, c *caller) error {
	acc, err := s.accounts.ByDID(r.Context(), c.DID)
	if errors.Is(err, account.ErrNotFound) || err == nil && acc.TakedownRef != "" {
		// Taken down after the token was issued: as good as gone here.
		return xrpc.InvalidRequest("", "Could not find user info for account: %s", c.DID)
	}
	if err != nil {
		return err
	}
	view := s.sessionView(r.Context(), acc, session{})
	if c.OAuth != nil && !c.OAuth.CanReadEmail() {
		// The email and its confirmation are shown to OAuth clients
		// granted account:email only.
		view.Email, view.EmailConfirmed = nil, nil
	}
	xrpc.WriteJSON(w, http.StatusOK, view)
	return nil
}

func (s *Server) refreshSession(w http.ResponseWriter, r *http.Request, c *caller) error {
	ctx := r.Context()
	acc, err := s.accounts.ByDID(ctx, c.DID)
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("", "Could not find user info for account: %s", c.DID)
	}
	if err != nil {
		return err
	}
	if acc.TakedownRef != "" {
		return xrpc.AuthRequired("AccountTakedown", "Account has been taken down")
	}
	tok, next, err := s.accounts.Rotate(ctx, c.TokenID, auth.NewRefreshID(s.rand("refresh-ids")), s.clock.Now(), auth.RefreshGrace)
	if errors.Is(err, account.ErrTokenRevoked) {
		return xrpc.InvalidRequest("ExpiredToken", "Token has been revoked")
	}
	if err != nil {
		return err
	}
	scope := auth.ScopeAccess
	if tok.AppPass != nil {
		scope = auth.ScopeAppPass
		if tok.AppPass.Privileged {
			scope = auth.ScopeAppPassPrivileged
		}
	}
	sess, err := s.mintSession(ctx, acc.DID, scope, next, tok.AppPass, true)
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, s.sessionView(ctx, acc, sess))
	return nil
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request, c *caller) error {
	if _, err := s.accounts.Revoke(r.Context(), c.TokenID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
