package oauth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth"
	"github.com/go-jose/go-jose/v4/jwt"
)

const requestURIPrefix = "urn:ietf:params:oauth:request_uri:"

// idLength is the length of a code and a refresh token: a four-character
// prefix and 32 random bytes in hex, the reference's format.
const idLength = 4 + 64

// requestURL is the request's own URL as the issuer names it, for the
// proof's htu.
func (p *Provider) requestURL(r *http.Request) *url.URL {
	u, err := url.Parse(p.issuer())
	if err != nil {
		return r.URL
	}
	u.Path = r.URL.Path
	return u
}

// dpopFor checks the request's DPoP proof (none is nil); the provider's
// endpoints check it before anything else, so a client retrying with a new
// nonce has spent nothing (not its client assertion's jti).
func (p *Provider) dpopFor(r *http.Request) (*proof, error) {
	return p.checkProof(r.Method, p.requestURL(r), r.Header.Values("DPoP"), "")
}

// proofAndClient checks what every client request starts with, in the
// reference's order: the DPoP proof, then the client's authentication.
func (p *Provider) proofAndClient(r *http.Request) (*proof, *client, clientAuth, error) {
	pr, err := p.dpopFor(r)
	if err != nil {
		return nil, nil, clientAuth{}, err
	}
	c, cauth, err := p.authenticate(r.Context(), r.PostForm)
	return pr, c, cauth, err
}

// par is RFC 9126's pushed authorization request.
func (p *Provider) par(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if err := parFormError(r.PostForm); err != nil {
		return err
	}
	pr, c, cauth, err := p.proofAndClient(r)
	if err != nil {
		return err
	}
	f := r.PostForm
	if f.Has("request") {
		// The parameters are the request object's, not the form's.
		if f, err = p.requestObject(c, f.Get("request")); err != nil {
			return err
		}
	}
	for _, k := range []string{"request", "request_uri", "authorization_details"} {
		if f.Has(k) {
			return errInvalidRequest(`Unsupported "%s" parameter`, k)
		}
	}
	par := params{
		ResponseType: f.Get("response_type"), ResponseMode: f.Get("response_mode"),
		RedirectURI: f.Get("redirect_uri"), Scope: f.Get("scope"), State: f.Get("state"),
		CodeChallenge: f.Get("code_challenge"), CodeChallengeMethod: f.Get("code_challenge_method"),
		LoginHint: f.Get("login_hint"), Prompt: f.Get("prompt"),
	}
	if err := p.checkParams(c, &par, pr, f.Get("dpop_jkt")); err != nil {
		return err
	}
	// Every include: must name a permission set this server resolves.
	if _, err := p.permissionSets(ctx, par.Scope); err != nil {
		return err
	}
	now := p.now()
	req := &request{
		ID: randomID(p.opts.Rand, "req-", 16), ClientID: c.ID, Auth: cauth, Params: par,
		ExpiresAt: now.Add(parExpiresIn), CSRF: randomID(p.opts.Rand, "", 16),
	}
	if err := p.db.putRequest(ctx, req, now); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]any{
		"request_uri": requestURIPrefix + req.ID,
		"expires_in":  int(parExpiresIn/time.Second) - 1,
	})
	return nil
}

