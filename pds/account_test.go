package pds_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
)

// apiErr asserts err is an XRPC error with the given status and name.
func apiErr(t *testing.T, err error, status int, name string) {
	t.Helper()
	var ae *atclient.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want XRPC %d %s", err, status, name)
	}
	if ae.StatusCode != status || ae.Name != name {
		t.Fatalf("err = %d %s (%s), want %d %s", ae.StatusCode, ae.Name, ae.Message, status, name)
	}
}

func createAccount(t *testing.T, s *pds.Server, handle, email, password string) *comatproto.ServerCreateAccount_Output {
	t.Helper()
	out, err := comatproto.ServerCreateAccount(t.Context(), atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateAccount_Input{
		Handle: handle, Email: &email, Password: &password,
	})
	if err != nil {
		t.Fatalf("createAccount %s: %v", handle, err)
	}
	return out
}

func TestCreateAccountAndSessions(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	out := createAccount(t, s, "Alice.test", "alice@example.com", "hunter22")
	if out.Handle != "alice.test" || !strings.HasPrefix(out.Did, "did:plc:") || out.AccessJwt == "" || out.RefreshJwt == "" {
		t.Fatalf("createAccount = %+v", out)
	}
	if out.DidDoc == nil {
		t.Fatal("createAccount returned no didDoc")
	}

	// The DID resolves through the PLC URL with indigo's own resolver, and
	// names this PDS, the handle and a signing key.
	base := identity.BaseDirectory{PLCURL: s.PLCURL()}
	ident, err := base.LookupDID(ctx, syntax.DID(out.Did))
	if err != nil {
		t.Fatalf("resolve %s through %s: %v", out.Did, s.PLCURL(), err)
	}
	if ident.PDSEndpoint() != s.URL() {
		t.Errorf("PDS endpoint %q, want %q", ident.PDSEndpoint(), s.URL())
	}
	if h, err := ident.DeclaredHandle(); err != nil || h != "alice.test" {
		t.Errorf("declared handle %q, %v", h, err)
	}
	if _, err := ident.PublicKey(); err != nil {
		t.Errorf("signing key: %v", err)
	}

	// LoginWithPassword through the server's Directory: handle -> DID ->
	// PDS -> createSession, all without DNS.
	client, err := atclient.LoginWithPassword(ctx, s.Directory(), syntax.AtIdentifier("alice.test"), "hunter22", "", nil)
	if err != nil {
		t.Fatalf("LoginWithPassword: %v", err)
	}
	sess, err := comatproto.ServerGetSession(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if sess.Did != out.Did || sess.Handle != "alice.test" || sess.Email == nil || *sess.Email != "alice@example.com" ||
		sess.EmailConfirmed == nil || *sess.EmailConfirmed || sess.Active == nil || !*sess.Active || sess.Status != nil {
		t.Fatalf("getSession = %+v", sess)
	}

	// Login by email and by DID; wrong password.
	anon := atclient.NewAPIClient(s.URL())
	for _, ident := range []string{"ALICE@example.com", out.Did, "alice.TEST"} {
		if _, err := comatproto.ServerCreateSession(ctx, anon, &comatproto.ServerCreateSession_Input{Identifier: ident, Password: "hunter22"}); err != nil {
			t.Errorf("login as %s: %v", ident, err)
		}
	}
	_, err = comatproto.ServerCreateSession(ctx, anon, &comatproto.ServerCreateSession_Input{Identifier: "alice.test", Password: "nope"})
	apiErr(t, err, 401, "AuthenticationRequired")
	_, err = comatproto.ServerCreateSession(ctx, anon, &comatproto.ServerCreateSession_Input{Identifier: "nobody.test", Password: "nope"})
	apiErr(t, err, 401, "AuthenticationRequired")

	// Refresh rotates; the old refresh token still works within the grace
	// period and gives the same successor; deleteSession revokes.
	refreshed := refresh(t, s, out.RefreshJwt)
	again := refresh(t, s, out.RefreshJwt)
	if jti(t, refreshed.RefreshJwt) != jti(t, again.RefreshJwt) {
		t.Error("reuse within the grace period gave another successor")
	}
	del := atclient.NewAPIClient(s.URL())
	del.Headers.Set("Authorization", "Bearer "+refreshed.RefreshJwt)
	if err := comatproto.ServerDeleteSession(ctx, del); err != nil {
		t.Fatal(err)
	}
	_, err = refreshErr(s, refreshed.RefreshJwt)
	apiErr(t, err, 400, "ExpiredToken")

	// An access token is not a refresh token and the other way round.
	_, err = refreshErr(s, out.AccessJwt)
	apiErr(t, err, 400, "InvalidToken")
	bad := atclient.NewAPIClient(s.URL())
	bad.Headers.Set("Authorization", "Bearer "+out.RefreshJwt)
	_, err = comatproto.ServerGetSession(ctx, bad)
	apiErr(t, err, 400, "InvalidToken")
	_, err = comatproto.ServerGetSession(ctx, atclient.NewAPIClient(s.URL()))
	apiErr(t, err, 401, "AuthMissing")
}

func refreshErr(s *pds.Server, token string) (*comatproto.ServerRefreshSession_Output, error) {
	c := atclient.NewAPIClient(s.URL())
	c.Headers.Set("Authorization", "Bearer "+token)
	return comatproto.ServerRefreshSession(context.Background(), c)
}

func refresh(t *testing.T, s *pds.Server, token string) *comatproto.ServerRefreshSession_Output {
	t.Helper()
	out, err := refreshErr(s, token)
	if err != nil {
		t.Fatalf("refreshSession: %v", err)
	}
	return out
}

// jti is a refresh token's id claim.
func jti(t *testing.T, token string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Jti string `json:"jti"`
	}
	if err := json.Unmarshal(b, &claims); err != nil || claims.Jti == "" {
		t.Fatalf("no jti in %s: %v", b, err)
	}
	return claims.Jti
}

