package pds_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
)

// unknownDID is a well-formed did:plc no server knows.
const unknownDID = "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"

func adminClient(s *pds.Server) *atclient.APIClient {
	return atclient.NewAdminClient(s.URL(), s.AdminPassword())
}

// xrpcErr asserts err is the XRPC error status/name/message.
func xrpcErr(t *testing.T, err error, status int, name, msg string) {
	t.Helper()
	var ae *atclient.APIError
	if !errors.As(err, &ae) || ae.StatusCode != status || ae.Name != name || ae.Message != msg {
		t.Fatalf("err = %v, want %d %s %q", err, status, name, msg)
	}
}

// rawCall sends body (JSON, or nil for none) to nsid with the given
// Authorization header and returns the status and the decoded answer.
func rawCall(t *testing.T, s *pds.Server, method, nsid, query, authz string, body *string) (int, map[string]any) {
	t.Helper()
	u := s.URL() + "/xrpc/" + nsid
	if query != "" {
		u += "?" + query
	}
	var rd *strings.Reader
	if body != nil {
		rd = strings.NewReader(*body)
	}
	var req *http.Request
	var err error
	if rd != nil {
		req, err = http.NewRequestWithContext(t.Context(), method, u, rd)
		req.Header.Set("Content-Type", "application/json")
	} else {
		req, err = http.NewRequestWithContext(t.Context(), method, u, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func basicAuth(password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+password))
}

// serviceJWT is an unsigned service token: the moderator verifier refuses
// it before it would look at a signature.
func serviceJWT(header, payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(header)) + "." + enc([]byte(payload)) + ".c2ln"
}

func TestAdminAuth(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	a := createAccount(t, s, "authz.test", "authz@example.com", "pw")
	did := a.Did
	subject := &comatproto.AdminUpdateSubjectStatus_Input_Subject{AdminDefs_RepoRef: &comatproto.AdminDefs_RepoRef{Did: did}}
	for _, m := range []struct {
		name      string
		moderator bool // moderator verifier; otherwise admin Basic only
		call      func(context.Context, *atclient.APIClient) error
	}{
		{"getAccountInfo", true, func(ctx context.Context, c *atclient.APIClient) error {
			_, err := comatproto.AdminGetAccountInfo(ctx, c, did)
			return err
		}},
		{"getAccountInfos", true, func(ctx context.Context, c *atclient.APIClient) error {
			_, err := comatproto.AdminGetAccountInfos(ctx, c, []string{did})
			return err
		}},
		{"updateSubjectStatus", true, func(ctx context.Context, c *atclient.APIClient) error {
			_, err := comatproto.AdminUpdateSubjectStatus(ctx, c, &comatproto.AdminUpdateSubjectStatus_Input{Subject: subject})
			return err
		}},
		{"getSubjectStatus", true, func(ctx context.Context, c *atclient.APIClient) error {
			_, err := comatproto.AdminGetSubjectStatus(ctx, c, "", did, "")
			return err
		}},
		{"sendEmail", true, func(ctx context.Context, c *atclient.APIClient) error {
			_, err := comatproto.AdminSendEmail(ctx, c, &comatproto.AdminSendEmail_Input{RecipientDid: did, SenderDid: did, Content: "hi"})
			return err
		}},
		{"disableAccountInvites", true, func(ctx context.Context, c *atclient.APIClient) error {
			return comatproto.AdminDisableAccountInvites(ctx, c, &comatproto.AdminDisableAccountInvites_Input{Account: did})
		}},
		{"enableAccountInvites", true, func(ctx context.Context, c *atclient.APIClient) error {
			return comatproto.AdminEnableAccountInvites(ctx, c, &comatproto.AdminEnableAccountInvites_Input{Account: did})
		}},
		{"disableInviteCodes", true, func(ctx context.Context, c *atclient.APIClient) error {
			return comatproto.AdminDisableInviteCodes(ctx, c, &comatproto.AdminDisableInviteCodes_Input{Codes: []string{"x"}})
		}},
		{"getInviteCodes", true, func(ctx context.Context, c *atclient.APIClient) error {
			_, err := comatproto.AdminGetInviteCodes(ctx, c, "", 0, "")
			return err
		}},
		{"updateAccountHandle", false, func(ctx context.Context, c *atclient.APIClient) error {
			return comatproto.AdminUpdateAccountHandle(ctx, c, &comatproto.AdminUpdateAccountHandle_Input{Did: did, Handle: "authz.test"})
		}},
		{"updateAccountEmail", false, func(ctx context.Context, c *atclient.APIClient) error {
			return comatproto.AdminUpdateAccountEmail(ctx, c, &comatproto.AdminUpdateAccountEmail_Input{Account: did, Email: "authz@example.com"})
		}},
		{"updateAccountPassword", false, func(ctx context.Context, c *atclient.APIClient) error {
			return comatproto.AdminUpdateAccountPassword(ctx, c, &comatproto.AdminUpdateAccountPassword_Input{Did: did, Password: "pw"})
		}},
		// Last: it deletes the account.
		{"deleteAccount", false, func(ctx context.Context, c *atclient.APIClient) error {
			return comatproto.AdminDeleteAccount(ctx, c, &comatproto.AdminDeleteAccount_Input{Did: did})
		}},
	} {
		t.Run(m.name, func(t *testing.T) {
			ctx := t.Context()
			withHeader := func(h string) *atclient.APIClient {
				c := atclient.NewAPIClient(s.URL())
				c.Headers.Set("Authorization", h)
				return c
			}
			xrpcErr(t, m.call(ctx, atclient.NewAPIClient(s.URL())), 401, "AuthenticationRequired", "Authentication Required")
			xrpcErr(t, m.call(ctx, atclient.NewAdminClient(s.URL(), "wrong")), 401, "AuthenticationRequired", "Authentication Required")
			xrpcErr(t, m.call(ctx, withHeader("DPoP abc")), 401, "AuthenticationRequired", "Authentication Required")
			if m.moderator {
				// A Bearer token goes to the service-token check; the
				// header is parsed first.
				xrpcErr(t, m.call(ctx, bearer(s, a.AccessJwt)), 401, "BadJwtType", `Invalid jwt type "at+jwt"`)
				xrpcErr(t, m.call(ctx, withHeader("Bearer abc")), 401, "BadJwt", "poorly formatted jwt")
				xrpcErr(t, m.call(ctx, withHeader("Foo bar")), 400, "InvalidToken", "Unsupported authorization type: Foo")
			} else {
				xrpcErr(t, m.call(ctx, bearer(s, a.AccessJwt)), 401, "AuthenticationRequired", "Authentication Required")
				xrpcErr(t, m.call(ctx, withHeader("Foo bar")), 401, "AuthenticationRequired", "Authentication Required")
			}
			if err := m.call(ctx, adminClient(s)); err != nil {
				t.Fatalf("as admin: %v", err)
			}
		})
	}
}

