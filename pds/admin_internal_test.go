package pds

import (
	"context"
	"database/sql"
	"log/slog"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/store"
)

// Record and blob takedowns set the takedown_ref of the rows the actor
// store has (no write API makes them yet, so the test puts them there), and
// getSubjectStatus reports it.
func TestAdminRecordAndBlobTakedown(t *testing.T) {
	s, err := New(Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	email, pw := "rows@example.com", "pw"
	acct, err := comatproto.ServerCreateAccount(ctx, atclient.NewAPIClient(s.URL()), &comatproto.ServerCreateAccount_Input{Handle: "rows.test", Email: &email, Password: &pw})
	if err != nil {
		t.Fatal(err)
	}
	const (
		recordCID = "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
		blobCID   = "bafkreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
	)
	rc := cid.MustParse(recordCID)
	err = s.withActor(ctx, acct.Did, func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO record (collection, rkey, cid, repo_rev) VALUES ('app.bsky.feed.post', 'abc', ?, 'rev')`, rc.Bytes()); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO blob (cid, mime_type, size, created_at) VALUES (?, 'image/png', 1, 'now')`, blobCID)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	takedownRef := func(table, where string, arg any) string {
		var ref sql.NullString
		err := s.withActor(ctx, acct.Did, func(db *store.DB) error {
			return db.Reader().QueryRowContext(ctx, `SELECT takedown_ref FROM `+table+` WHERE `+where, arg).Scan(&ref)
		})
		if err != nil {
			t.Fatal(err)
		}
		return ref.String
	}

	admin := atclient.NewAdminClient(s.URL(), s.AdminPassword())
	uri := "at://" + acct.Did + "/app.bsky.feed.post/abc"
	ref := "r-1"
	record := &comatproto.AdminUpdateSubjectStatus_Input_Subject{RepoStrongRef: &comatproto.RepoStrongRef{Uri: uri, Cid: recordCID}}
	blob := &comatproto.AdminUpdateSubjectStatus_Input_Subject{AdminDefs_RepoBlobRef: &comatproto.AdminDefs_RepoBlobRef{Did: acct.Did, Cid: blobCID}}
	for _, sub := range []*comatproto.AdminUpdateSubjectStatus_Input_Subject{record, blob} {
		if _, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, &comatproto.AdminUpdateSubjectStatus_Input{
			Subject: sub, Takedown: &comatproto.AdminDefs_StatusAttr{Applied: true, Ref: &ref},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if got := takedownRef("record", "rkey = ?", "abc"); got != ref {
		t.Fatalf("record takedown_ref = %q", got)
	}
	if got := takedownRef("blob", "cid = ?", blobCID); got != ref {
		t.Fatalf("blob takedown_ref = %q", got)
	}
	st, err := comatproto.AdminGetSubjectStatus(ctx, admin, "", "", uri)
	if err != nil || st.Subject.RepoStrongRef == nil || st.Subject.RepoStrongRef.Uri != uri || st.Subject.RepoStrongRef.Cid != recordCID ||
		!st.Takedown.Applied || *st.Takedown.Ref != ref || st.Deactivated != nil {
		t.Fatalf("record status = %+v, %v", st, err)
	}
	st, err = comatproto.AdminGetSubjectStatus(ctx, admin, blobCID, acct.Did, "")
	if err != nil || st.Subject.AdminDefs_RepoBlobRef == nil || st.Subject.AdminDefs_RepoBlobRef.Cid != blobCID || !st.Takedown.Applied {
		t.Fatalf("blob status = %+v, %v", st, err)
	}

	// Reversal clears both.
	for _, sub := range []*comatproto.AdminUpdateSubjectStatus_Input_Subject{record, blob} {
		if _, err := comatproto.AdminUpdateSubjectStatus(ctx, admin, &comatproto.AdminUpdateSubjectStatus_Input{
			Subject: sub, Takedown: &comatproto.AdminDefs_StatusAttr{Applied: false},
		}); err != nil {
			t.Fatal(err)
		}
	}
	if takedownRef("record", "rkey = ?", "abc") != "" || takedownRef("blob", "cid = ?", blobCID) != "" {
		t.Fatal("takedown not cleared")
	}
	if st, err := comatproto.AdminGetSubjectStatus(ctx, admin, "", "", uri); err != nil || st.Takedown.Applied || st.Takedown.Ref != nil {
		t.Fatalf("record status after reversal = %+v, %v", st, err)
	}
	// Neither takes the account down or sequences anything.
	if head, err := s.seq.Head(context.Background()); err != nil || head != 4 {
		t.Fatalf("sequencer head = %d, %v; want the 4 creation events", head, err)
	}
}