func TestCreateAccountErrors(t *testing.T) {
	s := start(t, pds.Config{})
	createAccount(t, s, "taken.test", "taken@example.com", "pw")
	c := atclient.NewAPIClient(s.URL())
	str := func(v string) *string { return &v }
	for _, tc := range []struct {
		name   string
		in     comatproto.ServerCreateAccount_Input
		status int
		err    string
		msg    string
	}{
		{"taken handle", comatproto.ServerCreateAccount_Input{Handle: "taken.test", Email: str("x@example.com"), Password: str("pw")}, 400, "InvalidRequest", "Handle already taken: taken.test"},
		{"taken email", comatproto.ServerCreateAccount_Input{Handle: "otheracct.test", Email: str("TAKEN@example.com"), Password: str("pw")}, 400, "InvalidRequest", "Email already taken: TAKEN@example.com"},
		{"no email", comatproto.ServerCreateAccount_Input{Handle: "otheracct.test", Password: str("pw")}, 400, "InvalidRequest", "Email is required"},
		{"bad email", comatproto.ServerCreateAccount_Input{Handle: "otheracct.test", Email: str("nope"), Password: str("pw")}, 400, "InvalidRequest", "This email address is not supported, please use a different email."},
		{"short", comatproto.ServerCreateAccount_Input{Handle: "ab.test", Email: str("ab@example.com"), Password: str("pw")}, 400, "InvalidHandle", "Handle too short"},
		{"long", comatproto.ServerCreateAccount_Input{Handle: "abcdefghijklmnopqrs.test", Email: str("ab@example.com"), Password: str("pw")}, 400, "InvalidHandle", "Handle too long"},
		{"dots", comatproto.ServerCreateAccount_Input{Handle: "a.bcd.test", Email: str("ab@example.com"), Password: str("pw")}, 400, "InvalidHandle", "Invalid characters in handle"},
		{"syntax", comatproto.ServerCreateAccount_Input{Handle: "bad_handle.test", Email: str("ab@example.com"), Password: str("pw")}, 400, "InvalidRequest", `Invalid handle (got "bad_handle.test") at $.handle`},
		{"tld", comatproto.ServerCreateAccount_Input{Handle: "alice.local", Email: str("ab@example.com"), Password: str("pw")}, 400, "InvalidHandle", "Handle TLD is invalid or disallowed"},
		{"domain", comatproto.ServerCreateAccount_Input{Handle: "alice.com", Email: str("ab@example.com"), Password: str("pw")}, 400, "UnsupportedDomain", "Not a supported handle domain"},
		{"long password", comatproto.ServerCreateAccount_Input{Handle: "otheracct.test", Email: str("ab@example.com"), Password: str(strings.Repeat("x", 257))}, 400, "InvalidRequest", "Password too long. Maximum length is 256 characters."},
		{"bogus invite", comatproto.ServerCreateAccount_Input{Handle: "otheracct.test", Email: str("ab@example.com"), Password: str("pw"), InviteCode: str("nope")}, 400, "InvalidInviteCode", "Provided invite code not available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := comatproto.ServerCreateAccount(t.Context(), c, &tc.in)
			var ae *atclient.APIError
			if !errors.As(err, &ae) || ae.StatusCode != tc.status || ae.Name != tc.err || ae.Message != tc.msg {
				t.Fatalf("err = %v, want %d %s %q", err, tc.status, tc.err, tc.msg)
			}
		})
	}
	// None of the failures left an account behind.
	if _, err := comatproto.ServerCreateSession(t.Context(), c, &comatproto.ServerCreateSession_Input{Identifier: "otheracct.test", Password: "pw"}); err == nil {
		t.Fatal("a failed createAccount left a usable account")
	}
}

