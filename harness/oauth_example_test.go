package harness_test

import (
	"fmt"
	"io"
	"strings"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"

	"github.com/fakepds/fakepds/harness"
)

// A ready OAuth session of a development client, through the real flow
// (PAR, consent, token); its APIClient signs every call with DPoP.
func ExampleAccount_OAuthSession() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)
	a := p.NewAccount(t)

	sess := a.OAuthSession(t, "atproto", "transition:generic")
	var out struct {
		DID string `json:"did"`
	}
	err := sess.APIClient().Get(t.Context(), "com.atproto.server.getSession", nil, &out)
	fmt.Println(out.DID == a.DID.String(), err, sess.Data.Scopes)
	// Output: true <nil> [atproto transition:generic]
}

// Your app's own login: start it as the app does, give (or refuse) the
// consent without a browser, and hand the redirect to the app's callback.
func ExampleAccount_AuthorizeOAuth() {
	t := harness.NewStandalone(io.Discard)
	defer t.Close()
	p := harness.New(t)
	a := p.NewAccount(t)

	cfg := oauth.NewLocalhostConfig("http://127.0.0.1:8080/callback", []string{"atproto"})
	app := oauth.NewClientApp(&cfg, oauth.NewMemStore())
	app.Dir = p.Directory()

	redirect := a.AuthorizeOAuth(t, a.StartOAuth(t, app))
	fmt.Println(redirect.Host+redirect.Path, strings.HasPrefix(redirect.Query().Get("code"), "cod-"))
	data, err := app.ProcessCallback(t.Context(), redirect.Query())
	fmt.Println(data.AccountDID == a.DID, err)

	denied := a.DenyOAuth(t, a.StartOAuth(t, app))
	fmt.Println(denied.Query().Get("error"))
	// Output:
	// 127.0.0.1:8080/callback true
	// true <nil>
	// access_denied
}