// The moderator verifier's service-token checks, in the reference's order;
// fakepds trusts no moderation service, so a well-formed token is an
// untrusted issuer.
func TestAdminModServiceToken(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	const nsid = "com.atproto.admin.getInviteCodes"
	exp := time.Now().Add(time.Hour).Unix()
	payload := func(fields string) string {
		return `{"iss":"did:plc:mod","aud":"did:web:localhost","exp":` + jsonInt(exp) + fields + `}`
	}
	hdr := `{"alg":"ES256K","typ":"JWT"}`
	for _, tc := range []struct {
		name, token     string
		status          int
		errName, errMsg string
	}{
		{"untrusted", serviceJWT(hdr, payload(`,"lxm":"`+nsid+`"`)), 401, "UntrustedIss", "Untrusted issuer"},
		{"labeler untrusted", serviceJWT(hdr, strings.Replace(payload(`,"lxm":"`+nsid+`"`), "did:plc:mod", "did:plc:mod#atproto_labeler", 1)), 401, "UntrustedIss", "Untrusted issuer"},
		{"no lxm", serviceJWT(hdr, payload("")), 401, "BadJwtLexiconMethod", `missing jwt lexicon method ("lxm"). must match: ` + nsid},
		{"wrong lxm", serviceJWT(hdr, payload(`,"lxm":"a.b.c"`)), 401, "BadJwtLexiconMethod", `bad jwt lexicon method ("lxm"). must match: ` + nsid},
		{"expired", serviceJWT(hdr, `{"iss":"did:plc:mod","aud":"x","exp":1,"lxm":"x"}`), 401, "JwtExpired", "jwt expired"},
		{"bad iss", serviceJWT(hdr, strings.Replace(payload(`,"lxm":"`+nsid+`"`), "did:plc:mod", "nodid", 1)), 401, "BadJwtIss", "jwt iss is not a valid did"},
		{"no alg", serviceJWT(`{"typ":"JWT"}`, payload("")), 401, "BadJwt", "poorly formatted jwt"},
		{"refresh typ", serviceJWT(`{"alg":"HS256","typ":"refresh+jwt"}`, payload("")), 401, "BadJwtType", `Invalid jwt type "refresh+jwt"`},
		{"exp not a number", serviceJWT(hdr, `{"iss":"did:plc:mod","aud":"x","exp":"soon"}`), 401, "BadJwt", "poorly formatted jwt"},
		{"lxm not a string", serviceJWT(hdr, payload(`,"lxm":5`)), 401, "BadJwt", "poorly formatted jwt"},
		{"two parts", "a.b", 401, "BadJwt", "poorly formatted jwt"},
		{"not JSON", "xxx.yyy.zzz", 500, "InternalServerError", "Internal Server Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := rawCall(t, s, "GET", nsid, "", "Bearer "+tc.token, nil)
			if status != tc.status || body["error"] != tc.errName || body["message"] != tc.errMsg {
				t.Fatalf("= %d %v, want %d %s %q", status, body, tc.status, tc.errName, tc.errMsg)
			}
		})
	}
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func TestAdminGetAccountInfo(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	inviter := createAccount(t, s, "inviter.test", "Inviter@Example.com", "pw")
	code, err := comatproto.ServerCreateInviteCode(ctx, admin, &comatproto.ServerCreateInviteCode_Input{UseCount: 2, ForAccount: &inviter.Did})
	if err != nil {
		t.Fatal(err)
	}
	email, pw := "invitee@example.com", "pw"
	invitee, err := comatproto.ServerCreateAccount(ctx, atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateAccount_Input{
		Handle: "invitee.test", Email: &email, Password: &pw, InviteCode: &code.Code,
	})
	if err != nil {
		t.Fatal(err)
	}

	v, err := comatproto.AdminGetAccountInfo(ctx, admin, inviter.Did)
	if err != nil {
		t.Fatal(err)
	}
	if v.Did != inviter.Did || v.Handle != "inviter.test" || v.Email == nil || *v.Email != "inviter@example.com" ||
		v.InvitesDisabled == nil || *v.InvitesDisabled || v.InvitedBy != nil || v.DeactivatedAt != nil || v.EmailConfirmedAt != nil {
		t.Fatalf("inviter view = %+v", v)
	}
	if _, err := time.Parse(time.RFC3339, v.IndexedAt); err != nil {
		t.Errorf("indexedAt %q: %v", v.IndexedAt, err)
	}
	if len(v.Invites) != 1 || v.Invites[0].Code != code.Code || len(v.Invites[0].Uses) != 1 || v.Invites[0].Uses[0].UsedBy != invitee.Did {
		t.Fatalf("inviter invites = %+v", v.Invites)
	}
	v, err = comatproto.AdminGetAccountInfo(ctx, admin, invitee.Did)
	if err != nil {
		t.Fatal(err)
	}
	if v.InvitedBy == nil || v.InvitedBy.Code != code.Code || v.InvitedBy.ForAccount != inviter.Did || v.Invites == nil || len(v.Invites) != 0 {
		t.Fatalf("invitee view = %+v", v)
	}
	// invites is an array even when empty, invitesDisabled a boolean.
	status, raw := rawCall(t, s, "GET", "com.atproto.admin.getAccountInfo", "did="+invitee.Did, basicAuth(s.AdminPassword()), nil)
	if status != 200 || raw["invites"] == nil || raw["invitesDisabled"] != false {
		t.Fatalf("raw view = %d %v", status, raw)
	}

	// Deactivated (and taken-down) accounts are still shown.
	if err := comatproto.ServerDeactivateAccount(ctx, bearer(s, invitee.AccessJwt), &comatproto.ServerDeactivateAccount_Input{}); err != nil {
		t.Fatal(err)
	}
	if v, err = comatproto.AdminGetAccountInfo(ctx, admin, invitee.Did); err != nil || v.DeactivatedAt == nil {
		t.Fatalf("deactivated view = %+v, %v", v, err)
	}

	_, err = comatproto.AdminGetAccountInfo(ctx, admin, unknownDID)
	xrpcErr(t, err, 400, "NotFound", "Account not found")
	_, err = comatproto.AdminGetAccountInfo(ctx, admin, "nope")
	xrpcErr(t, err, 400, "InvalidRequest", `Invalid com.atproto.admin.getAccountInfo params: Invalid DID (got "nope")`)
	_, err = comatproto.AdminGetAccountInfo(ctx, admin, "")
	xrpcErr(t, err, 400, "InvalidRequest", `Invalid com.atproto.admin.getAccountInfo params: Missing required key "did"`)
	// Bad parameters are refused before auth.
	_, err = comatproto.AdminGetAccountInfo(ctx, atclient.NewAPIClient(s.URL()), "nope")
	xrpcErr(t, err, 400, "InvalidRequest", `Invalid com.atproto.admin.getAccountInfo params: Invalid DID (got "nope")`)

	// getAccountInfos: known accounts only, each once, in DID order.
	out, err := comatproto.AdminGetAccountInfos(ctx, admin, []string{invitee.Did, unknownDID, inviter.Did, invitee.Did})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{inviter.Did, invitee.Did}
	if want[0] > want[1] {
		want[0], want[1] = want[1], want[0]
	}
	if len(out.Infos) != 2 || out.Infos[0].Did != want[0] || out.Infos[1].Did != want[1] {
		t.Fatalf("infos = %+v, want %v", out.Infos, want)
	}
	_, err = comatproto.AdminGetAccountInfos(ctx, admin, nil)
	xrpcErr(t, err, 400, "InvalidRequest", `Invalid com.atproto.admin.getAccountInfos params: Missing required key "dids"`)
	_, err = comatproto.AdminGetAccountInfos(ctx, admin, []string{inviter.Did, "bad"})
	xrpcErr(t, err, 400, "InvalidRequest", `Invalid com.atproto.admin.getAccountInfos params: Invalid DID (got "bad")`)
}