func TestAppPasswords(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	acct := createAccount(t, s, "appsacct.test", "apps@example.com", "main-password")
	full := bearer(s, acct.AccessJwt)
	ap, err := comatproto.ServerCreateAppPassword(ctx, full, &comatproto.ServerCreateAppPassword_Input{Name: "bot"})
	if err != nil {
		t.Fatal(err)
	}
	login, err := comatproto.ServerCreateSession(ctx, atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateSession_Input{Identifier: "appsacct.test", Password: ap.Password})
	if err != nil {
		t.Fatalf("login with app password: %v", err)
	}
	appClient := bearer(s, login.AccessJwt)
	// An app password session may list but not create app passwords.
	if list, err := comatproto.ServerListAppPasswords(ctx, appClient); err != nil || len(list.Passwords) != 1 || list.Passwords[0].Name != "bot" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	_, err = comatproto.ServerCreateAppPassword(ctx, appClient, &comatproto.ServerCreateAppPassword_Input{Name: "other"})
	apiErr(t, err, 400, "InvalidToken")
	// Revoking kills the app password and its sessions' refresh tokens.
	if err := comatproto.ServerRevokeAppPassword(ctx, full, &comatproto.ServerRevokeAppPassword_Input{Name: "bot"}); err != nil {
		t.Fatal(err)
	}
	_, err = refreshErr(s, login.RefreshJwt)
	apiErr(t, err, 400, "ExpiredToken")
	_, err = comatproto.ServerCreateSession(ctx, atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateSession_Input{Identifier: "appsacct.test", Password: ap.Password})
	apiErr(t, err, 401, "AuthenticationRequired")
}

func bearer(s *pds.Server, token string) *atclient.APIClient {
	c := atclient.NewAPIClient(s.URL())
	c.Headers.Set("Authorization", "Bearer "+token)
	return c
}

func TestWellKnownAndResolveHandle(t *testing.T) {
	s := start(t, pds.Config{})
	acct := createAccount(t, s, "known.test", "known@example.com", "pw")
	req, _ := http.NewRequest("GET", s.URL()+"/.well-known/atproto-did", nil)
	req.Host = "known.test"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 100)
	n, _ := resp.Body.Read(body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body[:n]) != acct.Did {
		t.Fatalf("well-known = %d %q", resp.StatusCode, body[:n])
	}
	req.Host = "unknown.test"
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 404 {
		t.Fatalf("unknown host: %v %v", resp.StatusCode, err)
	}
	out, err := comatproto.IdentityResolveHandle(t.Context(), atclient.NewAPIClient(s.URL()), "KNOWN.test")
	if err != nil || out.Did != acct.Did {
		t.Fatalf("resolveHandle = %+v, %v", out, err)
	}
	_, err = comatproto.IdentityResolveHandle(t.Context(), atclient.NewAPIClient(s.URL()), "nobody.test")
	apiErr(t, err, 400, "HandleNotFound")
}