// checkParams validates an authorization request against its client, in
// the reference's order and with its messages (RequestManager.validate).
func (p *Provider) checkParams(c *client, par *params, pr *proof, dpopJKT string) error {
	if par.ResponseType != "code" {
		if par.ResponseType == "" {
			return errInvalidRequest(`Missing "response_type" parameter`)
		}
		return oerr(400, "unsupported_response_type", `Unsupported response_type "%s"`, par.ResponseType)
	}
	switch par.ResponseMode {
	case "", "query", "fragment", "form_post":
	default:
		return errInvalidRequest(`Unsupported response_mode "%s"`, par.ResponseMode)
	}
	if par.RedirectURI == "" {
		if len(c.Meta.RedirectURIs) != 1 {
			return errInvalidRequest(`Missing "redirect_uri"`)
		}
		par.RedirectURI = c.Meta.RedirectURIs[0]
	} else if !c.redirectAllowed(par.RedirectURI) {
		return errInvalidRequest("Invalid redirect_uri %s", par.RedirectURI)
	}
	// Every requested scope must be declared by the client; then unknown
	// and malformed ones are dropped (indigo's parser, as the reference
	// drops what isAtprotoOauthScope refuses).
	declared := strings.Split(c.Meta.Scope, " ")
	var kept []string
	for _, s := range strings.Split(par.Scope, " ") {
		if s != "" && !slices.Contains(declared, s) {
			return oerr(400, "invalid_scope", `Scope "%s" is not declared in the client metadata`, s)
		}
	}
	for _, s := range strings.Split(par.Scope, " ") {
		if s != "" && !slices.Contains(kept, s) && knownScope(s) {
			kept = append(kept, s)
		}
	}
	par.Scope = strings.Join(kept, " ")
	if par.CodeChallenge == "" {
		if par.CodeChallengeMethod != "" {
			return errInvalidRequest("code_challenge is required when code_challenge_method is provided")
		}
		return errInvalidRequest("Use of PKCE is required")
	}
	if !slices.Contains(kept, "atproto") {
		return oerr(400, "invalid_scope", `The "atproto" scope is required`)
	}
	if slices.Contains(strings.Split(par.Scope, " "), "openid") {
		return oerr(400, "invalid_scope", "OpenID Connect is not compatible with atproto")
	}
	if par.CodeChallengeMethod != "S256" {
		if par.CodeChallengeMethod == "" || par.CodeChallengeMethod == "plain" {
			return errInvalidRequest(`atproto requires use of "S256" code_challenge_method`)
		}
		return errInvalidRequest(`Unsupported code_challenge_method "%s"`, par.CodeChallengeMethod)
	}
	if par.Prompt == "none" {
		return oerr(400, "consent_required", "Public clients are not allowed to use silent-sign-on")
	}
	switch {
	case pr != nil && dpopJKT != "" && dpopJKT != pr.jkt:
		return errInvalidRequest(`"dpop_jkt" parameter does not match the DPoP proof`)
	case pr != nil:
		par.DPoPJKT = pr.jkt
	default:
		// Without a proof the request is bound to the key of the token
		// request's proof (or dpop_jkt, RFC 9449 10), as the reference.
		par.DPoPJKT = dpopJKT
	}
	return nil
}

// knownScope is a scope fakepds understands: atproto, the transition
// scopes, and the permissions indigo's parser accepts.
func knownScope(s string) bool {
	switch s {
	case "atproto", "transition:generic", "transition:email", "transition:chat.bsky":
		return true
	}
	_, err := auth.ParsePermissionString(s)
	return err == nil
}

// pending loads the request an authorize URL names, checked against its
// client and expiry.
func (p *Provider) pending(ctx context.Context, clientID, requestURI string) (*request, *client, error) {
	id, ok := strings.CutPrefix(requestURI, requestURIPrefix)
	if !ok || id == "" {
		return nil, nil, errInvalidRequest(`Missing or invalid "request_uri" parameter`)
	}
	req, err := p.db.request(ctx, id)
	if errors.Is(err, errNotFound) {
		return nil, nil, errInvalidRequest("Unknown request_uri")
	}
	if err != nil {
		return nil, nil, err
	}
	if req.ClientID != clientID {
		return nil, nil, oerr(400, "access_denied", "This request was initiated for another client")
	}
	if req.Code != "" {
		return nil, nil, oerr(400, "access_denied", "This request was already authorized")
	}
	if !p.now().Before(req.ExpiresAt) {
		return nil, nil, oerr(400, "access_denied", "This request has expired")
	}
	// While the user is on the page the request lives on, five minutes
	// from each step, as the reference (AUTHORIZATION_INACTIVITY_TIMEOUT).
	req.ExpiresAt = p.now().Add(codeLifetime)
	if err := p.db.touch(ctx, req.ID, req.ExpiresAt); err != nil {
		return nil, nil, err
	}
	c, err := p.clients.get(ctx, clientID)
	if err != nil {
		return nil, nil, err
	}
	return req, c, nil
}

// finish ends an authorization: the client's redirect URI with a code, or
// with access_denied when deny is set.
func (p *Provider) finish(ctx context.Context, req *request, deny bool) (*url.URL, error) {
	u, err := url.Parse(req.Params.RedirectURI)
	if err != nil {
		return nil, err
	}
	out := url.Values{}
	if req.Params.State != "" {
		out.Set("state", req.Params.State)
	}
	out.Set("iss", p.issuer())
	if deny {
		if err := p.db.deleteRequest(ctx, req.ID); err != nil {
			return nil, err
		}
		out.Set("error", "access_denied")
		out.Set("error_description", "The user rejected the request")
	} else {
		code := randomID(p.opts.Rand, "cod-", 32)
		if err := p.db.authorize(ctx, req.ID, code, p.now().Add(codeLifetime)); err != nil {
			return nil, err
		}
		out.Set("code", code)
	}
	if req.Params.ResponseMode == "fragment" {
		u.Fragment = out.Encode()
	} else {
		q := u.Query()
		for k, v := range out {
			q[k] = v
		}
		u.RawQuery = q.Encode()
	}
	return u, nil
}

