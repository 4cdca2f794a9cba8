package harness_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/harness"
)

func post(text string) map[string]any {
	return map[string]any{"$type": "app.bsky.feed.post", "text": text, "createdAt": time.Now().UTC().Format(time.RFC3339)}
}

type recordRef struct {
	URI string `json:"uri"`
	CID string `json:"cid"`
}

func createRecord(t *testing.T, c *atclient.APIClient, did syntax.DID, collection string, record any) (recordRef, error) {
	t.Helper()
	var out recordRef
	err := c.Post(t.Context(), "com.atproto.repo.createRecord", map[string]any{"repo": did, "collection": collection, "record": record}, &out)
	return out, err
}

func apiErr(t *testing.T, err error, status int, name string) {
	t.Helper()
	var ae *atclient.APIError
	if !errors.As(err, &ae) || ae.StatusCode != status || ae.Name != name {
		t.Fatalf("got %v, want %d %s", err, status, name)
	}
}

// TestOAuthLocalhostClient: indigo's development client logs in through
// PAR, the consent and the token endpoint, then writes, reads and deletes
// a record with DPoP, refreshes, outlives an access token, and is locked
// out once revoked.
func TestOAuthLocalhostClient(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	a := p.NewAccount(t)
	sess := a.OAuthSession(t, "atproto", "transition:generic")
	c := sess.APIClient()
	ctx := t.Context()

	ref, err := createRecord(t, c, a.DID, "app.bsky.feed.post", post("hello over OAuth"))
	if err != nil {
		t.Fatalf("createRecord with DPoP: %v", err)
	}
	uri, _ := syntax.ParseATURI(ref.URI)
	var rec struct {
		Value map[string]any `json:"value"`
	}
	if err := c.Get(ctx, "com.atproto.repo.getRecord", map[string]any{"repo": a.DID, "collection": "app.bsky.feed.post", "rkey": uri.RecordKey()}, &rec); err != nil || rec.Value["text"] != "hello over OAuth" {
		t.Fatalf("getRecord: %v %v", rec.Value, err)
	}
	var me map[string]any
	if err := c.Get(ctx, "com.atproto.server.getSession", nil, &me); err != nil {
		t.Fatalf("getSession: %v", err)
	}
	if me["did"] != a.DID.String() || me["email"] != nil {
		t.Fatalf("getSession without account:email: %v", me)
	}
	if err := c.Post(ctx, "com.atproto.repo.deleteRecord", map[string]any{"repo": a.DID, "collection": "app.bsky.feed.post", "rkey": uri.RecordKey()}, nil); err != nil {
		t.Fatalf("deleteRecord: %v", err)
	}

	before := sess.Data.AccessToken
	if _, err := sess.RefreshTokens(ctx); err != nil || sess.Data.AccessToken == before {
		t.Fatalf("refresh: %v", err)
	}
	// The access token lives an hour of the server's clock; indigo sees
	// invalid_token, refreshes and retries.
	before = sess.Data.AccessToken
	p.Clock(t).Advance(61 * time.Minute)
	if err := c.Get(ctx, "com.atproto.server.getSession", nil, &me); err != nil {
		t.Fatalf("getSession after the access token expired: %v", err)
	}
	if sess.Data.AccessToken == before {
		t.Fatal("the client did not refresh the expired token")
	}

	if err := sess.RevokeSession(ctx); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := sess.RefreshTokens(ctx); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("refresh after revoke: %v", err)
	}
	// As the reference, the resource server looks the access token up: a
	// revoked session's token is refused at once, and nothing renews it.
	if _, err := createRecord(t, c, a.DID, "app.bsky.feed.post", post("after revoke")); err == nil {
		t.Fatal("createRecord after revoke succeeded")
	}
}

// TestOAuthScopes: granular scopes allow what they name and nothing else,
// with the reference's 403s.
func TestOAuthScopes(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t)
	sess := a.OAuthSession(t, "atproto", "repo:app.bsky.feed.like?action=create")
	c := sess.APIClient()

	like := map[string]any{"$type": "app.bsky.feed.like", "createdAt": time.Now().UTC().Format(time.RFC3339),
		"subject": map[string]any{"uri": "at://" + a.DID.String() + "/app.bsky.feed.post/3jzfcijpj2z2a", "cid": "bafyreidfayvfuwqa7qlnopdjiqrxzs6blmoeu4rujcjtnci5beludirz2a"}}
	ref, err := createRecord(t, c, a.DID, "app.bsky.feed.like", like)
	if err != nil {
		t.Fatalf("createRecord in the granted collection: %v", err)
	}
	_, err = createRecord(t, c, a.DID, "app.bsky.feed.post", post("not granted"))
	apiErr(t, err, 403, "ScopeMissingError")
	uri, _ := syntax.ParseATURI(ref.URI)
	err = c.Post(t.Context(), "com.atproto.repo.deleteRecord", map[string]any{"repo": a.DID, "collection": "app.bsky.feed.like", "rkey": uri.RecordKey()}, nil)
	apiErr(t, err, 403, "ScopeMissingError")
	err = c.Post(t.Context(), "com.atproto.server.createAppPassword", map[string]any{"name": "x"}, nil)
	apiErr(t, err, 403, "Forbidden")
}

