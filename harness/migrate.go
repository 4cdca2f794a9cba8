package harness

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/api/agnostic"
	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"
)

// MigrateAccount moves acct from its PDS to the PDS to, as Bluesky's own
// `goat account migrate` does and in its order, and returns the account
// on the new PDS, logged in there. The two must share a PLC directory
// (New(t, WithPLC(from.PLCURL()))). The steps:
//
//   - the PLC token: requestPlcOperationSignature on the old PDS, the
//     token from its outbox (EmailToken);
//   - getServiceAuth on the old PDS (aud: the new PDS's service DID, lxm:
//     com.atproto.server.createAccount), createAccount with the DID on
//     the new one under that token (the account starts deactivated), and
//     createSession there;
//   - getRepo on the old, importRepo on the new; getPreferences,
//     putPreferences; every blob of listBlobs downloaded and uploaded,
//     then listMissingBlobs on the new must be empty; checkAccountStatus;
//   - getRecommendedDidCredentials on the new, signPlcOperation on the old
//     with the token, submitPlcOperation on the new;
//   - activateAccount on the new, deactivateAccount on the old.
//
// The handle, email and password stay the same unless opts give others
// (WithHandle, WithEmail, WithPassword, WithInviteCode); a handle outside
// the new PDS's domain gets a fresh one there. Any step that fails fails t,
// naming the step. Both PDSes need their control plane (in-process, or
// fakepds serve) for the email token.
func MigrateAccount(t testing.TB, acct *Account, to *PDS, opts ...AccountOption) *Account {
	t.Helper()
	from := acct.pds
	from.alive(t, "MigrateAccount")
	to.alive(t, "MigrateAccount")
	ctx := t.Context()
	fail := func(step string, err error) {
		t.Helper()
		t.Fatalf("harness.MigrateAccount(%s, %s -> %s): %s: %v", acct.DID, from.url, to.url, step, err)
	}
	o := accountOptions{handle: acct.Handle.String(), email: acct.Email, password: acct.Password}
	for _, opt := range opts {
		opt(&o)
	}
	if !strings.HasSuffix(o.handle, to.handleDomain(t)) {
		o.handle = uniqueLabel(strings.Split(o.handle, ".")[0], strings.ReplaceAll(acct.DID.Identifier(), "-", "")) + to.handleDomain(t)
	}
	if o.invite == "" && to.invitesRequired(t) {
		o.invite = to.InviteCode(t)
	}
	old := acct.Client

	if err := comatproto.IdentityRequestPlcOperationSignature(ctx, old); err != nil {
		fail("requestPlcOperationSignature", err)
	}
	plcToken := from.EmailToken(t, acct.DID.String(), PurposePLCOperation)

	desc, err := comatproto.ServerDescribeServer(ctx, to.Client())
	if err != nil {
		fail("describeServer on the new PDS", err)
	}
	// exp left to the old PDS: its clock, which a test may have moved.
	svc, err := comatproto.ServerGetServiceAuth(ctx, old, desc.Did, 0, "com.atproto.server.createAccount")
	if err != nil {
		fail("getServiceAuth", err)
	}
	newClient := atclient.NewAPIClient(to.url)
	newClient.Auth = &atclient.PasswordAuth{Session: atclient.PasswordSessionData{AccountDID: acct.DID, AccessToken: svc.Token}}
	did := acct.DID.String()
	in := &comatproto.ServerCreateAccount_Input{Did: &did, Handle: o.handle, Email: &o.email, Password: &o.password}
	if o.invite != "" {
		in.InviteCode = &o.invite
	}
	if _, err := comatproto.ServerCreateAccount(ctx, newClient, in); err != nil {
		fail("createAccount on the new PDS", err)
	}
	sess, err := comatproto.ServerCreateSession(ctx, to.Client(), &comatproto.ServerCreateSession_Input{Identifier: did, Password: o.password})
	if err != nil {
		fail("createSession on the new PDS", err)
	}
	moved := to.account(acct.DID, syntax.Handle(sess.Handle), o.email, o.password, sess.AccessJwt, sess.RefreshJwt)
	newClient = moved.Client

	car, err := comatproto.SyncGetRepo(ctx, old, did, "")
	if err != nil {
		fail("getRepo on the old PDS", err)
	}
	if err := comatproto.RepoImportRepo(ctx, newClient, bytes.NewReader(car)); err != nil {
		fail("importRepo", err)
	}
	prefs, err := agnostic.ActorGetPreferences(ctx, old)
	if err != nil {
		fail("getPreferences on the old PDS", err)
	}
	if err := agnostic.ActorPutPreferences(ctx, newClient, &agnostic.ActorPutPreferences_Input{Preferences: prefs.Preferences}); err != nil {
		fail("putPreferences on the new PDS", err)
	}
	for cursor := ""; ; {
		page, err := comatproto.SyncListBlobs(ctx, old, cursor, did, 500, "")
		if err != nil {
			fail("listBlobs on the old PDS", err)
		}
		for _, c := range page.Cids {
			b, err := comatproto.SyncGetBlob(ctx, old, c, did)
			if err != nil {
				fail("getBlob "+c, err)
			}
			if _, err := comatproto.RepoUploadBlob(ctx, newClient, bytes.NewReader(b)); err != nil {
				fail("uploadBlob "+c, err)
			}
		}
		if page.Cursor == nil || *page.Cursor == "" {
			break
		}
		cursor = *page.Cursor
	}
	missing, err := comatproto.RepoListMissingBlobs(ctx, newClient, "", 1000)
	if err != nil {
		fail("listMissingBlobs on the new PDS", err)
	}
	if len(missing.Blobs) > 0 {
		fail("listMissingBlobs on the new PDS", errMissing(missing.Blobs))
	}

	// goat reports the new account's status here; a failure is a failure.
	if _, err := comatproto.ServerCheckAccountStatus(ctx, newClient); err != nil {
		fail("checkAccountStatus on the new PDS", err)
	}

	creds, err := agnostic.IdentityGetRecommendedDidCredentials(ctx, newClient)
	if err != nil {
		fail("getRecommendedDidCredentials on the new PDS", err)
	}
	var unsigned agnostic.IdentitySignPlcOperation_Input
	if b, err := json.Marshal(creds); err != nil {
		fail("getRecommendedDidCredentials on the new PDS", err)
	} else if err := json.Unmarshal(b, &unsigned); err != nil {
		fail("getRecommendedDidCredentials on the new PDS", err)
	}
	unsigned.Token = &plcToken
	signed, err := agnostic.IdentitySignPlcOperation(ctx, old, &unsigned)
	if err != nil {
		fail("signPlcOperation on the old PDS", err)
	}
	if err := agnostic.IdentitySubmitPlcOperation(ctx, newClient, &agnostic.IdentitySubmitPlcOperation_Input{Operation: signed.Operation}); err != nil {
		fail("submitPlcOperation on the new PDS", err)
	}

	if err := comatproto.ServerActivateAccount(ctx, newClient); err != nil {
		fail("activateAccount on the new PDS", err)
	}
	if err := comatproto.ServerDeactivateAccount(ctx, old, &comatproto.ServerDeactivateAccount_Input{}); err != nil {
		fail("deactivateAccount on the old PDS", err)
	}
	return moved
}

type errMissing []*comatproto.RepoListMissingBlobs_RecordBlob

func (m errMissing) Error() string {
	var b strings.Builder
	b.WriteString("blobs still missing:")
	for _, r := range m {
		b.WriteString(" " + r.Cid + " (" + r.RecordUri + ")")
	}
	return b.String()
}
