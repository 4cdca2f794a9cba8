package conformance

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/go-jose/go-jose/v4"
)

// OAuth: the discovery documents and the answers a client gets before any
// sign-in (pushed authorization requests, the token and revocation
// endpoints, the resource server's DPoP checks), from one development
// client. Sign-in and consent differ by design (docs/known-differences.md).

// oauthClient posts forms with DPoP proofs, keeping the server's nonce.
type oauthClient struct {
	r     *run
	key   *atcrypto.PrivateKeyP256
	nonce string
	id    string
}

// form posts to an endpoint of the server metadata; proof "none" sends
// none, "stale" one without the nonce, "" a good one.
func (c *oauthClient) form(step, endpoint string, form url.Values, proof string) *resp {
	c.r.t.Helper()
	hr := c.send(step, endpoint, form, proof)
	path := endpoint
	if u, err := url.Parse(endpoint); err == nil {
		path = u.Path
	}
	return c.r.record(step, "POST "+path, hr)
}

// pushed records a successful PAR as facts (the reference's expires_in is
// 299 or 300 depending on its timing, and the request_uri is random) and
// returns the request_uri.
func (c *oauthClient) pushed(step, endpoint string, form url.Values, proof string) string {
	c.r.t.Helper()
	hr := c.send(step, endpoint, form, proof)
	defer hr.Body.Close()
	var body struct {
		RequestURI string  `json:"request_uri"`
		ExpiresIn  float64 `json:"expires_in"`
	}
	_ = json.NewDecoder(hr.Body).Decode(&body)
	c.r.check(step, map[string]any{
		"status": hr.StatusCode, "content-type": hr.Header.Get("Content-Type"),
		"request_uri is a request URI": strings.HasPrefix(body.RequestURI, "urn:ietf:params:oauth:request_uri:req-") && len(body.RequestURI) == len("urn:ietf:params:oauth:request_uri:req-")+32,
		"expires_in is 299 or 300":     body.ExpiresIn == 299 || body.ExpiresIn == 300,
	})
	return body.RequestURI
}

func (c *oauthClient) send(step, endpoint string, form url.Values, proof string) *http.Response {
	c.r.t.Helper()
	if !form.Has("client_id") {
		form.Set("client_id", c.id)
	}
	req, err := http.NewRequestWithContext(c.r.t.Context(), http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		c.r.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return c.do(step, req, proof, "")
}

// do sends req with a DPoP proof for its method and URL (proof "none":
// none; "stale": one without the nonce), bound to the access token boundTo
// when set (its ath), and keeps the nonce it answers.
func (c *oauthClient) do(step string, req *http.Request, proof, boundTo string) *http.Response {
	c.r.t.Helper()
	if proof != "none" {
		nonce := c.nonce
		if proof == "stale" {
			nonce = ""
		}
		var p string
		var err error
		if boundTo == "" {
			p, err = oauth.NewAuthDPoP(req.Method, req.URL.String(), nonce, c.key)
		} else {
			sess := &oauth.ClientSession{Data: &oauth.ClientSessionData{AccessToken: boundTo, DPoPHostNonce: nonce}, DPoPPrivateKey: c.key}
			p, err = sess.NewHostDPoP(req.Method, req.URL.String())
		}
		if err != nil {
			c.r.t.Fatal(err)
		}
		req.Header.Set("DPoP", p)
	}
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		c.r.t.Fatalf("%s: %v", step, err)
	}
	if n := hr.Header.Get("DPoP-Nonce"); n != "" {
		c.nonce = n
	}
	return hr
}

// resource calls getSession with "Authorization: DPoP token" and a proof
// (not bound to token: no ath) with the nonce, without one, or none.
func (c *oauthClient) resource(step, base, token, proof string) {
	c.r.t.Helper()
	req, err := http.NewRequestWithContext(c.r.t.Context(), http.MethodGet, base+"/xrpc/com.atproto.server.getSession", nil)
	if err != nil {
		c.r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "DPoP "+token)
	hr := c.do(step, req, proof, "")
	c.r.check(step+": WWW-Authenticate", map[string]any{"www-authenticate": hr.Header.Get("WWW-Authenticate") != "", "dpop-nonce": hr.Header.Get("DPoP-Nonce") != ""})
	c.r.record(step, "GET /xrpc/com.atproto.server.getSession", hr)
}

