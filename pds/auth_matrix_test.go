package pds_test

import (
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
)

// Every authenticated method refuses a missing token (401 AuthMissing), a
// refresh token where an access token belongs (400 InvalidToken), and,
// where the reference demands a full password session, an app password
// session (400 InvalidToken "Bad token scope"): the reference's auth
// matrix (docs/known-differences.md lists the exceptions).
func TestAuthMatrix(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "matrix.test", "matrix@example.com", "pw")
	ap, err := comatproto.ServerCreateAppPassword(ctx, bearer(s, a.AccessJwt), &comatproto.ServerCreateAppPassword_Input{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	appSess := login(t, s, "matrix.test", ap.Password)

	for _, m := range []struct {
		nsid string
		post bool
		full bool // only a full password session may call it
	}{
		{"com.atproto.server.getSession", false, false},
		{"com.atproto.server.createAppPassword", true, true},
		{"com.atproto.server.listAppPasswords", false, false},
		{"com.atproto.server.revokeAppPassword", true, false},
		{"com.atproto.server.getServiceAuth", false, false},
		{"com.atproto.server.checkAccountStatus", false, false},
		{"com.atproto.server.activateAccount", true, true},
		{"com.atproto.server.deactivateAccount", true, true},
		{"com.atproto.server.requestAccountDelete", true, true},
		{"com.atproto.server.requestEmailConfirmation", true, false},
		{"com.atproto.server.confirmEmail", true, false},
		{"com.atproto.server.requestEmailUpdate", true, true},
		{"com.atproto.server.updateEmail", true, true},
		{"com.atproto.server.getAccountInviteCodes", false, true},
		{"com.atproto.identity.updateHandle", true, false},
		{"com.atproto.identity.getRecommendedDidCredentials", false, false},
		{"com.atproto.identity.requestPlcOperationSignature", true, true},
		{"com.atproto.identity.signPlcOperation", true, true},
		{"com.atproto.identity.submitPlcOperation", true, false},
		{"com.atproto.repo.createRecord", true, false},
		{"com.atproto.repo.putRecord", true, false},
		{"com.atproto.repo.deleteRecord", true, false},
		{"com.atproto.repo.applyWrites", true, false},
		{"com.atproto.repo.importRepo", true, true},
		{"app.bsky.actor.getPreferences", false, false},
		{"app.bsky.actor.putPreferences", true, false},
	} {
		t.Run(m.nsid, func(t *testing.T) {
			call := func(c *atclient.APIClient) error {
				params := map[string]any{}
				if m.nsid == "com.atproto.server.getServiceAuth" {
					params["aud"] = "did:web:x.test" // params are checked before auth
				}
				if m.post {
					return c.Post(ctx, syntax.NSID(m.nsid), map[string]any{}, nil)
				}
				return c.Get(ctx, syntax.NSID(m.nsid), params, nil)
			}
			apiErr(t, call(atclient.NewAPIClient(s.URL())), 401, "AuthMissing")
			apiErr(t, call(bearer(s, a.RefreshJwt)), 400, "InvalidToken")
			apiErr(t, call(bearer(s, "not.a.jwt")), 400, "InvalidToken")
			if m.full {
				apiErr(t, call(bearer(s, appSess.AccessJwt)), 400, "InvalidToken")
			}
		})
	}
}
