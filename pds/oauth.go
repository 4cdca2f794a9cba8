package pds

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/oauth"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// oauthAccounts is the account manager as the OAuth provider sees it.
type oauthAccounts struct{ s *Server }

func (a oauthAccounts) SignIn(ctx context.Context, identifier, password string) (oauth.Account, error) {
	acc, appPass, err := a.s.login(ctx, identifier, password)
	if errors.Is(err, errBadLogin) || err == nil && (appPass != nil || acc.TakedownRef != "") {
		// OAuth sign-in takes the account's password, never an app
		// password.
		return oauth.Account{}, oauth.ErrBadCredentials
	}
	if err != nil {
		return oauth.Account{}, err
	}
	return oauth.Account{DID: acc.DID, Handle: acc.Handle}, nil
}

func (a oauthAccounts) Account(ctx context.Context, id string) (oauth.Account, error) {
	var acc *account.Account
	var err error
	if strings.HasPrefix(id, "did:") {
		acc, err = a.s.accounts.ByDID(ctx, id)
	} else {
		acc, err = a.s.accounts.ByHandle(ctx, strings.ToLower(strings.TrimPrefix(id, "@")))
	}
	if err != nil {
		return oauth.Account{}, err
	}
	return oauth.Account{DID: acc.DID, Handle: acc.Handle}, nil
}

// CreateAccount is the authorize page's sign-up: the createAccount
// method itself, so its checks and messages are the same.
func (a oauthAccounts) CreateAccount(ctx context.Context, handle, email, password, invite string) (oauth.Account, error) {
	out, err := a.s.makeAccount(ctx, "", &createAccountInput{Handle: handle, Email: email, Password: password, InviteCode: invite})
	if err != nil {
		var xe *xrpc.Error
		if errors.As(err, &xe) && xe.Status < 500 {
			return oauth.Account{}, &oauth.Error{Status: xe.Status, Code: "invalid_request", Description: xe.Message}
		}
		return oauth.Account{}, err
	}
	return oauth.Account{DID: out.DID, Handle: out.Handle}, nil
}

func (s *Server) openOAuth(ctx context.Context, st *oauth.Store, secret []byte) error {
	p, err := oauth.New(ctx, oauth.Options{
		Store: st, Issuer: s.publicURL, Audience: s.ServiceDID(), Secret: secret,
		Clock: s.clock, Accounts: oauthAccounts{s}, Logger: s.log, Rand: s.rand("oauth"),
		PermissionSet: s.permissionSet, InviteRequired: s.cfg.InviteRequired,
	})
	if err != nil {
		return errors.Join(err, st.Close())
	}
	s.oauth = p
	s.verifyDPoP = s.oauthCaller
	return nil
}

// oauthCaller checks a DPoP-bound OAuth access token, the account and the
// method's scope rule, as the reference's oauth verifier does.
func (s *Server) oauthCaller(r *http.Request, token, typ string, _ []auth.Scope, chk check) (*caller, error) {
	if typ != auth.TypeAccess {
		// Refresh-token methods read only Bearer tokens.
		return nil, errAuthMissing
	}
	g, err := s.oauth.Verify(r, token)
	if err != nil {
		return nil, err
	}
	if chk.takedown || chk.deactivated {
		if _, err := s.checkAccount(r.Context(), g.DID, chk); err != nil {
			return nil, err
		}
	}
	if err := g.AuthorizeMethod(xrpc.NSID(r.URL.Path), r, s.proxyAudience(r)); err != nil {
		return nil, err
	}
	return &caller{DID: g.DID, Scope: auth.ScopeAccess, OAuth: g}, nil
}

// proxyAudience is the service a proxied call goes to: the atproto-proxy
// header, or the configured appview's bsky_appview service.
func (s *Server) proxyAudience(r *http.Request) string {
	if p := r.Header.Get("Atproto-Proxy"); p != "" {
		return p
	}
	if s.cfg.AppViewDID != "" {
		return s.cfg.AppViewDID + "#bsky_appview"
	}
	return ""
}

// mayWrite is the OAuth scope check of a repo write (a password session
// may write anything).
func (c *caller) mayWrite(collection, action string) error {
	if c.OAuth == nil {
		return nil
	}
	return c.OAuth.RequireRepo(collection, action)
}

// approveOAuth is the control plane's browserless consent: POST
// /_fakepds/oauth/authorize {"url": the authorize URL, "account": handle or
// DID, "deny": false} answers {"redirect": the client's redirect URI with
// code (or error), state and iss}.
func (s *Server) approveOAuth(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		URL     string `json:"url"`
		Account string `json:"account"`
		Deny    bool   `json:"deny"`
	}
	if err := xrpc.DecodeJSON(r, xrpc.JSONLimit, &in); err != nil {
		return err
	}
	if in.URL == "" {
		return xrpc.MissingInput("url")
	}
	if in.Account == "" && !in.Deny {
		return xrpc.MissingInput("account")
	}
	dest, err := s.oauth.Approve(r.Context(), in.URL, in.Account, in.Deny)
	var oe *oauth.Error
	if errors.As(err, &oe) {
		return xrpc.Errorf(oe.Status, oe.Code, "%s", oe.Description)
	}
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, map[string]string{"redirect": dest})
	return nil
}

// oauthSessions is the control plane's account side of OAuth:
// GET /_fakepds/oauth/sessions?account=<handle or DID> lists the account's
// sessions; DELETE (with &client_id=, or all) revokes them.
func (s *Server) oauthSessions(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	id := q.Get("account")
	if id == "" {
		return xrpc.InvalidRequest("", "Error: Params must have the property \"account\"")
	}
	acc, err := oauthAccounts{s}.Account(r.Context(), id)
	if err != nil {
		return xrpc.InvalidRequest("", "Unknown account %q", id)
	}
	if r.Method == http.MethodDelete {
		n, err := s.oauth.RevokeSessions(r.Context(), acc.DID, q.Get("client_id"))
		if err != nil {
			return err
		}
		xrpc.WriteJSON(w, http.StatusOK, map[string]int{"revoked": n})
		return nil
	}
	list, err := s.oauth.Sessions(r.Context(), acc.DID)
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, map[string]any{"sessions": list})
	return nil
}
