package pds_test

import (
	"context"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	indigoauth "github.com/bluesky-social/indigo/atproto/auth"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/clock"
)

func login(t *testing.T, s *pds.Server, ident, password string) *comatproto.ServerCreateSession_Output {
	t.Helper()
	out, err := comatproto.ServerCreateSession(t.Context(), atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateSession_Input{Identifier: ident, Password: password})
	if err != nil {
		t.Fatalf("login %s: %v", ident, err)
	}
	return out
}

func lastToken(t *testing.T, s *pds.Server, did, purpose string) string {
	t.Helper()
	m, ok := s.Outbox().Last(did, purpose)
	if !ok {
		t.Fatalf("no %s email for %s", purpose, did)
	}
	return m.Token
}

func TestConfirmEmail(t *testing.T) {
	c := &clock.Shifted{}
	s := start(t, pds.Config{Clock: c})
	ctx := t.Context()
	a := createAccount(t, s, "confirmacct.test", "Confirm@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	if err := comatproto.ServerRequestEmailConfirmation(ctx, cl); err != nil {
		t.Fatal(err)
	}
	tok := lastToken(t, s, a.Did, "confirm_email")
	err := comatproto.ServerConfirmEmail(ctx, cl, &comatproto.ServerConfirmEmail_Input{Email: "other@example.com", Token: tok})
	apiErr(t, err, 400, "InvalidEmail")
	err = comatproto.ServerConfirmEmail(ctx, cl, &comatproto.ServerConfirmEmail_Input{Email: "confirm@example.com", Token: "AAAAA-BBBBB"})
	apiErr(t, err, 400, "InvalidToken")
	// Tokens expire after 15 minutes of the server's clock.
	c.Advance(16 * time.Minute)
	cl = bearer(s, login(t, s, "confirmacct.test", "pw").AccessJwt)
	err = comatproto.ServerConfirmEmail(ctx, cl, &comatproto.ServerConfirmEmail_Input{Email: "confirm@example.com", Token: tok})
	apiErr(t, err, 400, "ExpiredToken")
	if err := comatproto.ServerRequestEmailConfirmation(ctx, cl); err != nil {
		t.Fatal(err)
	}
	tok = lastToken(t, s, a.Did, "confirm_email")
	if err := comatproto.ServerConfirmEmail(ctx, cl, &comatproto.ServerConfirmEmail_Input{Email: "CONFIRM@example.com", Token: tok}); err != nil {
		t.Fatal(err)
	}
	sess, err := comatproto.ServerGetSession(ctx, cl)
	if err != nil || !*sess.EmailConfirmed {
		t.Fatalf("after confirmEmail: %+v %v", sess, err)
	}
	// With a confirmed email, changing it needs a token sent to the old one.
	upd, err := comatproto.ServerRequestEmailUpdate(ctx, cl)
	if err != nil || !upd.TokenRequired {
		t.Fatalf("requestEmailUpdate = %+v, %v", upd, err)
	}
	err = comatproto.ServerUpdateEmail(ctx, cl, &comatproto.ServerUpdateEmail_Input{Email: "new@example.com"})
	apiErr(t, err, 400, "TokenRequired")
	tok = lastToken(t, s, "confirm@example.com", "update_email")
	if err := comatproto.ServerUpdateEmail(ctx, cl, &comatproto.ServerUpdateEmail_Input{Email: "New@example.com", Token: &tok}); err != nil {
		t.Fatal(err)
	}
	sess, _ = comatproto.ServerGetSession(ctx, cl)
	if *sess.Email != "new@example.com" || *sess.EmailConfirmed {
		t.Fatalf("after updateEmail: %s confirmed=%v", *sess.Email, *sess.EmailConfirmed)
	}
}