func oauthFlow(r *run) {
	r.plain("protected resource metadata", r.p.URL(), "/.well-known/oauth-protected-resource")
	meta := r.plain("authorization server metadata", r.p.URL(), "/.well-known/oauth-authorization-server")
	issuer := meta.S("issuer")
	par, token, revoke := meta.S("pushed_authorization_request_endpoint"), meta.S("token_endpoint"), meta.S("revocation_endpoint")

	key, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		r.t.Fatal(err)
	}
	redirect := "http://127.0.0.1:9999/callback"
	c := &oauthClient{r: r, key: key,
		id: "http://localhost?" + url.Values{"redirect_uri": {redirect}, "scope": {"atproto transition:generic"}}.Encode()}
	params := func(edit func(url.Values)) url.Values {
		v := url.Values{"response_type": {"code"}, "redirect_uri": {redirect}, "scope": {"atproto transition:generic"}, "state": {"s1"},
			"code_challenge": {oauth.S256CodeChallenge("a-verifier-of-at-least-forty-three-characters-0123456789")}, "code_challenge_method": {"S256"}}
		if edit != nil {
			edit(v)
		}
		return v
	}

	c.form("par without a nonce", par, params(nil), "stale")
	c.form("par without PKCE", par, params(func(v url.Values) { v.Del("code_challenge"); v.Del("code_challenge_method") }), "")
	c.form("par plain PKCE", par, params(func(v url.Values) { v.Set("code_challenge_method", "plain") }), "")
	c.form("par undeclared scope", par, params(func(v url.Values) { v.Set("scope", "atproto transition:email") }), "")
	c.form("par without atproto", par, params(func(v url.Values) { v.Set("scope", "transition:generic") }), "")
	c.form("par unregistered redirect", par, params(func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:9999/other") }), "")
	c.form("par another port", par, params(func(v url.Values) { v.Set("redirect_uri", "http://127.0.0.1:1234/callback") }), "")
	c.form("par response_type token", par, params(func(v url.Values) { v.Set("response_type", "token") }), "")
	c.form("par invalid client id", par, params(func(v url.Values) { v.Set("client_id", "http://localhost:8080") }), "")
	c.pushed("par", par, params(nil), "")
	c.pushed("par without DPoP", par, params(nil), "none")
	c.pushed("par prompt=create", par, params(func(v url.Values) { v.Set("prompt", "create") }), "")
	c.pushed("par prompt=login", par, params(func(v url.Values) { v.Set("prompt", "login") }), "")
	c.form("par prompt=bogus", par, params(func(v url.Values) { v.Set("prompt", "bogus") }), "")

	// Request objects (JAR) from a development client, which has no keys
	// and declares no request_object_signing_alg.
	jar := func(alg string, claims map[string]any) url.Values {
		return url.Values{"request": {requestObject(r, alg, claims)}}
	}
	claims := map[string]any{"iss": c.id, "aud": issuer, "jti": "jar-1", "iat": time.Now().Unix(), "client_id": c.id,
		"response_type": "code", "redirect_uri": redirect, "scope": "atproto transition:generic", "state": "s1",
		"code_challenge": oauth.S256CodeChallenge("a-verifier-of-at-least-forty-three-characters-0123456789"), "code_challenge_method": "S256"}
	c.form("par request object unsigned", par, jar("none", claims), "")
	c.form("par request object signed", par, jar("ES256", claims), "")
	c.form("par request object not a JWT", par, url.Values{"request": {"not-a-jwt"}}, "")

	c.form("token unknown code", token, url.Values{"grant_type": {"authorization_code"}, "code": {"cod-" + strings.Repeat("0", 64)}, "redirect_uri": {redirect},
		"code_verifier": {"a-verifier-of-at-least-forty-three-characters-0123456789"}}, "")
	c.form("token malformed code", token, url.Values{"grant_type": {"authorization_code"}, "code": {"cod-abc"}, "redirect_uri": {redirect}}, "")
	c.form("token unknown refresh token", token, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"ref-" + strings.Repeat("0", 64)}}, "")
	c.form("token without grant_type", token, url.Values{}, "")
	c.form("revoke unknown token", revoke, url.Values{"token": {"ref-" + strings.Repeat("0", 64)}}, "")

	c.resource("getSession DPoP without a proof", issuer, "not-a-token", "none")
	c.resource("getSession DPoP without a nonce", issuer, "not-a-token", "stale")
	c.resource("getSession DPoP proof for another token", issuer, "not-a-token", "")
}

