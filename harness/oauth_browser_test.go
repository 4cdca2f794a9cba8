package harness_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/chromedp/chromedp"

	"github.com/fakepds/fakepds/harness"
)

// chromium is the headless browser for the consent page test: Debian's
// package, which .ci/run installs. Without it the test skips, unless
// FAKEPDS_REQUIRE_CHROMIUM=1 (CI) makes that a failure.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("FAKEPDS_REQUIRE_CHROMIUM") == "1" {
			t.Fatalf("FAKEPDS_REQUIRE_CHROMIUM=1 but no chromium on PATH: %v", err)
		}
		t.Skipf("no chromium on PATH (apt-get install chromium): %v", err)
	}
	return path
}

// browser is a headless Chromium tab for one test, ended with it.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func newBrowser(t *testing.T, path string) *browser {
	// Chromium's helpers may still write in the profile dir for a moment
	// after it exits: remove it with retries, not with t.TempDir.
	profile, err := os.MkdirTemp("", "fakepds-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.UserDataDir(profile),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	}
	actx, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancel)
	return &browser{t: t, ctx: ctx}
}

// read runs a that reads something off the page.
func read[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
	return v
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return read(b, "text of "+sel, chromedp.Text(chromedp.CSS(sel)))
}

func (b *browser) value(sel string) string {
	b.t.Helper()
	return read(b, "value of "+sel, chromedp.Value(chromedp.CSS(sel)))
}

func (b *browser) location() string {
	b.t.Helper()
	return read(b, "location", chromedp.Location())
}

func (b *browser) step(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// browserApp is the app under test for the browser tests: a development
// client whose callback finishes the login, hands the session to the test
// and says who logged in.
func browserApp(t *testing.T, p *harness.PDS) (*oauth.ClientApp, string, <-chan *oauth.ClientSession) {
	var app *oauth.ClientApp
	loggedIn := make(chan *oauth.ClientSession, 1)
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := app.ProcessCallback(r.Context(), r.URL.Query())
		if err != nil {
			http.Error(w, "login failed: "+err.Error(), http.StatusBadRequest)
			return
		}
		sess, err := app.ResumeSession(r.Context(), data.AccountDID, data.SessionID)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		loggedIn <- sess
		fmt.Fprintf(w, "<!doctype html><p id=done>logged in as %s</p>", data.AccountDID)
	}))
	t.Cleanup(cb.Close)
	cfg := oauth.NewLocalhostConfig(cb.URL+"/callback", []string{"atproto", "transition:generic"})
	app = oauth.NewClientApp(&cfg, oauth.NewMemStore())
	app.Dir = p.Directory()
	return app, cb.URL + "/callback", loggedIn
}

// TestOAuthConsentPageInChromium: a user signs in and allows an app on the
// authorize page in a real (headless) browser, which follows the redirect
// to the app's callback; the app exchanges the code and calls the PDS.
func TestOAuthConsentPageInChromium(t *testing.T) {
	b := newBrowser(t, chromium(t))
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t)
	app, callback, loggedIn := browserApp(t, p)
	authorizeURL := a.StartOAuth(t, app)

	b.step("open the authorize page", chromedp.Navigate(authorizeURL), chromedp.WaitVisible(chromedp.CSS("#password")))
	hint := b.value("#identifier")
	b.step("sign in", chromedp.SendKeys(chromedp.CSS("#password"), a.Password), chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#allow")))
	account, scopes := b.text("#account"), b.text("#scopes")
	b.step("allow", chromedp.Click(chromedp.CSS("#allow")), chromedp.WaitVisible(chromedp.CSS("#done")))
	done, location := b.text("#done"), b.location()
	if hint != a.Handle.String() || account != a.Handle.String() || !strings.Contains(scopes, "transition:generic") {
		t.Fatalf("page showed hint %q, account %q, scopes %q", hint, account, scopes)
	}
	if !strings.HasPrefix(location, callback+"?") || done != "logged in as "+a.DID.String() {
		t.Fatalf("browser ended at %s showing %q", location, done)
	}
	sess := <-loggedIn
	if _, err := createRecord(t, sess.APIClient(), a.DID, "app.bsky.feed.post", post("logged in with a browser")); err != nil {
		t.Fatalf("createRecord: %v", err)
	}
}

// promptCreate adds prompt=create to the pushed authorization requests
// sent to par: indigo's SendAuthRequest has no parameter for it. The DPoP
// proof covers the method and URL only, so the changed body keeps it valid.
type promptCreate struct{ par string }