// TestHandleCase: handles are stored lower case and compared exactly, as
// the reference compares them. Only resolveHandle and login lower-case
// what they are given (asked of npm 0.5.35: describeRepo of Case.test 400
// RepoNotFound, createRecord 403 AccountNotFound, listRecords and
// getRecord 400 "Could not find repo", /.well-known/atproto-did 404).
func TestHandleCase(t *testing.T) {
	s := start(t, pds.Config{})
	acct := createAccount(t, s, "casey.test", "casey@example.com", "pw")
	const mixed = "Casey.test"
	bearer := "Bearer " + acct.AccessJwt
	post := `{"repo":"` + mixed + `","collection":"app.bsky.feed.post","record":{"$type":"app.bsky.feed.post","text":"hi","createdAt":"2024-01-01T00:00:00Z"}}`
	for _, c := range []struct {
		name, method, nsid, query, authz string
		body                             *string
		status                           int
		errName                          string
	}{
		{"describeRepo", "GET", "com.atproto.repo.describeRepo", "repo=" + mixed, "", nil, 400, "RepoNotFound"},
		{"listRecords", "GET", "com.atproto.repo.listRecords", "collection=app.bsky.feed.post&repo=" + mixed, "", nil, 400, "InvalidRequest"},
		{"getRecord", "GET", "com.atproto.repo.getRecord", "collection=app.bsky.feed.post&rkey=self&repo=" + mixed, "", nil, 400, "InvalidRequest"},
		{"createRecord", "POST", "com.atproto.repo.createRecord", "", bearer, &post, 403, "AccountNotFound"},
	} {
		status, body := rawCall(t, s, c.method, c.nsid, c.query, c.authz, c.body)
		if status != c.status || body["error"] != c.errName {
			t.Errorf("%s of %s = %d %v, want %d %s", c.name, mixed, status, body, c.status, c.errName)
		}
	}
	if out, err := comatproto.IdentityResolveHandle(t.Context(), atclient.NewAPIClient(s.URL()), mixed); err != nil || out.Did != acct.Did {
		t.Errorf("resolveHandle %s = %+v, %v; want %s", mixed, out, err, acct.Did)
	}
	if out := login(t, s, "CASEY.TEST", "pw"); out.Did != acct.Did {
		t.Errorf("createSession as CASEY.TEST = %s, want %s", out.Did, acct.Did)
	}
	for host, want := range map[string]int{"casey.test": 200, mixed: 404} {
		req, _ := http.NewRequestWithContext(t.Context(), "GET", s.URL()+"/.well-known/atproto-did", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("/.well-known/atproto-did for Host %s = %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// TestCreateAccountPLCRefused: when the PLC directory refuses the genesis
// operation (a 5xx: 502 UpstreamFailure, as the reference's PLC client),
// createAccount leaves no actor store behind (it is made beside the PLC
// call) and no account: twice, the second store made of the spare.
func TestCreateAccountPLCRefused(t *testing.T) {
	plcSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			w.Write([]byte(`{"message":"the directory is down"}`))
			return
		}
		http.NotFound(w, r)
	}))
	defer plcSrv.Close()
	s := start(t, pds.Config{PLCURL: plcSrv.URL})
	c := atclient.NewAPIClient(s.URL())
	for i := range 2 {
		handle, email, pw := fmt.Sprintf("refused%d.test", i), fmt.Sprintf("refused%d@example.com", i), "pw"
		_, err := comatproto.ServerCreateAccount(t.Context(), c, &comatproto.ServerCreateAccount_Input{Handle: handle, Email: &email, Password: &pw})
		apiErr(t, err, http.StatusBadGateway, "UpstreamFailure")
		_, err = comatproto.ServerCreateSession(t.Context(), c, &comatproto.ServerCreateSession_Input{Identifier: handle, Password: pw})
		apiErr(t, err, http.StatusUnauthorized, "AuthenticationRequired")
	}
	var stores []string
	err := filepath.WalkDir(filepath.Join(s.DataDir(), "actors"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".sqlite") {
			stores = append(stores, p)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(stores) > 0 {
		t.Fatalf("actor stores left by refused createAccounts: %v", stores)
	}
}
