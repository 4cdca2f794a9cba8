package oauth

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/bluesky-social/indigo/atproto/auth"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/fakepds/fakepds/pds/xrpc"
)

// Grant is a checked OAuth access token: whose it is and what it allows.
type Grant struct {
	DID      string
	ClientID string
	Scope    string
	perms    permissions
}

type headerKey struct{}

// Middleware gives every request that carries a DPoP token a fresh nonce
// on its answer (RFC 9449 8.2, as the reference's verifier sets it) and lets
// Verify add its challenge to the answer's headers.
func (p *Provider) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " "); strings.EqualFold(scheme, "DPoP") {
			h := w.Header()
			h.Set("DPoP-Nonce", p.nonces.next())
			h.Add("Access-Control-Expose-Headers", "DPoP-Nonce, WWW-Authenticate")
			r = r.WithContext(context.WithValue(r.Context(), headerKey{}, h))
		}
		next.ServeHTTP(w, r)
	})
}

// Verify checks a resource request's "Authorization: DPoP <token>" and its
// proof as the reference's OAuthVerifier does, in its order. Its errors
// are xrpc errors with the reference's OAuth names (use_dpop_nonce,
// invalid_dpop_proof, invalid_token: 401 with a WWW-Authenticate
// challenge, set on the answer when Middleware wraps the handler).
func (p *Provider) Verify(r *http.Request, token string) (*Grant, error) {
	g, err := p.verify(r, token)
	if err == nil {
		return g, nil
	}
	e, ok := err.(*Error)
	if !ok {
		return nil, err
	}
	if e.Code == "use_dpop_nonce" {
		e = &Error{Status: 401, Code: e.Code, Description: e.Description, Challenge: "DPoP"}
	}
	if h, _ := r.Context().Value(headerKey{}).(http.Header); h != nil && e.WWWAuthenticate() != "" {
		h.Set("WWW-Authenticate", e.WWWAuthenticate())
	}
	return nil, &xrpc.Error{Status: e.Status, Name: e.Code, Message: e.Description}
}

func (p *Provider) verify(r *http.Request, token string) (*Grant, error) {
	pr, err := p.checkProof(r.Method, p.requestURL(r), r.Header.Values("DPoP"), token)
	if err != nil {
		return nil, err
	}
	invalid := func(desc string) *Error {
		return &Error{Status: 401, Code: "invalid_token", Description: desc, Challenge: "DPoP"}
	}
	if strings.Count(token, ".") != 2 {
		return nil, invalid("Malformed token")
	}
	cl, err := p.parseAccess(token)
	if err != nil {
		return nil, invalid(err.Error())
	}
	if err := cl.Claims.ValidateWithLeeway(jwt.Expected{Time: p.now()}, 0); err != nil {
		return nil, invalid(`"exp" claim timestamp check failed`)
	}
	if cl.Cnf.JKT == "" {
		return nil, &Error{Status: 401, Code: "invalid_token", Description: "Bearer token type must be used without a DPoP proof", Challenge: "Bearer"}
	}
	if pr == nil {
		return nil, errDPoP("DPoP proof required")
	}
	if cl.Cnf.JKT != pr.jkt {
		return nil, keyBindingError()
	}
	// The session, as the reference's loadTokenClaims reads it: gone
	// (revoked, rotated by a refresh, ended by a replay) or expired is
	// "Invalid token".
	t, err := p.db.tokenByID(r.Context(), cl.ID)
	switch {
	case errors.Is(err, errNotFound):
		return nil, invalid("Invalid token")
	case err != nil:
		return nil, err
	case t.Params.DPoPJKT != cl.Cnf.JKT || t.DID != cl.Subject:
		if err := p.db.deleteToken(r.Context(), t.ID); err != nil {
			return nil, err
		}
		return nil, invalid("Invalid token")
	case t.ExpiresAt.Before(p.now()):
		if err := p.db.deleteToken(r.Context(), t.ID); err != nil {
			return nil, err
		}
		return nil, invalid("Token expired")
	}
	if !slices.Contains(cl.Audience, p.opts.Audience) {
		return nil, invalid("Invalid audience (got: " + strings.Join(cl.Audience, ",") + ", expected one of: " + p.opts.Audience + ")")
	}
	scope := t.Scope
	if !slices.Contains(strings.Split(scope, " "), "atproto") {
		return nil, invalid("Invalid scope (got: " + scope + ", expected one of: atproto)")
	}
	if !strings.HasPrefix(cl.Subject, "did:") {
		return nil, &Error{Status: 400, Code: "InvalidToken", Description: "Malformed token"}
	}
	return &Grant{DID: cl.Subject, ClientID: cl.ClientID, Scope: scope, perms: newPermissions(scope)}, nil
}