// Approve signs account (a handle or DID) in to the pending request an
// authorize URL names and grants it (or denies it), without a browser:
// what the harness and the control plane use. It returns the URL the
// browser would have been sent to.
func (p *Provider) Approve(ctx context.Context, authorizeURL, account string, deny bool) (string, error) {
	u, err := url.Parse(authorizeURL)
	if err != nil {
		return "", errInvalidRequest("Invalid authorize URL")
	}
	q := u.Query()
	req, _, err := p.pending(ctx, q.Get("client_id"), q.Get("request_uri"))
	if err != nil {
		return "", err
	}
	if !deny {
		acc, err := p.opts.Accounts.Account(ctx, account)
		if err != nil {
			return "", errInvalidRequest("Unknown account %q", account)
		}
		if err := p.db.signIn(ctx, req.ID, acc.DID); err != nil {
			return "", err
		}
	}
	if req.Params.ResponseMode == "form_post" {
		return "", errInvalidRequest("response_mode form_post cannot be approved without a browser")
	}
	dest, err := p.finish(ctx, req, deny)
	if err != nil {
		return "", err
	}
	return dest.String(), nil
}

// token is the token endpoint: authorization_code and refresh_token.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	pr, c, cauth, err := p.proofAndClient(r)
	if err != nil {
		return err
	}
	grant := r.PostForm.Get("grant_type")
	switch grant {
	case "authorization_code", "refresh_token", "password", "client_credentials":
	default:
		return errInvalidGrant("Invalid request payload: Invalid discriminator value. Expected 'authorization_code' | 'refresh_token' | 'password' | 'client_credentials' at body.grant_type")
	}
	if !slices.Contains(c.Meta.GrantTypes, grant) {
		return oerr(400, "unauthorized_client", `This client is not allowed to use the "%s" grant type`, grant)
	}
	var resp map[string]any
	switch grant {
	case "authorization_code":
		resp, err = p.codeGrant(ctx, c, cauth, pr, r.PostForm)
	case "refresh_token":
		resp, err = p.refreshGrant(ctx, c, cauth, pr, r.PostForm)
	default:
		return oerr(400, "unsupported_grant_type", `Grant type "%s" is not supported`, grant)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (p *Provider) codeGrant(ctx context.Context, c *client, cauth clientAuth, pr *proof, f url.Values) (map[string]any, error) {
	code := f.Get("code")
	if len(code) != idLength {
		return nil, errInvalidGrant("Invalid code: String must contain exactly %d character(s) at code", idLength)
	}
	now := p.now()
	var fail error
	var resp map[string]any
	_, err := p.db.exchange(ctx, code, now, func(req *request) (*tokenRow, error) {
		// A failed check still consumes the code, as the reference
		// deletes the request before checking it; the checks are in its
		// order (compareClientAuth, validateCodeGrant, validateTokenParams).
		switch {
		case req.DID == "":
			fail = errInvalidGrant("Unexpected request state")
		case req.ClientID != c.ID:
			fail = errInvalidGrant("Token was not issued to this client")
		default:
			fail = proofMatches(req.Params.DPoPJKT, pr)
		}
		if fail == nil {
			fail = sameAuth(req.Auth, cauth)
		}
		if fail == nil {
			fail = p.checkVerifier(f, req.Params)
		}
		if fail == nil && pr == nil {
			fail = errInvalidGrant("DPoP JKT is required for DPoP bound access tokens")
		}
		if fail != nil {
			return nil, fail
		}
		req.Params.DPoPJKT = pr.jkt
		scope, err := p.grantScope(ctx, req.Params.Scope)
		if err != nil {
			fail = err
			return nil, fail
		}
		t := &tokenRow{
			ID: randomID(p.opts.Rand, "tok-", 16), DID: req.DID, ClientID: c.ID, Auth: cauth, Params: req.Params,
			Scope: scope, RefreshToken: randomID(p.opts.Rand, "ref-", 32), CreatedAt: now, UpdatedAt: now,
		}
		resp, fail = p.tokenResponseAt(t, c, now)
		return t, fail
	})
	switch {
	case fail != nil:
		return nil, fail
	case errors.Is(err, errExpiredCode):
		return nil, errInvalidGrant("This code has expired")
	case errors.Is(err, errNotFound):
		// A code used twice ends the session it made (RFC 6749 4.1.2);
		// the answer is the same as for a code never issued.
		if t, err := p.db.tokenByCode(ctx, code); err == nil {
			if err := p.db.deleteToken(ctx, t.ID); err != nil {
				return nil, err
			}
		}
		return nil, errInvalidGrant("Invalid code")
	case err != nil:
		return nil, err
	}
	return resp, nil
}

// grantScope is tokenScope with the reference's answer at the token
// endpoint for a set that no longer resolves (400 invalid_request).
func (p *Provider) grantScope(ctx context.Context, scope string) (string, error) {
	s, err := p.tokenScope(ctx, scope)
	var e *Error
	if errors.As(err, &e) {
		return "", errInvalidRequest("%s", e.Description)
	}
	return s, err
}

// proofMatches checks the token request's DPoP proof against the key the
// request or session is bound to (the reference's compareClientAuth).
func proofMatches(jkt string, pr *proof) error {
	switch {
	case jkt == "":
		return nil
	case pr == nil:
		return errInvalidGrant("DPoP proof is required for this request")
	case pr.jkt != jkt:
		return errInvalidGrant("DPoP proof does not match the expected JKT")
	}
	return nil
}

// checkVerifier is the reference's validateCodeGrant: the redirect URI,
// then the PKCE verifier, then the challenge never exchanged before.
func (p *Provider) checkVerifier(f url.Values, par params) error {
	verifier := f.Get("code_verifier")
	switch {
	case f.Get("redirect_uri") != par.RedirectURI:
		return errInvalidGrant("The redirect_uri parameter must match the one used in the authorization request")
	case verifier == "":
		return errInvalidGrant("code_verifier is required")
	case len(verifier) < 43:
		return errInvalidGrant("code_verifier too short")
	case !pkceOK(verifier, par.CodeChallenge):
		return errInvalidGrant("Invalid code_verifier")
	case !p.challenges.unique(par.CodeChallenge):
		return errInvalidGrant("Code challenge already used")
	}
	return nil
}

func pkceOK(verifier, challenge string) bool {
	if len(verifier) > 128 {
		return false
	}
	sum := sha256.Sum256([]byte(verifier))
	return subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) == 1
}

