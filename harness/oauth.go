package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"
)

// OAuth helpers: fakepds is its own OAuth authorization server (PAR, PKCE,
// DPoP, the sign-in and consent page at /oauth/authorize). These drive the
// consent without a browser, through the control plane's
// POST /_fakepds/oauth/authorize, so they work in-process and attached;
// on the reference backend, through its authorization page's API
// (oauth_reference.go).

// AuthorizeOAuth signs the account in to the pending authorization request
// that authorizeURL (the URL an app sends the browser to, with client_id
// and request_uri) names and allows it, as the user would on the consent
// page. It returns where the browser would go next: the app's redirect URI
// with code, state and iss.
func (a *Account) AuthorizeOAuth(t testing.TB, authorizeURL string) *url.URL {
	t.Helper()
	return a.pds.consent(t, a, authorizeURL, false)
}

// DenyOAuth is AuthorizeOAuth with the user pressing Deny: the redirect
// carries error=access_denied.
func (a *Account) DenyOAuth(t testing.TB, authorizeURL string) *url.URL {
	t.Helper()
	return a.pds.consent(t, a, authorizeURL, true)
}

func (p *PDS) consent(t testing.TB, a *Account, authorizeURL string, deny bool) *url.URL {
	t.Helper()
	p.alive(t, "OAuth consent")
	var out struct {
		Redirect string `json:"redirect"`
	}
	err := p.control(t.Context(), http.MethodPost, "oauth/authorize",
		map[string]any{"url": authorizeURL, "account": a.DID.String(), "deny": deny}, &out)
	if errors.Is(err, errNoControlPlane) {
		u, err := referenceConsent(t.Context(), a, authorizeURL, deny)
		if err != nil {
			t.Fatalf("harness: OAuth consent on the reference's authorization page: %v", err)
		}
		return u
	}
	if err != nil {
		t.Fatalf("harness: OAuth consent: %v", err)
	}
	u, err := url.Parse(out.Redirect)
	if err != nil {
		t.Fatalf("OAuth consent: redirect %q: %v", out.Redirect, err)
	}
	return u
}

// OAuthServerMetadata is the PDS's authorization server metadata. It is
// not checked with indigo's AuthServerMetadata.Validate, which requires
// an https issuer without a port: a test PDS listens on http://127.0.0.1.
func (p *PDS) OAuthServerMetadata(t testing.TB) *oauth.AuthServerMetadata {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.url+"/.well-known/oauth-authorization-server", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("OAuth server metadata: %v", err)
	}
	defer resp.Body.Close()
	var m oauth.AuthServerMetadata
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OAuth server metadata: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatalf("OAuth server metadata: %v", err)
	}
	return &m
}

// StartOAuth begins app's login of the account against this PDS, as
// app.StartAuthFlow would (which wants https hosts): a pushed
// authorization request with PKCE and DPoP, the request saved in app's
// store. It returns the authorize URL to send a browser to, or to pass to
// AuthorizeOAuth.
func (a *Account) StartOAuth(t testing.TB, app *oauth.ClientApp) string {
	t.Helper()
	ctx := t.Context()
	meta := a.pds.OAuthServerMetadata(t)
	info, err := app.SendAuthRequest(ctx, meta, app.Config.Scopes, a.Handle.String())
	if err != nil {
		t.Fatalf("OAuth PAR: %v", err)
	}
	did := a.DID
	info.AccountDID = &did
	if err := app.Store.SaveAuthRequestInfo(ctx, *info); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"client_id": {app.Config.ClientID}, "request_uri": {info.RequestURI}}
	return meta.AuthorizationEndpoint + "?" + q.Encode()
}

// LoginOAuth runs app through the whole login as the account: StartOAuth,
// AuthorizeOAuth, then app.ProcessCallback with the redirect (the token
// request), and returns the resumed session; its APIClient makes DPoP
// calls and refreshes itself. It sets app.Dir to the PDS's Directory: the
// default one resolves DIDs on the public network.
func (a *Account) LoginOAuth(t testing.TB, app *oauth.ClientApp) *oauth.ClientSession {
	t.Helper()
	app.Dir = a.pds.Directory()
	redirect := a.AuthorizeOAuth(t, a.StartOAuth(t, app))
	sess, err := finishOAuth(t.Context(), app, redirect)
	if err != nil {
		t.Fatalf("OAuth login: %v", err)
	}
	return sess
}