// oauthSignIn is a whole sign-in of a development client, as an app makes
// it: PAR (with the DPoP nonce dance), the authorize page (the harness
// signs in and consents: fakepds through its control plane, the reference
// through its authorization page's API), the code exchanged for tokens
// with PKCE and DPoP, XRPC calls with the DPoP-bound token (and one sent
// as Bearer), refresh with rotation and replay, revocation, and a denial.
// What differs by design is only the sign-in page itself, which no step
// records.
func oauthSignIn(r *run) {
	meta := oauthMetadata(r)
	issuer := meta["issuer"]
	r.n.Name(issuer, "<issuer>")
	a := r.account("oauth")

	key, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		r.t.Fatal(err)
	}
	redirect := "http://127.0.0.1:9999/callback"
	scope := "atproto transition:generic"
	c := &oauthClient{r: r, key: key,
		id: "http://localhost?" + url.Values{"redirect_uri": {redirect}, "scope": {scope}}.Encode()}
	var verifier string
	params := url.Values{"response_type": {"code"}, "redirect_uri": {redirect}, "scope": {scope}, "state": {"s1"},
		"code_challenge": {oauth.S256CodeChallenge("a-verifier-never-used-since-this-request-is-refused")}, "code_challenge_method": {"S256"}, "login_hint": {a.Handle.String()}}

	par, tokenURL := meta["pushed_authorization_request_endpoint"], meta["token_endpoint"]

	// PAR, first without the server's nonce, as a client that has none yet.
	c.form("par without a nonce", par, params, "stale")
	// Each request has its own PKCE verifier: the reference refuses a
	// code challenge used before.
	login := func(step string, deny bool) *url.URL {
		verifier = "a-verifier-of-at-least-forty-three-characters-" + strings.ReplaceAll(step, " ", "-")
		params.Set("code_challenge", oauth.S256CodeChallenge(verifier))
		requestURI := c.pushed(step+": par", par, params, "")
		authorize := meta["authorization_endpoint"] + "?" + url.Values{"client_id": {c.id}, "request_uri": {requestURI}}.Encode()
		back := a.AuthorizeOAuth
		if deny {
			back = a.DenyOAuth
		}
		u := back(r.t, authorize)
		r.check(step+": redirect", redirectFacts(u, redirect))
		return u
	}
	exchange := func(code string) url.Values {
		return url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}, "code_verifier": {verifier}}
	}
	tok := c.tokens("token", tokenURL, exchange(login("authorize", false).Query().Get("code")))

	// The resource server: the token with its proof, first without the
	// resource server's nonce.
	record := map[string]any{"repo": a.DID.String(), "collection": "app.bsky.feed.post",
		"record": map[string]any{"$type": "app.bsky.feed.post", "text": "over OAuth", "createdAt": "2026-01-01T00:00:00.000Z"}}
	c.xrpc("createRecord without a nonce", issuer, http.MethodPost, "com.atproto.repo.createRecord", tok.access, record, "stale")
	c.xrpc("createRecord", issuer, http.MethodPost, "com.atproto.repo.createRecord", tok.access, record, "")
	c.xrpc("getSession", issuer, http.MethodGet, "com.atproto.server.getSession", tok.access, nil, "")
	c.xrpc("getSession without a proof", issuer, http.MethodGet, "com.atproto.server.getSession", tok.access, nil, "none")
	c.bearer("getSession with the token as Bearer", issuer, tok.access)
	c.xrpc("createAppPassword", issuer, http.MethodPost, "com.atproto.server.createAppPassword", tok.access, map[string]any{"name": "x"}, "")

	// Refresh rotates the refresh token; revocation ends the session.
	refreshed := c.tokens("refresh", tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh}})
	c.xrpc("getSession after refresh", issuer, http.MethodGet, "com.atproto.server.getSession", refreshed.access, nil, "")
	c.form("refresh replayed", tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh}}, "")
	c.form("refresh after the replay", tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshed.refresh}}, "")
	c.xrpc("getSession after the replay", issuer, http.MethodGet, "com.atproto.server.getSession", refreshed.access, nil, "")
	c.xrpc("getSession with the token refresh replaced", issuer, http.MethodGet, "com.atproto.server.getSession", tok.access, nil, "")

	params.Set("state", "s2")
	tok = c.tokens("token again", tokenURL, exchange(login("authorize again", false).Query().Get("code")))
	other := c.withAnotherKey()
	other.form("refresh with another DPoP key", tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh}}, "")
	c.form("refresh after a refused refresh", tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh}}, "")
	c.xrpc("getSession after a refused refresh", issuer, http.MethodGet, "com.atproto.server.getSession", tok.access, nil, "")
	params.Set("state", "s2b")
	tok = c.tokens("token once more", tokenURL, exchange(login("authorize once more", false).Query().Get("code")))
	other.xrpc("getSession with another DPoP key", issuer, http.MethodGet, "com.atproto.server.getSession", tok.access, nil, "")
	c.form("revoke", meta["revocation_endpoint"], url.Values{"token": {tok.refresh}}, "")
	c.form("refresh after revoke", tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh}}, "")
	c.xrpc("getSession after revoke", issuer, http.MethodGet, "com.atproto.server.getSession", tok.access, nil, "")

	// A code used twice ends the session it made.
	params.Set("state", "s3")
	code := login("authorize a third time", false).Query().Get("code")
	tok = c.tokens("token a third time", tokenURL, exchange(code))
	c.form("token code replayed", tokenURL, exchange(code), "")
	c.form("refresh after the code replay", tokenURL, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.refresh}}, "")

	// A code exchanged with another DPoP key than the request's is spent.
	params.Set("state", "s3b")
	code = login("authorize a fourth time", false).Query().Get("code")
	other.form("token with another DPoP key", tokenURL, exchange(code), "")
	c.form("token after a refused exchange", tokenURL, exchange(code), "")
	params.Set("state", "s3c")
	code = login("authorize a fifth time", false).Query().Get("code")
	c.form("token without a verifier", tokenURL, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirect}}, "")

	// The user presses Deny.
	params.Set("state", "s4")
	login("deny", true)

	// A permission set neither server can resolve (the reference would
	// ask the network, which it has not here).
	withSet := "atproto include:com.example.fakepds.basics"
	sc := &oauthClient{r: r, key: key, nonce: c.nonce,
		id: "http://localhost?" + url.Values{"redirect_uri": {redirect}, "scope": {withSet}}.Encode()}
	params.Set("scope", withSet)
	params.Del("client_id") // send set the first client's
	sc.form("par with an unresolvable permission set", par, params, "")
}

