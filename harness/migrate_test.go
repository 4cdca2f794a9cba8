package harness_test

import (
	"bytes"
	"errors"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/repo"

	"github.com/fakepds/fakepds/harness"
)

// Issue 15.3: two fakepds on one PLC directory; an account moved from one
// to the other with goat's steps in goat's order (MigrateAccount), each
// server emitting what the reference emits; the repo verifies on the new
// PDS with the key of the updated DID document, and the old PDS answers
// as the reference does for a deactivated account.
func TestMigrateAccount(t *testing.T) {
	t.Parallel()
	p1 := harness.New(t)
	p2 := harness.New(t, harness.WithPLC(p1.PLCURL()))
	if p2.PLCURL() != p1.PLCURL() {
		t.Fatalf("p2.PLCURL() = %s, want p1's %s", p2.PLCURL(), p1.PLCURL())
	}
	a := p1.NewAccount(t)
	img := a.UploadBlob(t, []byte("\x89PNG\r\n\x1a\nnot really a picture"), "image/png")
	post := a.Post(t, "before the move", harness.WithImages(img))

	before, err := p1.Directory().LookupDID(t.Context(), a.DID)
	if err != nil {
		t.Fatal(err)
	}
	oldKey, err := before.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	fh1, fh2 := p1.Firehose(t), p2.Firehose(t)
	moved := harness.MigrateAccount(t, a, p2)
	if moved.DID != a.DID || moved.Handle != a.Handle {
		t.Fatalf("moved account %s %s, want %s %s", moved.DID, moved.Handle, a.DID, a.Handle)
	}

	// The DID document names the new PDS and its key, through either
	// server's directory and over the shared PLC's HTTP API.
	var ident *identity.Identity
	for name, dir := range map[string]identity.Directory{
		"p1": p1.Directory(), "p2": p2.Directory(),
		"PLC over HTTP": &identity.BaseDirectory{PLCURL: p1.PLCURL(), SkipHandleVerification: true},
	} {
		id, err := dir.LookupDID(t.Context(), a.DID)
		if err != nil {
			t.Fatalf("%s: LookupDID: %v", name, err)
		}
		if id.PDSEndpoint() != p2.URL() {
			t.Errorf("%s: PDS endpoint %s, want %s", name, id.PDSEndpoint(), p2.URL())
		}
		ident = id
	}
	if h, err := p2.Directory().LookupHandle(t.Context(), a.Handle); err != nil || h.DID != a.DID {
		t.Errorf("p2 resolves %s to %v (%v), want %s", a.Handle, h, err, a.DID)
	}

	newKey, err := ident.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if newKey.DIDKey() == oldKey.DIDKey() {
		t.Fatalf("the DID document still names the old PDS's key %s", oldKey.DIDKey())
	}

	// The repo on the new PDS loads with indigo, the record and its blob
	// came along. Its head is the imported commit, signed by the old key,
	// as in the reference (importRepo keeps the CAR's commit); the first
	// write on the new PDS signs with the document's new key.
	commit, r := loadRepo(t, p2, a)
	if err := commit.VerifySignature(oldKey); err != nil {
		t.Errorf("the imported head does not verify with the old key: %v", err)
	}
	if _, _, err := r.GetRecordBytes(t.Context(), post.URI.Collection(), post.URI.RecordKey()); err != nil {
		t.Errorf("the post is not in the migrated repo: %v", err)
	}
	if _, err := comatproto.SyncGetBlob(t.Context(), p2.Client(), img.Ref.String(), a.DID.String()); err != nil {
		t.Errorf("getBlob on p2: %v", err)
	}
	p2.RequireRecord(t, post.URI)
	after := moved.Post(t, "after the move")
	commit, r = loadRepo(t, p2, a)
	if err := commit.VerifySignature(newKey); err != nil {
		t.Errorf("the new PDS's commit does not verify with the DID document's key: %v", err)
	}
	for _, ref := range []harness.Ref{post, after} {
		if _, _, err := r.GetRecordBytes(t.Context(), ref.URI.Collection(), ref.URI.RecordKey()); err != nil {
			t.Errorf("%s is not in the repo on p2: %v", ref.URI, err)
		}
	}

	// What each firehose said: the new PDS #identity (the PLC operation),
	// then the activation's #account, #identity, #sync; the old one the
	// deactivation's #account.
	want2 := []string{"#identity", "#account", "#identity", "#sync", "#commit"}
	for i, typ := range want2 {
		e := fh2.Require(t, func(e harness.Event) bool { return e.DID == a.DID })
		if e.Type != typ {
			t.Fatalf("p2 event %d for the account: %s, want %s", i, e, typ)
		}
		switch {
		case e.Account != nil && !e.Account.Active:
			t.Errorf("p2 #account: active false, want true")
		case i == 2 && (e.Identity.Handle == nil || *e.Identity.Handle != a.Handle.String()):
			t.Errorf("p2 activation #identity handle %v, want %s", e.Identity.Handle, a.Handle)
		}
	}
	e := fh1.Require(t, func(e harness.Event) bool { return e.DID == a.DID })
	if e.Account == nil || e.Account.Active || e.Account.Status == nil || *e.Account.Status != "deactivated" {
		t.Errorf("p1's event after the move: %s %+v, want #account active=false status=deactivated", e, e.Account)
	}

	status, err := comatproto.ServerCheckAccountStatus(t.Context(), moved.Client)
	if err != nil || !status.Activated || !status.ValidDid || status.ExpectedBlobs != 1 || status.ImportedBlobs != 1 || status.IndexedRecords < 2 {
		t.Errorf("checkAccountStatus on p2: %+v %v, want activated, a valid DID, 1 of 1 blobs, the records", status, err)
	}

	// The old PDS: the account is deactivated there.
	_, err = comatproto.SyncGetRepo(t.Context(), p1.Client(), a.DID.String(), "")
	requireXRPC(t, "getRepo on p1", err, 400, "RepoDeactivated")
	st, err := comatproto.SyncGetRepoStatus(t.Context(), p1.Client(), a.DID.String())
	if err != nil || st.Active || st.Status == nil || *st.Status != "deactivated" {
		t.Errorf("getRepoStatus on p1: %+v %v, want active=false status=deactivated", st, err)
	}
	st, err = comatproto.SyncGetRepoStatus(t.Context(), p2.Client(), a.DID.String())
	if err != nil || !st.Active {
		t.Errorf("getRepoStatus on p2: %+v %v, want active", st, err)
	}
}

// loadRepo is a's repo as p serves it, read by indigo.
func loadRepo(t *testing.T, p *harness.PDS, a *harness.Account) (*repo.Commit, *repo.Repo) {
	t.Helper()
	car, err := comatproto.SyncGetRepo(t.Context(), p.Client(), a.DID.String(), "")
	if err != nil {
		t.Fatalf("getRepo on %s: %v", p.URL(), err)
	}
	commit, r, err := repo.LoadRepoFromCAR(t.Context(), bytes.NewReader(car))
	if err != nil {
		t.Fatalf("LoadRepoFromCAR of %s's repo on %s: %v", a.DID, p.URL(), err)
	}
	return commit, r
}

func requireXRPC(t *testing.T, what string, err error, status int, name string) {
	t.Helper()
	var apiErr *atclient.APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || apiErr.Name != name {
		t.Errorf("%s: %v, want %d %s", what, err, status, name)
	}
}