func finishOAuth(ctx context.Context, app *oauth.ClientApp, redirect *url.URL) (*oauth.ClientSession, error) {
	data, err := app.ProcessCallback(ctx, redirect.Query())
	if err != nil {
		return nil, fmt.Errorf("callback: %w", err)
	}
	return app.ResumeSession(ctx, data.AccountDID, data.SessionID)
}

// OAuthSession logs the account in to a new development client
// (http://localhost client id, public, the given scopes; "atproto" when
// none) through the real flow and returns its session.
func (a *Account) OAuthSession(t testing.TB, scopes ...string) *oauth.ClientSession {
	t.Helper()
	if len(scopes) == 0 {
		scopes = []string{"atproto"}
	}
	cfg := oauth.NewLocalhostConfig("http://127.0.0.1/callback", scopes)
	return a.LoginOAuth(t, oauth.NewClientApp(&cfg, oauth.NewMemStore()))
}

// OAuthGrant is one of an account's OAuth sessions, as its account page
// lists the apps signed in.
type OAuthGrant struct {
	ClientID  string    `json:"clientId"`
	Scope     string    `json:"scope"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"` // the last sign-in or refresh
}

// OAuthGrants lists the account's OAuth sessions, newest first.
func (a *Account) OAuthGrants(t testing.TB) []OAuthGrant {
	t.Helper()
	var out struct {
		Sessions []OAuthGrant `json:"sessions"`
	}
	a.pds.power(t, "OAuthGrants", http.MethodGet, "oauth/sessions?"+url.Values{"account": {a.DID.String()}}.Encode(), nil, &out)
	return out.Sessions
}

// RevokeOAuth signs the app clientID out of the account ("" signs every
// app out), as the user would from their account page, and says how many
// sessions ended. Their refresh tokens stop working at once; access tokens
// already issued last until they expire, as on the reference.
func (a *Account) RevokeOAuth(t testing.TB, clientID string) int {
	t.Helper()
	var out struct {
		Revoked int `json:"revoked"`
	}
	a.pds.power(t, "RevokeOAuth", http.MethodDelete, "oauth/sessions?"+url.Values{"account": {a.DID.String()}, "client_id": {clientID}}.Encode(), nil, &out)
	return out.Revoked
}

// WithPermissionSets registers OAuth permission sets: lexicon documents
// (JSON) whose main definition is a "permission-set", which include:<nsid>
// scopes may then name (pds.Config.PermissionSets). The reference
// resolves them over the network; a test PDS has none. A set can also be
// published as a com.atproto.lexicon.schema record (rkey: its NSID) by the
// account whose handle is the NSID's authority (PublishPermissionSet).
func WithPermissionSets(docs ...[]byte) Option {
	return func(s *setup) { s.cfg.PermissionSets = append(s.cfg.PermissionSets, docs...) }
}

// PublishPermissionSet writes a permission set lexicon document (JSON) as
// the account's com.atproto.lexicon.schema record, as a lexicon's author
// publishes it; fakepds resolves include:<nsid> from it when the NSID's
// authority is the account's handle (handle alice.test publishes
// test.alice.*). It returns the set's NSID.
func (a *Account) PublishPermissionSet(t testing.TB, doc []byte) string {
	t.Helper()
	var rec map[string]any
	if err := json.Unmarshal(doc, &rec); err != nil {
		t.Fatalf("PublishPermissionSet: %v", err)
	}
	nsid, _ := rec["id"].(string)
	rec["$type"] = "com.atproto.lexicon.schema"
	in := map[string]any{"repo": a.DID.String(), "collection": "com.atproto.lexicon.schema", "rkey": nsid, "record": rec}
	if err := a.Client.Post(t.Context(), "com.atproto.repo.putRecord", in, nil); err != nil {
		t.Fatalf("PublishPermissionSet %s: %v", nsid, err)
	}
	return nsid
}
