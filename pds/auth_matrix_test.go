package pds_test

import (
	"net/http"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// matrixParams satisfy every registered query's required parameters
// (params are checked before auth); a parameter a method does not declare
// is ignored, as the reference ignores it.
var matrixParams = map[string]any{
	"did": "did:plc:matrixmatrixmatrixmatrix", "dids": "did:plc:matrixmatrixmatrixmatrix",
	"repo": "did:plc:matrixmatrixmatrixmatrix", "aud": "did:web:x.test", "handle": "matrix.test",
	"collection": "app.bsky.feed.post", "rkey": "self",
	"cid":  "bafkreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm",
	"cids": "bafkreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm",
}

// referenceAuth is who may call each method in the reference (its
// verifier in api/), written down so that a declaration that drifts from it
// fails TestAuthMatrix; "Full": full password sessions only.
var referenceAuth = map[string]string{
	"app.bsky.actor.getPreferences":                     "access",
	"app.bsky.actor.putPreferences":                     "access",
	"com.atproto.admin.deleteAccount":                   "admin",
	"com.atproto.admin.disableAccountInvites":           "moderator",
	"com.atproto.admin.disableInviteCodes":              "moderator",
	"com.atproto.admin.enableAccountInvites":            "moderator",
	"com.atproto.admin.getAccountInfo":                  "moderator",
	"com.atproto.admin.getAccountInfos":                 "moderator",
	"com.atproto.admin.getInviteCodes":                  "moderator",
	"com.atproto.admin.getSubjectStatus":                "moderator",
	"com.atproto.admin.sendEmail":                       "moderator",
	"com.atproto.admin.updateAccountEmail":              "admin",
	"com.atproto.admin.updateAccountHandle":             "admin",
	"com.atproto.admin.updateAccountPassword":           "admin",
	"com.atproto.admin.updateSubjectStatus":             "moderator",
	"com.atproto.identity.getRecommendedDidCredentials": "access",
	"com.atproto.identity.requestPlcOperationSignature": "accessFull",
	"com.atproto.identity.resolveHandle":                "none",
	"com.atproto.identity.signPlcOperation":             "accessFull",
	"com.atproto.identity.submitPlcOperation":           "access",
	"com.atproto.identity.updateHandle":                 "access",
	"com.atproto.repo.applyWrites":                      "access",
	"com.atproto.repo.createRecord":                     "access",
	"com.atproto.repo.deleteRecord":                     "access",
	"com.atproto.repo.describeRepo":                     "none",
	"com.atproto.repo.getRecord":                        "none",
	"com.atproto.repo.importRepo":                       "accessFull",
	"com.atproto.repo.listMissingBlobs":                 "access",
	"com.atproto.repo.listRecords":                      "none",
	"com.atproto.repo.putRecord":                        "access",
	"com.atproto.repo.uploadBlob":                       "uploader",
	"com.atproto.server.activateAccount":                "accessFull",
	"com.atproto.server.checkAccountStatus":             "access",
	"com.atproto.server.confirmEmail":                   "access",
	"com.atproto.server.createAccount":                  "migration",
	"com.atproto.server.createAppPassword":              "accessFull",
	"com.atproto.server.createInviteCode":               "admin",
	"com.atproto.server.createInviteCodes":              "admin",
	"com.atproto.server.createSession":                  "none",
	"com.atproto.server.deactivateAccount":              "accessFull",
	"com.atproto.server.deleteAccount":                  "none",
	"com.atproto.server.deleteSession":                  "refresh",
	"com.atproto.server.describeServer":                 "none",
	"com.atproto.server.getAccountInviteCodes":          "accessFull",
	"com.atproto.server.getServiceAuth":                 "access",
	"com.atproto.server.getSession":                     "access",
	"com.atproto.server.listAppPasswords":               "access",
	"com.atproto.server.refreshSession":                 "refresh",
	"com.atproto.server.requestAccountDelete":           "accessFull",
	"com.atproto.server.requestEmailConfirmation":       "access",
	"com.atproto.server.requestEmailUpdate":             "accessFull",
	"com.atproto.server.requestPasswordReset":           "none",
	"com.atproto.server.resetPassword":                  "none",
	"com.atproto.server.revokeAppPassword":              "access",
	"com.atproto.server.updateEmail":                    "accessFull",
	"com.atproto.sync.getBlob":                          "repoReader",
	"com.atproto.sync.getBlocks":                        "repoReader",
	"com.atproto.sync.getLatestCommit":                  "repoReader",
	"com.atproto.sync.getRecord":                        "repoReader",
	"com.atproto.sync.getRepo":                          "repoReader",
	"com.atproto.sync.getRepoStatus":                    "none",
	"com.atproto.sync.listBlobs":                        "repoReader",
	"com.atproto.sync.listRepos":                        "none",
	"com.atproto.sync.subscribeRepos":                   "none",
}

// Every registered method is held to the auth it declared at
// registration, with the reference's answers: a bearer method refuses a
// missing token (401 AuthMissing), a token of the wrong type or garbage
// (400 InvalidToken) and, where only a full password session may call it,
// an app password session; admin and moderator methods refuse anything
// but the admin's credentials (401 AuthenticationRequired); optional auth
// still refuses bad credentials; a method anyone may call does not look at
// them. A method registered with an auth this test does not know fails it.
func TestAuthMatrix(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "matrix.test", "matrix@example.com", "pw")
	ap, err := comatproto.ServerCreateAppPassword(ctx, bearer(s, a.AccessJwt), &comatproto.ServerCreateAppPassword_Input{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	appSess := login(t, s, "matrix.test", ap.Password)
	basic := func(pass string) *atclient.APIClient {
		c := atclient.NewAPIClient(s.URL())
		c.Headers = http.Header{}
		c.Headers.Set("Authorization", basicAuth(pass))
		return c
	}

	methods := pds.RegisteredAuth(s)
	if len(methods) < 50 {
		t.Fatalf("only %d methods registered", len(methods))
	}
	for _, m := range methods {
		if m.Kind == xrpc.Subscription {
			continue // a WebSocket upgrade; subscribeRepos takes no auth
		}
		t.Run(m.NSID, func(t *testing.T) {
			got := m.Auth
			if m.Full {
				got += "Full"
			}
			if want, ok := referenceAuth[m.NSID]; !ok {
				t.Fatalf("registered with auth %q: add the reference's auth for it to referenceAuth", got)
			} else if got != want {
				t.Errorf("registered with auth %q, the reference's is %q", got, want)
			}
			call := func(c *atclient.APIClient) error {
				if m.Kind == xrpc.Procedure {
					return c.Post(ctx, syntax.NSID(m.NSID), map[string]any{}, nil)
				}
				return c.Get(ctx, syntax.NSID(m.NSID), matrixParams, nil)
			}
			anon := atclient.NewAPIClient(s.URL())
			switch m.Auth {
			case "access", "uploader":
				apiErr(t, call(anon), 401, "AuthMissing")
				apiErr(t, call(bearer(s, a.RefreshJwt)), 400, "InvalidToken")
				if m.Auth == "access" {
					// uploadBlob decodes a bearer token for its lxm first,
					// and a token that is not a JWT is a 500 there, as in
					// the reference.
					apiErr(t, call(bearer(s, "not.a.jwt")), 400, "InvalidToken")
				}
				if m.Full {
					apiErr(t, call(bearer(s, appSess.AccessJwt)), 400, "InvalidToken")
				}
			case "refresh":
				apiErr(t, call(anon), 401, "AuthMissing")
				apiErr(t, call(bearer(s, a.AccessJwt)), 400, "InvalidToken")
			case "admin", "moderator":
				apiErr(t, call(anon), 401, "AuthenticationRequired")
				apiErr(t, call(basic("wrong")), 401, "AuthenticationRequired")
				if m.Auth == "admin" {
					apiErr(t, call(bearer(s, a.AccessJwt)), 401, "AuthenticationRequired")
				}
			case "repoReader":
				apiErr(t, call(bearer(s, "not.a.jwt")), 400, "InvalidToken")
				apiErr(t, call(basic("wrong")), 401, "AuthenticationRequired")
			case "migration":
				apiErr(t, call(bearer(s, "x")), 401, "BadJwt")
			case "none":
				err := call(bearer(s, "not.a.jwt"))
				if e, ok := err.(*atclient.APIError); ok && (e.Name == "InvalidToken" || e.StatusCode == 401) {
					t.Errorf("a method anyone may call checked the credentials: %v", err)
				}
			default:
				t.Fatalf("auth %q: not covered by this test", m.Auth)
			}
		})
	}
}