// refreshAllowed is the reference's compareClientAuth and
// validateRefreshGrant for a refresh of t.
func (p *Provider) refreshAllowed(t *tokenRow, c *client, cauth clientAuth, pr *proof) error {
	if t.ClientID != c.ID {
		return errInvalidGrant("Token was not issued to this client")
	}
	if err := proofMatches(t.Params.DPoPJKT, pr); err != nil {
		return err
	}
	if err := sameAuth(t.Auth, cauth); err != nil {
		return err
	}
	now := p.now()
	session, idle := c.sessionLimits()
	if now.After(t.CreatedAt.Add(session)) {
		return errInvalidGrant("Session expired")
	}
	if now.After(t.UpdatedAt.Add(idle)) {
		return errInvalidGrant("Refresh token expired")
	}
	return nil
}

func keyBindingError() *Error {
	e := oerr(401, "invalid_token", "Invalid DPoP key binding")
	e.Challenge = "DPoP"
	return e
}

func (p *Provider) refreshGrant(ctx context.Context, c *client, cauth clientAuth, pr *proof, f url.Values) (map[string]any, error) {
	refresh := f.Get("refresh_token")
	if len(refresh) != idLength {
		return nil, errInvalidGrant("Invalid refresh token: String must contain exactly %d character(s) at refresh_token", idLength)
	}
	t, current, err := p.db.tokenByRefresh(ctx, refresh)
	if errors.Is(err, errNotFound) {
		return nil, errInvalidGrant("Invalid refresh token")
	}
	if err != nil {
		return nil, err
	}
	if !current {
		// An old refresh token used again: someone has a copy; end the
		// session for both.
		if err := p.db.deleteToken(ctx, t.ID); err != nil {
			return nil, err
		}
		return nil, errInvalidGrant("Refresh token replayed")
	}
	// Any refusal from here on ends the session, as the reference deletes
	// the token when a refresh fails after the refresh token was found.
	if err := p.refreshAllowed(t, c, cauth, pr); err != nil {
		if derr := p.db.deleteToken(ctx, t.ID); derr != nil {
			return nil, derr
		}
		return nil, err
	}
	now := p.now()
	// The permission sets are read again, as the reference rebuilds the
	// scope on each rotation. One it has no document for ends the session
	// with a 500, as the reference's: it expects the sets it once resolved
	// to stay in its store.
	scope, err := p.tokenScope(ctx, t.Params.Scope)
	if err != nil {
		if derr := p.db.deleteToken(ctx, t.ID); derr != nil {
			return nil, derr
		}
		var e *Error
		if errors.As(err, &e) {
			p.log.Warn("oauth: refresh: permission set gone", "err", e.Description)
			return nil, oerr(500, "server_error", "Server error")
		}
		return nil, err
	}
	oldID := t.ID
	t.ID, t.RefreshToken, t.UpdatedAt, t.Auth, t.Scope = randomID(p.opts.Rand, "tok-", 16), randomID(p.opts.Rand, "ref-", 32), now, cauth, scope
	resp, err := p.tokenResponseAt(t, c, now)
	if err != nil {
		return nil, err
	}
	if err := p.db.rotate(ctx, t, oldID, refresh); errors.Is(err, errNotFound) {
		return nil, errInvalidGrant("Refresh token replayed")
	} else if err != nil {
		return nil, err
	}
	return resp, nil
}