// TestOAuthDeny: the user pressing Deny sends the app access_denied.
func TestOAuthDeny(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t)
	cfg := oauth.NewLocalhostConfig("http://127.0.0.1/callback", []string{"atproto"})
	app := oauth.NewClientApp(&cfg, oauth.NewMemStore())
	app.Dir = p.Directory()
	redirect := a.DenyOAuth(t, a.StartOAuth(t, app))
	_, err := app.ProcessCallback(t.Context(), redirect.Query())
	var cbe *oauth.AuthRequestCallbackError
	if !errors.As(err, &cbe) || cbe.ErrorCode != "access_denied" {
		t.Fatalf("callback after deny: %v (redirect %s)", err, redirect)
	}
}

// TestOAuthConfidentialClient: a web client with a private_key_jwt key,
// its metadata document served on loopback, logs in, writes and refreshes.
func TestOAuthConfidentialClient(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t)
	key, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		t.Fatal(err)
	}
	var cfg oauth.ClientConfig
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := cfg.ClientMetadata()
		jwks := cfg.PublicJWKS()
		m.JWKS = &jwks
		name := "Confidential test app"
		m.ClientName = &name
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(m)
	}))
	t.Cleanup(meta.Close)
	cfg = oauth.NewPublicConfig(meta.URL+"/client-metadata.json", "http://127.0.0.1/callback", []string{"atproto", "transition:generic"})
	if err := cfg.SetClientSecret(key, "k1"); err != nil {
		t.Fatal(err)
	}
	sess := a.LoginOAuth(t, oauth.NewClientApp(&cfg, oauth.NewMemStore()))
	if _, err := createRecord(t, sess.APIClient(), a.DID, "app.bsky.feed.post", post("from a confidential client")); err != nil {
		t.Fatalf("createRecord: %v", err)
	}
	if _, err := sess.RefreshTokens(t.Context()); err != nil {
		t.Fatalf("refresh with a client assertion: %v", err)
	}
	if _, err := createRecord(t, sess.APIClient(), a.DID, "app.bsky.feed.post", post("after refresh")); err != nil {
		t.Fatalf("createRecord after refresh: %v", err)
	}
}

// TestOAuthDPoPChecks: the resource server's answers to a missing proof,
// a replayed proof and a stale nonce, and the token endpoint's to a
// replayed refresh token.
func TestOAuthDPoPChecks(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t)
	sess := a.OAuthSession(t, "atproto", "transition:generic")
	target := p.URL() + "/xrpc/com.atproto.server.getSession"
	call := func(proof string) *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, target, nil)
		req.Header.Set("Authorization", "DPoP "+sess.Data.AccessToken)
		if proof != "" {
			req.Header.Set("DPoP", proof)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	want := func(resp *http.Response, status int, name, challenge string) {
		t.Helper()
		var body struct{ Error, Message string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode != status || body.Error != name || !strings.Contains(resp.Header.Get("WWW-Authenticate"), challenge) {
			t.Fatalf("got %d %+v (WWW-Authenticate %q), want %d %s with %q", resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"), status, name, challenge)
		}
	}
	want(call(""), 401, "invalid_dpop_proof", `DPoP algs=`)

	// The token sent as a Bearer token: refused as the reference refuses
	// it (400 InvalidToken "Malformed token", for its cnf claim, with no
	// challenge; conformance oauth-sign-in).
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, target, nil)
	req.Header.Set("Authorization", "Bearer "+sess.Data.AccessToken)
	bresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bresp.Body.Close() })
	var bbody struct{ Error, Message string }
	_ = json.NewDecoder(bresp.Body).Decode(&bbody)
	if bresp.StatusCode != 400 || bbody.Error != "InvalidToken" || bbody.Message != "Malformed token" || bresp.Header.Get("WWW-Authenticate") != "" {
		t.Fatalf("the token as Bearer: %d %+v (WWW-Authenticate %q), want 400 InvalidToken Malformed token", bresp.StatusCode, bbody, bresp.Header.Get("WWW-Authenticate"))
	}

	proof, err := sess.NewHostDPoP(http.MethodGet, target)
	if err != nil {
		t.Fatal(err)
	}
	if resp := call(proof); resp.StatusCode != 200 {
		t.Fatalf("a fresh proof: %d", resp.StatusCode)
	}
	want(call(proof), 401, "invalid_dpop_proof", `error="invalid_dpop_proof"`)

	// A proof whose ath hashes another token.
	tok := sess.Data.AccessToken
	sess.Data.AccessToken = "another token"
	proof, _ = sess.NewHostDPoP(http.MethodGet, target)
	sess.Data.AccessToken = tok
	want(call(proof), 401, "invalid_dpop_proof", `error="invalid_dpop_proof"`)

	sess.Data.DPoPHostNonce = "stale"
	proof, _ = sess.NewHostDPoP(http.MethodGet, target)
	resp := call(proof)
	if resp.Header.Get("DPoP-Nonce") == "" {
		t.Fatal("no DPoP-Nonce header with use_dpop_nonce")
	}
	want(resp, 401, "use_dpop_nonce", `error="use_dpop_nonce"`)

	// A refresh token used twice ends the session.
	old := sess.Data.RefreshToken
	if _, err := sess.RefreshTokens(t.Context()); err != nil {
		t.Fatal(err)
	}
	current := sess.Data.RefreshToken
	sess.Data.RefreshToken = old
	if _, err := sess.RefreshTokens(t.Context()); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("refresh with a used refresh token: %v", err)
	}
	sess.Data.RefreshToken = current
	if _, err := sess.RefreshTokens(t.Context()); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("refresh with the current token after a replay: %v", err)
	}
}

