package conformance

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
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

// pushed records a successful PAR as facts: the reference's expires_in is
// 299 or 300 depending on its timing, and the request_uri is random.
func (c *oauthClient) pushed(step, endpoint string, form url.Values, proof string) {
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
	return c.do(step, req, proof)
}

// do sends req with a DPoP proof for its method and URL (proof "none":
// none; "stale": one without the nonce) and keeps the nonce it answers.
func (c *oauthClient) do(step string, req *http.Request, proof string) *http.Response {
	c.r.t.Helper()
	if proof != "none" {
		nonce := c.nonce
		if proof == "stale" {
			nonce = ""
		}
		p, err := oauth.NewAuthDPoP(req.Method, req.URL.String(), nonce, c.key)
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
	hr := c.do(step, req, proof)
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