// accessClaims are the reference's access token claims. As in its default
// (not stateless) mode the scope is not in the token: the resource server
// looks the token up, so a revoked or rotated token stops working at once.
type accessClaims struct {
	jwt.Claims
	ClientID string `json:"client_id"`
	Cnf      struct {
		JKT string `json:"jkt"`
	} `json:"cnf"`
}

// tokenResponseAt mints t's access token, valid for the reference's hour
// but never past the session's end, and sets t.ExpiresAt.
func (p *Provider) tokenResponseAt(t *tokenRow, c *client, now time.Time) (map[string]any, error) {
	session, _ := c.sessionLimits()
	life := min(tokenMaxAge, t.CreatedAt.Add(session).Sub(now))
	if life <= 250*time.Millisecond {
		return nil, errInvalidGrant("Session expired")
	}
	t.ExpiresAt = now.Add(life)
	cl := accessClaims{
		Claims: jwt.Claims{
			Issuer: p.issuer(), Subject: t.DID, Audience: jwt.Audience{p.opts.Audience}, ID: t.ID,
			IssuedAt: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(t.ExpiresAt),
		},
		ClientID: t.ClientID,
	}
	cl.Cnf.JKT = t.Params.DPoPJKT
	tok, err := jwt.Signed(p.signer).Claims(cl).Serialize()
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"access_token":  tok,
		"token_type":    "DPoP",
		"refresh_token": t.RefreshToken,
		"scope":         t.Scope,
		// The reference counts from when it writes the answer, a moment
		// after iat: a whole hour reads 3599.
		"expires_in": int((life - time.Millisecond) / time.Second),
		"sub":        t.DID,
	}, nil
}

// revoke is RFC 7009's endpoint: any of the session's tokens (access,
// refresh, used refresh, code) ends it. Unknown tokens are not an error.
func (p *Provider) revoke(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	if _, err := p.dpopFor(r); err != nil {
		return err
	}
	if r.PostForm.Get("client_id") != "" {
		if _, _, err := p.authenticate(ctx, r.PostForm); err != nil {
			return err
		}
	}
	tok := r.PostForm.Get("token")
	if tok == "" {
		return errInvalidRequest(`Missing "token" parameter`)
	}
	var t *tokenRow
	var err error
	switch {
	case strings.HasPrefix(tok, "ref-"):
		t, _, err = p.db.tokenByRefresh(ctx, tok)
	case strings.HasPrefix(tok, "cod-"):
		t, err = p.db.tokenByCode(ctx, tok)
	case strings.HasPrefix(tok, "tok-"):
		t, err = p.db.tokenByID(ctx, tok)
	default:
		var cl accessClaims
		if cl, err = p.parseAccess(tok); err == nil {
			t, err = p.db.tokenByID(ctx, cl.ID)
		} else {
			err = errNotFound
		}
	}
	if err == nil {
		err = p.db.deleteToken(ctx, t.ID)
	}
	if err != nil && !errors.Is(err, errNotFound) {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}