type tokenError string

func (e tokenError) Error() string { return string(e) }

// parseAccess verifies an access token's signature, type and issuer; its
// times are the caller's to check.
func (p *Provider) parseAccess(token string) (accessClaims, error) {
	var cl accessClaims
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.HS256})
	if err != nil || len(tok.Headers) != 1 {
		return cl, tokenError("Invalid token")
	}
	if typ, _ := tok.Headers[0].ExtraHeaders[jose.HeaderType].(string); typ != "at+jwt" {
		return cl, tokenError(`unexpected "typ" JWT header value`)
	}
	if err := tok.Claims(p.opts.Secret, &cl); err != nil {
		return cl, tokenError("signature verification failed")
	}
	if cl.Issuer != p.issuer() {
		return cl, tokenError(`unexpected "iss" claim value`)
	}
	return cl, nil
}

// permissions are a token's scopes, read with indigo's parser, matched as
// the reference's ScopePermissionsTransition matches them.
type permissions struct {
	scopes map[string]bool
	perms  []auth.Permission
}

func newPermissions(scope string) permissions {
	p := permissions{scopes: make(map[string]bool)}
	for _, s := range strings.Split(scope, " ") {
		if s == "" {
			continue
		}
		p.scopes[s] = true
		if perm, err := auth.ParsePermissionString(s); err == nil {
			p.perms = append(p.perms, *perm)
		}
	}
	return p
}

func (p permissions) each(resource string, fn func(auth.Permission) bool) bool {
	for _, perm := range p.perms {
		if perm.Resource == resource && fn(perm) {
			return true
		}
	}
	return false
}

// AllowsRepo says whether the token may do action (create, update,
// delete) on records of collection.
func (g *Grant) AllowsRepo(collection, action string) bool {
	if g.perms.scopes["transition:generic"] {
		return true
	}
	return g.perms.each("repo", func(p auth.Permission) bool {
		return (len(p.Action) == 0 || slices.Contains(p.Action, action)) &&
			(slices.Contains(p.Collection, "*") || slices.Contains(p.Collection, collection))
	})
}

// AllowsBlob says whether the token may upload a blob of this MIME type.
func (g *Grant) AllowsBlob(mime string) bool {
	if g.perms.scopes["transition:generic"] {
		return true
	}
	mime = strings.ToLower(mime)
	return g.perms.each("blob", func(p auth.Permission) bool {
		for _, a := range p.Accept {
			a = strings.ToLower(a)
			if a == "*/*" || a == mime || (strings.HasSuffix(a, "/*") && strings.HasPrefix(mime, strings.TrimSuffix(a, "*"))) {
				return true
			}
		}
		return false
	})
}

// AllowsRPC says whether the token may call lxm on the service aud.
func (g *Grant) AllowsRPC(aud, lxm string) bool {
	chat := strings.HasPrefix(lxm, "chat.bsky.")
	if g.perms.scopes["transition:generic"] && (lxm == "*" || !chat) {
		return true
	}
	if g.perms.scopes["transition:chat.bsky"] && chat {
		return true
	}
	return g.perms.each("rpc", func(p auth.Permission) bool {
		return (p.Audience == "*" || p.Audience == aud) && (slices.Contains(p.Endpoint, "*") || slices.Contains(p.Endpoint, lxm))
	})
}