// oauthMetadata reads the authorization server metadata without recording
// it (the oauth scenario does).
func oauthMetadata(r *run) map[string]string {
	req, err := http.NewRequestWithContext(r.t.Context(), http.MethodGet, r.p.URL()+"/.well-known/oauth-authorization-server", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer hr.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(hr.Body).Decode(&m); err != nil {
		r.t.Fatalf("authorization server metadata: %v", err)
	}
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// redirectFacts is what an app's callback receives.
func redirectFacts(u *url.URL, redirect string) map[string]any {
	q := u.Query()
	facts := map[string]any{"to the redirect_uri": u.Scheme+"://"+u.Host+u.Path == redirect, "fragment": u.Fragment}
	for k := range q {
		facts[k] = q.Get(k)
	}
	if code := q.Get("code"); code != "" {
		facts["code"] = strings.HasPrefix(code, "cod-") && len(code) == 68
	}
	return facts
}

// requestObject is a request object (RFC 9101) with claims: unsigned for
// alg "none", else signed by a fresh key the server does not know.
func requestObject(r *run, alg string, claims map[string]any) string {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			r.t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	head := enc(map[string]any{"alg": alg, "typ": "JWT"}) + "." + enc(claims)
	if alg == "none" {
		return head + "."
	}
	key, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		r.t.Fatal(err)
	}
	sig, err := key.HashAndSign([]byte(head))
	if err != nil {
		r.t.Fatal(err)
	}
	return head + "." + base64.RawURLEncoding.EncodeToString(sig)
}

type tokenPair struct{ access, refresh string }

// withAnotherKey is the same client with another DPoP key (and the nonce
// it has).
func (c *oauthClient) withAnotherKey() *oauthClient {
	key, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		c.r.t.Fatal(err)
	}
	return &oauthClient{r: c.r, key: key, nonce: c.nonce, id: c.id}
}