// TestOAuthGrantsAndRevoke: the account side lists the apps signed in and
// signs one out; that app can no longer refresh, the other still can.
func TestOAuthGrantsAndRevoke(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t)
	one := a.OAuthSession(t, "atproto")
	two := a.OAuthSession(t, "atproto", "transition:generic")
	grants := a.OAuthGrants(t)
	if len(grants) != 2 || grants[0].Scope != "atproto transition:generic" || grants[1].ClientID != one.Config.ClientID {
		t.Fatalf("grants: %+v", grants)
	}
	if n := a.RevokeOAuth(t, one.Config.ClientID); n != 1 {
		t.Fatalf("revoked %d sessions, want 1", n)
	}
	if _, err := one.RefreshTokens(t.Context()); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("refresh of a revoked app: %v", err)
	}
	if _, err := two.RefreshTokens(t.Context()); err != nil {
		t.Fatalf("refresh of the other app: %v", err)
	}
	if got := a.OAuthGrants(t); len(got) != 1 || got[0].ClientID != two.Config.ClientID {
		t.Fatalf("grants after revoking one: %+v", got)
	}
}

// permissionSet is a permission set lexicon document granting create on
// one collection of its group and one method to any service.
func permissionSet(nsid, group string) []byte {
	return []byte(`{"lexicon": 1, "id": "` + nsid + `", "defs": {"main": {"type": "permission-set", "title": "Test", "permissions": [
		{"type": "permission", "resource": "repo", "collection": ["` + group + `.note"], "action": ["create"]},
		{"type": "permission", "resource": "rpc", "lxm": ["` + group + `.getNotes"], "aud": "*"}]}}}`)
}

// TestOAuthPermissionSets: an include: scope grants exactly what its
// permission set lists, whether the set was registered with the server
// (WithPermissionSets) or published by the account whose handle is its
// NSID's authority; an include: of a set nobody has is refused at PAR
// (conformance oauth-sign-in compares that answer with the reference).
func TestOAuthPermissionSets(t *testing.T) {
	t.Parallel()
	p := harness.New(t, harness.WithPermissionSets(permissionSet("com.example.notes.basics", "com.example.notes")))
	a := p.NewAccount(t)
	author := p.NewAccount(t, harness.WithHandlePrefix("notes"))
	group := "test." + strings.TrimSuffix(author.Handle.String(), ".test")
	published := author.PublishPermissionSet(t, permissionSet(group+".basics", group))

	for _, tc := range []struct{ include, group string }{
		{"include:com.example.notes.basics", "com.example.notes"},
		{"include:" + published, group},
	} {
		sess := a.OAuthSession(t, "atproto", tc.include)
		if want := "repo:" + tc.group + ".note?action=create rpc:" + tc.group + ".getNotes?aud=* atproto"; strings.Join(sess.Data.Scopes, " ") != want {
			t.Errorf("%s: token scope %q, want %q", tc.include, strings.Join(sess.Data.Scopes, " "), want)
		}
		c := sess.APIClient()
		note := map[string]any{"$type": tc.group + ".note", "text": "hi"}
		if _, err := createRecord(t, c, a.DID, tc.group+".note", note); err != nil {
			t.Errorf("%s: createRecord in the set's collection: %v", tc.include, err)
		}
		_, err := createRecord(t, c, a.DID, "app.bsky.feed.post", post("not in the set"))
		apiErr(t, err, 403, "ScopeMissingError")
		_, err = createRecord(t, c, a.DID, tc.group+".other", map[string]any{"$type": tc.group + ".other"})
		apiErr(t, err, 403, "ScopeMissingError")
	}

	cfg := oauth.NewLocalhostConfig("http://127.0.0.1/callback", []string{"atproto", "include:com.example.notes.missing"})
	app := oauth.NewClientApp(&cfg, oauth.NewMemStore())
	_, err := app.SendAuthRequest(t.Context(), p.OAuthServerMetadata(t), app.Config.Scopes, a.Handle.String())
	if err == nil || !strings.Contains(err.Error(), "invalid_scope") {
		t.Fatalf("PAR with an unknown permission set: %v", err)
	}
}