func (pc promptCreate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.URL.String() != pc.par {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	r.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	form.Set("prompt", "create")
	body = []byte(form.Encode())
	r = r.Clone(r.Context())
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return http.DefaultTransport.RoundTrip(r)
}

// TestOAuthSignUpPageInChromium: an app asks for prompt=create; in a real
// (headless) browser the user meets the sign-up form, first picks a handle
// that is taken and is told so on the page, then makes the account, allows
// the app and lands on its callback. The app exchanges the code for the
// new account's tokens and writes with them; the account signs in with the
// email and password typed in the form.
func TestOAuthSignUpPageInChromium(t *testing.T) {
	b := newBrowser(t, chromium(t))
	t.Parallel()
	p := harness.Shared(t)
	taken := p.NewAccount(t)
	app, callback, loggedIn := browserApp(t, p)

	meta := p.OAuthServerMetadata(t)
	app.Client = &http.Client{Transport: promptCreate{par: meta.PushedAuthorizationRequestEndpoint}}
	info, err := app.SendAuthRequest(t.Context(), meta, app.Config.Scopes, "")
	if err != nil {
		t.Fatalf("PAR prompt=create: %v", err)
	}
	authorizeURL := meta.AuthorizationEndpoint + "?" + url.Values{"client_id": {app.Config.ClientID}, "request_uri": {info.RequestURI}}.Encode()

	_, domain, _ := strings.Cut(taken.Handle.String(), ".")
	handle := "su" + strings.ToLower(rand.Text()[:12]) + "." + domain
	email, password := "su-"+strings.ToLower(rand.Text()[:8])+"@example.com", "pw-"+rand.Text()

	b.step("open the sign-up page", chromedp.Navigate(authorizeURL), chromedp.WaitVisible(chromedp.CSS("#sign-up")))
	b.step("sign up with a taken handle",
		chromedp.SendKeys(chromedp.CSS("#handle"), taken.Handle.String()), chromedp.SendKeys(chromedp.CSS("#email"), email),
		chromedp.SendKeys(chromedp.CSS("#password"), password), chromedp.Click(chromedp.CSS("#sign-up")),
		chromedp.WaitVisible(chromedp.CSS("#error")))
	if msg, kept := b.text("#error"), b.value("#handle"); msg != "Handle already taken: "+taken.Handle.String() || kept != taken.Handle.String() || b.value("#email") != email {
		t.Fatalf("taken handle: page showed %q with handle %q, email %q", msg, kept, b.value("#email"))
	}
	b.step("sign up", chromedp.SetValue(chromedp.CSS("#handle"), handle), chromedp.SendKeys(chromedp.CSS("#password"), password),
		chromedp.Click(chromedp.CSS("#sign-up")), chromedp.WaitVisible(chromedp.CSS("#allow")))
	account, scopes := b.text("#account"), b.text("#scopes")
	// indigo's ProcessCallback checks a login begun without a DID against
	// the auth server it resolves for the DID's PDS, which it accepts only
	// on https: tell it the DID the new handle resolves to, which it then
	// checks the token's sub against.
	ident, err := p.Directory().LookupHandle(t.Context(), syntax.Handle(handle))
	if err != nil {
		t.Fatalf("the new handle: %v", err)
	}
	info.AccountDID = &ident.DID
	if err := app.Store.SaveAuthRequestInfo(t.Context(), *info); err != nil {
		t.Fatal(err)
	}
	b.step("allow", chromedp.Click(chromedp.CSS("#allow")), chromedp.WaitVisible(chromedp.CSS("#done")))
	done, location := b.text("#done"), b.location()
	if account != handle || !strings.Contains(scopes, "transition:generic") {
		t.Fatalf("consent page showed account %q, scopes %q; want %s", account, scopes, handle)
	}
	if !strings.HasPrefix(location, callback+"?") || !strings.Contains(location, "code=") {
		t.Fatalf("browser ended at %s showing %q", location, done)
	}
	sess := <-loggedIn

	// The account exists as the form made it, and is the one the token is for.
	made := p.Login(t, handle, password)
	if made.DID != sess.Data.AccountDID || made.Email != email || made.Handle.String() != handle || done != "logged in as "+made.DID.String() {
		t.Fatalf("signed up as %s (%s, %s), token for %s, page %q", made.DID, made.Handle, made.Email, sess.Data.AccountDID, done)
	}
	if _, err := createRecord(t, sess.APIClient(), made.DID, "app.bsky.feed.post", post("signed up with a browser")); err != nil {
		t.Fatalf("createRecord with the new account's token: %v", err)
	}
}