func repoRef(did string) *comatproto.AdminUpdateSubjectStatus_Input_Subject {
	return &comatproto.AdminUpdateSubjectStatus_Input_Subject{AdminDefs_RepoRef: &comatproto.AdminDefs_RepoRef{Did: did}}
}

// A takedown locks the account out (login and refresh), is sequenced, and
// can be reversed.
func TestAdminTakedown(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	a := createAccount(t, s, "villain.test", "villain@example.com", "pw")
	events := firehose(t, s, "?cursor=4")
	sess := login(t, s, "villain.test", "pw")

	ref := "mod-ticket-1"
	out, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, &comatproto.AdminUpdateSubjectStatus_Input{
		Subject: repoRef(a.Did), Takedown: &comatproto.AdminDefs_StatusAttr{Applied: true, Ref: &ref},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Subject.AdminDefs_RepoRef == nil || out.Subject.AdminDefs_RepoRef.Did != a.Did || out.Takedown == nil || !out.Takedown.Applied || *out.Takedown.Ref != ref {
		t.Fatalf("output = %+v", out)
	}
	expectEvents(t, events, "account:5:"+a.Did+":false:takendown")

	_, err = comatproto.ServerCreateSession(ctx, atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateSession_Input{Identifier: "villain.test", Password: "pw"})
	xrpcErr(t, err, 401, "AccountTakedown", "Account has been taken down")
	_, err = refreshErr(s, sess.RefreshJwt)
	xrpcErr(t, err, 401, "AccountTakedown", "Account has been taken down")
	st, err := comatproto.AdminGetSubjectStatus(ctx, admin, "", a.Did, "")
	if err != nil || st.Takedown == nil || !st.Takedown.Applied || st.Takedown.Ref == nil || *st.Takedown.Ref != ref ||
		st.Deactivated == nil || st.Deactivated.Applied || st.Subject.AdminDefs_RepoRef == nil || st.Subject.AdminDefs_RepoRef.Did != a.Did {
		t.Fatalf("subject status = %+v, %v", st, err)
	}

	// Reversed: login works again; the refresh tokens the takedown
	// revoked stay revoked.
	if _, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, &comatproto.AdminUpdateSubjectStatus_Input{
		Subject: repoRef(a.Did), Takedown: &comatproto.AdminDefs_StatusAttr{Applied: false},
	}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events, "account:6:"+a.Did+":true:active")
	login(t, s, "villain.test", "pw")
	_, err = refreshErr(s, sess.RefreshJwt)
	xrpcErr(t, err, 400, "ExpiredToken", "Token has been revoked")
	if st, err = comatproto.AdminGetSubjectStatus(ctx, admin, "", a.Did, ""); err != nil || st.Takedown.Applied || st.Takedown.Ref != nil {
		t.Fatalf("after reversal = %+v, %v", st, err)
	}

	// Applied without a ref: the ref is the time.
	if _, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, &comatproto.AdminUpdateSubjectStatus_Input{
		Subject: repoRef(a.Did), Takedown: &comatproto.AdminDefs_StatusAttr{Applied: true},
	}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events, "account:7:"+a.Did+":false:takendown")
	st, err = comatproto.AdminGetSubjectStatus(ctx, admin, "", a.Did, "")
	if err != nil || st.Takedown.Ref == nil {
		t.Fatalf("subject status = %+v, %v", st, err)
	}
	if _, err := time.Parse(time.RFC3339, *st.Takedown.Ref); err != nil {
		t.Errorf("default ref %q is not a datetime", *st.Takedown.Ref)
	}

	// Neither field: the current status is sequenced again. An unknown
	// DID is sequenced as deleted.
	if _, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, &comatproto.AdminUpdateSubjectStatus_Input{Subject: repoRef(a.Did)}); err != nil {
		t.Fatal(err)
	}
	if _, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, &comatproto.AdminUpdateSubjectStatus_Input{
		Subject: repoRef(unknownDID), Takedown: &comatproto.AdminDefs_StatusAttr{Applied: true},
	}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events,
		"account:8:"+a.Did+":false:takendown",
		"account:9:"+unknownDID+":false:deleted",
	)
}