func TestPasswordReset(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "resetacct.test", "reset@example.com", "old-password")
	anon := atclient.NewAPIClient(s.URL())
	err := comatproto.ServerRequestPasswordReset(ctx, anon, &comatproto.ServerRequestPasswordReset_Input{Email: "nobody@example.com"})
	apiErr(t, err, 400, "InvalidRequest")
	if err := comatproto.ServerRequestPasswordReset(ctx, anon, &comatproto.ServerRequestPasswordReset_Input{Email: "RESET@example.com"}); err != nil {
		t.Fatal(err)
	}
	tok := lastToken(t, s, a.Did, "reset_password")
	err = comatproto.ServerResetPassword(ctx, anon, &comatproto.ServerResetPassword_Input{Token: "ZZZZZ-ZZZZZ", Password: "x"})
	apiErr(t, err, 400, "InvalidToken")
	if err := comatproto.ServerResetPassword(ctx, anon, &comatproto.ServerResetPassword_Input{Token: tok, Password: "new-password"}); err != nil {
		t.Fatal(err)
	}
	// The old password and the old sessions are gone; the token is spent.
	_, err = comatproto.ServerCreateSession(ctx, anon, &comatproto.ServerCreateSession_Input{Identifier: "resetacct.test", Password: "old-password"})
	apiErr(t, err, 401, "AuthenticationRequired")
	_, err = refreshErr(s, a.RefreshJwt)
	apiErr(t, err, 400, "ExpiredToken")
	login(t, s, "resetacct.test", "new-password")
	err = comatproto.ServerResetPassword(ctx, anon, &comatproto.ServerResetPassword_Input{Token: tok, Password: "again"})
	apiErr(t, err, 400, "InvalidToken")
}

func TestDeactivateActivate(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "sleepy.test", "sleepy@example.com", "pw")
	events := firehose(t, s, "?cursor=4")
	cl := bearer(s, a.AccessJwt)
	if err := comatproto.ServerDeactivateAccount(ctx, cl, &comatproto.ServerDeactivateAccount_Input{}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events, "account:5:"+a.Did+":false:deactivated")
	// A deactivated account can still log in, and says so.
	sess := login(t, s, "sleepy.test", "pw")
	if *sess.Active || sess.Status == nil || *sess.Status != "deactivated" {
		t.Fatalf("session of a deactivated account: active=%v status=%v", *sess.Active, sess.Status)
	}
	st, err := comatproto.ServerCheckAccountStatus(ctx, cl)
	if err != nil || st.Activated || !st.ValidDid || st.RepoRev == "" || st.RepoBlocks < 1 {
		t.Fatalf("checkAccountStatus = %+v, %v", st, err)
	}
	if err := comatproto.ServerActivateAccount(ctx, cl); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events,
		"account:6:"+a.Did+":true:active",
		"identity:7:"+a.Did+":sleepy.test",
		"sync:8:"+a.Did)
	if st, _ := comatproto.ServerCheckAccountStatus(ctx, cl); !st.Activated {
		t.Fatal("not activated")
	}
}

func TestDeleteAccount(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	keep := createAccount(t, s, "keep.test", "keep@example.com", "pw")
	gone := createAccount(t, s, "gone.test", "gone@example.com", "pw")
	cl := bearer(s, gone.AccessJwt)
	if err := comatproto.ServerRequestAccountDelete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	tok := lastToken(t, s, gone.Did, "delete_account")
	anon := atclient.NewAPIClient(s.URL())
	err := comatproto.ServerDeleteAccount(ctx, anon, &comatproto.ServerDeleteAccount_Input{Did: gone.Did, Password: "wrong", Token: tok})
	apiErr(t, err, 401, "AuthenticationRequired")
	err = comatproto.ServerDeleteAccount(ctx, anon, &comatproto.ServerDeleteAccount_Input{Did: gone.Did, Password: "pw", Token: "AAAAA-AAAAA"})
	apiErr(t, err, 400, "InvalidToken")
	if err := comatproto.ServerDeleteAccount(ctx, anon, &comatproto.ServerDeleteAccount_Input{Did: gone.Did, Password: "pw", Token: tok}); err != nil {
		t.Fatal(err)
	}
	_, err = comatproto.ServerCreateSession(ctx, anon, &comatproto.ServerCreateSession_Input{Identifier: "gone.test", Password: "pw"})
	apiErr(t, err, 401, "AuthenticationRequired")
	// The history of the deleted account is gone but for its deletion;
	// the other account's is intact.
	expectEvents(t, firehose(t, s, "?cursor=0"),
		"identity:1:"+keep.Did+":keep.test",
		"account:2:"+keep.Did+":true:active",
		"commit:3:"+keep.Did,
		"sync:4:"+keep.Did,
		"account:9:"+gone.Did+":false:deleted")
	// The handle is free again.
	createAccount(t, s, "gone.test", "gone2@example.com", "pw")
}

