package oauth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	indigo "github.com/bluesky-social/indigo/atproto/auth/oauth"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/store"
)

type fakeAccounts map[string]Account // by handle

func (f fakeAccounts) SignIn(_ context.Context, id, pw string) (Account, error) {
	if a, ok := f[id]; ok && pw == "pw" {
		return a, nil
	}
	return Account{}, ErrBadCredentials
}

func (f fakeAccounts) Account(_ context.Context, id string) (Account, error) {
	for _, a := range f {
		if a.DID == id || a.Handle == id {
			return a, nil
		}
	}
	return Account{}, errNotFound
}

// CreateAccount makes the account in the map; a taken handle is refused as
// createAccount refuses it.
func (f fakeAccounts) CreateAccount(_ context.Context, handle, email, password, _ string) (Account, error) {
	if _, ok := f[handle]; ok {
		return Account{}, errInvalidRequest("Handle already taken: %s", handle)
	}
	a := Account{DID: "did:plc:" + strings.ReplaceAll(handle, ".", ""), Handle: handle}
	f[handle] = a
	return a, nil
}

type testServer struct {
	t     *testing.T
	p     *Provider
	url   string
	clock *clock.Shifted
}

func newTestServer(t *testing.T) *testServer {
	t.Helper()
	ts := &testServer{t: t, clock: &clock.Shifted{}}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	st, err := OpenStore(t.Context(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(t.Context(), Options{
		Store: st, Issuer: func() string { return ts.url }, Audience: "did:web:localhost",
		Secret: secret, Clock: ts.clock,
		Accounts: fakeAccounts{"alice.test": {DID: "did:plc:alice", Handle: "alice.test"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	mux := http.NewServeMux()
	p.Mount(mux)
	srv := httptest.NewServer(p.Middleware(mux))
	t.Cleanup(srv.Close)
	ts.p, ts.url = p, srv.URL
	return ts
}

// client is a test OAuth client: one DPoP key, the server's last nonce.
type testClient struct {
	ts    *testServer
	key   *atcrypto.PrivateKeyP256
	nonce string
	form  url.Values // sent with every request (client_id, assertion...)
	// verifier is the PKCE verifier of the last request authorize made.
	verifier string
}

func (ts *testServer) client(clientID string) *testClient {
	k, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		ts.t.Fatal(err)
	}
	return &testClient{ts: ts, key: k, form: url.Values{"client_id": {clientID}}}
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func (a answer) err() string { s, _ := a.body["error"].(string); return s }

func (a answer) desc() string { s, _ := a.body["error_description"].(string); return s }

// post sends form (plus the client's) with a DPoP proof, retrying once
// when the server asks for its nonce.
func (c *testClient) post(path string, form url.Values) answer {
	c.ts.t.Helper()
	for k, v := range c.form {
		if !form.Has(k) {
			form[k] = v
		}
	}
	var a answer
	for range 2 {
		proof, err := indigo.NewAuthDPoP("POST", c.ts.url+path, c.nonce, c.key)
		if err != nil {
			c.ts.t.Fatal(err)
		}
		a = c.raw(path, form, proof)
		if n := a.header.Get("DPoP-Nonce"); n != "" {
			c.nonce = n
		}
		if a.err() != "use_dpop_nonce" {
			break
		}
	}
	return a
}

func (c *testClient) raw(path string, form url.Values, proof string) answer {
	c.ts.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.ts.url+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if proof != "" {
		req.Header.Set("DPoP", proof)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.ts.t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	_ = json.NewDecoder(resp.Body).Decode(&a.body)
	return a
}

// verifiers maps each code challenge parForm made to its verifier: a
// challenge is good for one exchange (the reference refuses it again).
var (
	verifiers   sync.Map
	verifierSeq atomic.Int64
)

func parForm(redirect, scope string) url.Values {
	v := fmt.Sprintf("a-verifier-of-at-least-forty-three-characters-%d", verifierSeq.Add(1))
	challenge := indigo.S256CodeChallenge(v)
	verifiers.Store(challenge, v)
	return url.Values{
		"response_type": {"code"}, "redirect_uri": {redirect}, "scope": {scope}, "state": {"st"},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"},
	}
}

// verifierOf is the PKCE verifier of a form parForm made.
func verifierOf(form url.Values) string {
	v, _ := verifiers.Load(form.Get("code_challenge"))
	s, _ := v.(string)
	return s
}

func loopbackID(redirect, scope string) string {
	return "http://localhost?" + url.Values{"redirect_uri": {redirect}, "scope": {scope}}.Encode()
}

// authorize pushes a request and approves it as alice; it returns the code.
func (c *testClient) authorize(form url.Values) string {
	c.ts.t.Helper()
	c.verifier = verifierOf(form)
	a := c.post("/oauth/par", form)
	if a.status != http.StatusCreated {
		c.ts.t.Fatalf("PAR: %d %v", a.status, a.body)
	}
	u := c.ts.url + "/oauth/authorize?" + url.Values{"client_id": c.form["client_id"], "request_uri": {a.body["request_uri"].(string)}}.Encode()
	dest, err := c.ts.p.Approve(c.ts.t.Context(), u, "alice.test", false)
	if err != nil {
		c.ts.t.Fatalf("approve: %v", err)
	}
	du, _ := url.Parse(dest)
	if du.Query().Get("state") != "st" || du.Query().Get("iss") != c.ts.url {
		c.ts.t.Fatalf("redirect %s", dest)
	}
	return du.Query().Get("code")
}

func TestDiscovery(t *testing.T) {
	ts := newTestServer(t)
	get := func(path string) map[string]any {
		resp, err := http.Get(ts.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&m) != nil {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		return m
	}
	pr := get("/.well-known/oauth-protected-resource")
	if pr["resource"] != ts.url || pr["authorization_servers"].([]any)[0] != ts.url {
		t.Fatalf("protected resource: %v", pr)
	}
	m := get("/.well-known/oauth-authorization-server")
	for k, want := range map[string]any{
		"issuer": ts.url, "pushed_authorization_request_endpoint": ts.url + "/oauth/par",
		"token_endpoint": ts.url + "/oauth/token", "authorization_endpoint": ts.url + "/oauth/authorize",
		"revocation_endpoint": ts.url + "/oauth/revoke", "require_pushed_authorization_requests": true,
		"authorization_response_iss_parameter_supported": true, "client_id_metadata_document_supported": true,
	} {
		if m[k] != want {
			t.Errorf("%s = %v, want %v", k, m[k], want)
		}
	}
	// indigo's client checks the rest (it wants https only for the issuer).
	b, _ := json.Marshal(m)
	var meta indigo.AuthServerMetadata
	_ = json.Unmarshal(b, &meta)
	meta.Issuer, meta.AuthorizationEndpoint = "https://pds.example", "https://pds.example/oauth/authorize"
	if err := meta.Validate("https://pds.example"); err != nil {
		t.Fatalf("indigo refuses the metadata: %v", err)
	}
}

func TestLoopbackClientIDs(t *testing.T) {
	for _, id := range []string{
		"http://localhost",
		"http://localhost/",
		loopbackID("http://127.0.0.1:8080/cb", "atproto transition:generic"),
		loopbackID("http://[::1]/cb", "atproto"),
	} {
		if _, err := loopbackClient(id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	for _, id := range []string{
		"http://localhost:8080",
		"http://localhost/client.json",
		loopbackID("http://localhost:8080/cb", "atproto"),
		loopbackID("https://127.0.0.1/cb", "atproto"),
		loopbackID("http://127.0.0.1/cb", "transition:generic"),
		"http://localhost?foo=bar",
	} {
		if _, err := loopbackClient(id); err == nil {
			t.Errorf("%s: accepted", id)
		}
	}
}

func TestValidateClient(t *testing.T) {
	yes, no := true, false
	base := func() clientMetadata {
		return clientMetadata{
			ClientID: "https://app.example/client.json", Scope: "atproto", RedirectURIs: []string{"https://app.example/cb"},
			GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
			TokenEndpointAuthMethod: "none", DPoPBoundAccessTokens: &yes,
		}
	}
	if err := validateClient(&client{Meta: base()}); err != nil {
		t.Fatalf("valid metadata: %v", err)
	}
	for want, edit := range map[string]func(*clientMetadata){
		`"dpop_bound_access_tokens" must be true`:  func(m *clientMetadata) { m.DPoPBoundAccessTokens = &no },
		"jwks_uri and jwks are mutually exclusive": func(m *clientMetadata) { m.JWKS, m.JWKSURI = json.RawMessage(`{"keys":[]}`), "https://x/j" },
		`Native clients must authenticate using "none" method`: func(m *clientMetadata) {
			m.ApplicationType, m.TokenEndpointAuthMethod, m.JWKSURI, m.TokenEndpointAuthSigningAlg = "native", "private_key_jwt", "https://x/j", "ES256"
		},
		`Grant type "implicit" is not allowed`:                           func(m *clientMetadata) { m.GrantTypes = append(m.GrantTypes, "implicit") },
		"client_uri hostname is invalid":                                 func(m *clientMetadata) { m.ClientURI = "http://localhost:3000" },
		"Missing scope property":                                         func(m *clientMetadata) { m.Scope = "" },
		`Duplicate scope "atproto"`:                                      func(m *clientMetadata) { m.Scope = "atproto atproto" },
		`Missing "atproto" scope`:                                        func(m *clientMetadata) { m.Scope = "transition:generic" },
		`Unsupported client authentication method "client_secret_basic"`: func(m *clientMetadata) { m.TokenEndpointAuthMethod = "" },
		"must use https":                                                 func(m *clientMetadata) { m.RedirectURIs = []string{"http://app.example/cb"} },
		"Missing token_endpoint_auth_signing_alg":                        func(m *clientMetadata) { m.TokenEndpointAuthMethod, m.JWKSURI = "private_key_jwt", "https://x/j" },
	} {
		m := base()
		edit(&m)
		err := validateClient(&client{Meta: m})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

func TestPARChecks(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	c := ts.client(loopbackID(redirect, "atproto transition:generic"))
	for _, tc := range []struct {
		name      string
		edit      func(url.Values)
		err, desc string
	}{
		{"no PKCE", func(f url.Values) { f.Del("code_challenge"); f.Del("code_challenge_method") }, "invalid_request", "Use of PKCE is required"},
		{"plain PKCE", func(f url.Values) { f.Set("code_challenge_method", "plain") }, "invalid_request", `atproto requires use of "S256" code_challenge_method`},
		{"undeclared scope", func(f url.Values) { f.Set("scope", "atproto transition:email") }, "invalid_scope", `Scope "transition:email" is not declared in the client metadata`},
		{"no atproto", func(f url.Values) { f.Set("scope", "transition:generic") }, "invalid_scope", `The "atproto" scope is required`},
		{"unregistered redirect", func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:9999/other") }, "invalid_request", "Invalid redirect_uri"},
		{"response type", func(f url.Values) { f.Set("response_type", "token") }, "unsupported_response_type", `Unsupported response_type "token"`},
		{"unknown scope", func(f url.Values) { f.Set("scope", "atproto bogus:x") }, "invalid_scope", `Scope "bogus:x" is not declared in the client metadata`},
		{"another port", func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:1234/cb") }, "invalid_request", "Invalid redirect_uri http://127.0.0.1:1234/cb"},
	} {
		f := parForm(redirect, "atproto transition:generic")
		tc.edit(f)
		a := c.post("/oauth/par", f)
		if a.status != 400 || a.err() != tc.err || !strings.HasPrefix(a.desc(), tc.desc) {
			t.Errorf("%s: %d %v", tc.name, a.status, a.body)
		}
	}
	// A proof without the nonce: 400 use_dpop_nonce, with the nonce.
	f := parForm(redirect, "atproto")
	f.Set("client_id", c.form.Get("client_id"))
	proof, _ := indigo.NewAuthDPoP("POST", ts.url+"/oauth/par", "", c.key)
	a := c.raw("/oauth/par", f, proof)
	if a.status != 400 || a.err() != "use_dpop_nonce" || a.header.Get("DPoP-Nonce") == "" {
		t.Fatalf("PAR without a nonce: %d %v", a.status, a.body)
	}
	a = c.post("/oauth/par", parForm(redirect, "atproto"))
	if a.status != 201 || !strings.HasPrefix(a.body["request_uri"].(string), requestURIPrefix) || a.body["expires_in"] != 299.0 {
		t.Fatalf("PAR: %d %v", a.status, a.body)
	}
}

// TestPARWithoutDPoP: as the reference, a pushed request needs no proof;
// the session is then bound to the key of the token request's proof.
func TestPARWithoutDPoP(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	c := ts.client(loopbackID(redirect, "atproto"))
	f := parForm(redirect, "atproto")
	f.Set("client_id", c.form.Get("client_id"))
	a := c.raw("/oauth/par", f, "")
	if a.status != 201 {
		t.Fatalf("PAR without DPoP: %d %v", a.status, a.body)
	}
	u := ts.url + "/oauth/authorize?" + url.Values{"client_id": c.form["client_id"], "request_uri": {a.body["request_uri"].(string)}}.Encode()
	dest, err := ts.p.Approve(t.Context(), u, "did:plc:alice", false)
	if err != nil {
		t.Fatal(err)
	}
	du, _ := url.Parse(dest)
	a = c.post("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {du.Query().Get("code")}, "redirect_uri": {redirect}, "code_verifier": {verifierOf(f)}})
	if a.status != 200 {
		t.Fatalf("token: %d %v", a.status, a.body)
	}
	other := ts.client(c.form.Get("client_id"))
	if a := other.post("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {a.body["refresh_token"].(string)}}); a.status != 400 || a.desc() != "DPoP proof does not match the expected JKT" {
		t.Fatalf("refresh with another key: %d %v", a.status, a.body)
	}
}

func TestCodeExchange(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	c := ts.client(loopbackID(redirect, "atproto"))
	exchange := func(c *testClient, code, v string) answer {
		return c.post("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {v}})
	}

	code := c.authorize(parForm(redirect, "atproto"))
	if a := exchange(c, code, c.verifier+"x"); a.err() != "invalid_grant" || a.desc() != "Invalid code_verifier" {
		t.Fatalf("wrong verifier: %v", a.body)
	}
	// The failed attempt spent the code.
	if a := exchange(c, code, c.verifier); a.err() != "invalid_grant" || a.desc() != "Invalid code" {
		t.Fatalf("spent code: %v", a.body)
	}

	code = c.authorize(parForm(redirect, "atproto"))
	other := ts.client(c.form.Get("client_id"))
	if a := exchange(other, code, c.verifier); a.status != 400 || a.err() != "invalid_grant" || a.desc() != "DPoP proof does not match the expected JKT" {
		t.Fatalf("another DPoP key: %d %v", a.status, a.body)
	}

	code = c.authorize(parForm(redirect, "atproto"))
	a := exchange(c, code, c.verifier)
	if a.status != 200 || a.body["token_type"] != "DPoP" || a.body["sub"] != "did:plc:alice" || a.body["scope"] != "atproto" || a.body["expires_in"] != 3599.0 {
		t.Fatalf("exchange: %d %v", a.status, a.body)
	}
	refresh := a.body["refresh_token"].(string)
	if a := exchange(c, code, c.verifier); a.desc() != "Invalid code" {
		t.Fatalf("code replay: %v", a.body)
	}
	// The replay ended the session the code made.
	if a := c.post("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}}); a.desc() != "Invalid refresh token" {
		t.Fatalf("refresh after a code replay: %v", a.body)
	}

	// A code challenge is good for one exchange, even on a new request.
	f := parForm(redirect, "atproto")
	f2 := parForm(redirect, "atproto")
	f2.Set("code_challenge", f.Get("code_challenge"))
	if a := exchange(c, c.authorize(f), verifierOf(f)); a.status != 200 {
		t.Fatalf("first use of a challenge: %v", a.body)
	}
	if a := exchange(c, c.authorize(f2), verifierOf(f)); a.desc() != "Code challenge already used" {
		t.Fatalf("second use of a challenge: %v", a.body)
	}
	if a := exchange(c, c.authorize(parForm(redirect, "atproto")), ""); a.desc() != "code_verifier is required" {
		t.Fatalf("no verifier: %v", a.body)
	}

	code = c.authorize(parForm(redirect, "atproto"))
	ts.clock.Advance(codeLifetime + time.Second)
	if a := exchange(c, code, c.verifier); a.desc() != "This code has expired" {
		t.Fatalf("old code: %v", a.body)
	}
}

func TestSessionExpiry(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	c := ts.client(loopbackID(redirect, "atproto"))
	a := c.post("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {c.authorize(parForm(redirect, "atproto"))}, "redirect_uri": {redirect}, "code_verifier": {c.verifier}})
	refresh := a.body["refresh_token"].(string)
	// A public client's session ends two weeks after it began, however
	// often it refreshes.
	for range 3 {
		ts.clock.Advance(5 * 24 * time.Hour)
		a = c.post("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refresh}})
		if a.status != 200 {
			break
		}
		refresh = a.body["refresh_token"].(string)
	}
	if a.err() != "invalid_grant" {
		t.Fatalf("refresh 15 days into a session: %d %v", a.status, a.body)
	}
}

// confidentialClient serves a private_key_jwt client's metadata (its key
// "k1" in jwks) on loopback.
func confidentialClient(t *testing.T, redirect string) (*indigo.ClientConfig, *atcrypto.PrivateKeyP256) {
	key, _ := atcrypto.GeneratePrivateKeyP256()
	cfg := new(indigo.ClientConfig)
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := cfg.ClientMetadata()
		jwks := cfg.PublicJWKS()
		m.JWKS = &jwks
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m)
	}))
	t.Cleanup(meta.Close)
	*cfg = indigo.NewPublicConfig(meta.URL+"/client.json", redirect, []string{"atproto"})
	if err := cfg.SetClientSecret(key, "k1"); err != nil {
		t.Fatal(err)
	}
	return cfg, key
}

func TestClientAssertion(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	cfg, _ := confidentialClient(t, redirect)
	c := ts.client(cfg.ClientID)

	if a := c.post("/oauth/par", parForm(redirect, "atproto")); a.err() != "invalid_client" {
		t.Fatalf("confidential client without an assertion: %v", a.body)
	}
	wrongAud, _ := cfg.NewClientAssertion("https://elsewhere.example")
	c.form.Set("client_assertion_type", assertionType)
	c.form.Set("client_assertion", wrongAud)
	if a := c.post("/oauth/par", parForm(redirect, "atproto")); a.err() != "invalid_client" || !strings.Contains(a.desc(), `"aud"`) {
		t.Fatalf("assertion for another server: %v", a.body)
	}
	good, _ := cfg.NewClientAssertion(ts.url)
	c.form.Set("client_assertion", good)
	if a := c.post("/oauth/par", parForm(redirect, "atproto")); a.status != 201 {
		t.Fatalf("PAR with an assertion: %v", a.body)
	}
	if a := c.post("/oauth/par", parForm(redirect, "atproto")); a.err() != "invalid_client" || a.desc() != "Client assertion jti replayed" {
		t.Fatalf("replayed assertion: %v", a.body)
	}
}

// TestTokenTableBounded: a new session clears the families no refresh
// could revive, and only those.
func TestTokenTableBounded(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	c := ts.client(loopbackID(redirect, "atproto"))
	login := func() {
		t.Helper()
		a := c.post("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {c.authorize(parForm(redirect, "atproto"))}, "redirect_uri": {redirect}, "code_verifier": {c.verifier}})
		if a.status != 200 {
			t.Fatalf("token: %v", a.body)
		}
	}
	count := func() (n int) {
		t.Helper()
		if err := ts.p.db.Reader().QueryRow(`SELECT count(*) FROM token`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	login()
	login()
	ts.clock.Advance(30 * 24 * time.Hour)
	login()
	if n := count(); n != 3 {
		t.Fatalf("%d families a month on, want 3 (a confidential one could still refresh)", n)
	}
	ts.clock.Advance(refreshLifetimeLong - 29*24*time.Hour) // the first two are past it, the third not
	login()
	if n := count(); n != 2 {
		t.Fatalf("%d families after the longest refresh lifetime, want 2", n)
	}
}

// TestRequestExpiry: a pushed request lives five minutes, and five more
// from each step the user takes on the page.
func TestRequestExpiry(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	c := ts.client(loopbackID(redirect, "atproto"))
	push := func() string {
		a := c.post("/oauth/par", parForm(redirect, "atproto"))
		return ts.url + "/oauth/authorize?" + url.Values{"client_id": c.form["client_id"], "request_uri": {a.body["request_uri"].(string)}}.Encode()
	}
	page := func(u string) int {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	stale := push()
	ts.clock.Advance(parExpiresIn + time.Second)
	if _, err := ts.p.Approve(t.Context(), stale, "alice.test", false); err == nil || !strings.Contains(err.Error(), "This request has expired") {
		t.Fatalf("approve after %v: %v", parExpiresIn, err)
	}
	u := push()
	for range 3 {
		ts.clock.Advance(4 * time.Minute)
		if s := page(u); s != 200 {
			t.Fatalf("page 4 minutes after the last step: %d", s)
		}
	}
	if _, err := ts.p.Approve(t.Context(), u, "alice.test", false); err != nil {
		t.Fatalf("approve 12 minutes after PAR, 4 after the last step: %v", err)
	}
}

// TestRequestObject: a confidential client's pushed request may carry its
// parameters in a request object signed with its key, as the reference
// accepts them; one signed by another key, stale, without a jti or
// replayed is refused with the reference's messages.
func TestRequestObject(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	cfg, key := confidentialClient(t, redirect)
	c := ts.client(cfg.ClientID)
	c.form.Set("client_assertion_type", assertionType)
	jar := func(signer *atcrypto.PrivateKeyP256, claims map[string]any) url.Values {
		assertion, _ := cfg.NewClientAssertion(ts.url)
		c.form.Set("client_assertion", assertion)
		enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
		input := enc(map[string]any{"alg": "ES256", "kid": "k1", "typ": "JWT"}) + "." + enc(claims)
		sig, err := signer.HashAndSign([]byte(input))
		if err != nil {
			t.Fatal(err)
		}
		return url.Values{"request": {input + "." + base64.RawURLEncoding.EncodeToString(sig)}}
	}
	f := parForm(redirect, "atproto")
	claims := func(edit func(map[string]any)) map[string]any {
		m := map[string]any{"iss": cfg.ClientID, "aud": ts.url, "jti": rand.Text(), "iat": time.Now().Unix(), "client_id": cfg.ClientID}
		for k := range f {
			m[k] = f.Get(k)
		}
		if edit != nil {
			edit(m)
		}
		return m
	}
	other, _ := atcrypto.GeneratePrivateKeyP256()
	for _, tc := range []struct {
		name   string
		signer *atcrypto.PrivateKeyP256
		edit   func(map[string]any)
		desc   string
	}{
		{"another key", other, nil, `Invalid "request" object: signature verification failed`},
		{"another audience", key, func(m map[string]any) { m["aud"] = "https://elsewhere.example" }, `Invalid "request" object: unexpected "aud" claim value`},
		{"no iat", key, func(m map[string]any) { delete(m, "iat") }, `Invalid "request" object: "iat" claim missing`},
		{"stale", key, func(m map[string]any) { m["iat"] = time.Now().Add(-10 * time.Minute).Unix() }, `Invalid "request" object: "iat" claim timestamp check failed (too far in the past)`},
		{"no jti", key, func(m map[string]any) { delete(m, "jti") }, `Request object payload must contain a "jti" claim`},
		{"no PKCE", key, func(m map[string]any) { delete(m, "code_challenge"); delete(m, "code_challenge_method") }, "Use of PKCE is required"},
	} {
		if a := c.post("/oauth/par", jar(tc.signer, claims(tc.edit))); a.err() != "invalid_request" || a.desc() != tc.desc {
			t.Errorf("%s: %d %v, want %q", tc.name, a.status, a.body, tc.desc)
		}
	}
	good := claims(nil)
	a := c.post("/oauth/par", jar(key, good))
	if a.status != 201 {
		t.Fatalf("PAR with a request object: %d %v", a.status, a.body)
	}
	if a := c.post("/oauth/par", jar(key, good)); a.desc() != "Request object was replayed" {
		t.Fatalf("replayed request object: %v", a.body)
	}
	// The request is the object's: its state comes back on the redirect.
	u := ts.url + "/oauth/authorize?" + url.Values{"client_id": {cfg.ClientID}, "request_uri": {a.body["request_uri"].(string)}}.Encode()
	dest, err := ts.p.Approve(t.Context(), u, "alice.test", false)
	if err != nil || !strings.Contains(dest, "state=st") {
		t.Fatalf("approve: %s %v", dest, err)
	}
}

// TestSignUp: a prompt=create request opens the sign-up form; the new
// account is signed in to the request and consents.
func TestSignUp(t *testing.T) {
	ts := newTestServer(t)
	redirect := "http://127.0.0.1:9999/cb"
	c := ts.client(loopbackID(redirect, "atproto"))
	f := parForm(redirect, "atproto")
	f.Set("prompt", "create")
	a := c.post("/oauth/par", f)
	if a.status != 201 {
		t.Fatalf("PAR prompt=create: %v", a.body)
	}
	requestURI := a.body["request_uri"].(string)
	page := func(method, path string, form url.Values) (int, string, *http.Response) {
		t.Helper()
		var resp *http.Response
		var err error
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		if method == http.MethodGet {
			resp, err = noRedirect.Get(ts.url + path)
		} else {
			resp, err = noRedirect.PostForm(ts.url+path, form)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp
	}
	status, body, _ := page(http.MethodGet, "/oauth/authorize?"+url.Values{"client_id": c.form["client_id"], "request_uri": {requestURI}}.Encode(), nil)
	if status != 200 || !strings.Contains(body, `id="sign-up"`) {
		t.Fatalf("authorize page for prompt=create: %d %s", status, body)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)[1]
	form := url.Values{"request_uri": {requestURI}, "client_id": c.form["client_id"], "csrf": {csrf},
		"handle": {"alice.test"}, "email": {"a@example.com"}, "password": {"pw"}}
	if status, body, _ := page(http.MethodPost, "/oauth/authorize/sign-up", form); status != 400 || !strings.Contains(body, "Handle already taken: alice.test") {
		t.Fatalf("sign-up with a taken handle: %d %s", status, body)
	}
	form.Set("handle", "@Bob.test")
	if status, body, _ := page(http.MethodPost, "/oauth/authorize/sign-up", form); status != 200 || !strings.Contains(body, `id="account">bob.test`) {
		t.Fatalf("sign-up: %d %s", status, body)
	}
	form.Set("decision", "allow")
	status, _, resp := page(http.MethodPost, "/oauth/authorize/consent", form)
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if status != http.StatusSeeOther || loc.Query().Get("code") == "" {
		t.Fatalf("consent: %d %s", status, loc)
	}
	a = c.post("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")}, "redirect_uri": {redirect}, "code_verifier": {verifierOf(f)}})
	if a.status != 200 || a.body["sub"] != "did:plc:bobtest" {
		t.Fatalf("token for the new account: %d %v", a.status, a.body)
	}
}