func TestAdminDeactivate(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	a := createAccount(t, s, "dozy.test", "dozy@example.com", "pw")
	events := firehose(t, s, "?cursor=4")
	update := func(in *comatproto.AdminUpdateSubjectStatus_Input) error {
		_, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, in)
		return err
	}
	if err := update(&comatproto.AdminUpdateSubjectStatus_Input{Subject: repoRef(a.Did), Deactivated: &comatproto.AdminDefs_StatusAttr{Applied: true}}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events, "account:5:"+a.Did+":false:deactivated")
	st, err := comatproto.AdminGetSubjectStatus(ctx, admin, "", a.Did, "")
	if err != nil || !st.Deactivated.Applied || st.Takedown.Applied {
		t.Fatalf("status = %+v, %v", st, err)
	}
	// Reactivation: #account, #identity and #sync, as activateAccount.
	if err := update(&comatproto.AdminUpdateSubjectStatus_Input{Subject: repoRef(a.Did), Deactivated: &comatproto.AdminDefs_StatusAttr{Applied: false}}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events,
		"account:6:"+a.Did+":true:active",
		"identity:7:"+a.Did+":dozy.test",
		"sync:8:"+a.Did,
	)

	err = update(&comatproto.AdminUpdateSubjectStatus_Input{Subject: repoRef(a.Did),
		Takedown: &comatproto.AdminDefs_StatusAttr{Applied: true}, Deactivated: &comatproto.AdminDefs_StatusAttr{Applied: false}})
	xrpcErr(t, err, 400, "InvalidRequest", "Cannot activate and takedown an account at the same time")
	err = update(&comatproto.AdminUpdateSubjectStatus_Input{Subject: repoRef(unknownDID), Deactivated: &comatproto.AdminDefs_StatusAttr{Applied: true}})
	xrpcErr(t, err, 400, "InvalidRequest", "Account not found")
	err = update(&comatproto.AdminUpdateSubjectStatus_Input{Subject: repoRef(unknownDID), Deactivated: &comatproto.AdminDefs_StatusAttr{Applied: false}})
	xrpcErr(t, err, 400, "InvalidRequest", "DID not registered: "+unknownDID)

	// A taken-down account is deactivated as takendown, and cannot be
	// reactivated.
	if err := update(&comatproto.AdminUpdateSubjectStatus_Input{Subject: repoRef(a.Did),
		Takedown: &comatproto.AdminDefs_StatusAttr{Applied: true}, Deactivated: &comatproto.AdminDefs_StatusAttr{Applied: true}}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events,
		"account:9:"+a.Did+":false:takendown",
		"account:10:"+a.Did+":false:takendown",
	)
	err = update(&comatproto.AdminUpdateSubjectStatus_Input{Subject: repoRef(a.Did), Deactivated: &comatproto.AdminDefs_StatusAttr{Applied: false}})
	xrpcErr(t, err, 400, "AccountNotFound", "user not found")
}