func TestInvites(t *testing.T) {
	s := start(t, pds.Config{InviteRequired: true})
	ctx := t.Context()
	admin := atclient.NewAdminClient(s.URL(), s.AdminPassword())
	_, err := comatproto.ServerCreateInviteCode(ctx, atclient.NewAdminClient(s.URL(), "wrong"), &comatproto.ServerCreateInviteCode_Input{UseCount: 1})
	apiErr(t, err, 401, "AuthenticationRequired")
	code, err := comatproto.ServerCreateInviteCode(ctx, admin, &comatproto.ServerCreateInviteCode_Input{UseCount: 1})
	if err != nil {
		t.Fatal(err)
	}
	email, pw := "inv@example.com", "pw"
	c := atclient.NewAPIClient(s.URL())
	_, err = comatproto.ServerCreateAccount(ctx, c, &comatproto.ServerCreateAccount_Input{Handle: "inv.test", Email: &email, Password: &pw})
	apiErr(t, err, 400, "InvalidInviteCode")
	a, err := comatproto.ServerCreateAccount(ctx, c, &comatproto.ServerCreateAccount_Input{Handle: "inv.test", Email: &email, Password: &pw, InviteCode: &code.Code})
	if err != nil {
		t.Fatal(err)
	}
	email2 := "inv2@example.com"
	_, err = comatproto.ServerCreateAccount(ctx, c, &comatproto.ServerCreateAccount_Input{Handle: "inv2.test", Email: &email2, Password: &pw, InviteCode: &code.Code})
	apiErr(t, err, 400, "InvalidInviteCode")

	codes, err := comatproto.ServerCreateInviteCodes(ctx, admin, &comatproto.ServerCreateInviteCodes_Input{CodeCount: 2, UseCount: 3, ForAccounts: []string{a.Did}})
	if err != nil || len(codes.Codes) != 1 || len(codes.Codes[0].Codes) != 2 {
		t.Fatalf("createInviteCodes = %+v, %v", codes, err)
	}
	mine, err := comatproto.ServerGetAccountInviteCodes(ctx, bearer(s, a.AccessJwt), false, true)
	if err != nil || len(mine.Codes) != 2 || mine.Codes[0].Available != 3 || mine.Codes[0].ForAccount != a.Did {
		t.Fatalf("getAccountInviteCodes = %+v, %v", mine, err)
	}
}

// getServiceAuth's tokens pass indigo's validator; its limits answer as the
// reference's.
func TestGetServiceAuth(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "svc.test", "svc@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	out, err := comatproto.ServerGetServiceAuth(ctx, cl, "did:web:appview.test", 0, "app.bsky.feed.getTimeline")
	if err != nil {
		t.Fatal(err)
	}
	v := indigoauth.ServiceAuthValidator{Audience: "did:web:appview.test", Dir: s.Directory()}
	lxm := syntax.NSID("app.bsky.feed.getTimeline")
	if iss, err := v.Validate(context.Background(), out.Token, &lxm); err != nil || iss.String() != a.Did {
		t.Fatalf("indigo rejects the token: %v %v", iss, err)
	}
	now := time.Now()
	for _, tc := range []struct {
		aud, lxm string
		exp      int64
		name     string
	}{
		{"not-a-did", "", 0, "InvalidRequest"},
		{"did:web:x.test", "", now.Add(-time.Minute).Unix(), "BadExpiration"},
		{"did:web:x.test", "app.bsky.feed.getTimeline", now.Add(2 * time.Hour).Unix(), "BadExpiration"},
		{"did:web:x.test", "", now.Add(5 * time.Minute).Unix(), "BadExpiration"},
		{"did:web:x.test", "com.atproto.server.getSession", 0, "InvalidRequest"},
	} {
		_, err := comatproto.ServerGetServiceAuth(ctx, cl, tc.aud, tc.exp, tc.lxm)
		apiErr(t, err, 400, tc.name)
	}
}
