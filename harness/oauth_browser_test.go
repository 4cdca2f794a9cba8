package harness_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"
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

// TestOAuthConsentPageInChromium: a user signs in and allows an app on the
// authorize page in a real (headless) browser, which follows the redirect
// to the app's callback; the app exchanges the code and calls the PDS.
func TestOAuthConsentPageInChromium(t *testing.T) {
	browser := chromium(t)
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t)

	// The app under test: its callback finishes the login and says who
	// logged in.
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
	authorizeURL := a.StartOAuth(t, app)

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
		chromedp.ExecPath(browser), chromedp.UserDataDir(profile),
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

	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("browser: text of %s: %v", sel, err)
		}
		return v
	}
	step := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	step("open the authorize page", chromedp.Navigate(authorizeURL), chromedp.WaitVisible(chromedp.CSS("#password")))
	hint, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("#identifier")))
	if err != nil {
		t.Fatal(err)
	}
	step("sign in", chromedp.SendKeys(chromedp.CSS("#password"), a.Password), chromedp.Click(chromedp.CSS("#sign-in")),
		chromedp.WaitVisible(chromedp.CSS("#allow")))
	account, scopes := text("#account"), text("#scopes")
	step("allow", chromedp.Click(chromedp.CSS("#allow")), chromedp.WaitVisible(chromedp.CSS("#done")))
	done := text("#done")
	location, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if hint != a.Handle.String() || account != a.Handle.String() || !strings.Contains(scopes, "transition:generic") {
		t.Fatalf("page showed hint %q, account %q, scopes %q", hint, account, scopes)
	}
	if !strings.HasPrefix(location, cb.URL+"/callback?") || done != "logged in as "+a.DID.String() {
		t.Fatalf("browser ended at %s showing %q", location, done)
	}
	sess := <-loggedIn
	if _, err := createRecord(t, sess.APIClient(), a.DID, "app.bsky.feed.post", post("logged in with a browser")); err != nil {
		t.Fatalf("createRecord: %v", err)
	}
}