// AllowsAccount says whether the token may read or manage the account
// attribute attr (email, repo).
func (g *Grant) AllowsAccount(attr, action string) bool {
	if attr == "email" && action == "read" && g.perms.scopes["transition:email"] {
		return true
	}
	return g.perms.each("account", func(p auth.Permission) bool {
		acts := p.Action
		if len(acts) == 0 {
			acts = []string{"read"}
		}
		return p.Attribute == attr && (slices.Contains(acts, action) || (action == "read" && slices.Contains(acts, "manage")))
	})
}

// AllowsIdentity says whether the token may change the identity
// attribute attr (handle, or * for all of it).
func (g *Grant) AllowsIdentity(attr string) bool {
	return g.perms.each("identity", func(p auth.Permission) bool {
		return p.Attribute == "*" || p.Attribute == attr
	})
}

// missing is the reference's ScopeMissingError: 403, naming the scope
// that would have allowed the call.
func missing(p auth.Permission) error {
	return &xrpc.Error{Status: http.StatusForbidden, Name: "ScopeMissingError", Message: `Missing required scope "` + p.ScopeString() + `"`}
}

// RequireRepo is AllowsRepo as the handlers' check.
func (g *Grant) RequireRepo(collection, action string) error {
	if g.AllowsRepo(collection, action) {
		return nil
	}
	return missing(auth.Permission{Resource: "repo", Collection: []string{collection}, Action: []string{action}})
}

// RequireBlob is AllowsBlob as the handlers' check.
func (g *Grant) RequireBlob(mime string) error {
	if g.AllowsBlob(mime) {
		return nil
	}
	return missing(auth.Permission{Resource: "blob", Accept: []string{mime}})
}

// RequireRPC is AllowsRPC as the handlers' check.
func (g *Grant) RequireRPC(aud, lxm string) error {
	if g.AllowsRPC(aud, lxm) {
		return nil
	}
	return missing(auth.Permission{Resource: "rpc", Endpoint: []string{lxm}, Audience: aud})
}

func (g *Grant) requireAccount(attr, action string) error {
	if g.AllowsAccount(attr, action) {
		return nil
	}
	p := auth.Permission{Resource: "account", Attribute: attr}
	if action != "read" {
		p.Action = []string{action}
	}
	return missing(p)
}

func (g *Grant) requireIdentity(attr string) error {
	if g.AllowsIdentity(attr) {
		return nil
	}
	return missing(auth.Permission{Resource: "identity", Attribute: attr})
}

var errNoOAuth = xrpc.Forbidden("OAuth credentials are not supported for this endpoint")

// methodRule is what the reference's "authorize" callback of a method
// checks before its handler runs.
type methodRule func(g *Grant, r *http.Request, aud string) error

func always(*Grant, *http.Request, string) error { return nil }

func refuse(*Grant, *http.Request, string) error { return errNoOAuth }

func rpcRule(lxm string) methodRule {
	return func(g *Grant, r *http.Request, aud string) error { return g.RequireRPC(aud, lxm) }
}