func TestAdminUpdateSubjectStatusInput(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	a := createAccount(t, s, "inputs.test", "inputs@example.com", "pw")
	const cidRaw = "bafkreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
	repo := `{"$type":"com.atproto.admin.defs#repoRef","did":"` + a.Did + `"}`
	for _, tc := range []struct {
		name, body string
		status     int
		msg        string // the error message, or the echoed output
	}{
		{"no subject", `{}`, 400, `Missing required key "subject" at $`},
		{"not an object", `[]`, 400, `Expected object value type (got []) at $`},
		{"untyped", `{"subject":{"did":"x"}}`, 400, `Expected an object which includes the "$type" property value type (got {"did": ...}) at $.subject`},
		{"subject string", `{"subject":"x"}`, 400, `Expected an object which includes the "$type" property value type (got "x") at $.subject`},
		{"type not string", `{"subject":{"$type":1}}`, 400, `Expected string value type (got 1) at $.subject.$type`},
		{"repoRef no did", `{"subject":{"$type":"com.atproto.admin.defs#repoRef"}}`, 400, `Missing required key "did" at $.subject`},
		{"repoRef bad did", `{"subject":{"$type":"com.atproto.admin.defs#repoRef","did":"bad"}}`, 400, `Invalid DID (got "bad") at $.subject.did`},
		{"strongRef bad uri", `{"subject":{"$type":"com.atproto.repo.strongRef","uri":"bad","cid":"` + cidRaw + `"}}`, 400, `Invalid at-uri (got "bad") at $.subject.uri`},
		{"strongRef bad cid", `{"subject":{"$type":"com.atproto.repo.strongRef","uri":"at://` + a.Did + `/a.b.c/r","cid":"bad"}}`, 400, `Invalid CID string (got "bad") at $.subject.cid`},
		{"blobRef no did", `{"subject":{"$type":"com.atproto.admin.defs#repoBlobRef","cid":"bad"}}`, 400, `Missing required key "did" at $.subject`},
		{"blobRef bad recordUri", `{"subject":{"$type":"com.atproto.admin.defs#repoBlobRef","did":"` + a.Did + `","cid":"` + cidRaw + `","recordUri":5}}`, 400, `Expected string value type (got 5) at $.subject.recordUri`},
		{"takedown empty", `{"subject":` + repo + `,"takedown":{}}`, 400, `Missing required key "applied" at $.takedown`},
		{"takedown null", `{"subject":` + repo + `,"takedown":null}`, 400, `Expected object value type (got null) at $.takedown`},
		{"applied not bool", `{"subject":` + repo + `,"takedown":{"applied":"yes"}}`, 400, `Expected boolean value type (got "yes") at $.takedown.applied`},
		{"schema order", `{"subject":` + repo + `,"deactivated":{"applied":1},"takedown":{"applied":2}}`, 400, `Expected boolean value type (got 2) at $.takedown.applied`},
		{"ref not string", `{"subject":` + repo + `,"takedown":{"applied":true,"ref":5}}`, 400, `Expected string value type (got 5) at $.takedown.ref`},
		{"unknown type with takedown", `{"subject":{"$type":"x.y#z"},"takedown":{"applied":true}}`, 400, `Invalid subject (x.y#z)`},
		// Unknown types and fields pass through, echoed.
		{"unknown type", `{"subject":{"$type":"x.y#z","a":[1]}}`, 200, `{"subject":{"$type":"x.y#z","a":[1]}}`},
		{"echo", `{"subject":` + repo + `,"takedown":{"applied":false,"ref":"r","extra":1}}`, 200, `{"subject":` + repo + `,"takedown":{"applied":false,"ref":"r","extra":1}}`},
		// A record or blob of an existing repo: done even if absent.
		{"record", `{"subject":{"$type":"com.atproto.repo.strongRef","uri":"at://` + a.Did + `/a.b.c/r","cid":"` + cidRaw + `"},"takedown":{"applied":true}}`, 200,
			`{"subject":{"$type":"com.atproto.repo.strongRef","uri":"at://` + a.Did + `/a.b.c/r","cid":"` + cidRaw + `"},"takedown":{"applied":true}}`},
		{"blob", `{"subject":{"$type":"com.atproto.admin.defs#repoBlobRef","did":"` + a.Did + `","cid":"` + cidRaw + `"},"takedown":{"applied":true}}`, 200,
			`{"subject":{"$type":"com.atproto.admin.defs#repoBlobRef","did":"` + a.Did + `","cid":"` + cidRaw + `"},"takedown":{"applied":true}}`},
		// A repo that does not exist: the reference fails (500).
		{"record no repo", `{"subject":{"$type":"com.atproto.repo.strongRef","uri":"at://` + unknownDID + `/a.b.c/r","cid":"` + cidRaw + `"},"takedown":{"applied":true}}`, 500, "Internal Server Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := s.URL() + "/xrpc/com.atproto.admin.updateSubjectStatus"
			req, _ := http.NewRequestWithContext(t.Context(), "POST", u, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.SetBasicAuth("admin", s.AdminPassword())
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got json.RawMessage
			_ = json.NewDecoder(resp.Body).Decode(&got)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, got, tc.status)
			}
			if tc.status == 200 {
				if string(got) != tc.msg {
					t.Fatalf("output %s, want %s", got, tc.msg)
				}
				return
			}
			var e struct{ Message string }
			_ = json.Unmarshal(got, &e)
			if e.Message != tc.msg {
				t.Fatalf("message %q, want %q", e.Message, tc.msg)
			}
		})
	}
}