// tokens posts a token request and records its answer, naming the tokens
// so that later steps say which one they use.
func (c *oauthClient) tokens(step, endpoint string, form url.Values) tokenPair {
	c.r.t.Helper()
	// expires_in is 3599 or 3600 on the reference, as the moment it writes
	// the answer falls: recorded as that fact.
	hr := c.send(step, endpoint, form, "")
	b, err := io.ReadAll(hr.Body)
	hr.Body.Close()
	if err != nil {
		c.r.t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal(b, &body); err == nil {
		if e, ok := body["expires_in"].(float64); ok && (e == 3599 || e == 3600) {
			body["expires_in"] = "3599 or 3600"
		}
		b, _ = json.Marshal(body)
	}
	hr.Body = io.NopCloser(bytes.NewReader(b))
	re := c.r.record(step, "POST "+hr.Request.URL.Path, hr)
	tp := tokenPair{access: re.S("access_token"), refresh: re.S("refresh_token")}
	if tp.access == "" || tp.refresh == "" {
		c.r.t.Fatalf("%s: %d %s", step, re.Status, re.Raw)
	}
	c.r.n.Name(tp.refresh, "<refresh-token:"+step+">")
	jkt, err := jwkThumbprint(c.key)
	if err != nil {
		c.r.t.Fatal(err)
	}
	c.r.n.Name(jkt, "<dpop-jkt>")
	c.r.check(step+": refresh token", map[string]any{"shape": strings.HasPrefix(tp.refresh, "ref-") && len(tp.refresh) == 68})
	return tp
}

// xrpc calls nsid with "Authorization: DPoP token" and a proof bound to
// it (proof as in form).
func (c *oauthClient) xrpc(step, base, method, nsid, token string, body any, proof string) *resp {
	c.r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.r.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(c.r.t.Context(), method, base+"/xrpc/"+nsid, rd)
	if err != nil {
		c.r.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "DPoP "+token)
	hr := c.do(step, req, proof, token)
	c.r.check(step+": headers", map[string]any{"www-authenticate": hr.Header.Get("WWW-Authenticate"), "dpop-nonce": hr.Header.Get("DPoP-Nonce") != ""})
	return c.r.record(step, method+" "+nsid, hr)
}

// bearer sends an OAuth access token as a Bearer token, with no proof.
func (c *oauthClient) bearer(step, base, token string) {
	c.r.t.Helper()
	req, err := http.NewRequestWithContext(c.r.t.Context(), http.MethodGet, base+"/xrpc/com.atproto.server.getSession", nil)
	if err != nil {
		c.r.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		c.r.t.Fatalf("%s: %v", step, err)
	}
	c.r.check(step+": headers", map[string]any{"www-authenticate": hr.Header.Get("WWW-Authenticate"), "dpop-nonce": hr.Header.Get("DPoP-Nonce") != ""})
	c.r.record(step, "GET com.atproto.server.getSession", hr)
}

// jwkThumbprint is the RFC 7638 thumbprint of the DPoP key, the token's
// cnf.jkt.
func jwkThumbprint(k *atcrypto.PrivateKeyP256) (string, error) {
	pub, err := k.PublicKey()
	if err != nil {
		return "", err
	}
	j, err := pub.JWK()
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(j)
	if err != nil {
		return "", err
	}
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(b); err != nil {
		return "", err
	}
	sum, err := jwk.Thumbprint(crypto.SHA256)
	return base64.RawURLEncoding.EncodeToString(sum), err
}