// methodRules: the reference PDS's per-method authorize callbacks. The
// repo writes check in their handlers (the collection is in the body);
// a method not listed is checked as an rpc: call to the service it is
// proxied to.
var methodRules = map[string]methodRule{
	"com.atproto.server.getSession":                     always,
	"com.atproto.server.checkAccountStatus":             always,
	"com.atproto.identity.getRecommendedDidCredentials": always,
	"com.atproto.repo.listMissingBlobs":                 always,
	"com.atproto.repo.createRecord":                     always,
	"com.atproto.repo.putRecord":                        always,
	"com.atproto.repo.deleteRecord":                     always,
	"com.atproto.repo.applyWrites":                      always,
	"com.atproto.sync.getBlob":                          always,
	"com.atproto.sync.getBlocks":                        always,
	"com.atproto.sync.getLatestCommit":                  always,
	"com.atproto.sync.getRecord":                        always,
	"com.atproto.sync.getRepo":                          always,
	"com.atproto.sync.listBlobs":                        always,
	"com.atproto.sync.getHead":                          always,
	"com.atproto.sync.getCheckout":                      always,
	"app.bsky.notification.unregisterPush":              always,
	"app.bsky.notification.registerPush":                always,

	"com.atproto.server.activateAccount":       refuse,
	"com.atproto.server.deactivateAccount":     refuse,
	"com.atproto.server.createAppPassword":     refuse,
	"com.atproto.server.listAppPasswords":      refuse,
	"com.atproto.server.revokeAppPassword":     refuse,
	"com.atproto.server.getAccountInviteCodes": refuse,
	"com.atproto.server.requestAccountDelete":  refuse,
	"com.atproto.temp.checkSignupQueue":        refuse,
	"com.atproto.server.requestEmailUpdate": func(*Grant, *http.Request, string) error {
		return xrpc.Forbidden("Use the account manager interface to update email address associated with an account")
	},
	"com.atproto.server.updateEmail": func(*Grant, *http.Request, string) error {
		return xrpc.Forbidden("Use the account manager interface to update email address associated with an account")
	},

	"com.atproto.identity.requestPlcOperationSignature": func(g *Grant, _ *http.Request, _ string) error { return g.requireIdentity("*") },
	"com.atproto.identity.signPlcOperation":             func(g *Grant, _ *http.Request, _ string) error { return g.requireIdentity("*") },
	"com.atproto.identity.submitPlcOperation":           func(g *Grant, _ *http.Request, _ string) error { return g.requireIdentity("*") },
	"com.atproto.identity.updateHandle":                 func(g *Grant, _ *http.Request, _ string) error { return g.requireIdentity("handle") },
	"com.atproto.repo.importRepo":                       func(g *Grant, _ *http.Request, _ string) error { return g.requireAccount("repo", "manage") },
	"com.atproto.server.requestEmailConfirmation":       func(g *Grant, _ *http.Request, _ string) error { return g.requireAccount("email", "manage") },
	"com.atproto.server.confirmEmail":                   func(g *Grant, _ *http.Request, _ string) error { return g.requireAccount("email", "manage") },
	"com.atproto.repo.uploadBlob": func(g *Grant, r *http.Request, _ string) error {
		return g.RequireBlob(r.Header.Get("Content-Type"))
	},
	"com.atproto.server.getServiceAuth": func(g *Grant, r *http.Request, _ string) error {
		q := r.URL.Query()
		lxm := q.Get("lxm")
		if lxm == "" {
			lxm = "*"
		}
		return g.RequireRPC(q.Get("aud"), lxm)
	},
	"app.bsky.feed.getFeed": func(g *Grant, r *http.Request, aud string) error {
		if err := g.RequireRPC(aud, "app.bsky.feed.getFeed"); err != nil {
			return err
		}
		return g.RequireRPC(aud, "app.bsky.feed.getFeedSkeleton")
	},
}

// AuthorizeMethod applies the reference's rule for the XRPC method nsid;
// aud is the service a proxied call goes to (the atproto-proxy header or
// the default appview).
func (g *Grant) AuthorizeMethod(nsid string, r *http.Request, aud string) error {
	if rule, ok := methodRules[nsid]; ok {
		return rule(g, r, aud)
	}
	return rpcRule(nsid)(g, r, aud)
}

// CanReadEmail says whether getSession may show the account's email.
func (g *Grant) CanReadEmail() bool { return g.AllowsAccount("email", "read") }