func TestAdminGetSubjectStatus(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	a := createAccount(t, s, "subject.test", "subject@example.com", "pw")
	const blob = "bafkreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
	for _, tc := range []struct {
		name, blob, did, uri string
		status               int
		errName, msg         string
	}{
		{"none", "", "", "", 400, "InvalidRequest", "No provided subject"},
		{"blob without did", blob, "", "", 400, "InvalidRequest", "Must provide a did to request blob state"},
		{"unknown did", "", unknownDID, "", 400, "NotFound", "Subject not found"},
		{"absent blob", blob, a.Did, "", 400, "NotFound", "Subject not found"},
		{"blob of no repo", blob, unknownDID, "", 400, "NotFound", "Repo not found"},
		{"absent record", "", "", "at://" + a.Did + "/app.bsky.feed.post/abc", 400, "NotFound", "Subject not found"},
		{"record of no repo", "", "", "at://" + unknownDID + "/app.bsky.feed.post/abc", 400, "NotFound", "Repo not found"},
		{"record of a handle", "", "", "at://subject.test/app.bsky.feed.post/abc", 500, "InternalServerError", "Internal Server Error"},
		{"bad did", "", "bad", "", 400, "InvalidRequest", `Invalid com.atproto.admin.getSubjectStatus params: Invalid DID (got "bad")`},
		{"bad uri", "", "", "bad", 400, "InvalidRequest", `Invalid com.atproto.admin.getSubjectStatus params: Invalid at-uri (got "bad")`},
		{"bad blob", "bad", a.Did, "", 400, "InvalidRequest", `Invalid com.atproto.admin.getSubjectStatus params: Invalid CID string (got "bad")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := comatproto.AdminGetSubjectStatus(ctx, admin, tc.blob, tc.did, tc.uri)
			xrpcErr(t, err, tc.status, tc.errName, tc.msg)
		})
	}
	st, err := comatproto.AdminGetSubjectStatus(ctx, admin, "", a.Did, "")
	if err != nil || st.Subject.AdminDefs_RepoRef == nil || st.Takedown == nil || st.Takedown.Applied || st.Deactivated == nil || st.Deactivated.Applied {
		t.Fatalf("status = %+v, %v", st, err)
	}
}

func TestAdminUpdateAccountHandle(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	a := createAccount(t, s, "before.test", "before@example.com", "pw")
	createAccount(t, s, "taken.test", "taken@example.com", "pw")
	events := firehose(t, s, "?cursor=8")
	if err := comatproto.AdminUpdateAccountHandle(ctx, admin, &comatproto.AdminUpdateAccountHandle_Input{Did: a.Did, Handle: "After.test"}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events, "identity:9:"+a.Did+":after.test")
	v, err := comatproto.AdminGetAccountInfo(ctx, admin, a.Did)
	if err != nil || v.Handle != "after.test" {
		t.Fatalf("view = %+v, %v", v, err)
	}
	// The PLC document follows.
	ident, err := (&identity.BaseDirectory{PLCURL: s.PLCURL()}).LookupDID(ctx, syntax.DID(a.Did))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := ident.DeclaredHandle(); err != nil || h != "after.test" {
		t.Fatalf("declared handle %q, %v", h, err)
	}

	for _, tc := range []struct {
		name, did, handle string
		errName, msg      string
	}{
		{"taken", a.Did, "taken.test", "HandleNotAvailable", "Handle already taken: taken.test"},
		{"unknown", unknownDID, "nobody.test", "InvalidRequest", "Account not found"},
		{"syntax", a.Did, "bad_h", "InvalidRequest", `Invalid handle (got "bad_h") at $.handle`},
		{"bad did", "bad", "x.test", "InvalidRequest", `Invalid DID (got "bad") at $.did`},
		{"short", a.Did, "ab.test", "InvalidHandle", "Handle too short"},
		{"external", a.Did, "alice.com", "InvalidRequest", "External handle did not resolve to DID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := comatproto.AdminUpdateAccountHandle(ctx, admin, &comatproto.AdminUpdateAccountHandle_Input{Did: tc.did, Handle: tc.handle})
			xrpcErr(t, err, 400, tc.errName, tc.msg)
		})
	}
	body := `{"did":"` + a.Did + `"}`
	if status, out := rawCall(t, s, "POST", "com.atproto.admin.updateAccountHandle", "", basicAuth(s.AdminPassword()), &body); status != 400 || out["message"] != `Missing required key "handle" at $` {
		t.Fatalf("no handle: %d %v", status, out)
	}
	// A taken-down account is not found.
	if _, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, &comatproto.AdminUpdateSubjectStatus_Input{
		Subject: repoRef(a.Did), Takedown: &comatproto.AdminDefs_StatusAttr{Applied: true},
	}); err != nil {
		t.Fatal(err)
	}
	err = comatproto.AdminUpdateAccountHandle(ctx, admin, &comatproto.AdminUpdateAccountHandle_Input{Did: a.Did, Handle: "again.test"})
	xrpcErr(t, err, 400, "InvalidRequest", "Account not found")
}

func TestAdminUpdateAccountEmail(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	a := createAccount(t, s, "maileracct.test", "mailer@example.com", "pw")
	createAccount(t, s, "otheracct.test", "other@example.com", "pw")
	// Confirm the address first: the admin change clears it.
	cl := bearer(s, a.AccessJwt)
	if err := comatproto.ServerRequestEmailConfirmation(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if err := comatproto.ServerConfirmEmail(ctx, cl, &comatproto.ServerConfirmEmail_Input{Email: "mailer@example.com", Token: lastToken(t, s, a.Did, "confirm_email")}); err != nil {
		t.Fatal(err)
	}
	if _, err := comatproto.ServerRequestEmailUpdate(ctx, cl); err != nil {
		t.Fatal(err)
	}
	pending := lastToken(t, s, "mailer@example.com", "update_email")

	if err := comatproto.AdminUpdateAccountEmail(ctx, admin, &comatproto.AdminUpdateAccountEmail_Input{Account: a.Did, Email: "New@Example.COM"}); err != nil {
		t.Fatal(err)
	}
	v, err := comatproto.AdminGetAccountInfo(ctx, admin, a.Did)
	if err != nil || v.Email == nil || *v.Email != "new@example.com" || v.EmailConfirmedAt != nil {
		t.Fatalf("view = %+v, %v", v, err)
	}
	// The account's email tokens are gone.
	err = comatproto.ServerUpdateEmail(ctx, cl, &comatproto.ServerUpdateEmail_Input{Email: "x@example.com", Token: &pending})
	xrpcErr(t, err, 400, "InvalidToken", "Token is invalid")

	// By exact handle, with no validation of the address.
	if err := comatproto.AdminUpdateAccountEmail(ctx, admin, &comatproto.AdminUpdateAccountEmail_Input{Account: "maileracct.test", Email: "not-an-email"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := comatproto.AdminGetAccountInfo(ctx, admin, a.Did); *v.Email != "not-an-email" {
		t.Fatalf("email = %q", *v.Email)
	}
	for _, tc := range []struct {
		name, account, email string
		status               int
		errName, msg         string
	}{
		{"handle case", "Mailer.test", "x@example.com", 400, "InvalidRequest", "Account does not exist: Mailer.test"},
		{"unknown", unknownDID, "x@example.com", 400, "InvalidRequest", "Account does not exist: " + unknownDID},
		{"bad identifier", "bad_x", "x@example.com", 400, "InvalidRequest", `Invalid AT identifier (got "bad_x") at $.account`},
		{"taken", a.Did, "OTHER@example.com", 500, "InternalServerError", "Internal Server Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := comatproto.AdminUpdateAccountEmail(ctx, admin, &comatproto.AdminUpdateAccountEmail_Input{Account: tc.account, Email: tc.email})
			xrpcErr(t, err, tc.status, tc.errName, tc.msg)
		})
	}
}

func TestAdminUpdateAccountPassword(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	a := createAccount(t, s, "forgetful.test", "forgetful@example.com", "old")
	if err := comatproto.AdminUpdateAccountPassword(ctx, admin, &comatproto.AdminUpdateAccountPassword_Input{Did: a.Did, Password: "new"}); err != nil {
		t.Fatal(err)
	}
	login(t, s, "forgetful.test", "new")
	_, err := comatproto.ServerCreateSession(ctx, atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateSession_Input{Identifier: "forgetful.test", Password: "old"})
	xrpcErr(t, err, 401, "AuthenticationRequired", "Invalid identifier or password")
	_, err = refreshErr(s, a.RefreshJwt)
	xrpcErr(t, err, 400, "ExpiredToken", "Token has been revoked")

	// The limit counts UTF-16 units, as JavaScript does: 256 two-byte
	// characters pass.
	long := strings.Repeat("é", 256)
	if err := comatproto.AdminUpdateAccountPassword(ctx, admin, &comatproto.AdminUpdateAccountPassword_Input{Did: a.Did, Password: long}); err != nil {
		t.Fatal(err)
	}
	login(t, s, "forgetful.test", long)
	err = comatproto.AdminUpdateAccountPassword(ctx, admin, &comatproto.AdminUpdateAccountPassword_Input{Did: a.Did, Password: long + "x"})
	xrpcErr(t, err, 400, "InvalidRequest", "Invalid password length.")
	// An unknown DID succeeds silently.
	if err := comatproto.AdminUpdateAccountPassword(ctx, admin, &comatproto.AdminUpdateAccountPassword_Input{Did: unknownDID, Password: "x"}); err != nil {
		t.Fatal(err)
	}
	body := `{"did":"` + a.Did + `","password":1}`
	if status, out := rawCall(t, s, "POST", "com.atproto.admin.updateAccountPassword", "", basicAuth(s.AdminPassword()), &body); status != 400 || out["message"] != "Expected string value type (got 1) at $.password" {
		t.Fatalf("password 1: %d %v", status, out)
	}
	// An empty body (Go sends Content-Length: 0) with no content type.
	if status, out := rawCall(t, s, "POST", "com.atproto.admin.updateAccountPassword", "", basicAuth(s.AdminPassword()), nil); status != 400 || out["message"] != "Request encoding (Content-Type) required but not provided" {
		t.Fatalf("no body: %d %v", status, out)
	}
	empty := ""
	if status, out := rawCall(t, s, "POST", "com.atproto.admin.updateAccountPassword", "", basicAuth(s.AdminPassword()), &empty); status != 400 || out["message"] != `Missing required key "did" at $` {
		t.Fatalf("empty body: %d %v", status, out)
	}
}

// Deletion sequences #account deleted and forgets the account's earlier
// events; the PLC identity is left alone.
func TestAdminDeleteAccount(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	gone := createAccount(t, s, "gone.test", "gone@example.com", "pw")
	kept := createAccount(t, s, "kept.test", "kept@example.com", "pw")
	if err := comatproto.AdminDeleteAccount(ctx, admin, &comatproto.AdminDeleteAccount_Input{Did: gone.Did}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, firehose(t, s, "?cursor=0"),
		"identity:5:"+kept.Did+":kept.test",
		"account:6:"+kept.Did+":true:active",
		"commit:7:"+kept.Did,
		"sync:8:"+kept.Did,
		"account:9:"+gone.Did+":false:deleted",
	)
	_, err := comatproto.AdminGetAccountInfo(ctx, admin, gone.Did)
	xrpcErr(t, err, 400, "NotFound", "Account not found")
	_, err = comatproto.ServerCreateSession(ctx, atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateSession_Input{Identifier: "gone.test", Password: "pw"})
	xrpcErr(t, err, 401, "AuthenticationRequired", "Invalid identifier or password")
	if _, err := (&identity.BaseDirectory{PLCURL: s.PLCURL()}).LookupDID(ctx, syntax.DID(gone.Did)); err != nil {
		t.Errorf("PLC identity after deletion: %v", err)
	}

	// No existence check: an unknown DID is deleted all the same.
	events := firehose(t, s, "?cursor=9")
	if err := comatproto.AdminDeleteAccount(ctx, admin, &comatproto.AdminDeleteAccount_Input{Did: unknownDID}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events, "account:10:"+unknownDID+":false:deleted")
	err = comatproto.AdminDeleteAccount(ctx, admin, &comatproto.AdminDeleteAccount_Input{Did: "bad"})
	xrpcErr(t, err, 400, "InvalidRequest", `Invalid DID (got "bad") at $.did`)
}

func TestAdminSendEmail(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	a := createAccount(t, s, "readeracct.test", "Reader@example.com", "pw")
	send := func(in *comatproto.AdminSendEmail_Input) error {
		out, err := comatproto.AdminSendEmail(ctx, admin, in)
		if err == nil && !out.Sent {
			t.Fatal("sent = false")
		}
		return err
	}
	if err := send(&comatproto.AdminSendEmail_Input{RecipientDid: a.Did, SenderDid: "did:plc:mod", Content: "Behave."}); err != nil {
		t.Fatal(err)
	}
	m, ok := s.Outbox().Last(a.Did, "admin")
	if !ok || m.To != "reader@example.com" || m.Subject != "Message via your PDS" || m.Body != "Behave." {
		t.Fatalf("mail = %+v", m)
	}
	subject := "Warning"
	if err := send(&comatproto.AdminSendEmail_Input{RecipientDid: a.Did, SenderDid: "did:plc:mod", Content: "Really.", Subject: &subject}); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Outbox().Last(a.Did, "admin"); m.Subject != "Warning" || m.Body != "Really." {
		t.Fatalf("mail = %+v", m)
	}
	err := send(&comatproto.AdminSendEmail_Input{RecipientDid: unknownDID, SenderDid: "did:plc:mod", Content: "x"})
	xrpcErr(t, err, 400, "InvalidRequest", "Recipient not found")
	err = send(&comatproto.AdminSendEmail_Input{RecipientDid: a.Did, SenderDid: "bad", Content: "x"})
	xrpcErr(t, err, 400, "InvalidRequest", `Invalid DID (got "bad") at $.senderDid`)
	body := `{"recipientDid":"` + a.Did + `","content":"x"}`
	if status, out := rawCall(t, s, "POST", "com.atproto.admin.sendEmail", "", basicAuth(s.AdminPassword()), &body); status != 400 || out["message"] != `Missing required key "senderDid" at $` {
		t.Fatalf("no senderDid: %d %v", status, out)
	}
}

func TestAdminInviteCodes(t *testing.T) {
	t.Parallel()
	s := start(t, pds.Config{})
	ctx := t.Context()
	admin := adminClient(s)
	a := createAccount(t, s, "hostacct.test", "host@example.com", "pw")
	var codes []string
	for _, n := range []int64{1, 2, 3} {
		out, err := comatproto.ServerCreateInviteCode(ctx, admin, &comatproto.ServerCreateInviteCode_Input{UseCount: n, ForAccount: &a.Did})
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, out.Code)
	}
	adminCode, err := comatproto.ServerCreateInviteCode(ctx, admin, &comatproto.ServerCreateInviteCode_Input{UseCount: 5})
	if err != nil {
		t.Fatal(err)
	}
	email, pw := "guest@example.com", "pw"
	if _, err := comatproto.ServerCreateAccount(ctx, atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateAccount_Input{
		Handle: "guestacct.test", Email: &email, Password: &pw, InviteCode: &codes[2],
	}); err != nil {
		t.Fatal(err)
	}

	// Account invites flag.
	if err := comatproto.AdminDisableAccountInvites(ctx, admin, &comatproto.AdminDisableAccountInvites_Input{Account: a.Did}); err != nil {
		t.Fatal(err)
	}
	if v, _ := comatproto.AdminGetAccountInfo(ctx, admin, a.Did); !*v.InvitesDisabled {
		t.Fatal("invites not disabled")
	}
	if err := comatproto.AdminEnableAccountInvites(ctx, admin, &comatproto.AdminEnableAccountInvites_Input{Account: a.Did}); err != nil {
		t.Fatal(err)
	}
	if v, _ := comatproto.AdminGetAccountInfo(ctx, admin, a.Did); *v.InvitesDisabled || len(v.Invites) != 3 {
		t.Fatalf("view = %+v", v)
	}
	// No existence check.
	if err := comatproto.AdminEnableAccountInvites(ctx, admin, &comatproto.AdminEnableAccountInvites_Input{Account: unknownDID}); err != nil {
		t.Fatal(err)
	}
	err = comatproto.AdminDisableAccountInvites(ctx, admin, &comatproto.AdminDisableAccountInvites_Input{Account: "bad"})
	xrpcErr(t, err, 400, "InvalidRequest", `Invalid DID (got "bad") at $.account`)

	// Listing: newest first, every page joined is the whole list.
	all, err := comatproto.AdminGetInviteCodes(ctx, admin, "", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Codes) != 4 || all.Cursor == nil {
		t.Fatalf("all = %+v", all)
	}
	for i := 1; i < len(all.Codes); i++ {
		p, c := all.Codes[i-1], all.Codes[i]
		if p.CreatedAt < c.CreatedAt || p.CreatedAt == c.CreatedAt && p.Code < c.Code {
			t.Fatalf("not newest first: %s/%s before %s/%s", p.CreatedAt, p.Code, c.CreatedAt, c.Code)
		}
	}
	for _, sort := range []string{"recent", "usage"} {
		full, err := comatproto.AdminGetInviteCodes(ctx, admin, "", 0, sort)
		if err != nil {
			t.Fatal(err)
		}
		var paged []string
		cursor := ""
		for range 10 {
			page, err := comatproto.AdminGetInviteCodes(ctx, admin, cursor, 1, sort)
			if err != nil {
				t.Fatal(err)
			}
			if len(page.Codes) == 0 {
				if page.Cursor != nil {
					t.Fatal("a cursor with no results")
				}
				break
			}
			paged = append(paged, page.Codes[0].Code)
			cursor = *page.Cursor
		}
		if len(paged) != len(full.Codes) {
			t.Fatalf("%s: paged %v, want %d codes", sort, paged, len(full.Codes))
		}
		for i, c := range full.Codes {
			if paged[i] != c.Code {
				t.Fatalf("%s: page %d = %s, want %s", sort, i, paged[i], c.Code)
			}
		}
		if sort == "usage" && (full.Codes[0].Code != codes[2] || !strings.HasPrefix(*full.Cursor, "0::")) {
			t.Fatalf("usage order = %+v, cursor %s", full.Codes, *full.Cursor)
		}
	}

	// Disabling by code and by account; "admin" is refused.
	if err := comatproto.AdminDisableInviteCodes(ctx, admin, &comatproto.AdminDisableInviteCodes_Input{Codes: []string{adminCode.Code}}); err != nil {
		t.Fatal(err)
	}
	if err := comatproto.AdminDisableInviteCodes(ctx, admin, &comatproto.AdminDisableInviteCodes_Input{Accounts: []string{a.Did}}); err != nil {
		t.Fatal(err)
	}
	all, _ = comatproto.AdminGetInviteCodes(ctx, admin, "", 0, "")
	for _, c := range all.Codes {
		if !c.Disabled {
			t.Errorf("%s (for %s) not disabled", c.Code, c.ForAccount)
		}
	}
	err = comatproto.AdminDisableInviteCodes(ctx, admin, &comatproto.AdminDisableInviteCodes_Input{Accounts: []string{"admin"}})
	xrpcErr(t, err, 400, "InvalidRequest", "cannot disable admin invite codes")

	for _, tc := range []struct {
		name, query, msg string
	}{
		{"sort", "sort=bogus", "unknown sort method: bogus"},
		{"limit low", "limit=0", "Invalid com.atproto.admin.getInviteCodes params: integer too small (minimum 1, got 0)"},
		{"limit high", "limit=501", "Invalid com.atproto.admin.getInviteCodes params: integer too big (maximum 500, got 501)"},
		{"limit text", "limit=x", `Invalid com.atproto.admin.getInviteCodes params: Expected integer value type (got "x")`},
		{"limit twice", "limit=5&limit=6", "Invalid com.atproto.admin.getInviteCodes params: Expected integer value type (got [5, 6])"},
		{"cursor one part", "cursor=abc", "Malformed cursor"},
		{"cursor three parts", "cursor=1::a::b", "Malformed cursor"},
		{"cursor not a time", "cursor=abc::def", "Malformed cursor"},
		{"cursor past JS dates", "cursor=99999999999999999::x", "Malformed cursor"},
		{"usage cursor", "sort=usage&cursor=x::y", "Malformed cursor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := rawCall(t, s, "GET", "com.atproto.admin.getInviteCodes", tc.query, basicAuth(s.AdminPassword()), nil)
			if status != 400 || out["error"] != "InvalidRequest" || out["message"] != tc.msg {
				t.Fatalf("= %d %v, want 400 %q", status, out, tc.msg)
			}
		})
	}
	// A cursor is parsed as JavaScript's parseInt would.
	if status, out := rawCall(t, s, "GET", "com.atproto.admin.getInviteCodes", "cursor=12abc::x", basicAuth(s.AdminPassword()), nil); status != 200 {
		t.Fatalf("lenient cursor: %d %v", status, out)
	}
}
