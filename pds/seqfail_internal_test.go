package pds

import (
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
)

// newWriter is a server with one account, its DID and its client.
func newWriter(t *testing.T, handle string) (*Server, string, *atclient.APIClient) {
	t.Helper()
	s := startAt(t, t.TempDir())
	did := createAccount(t, s, handle, "pw").Did
	return s, did, login(t, s, handle, "pw")
}

// A repo write whose #commit cannot be stored fails without committing, as
// the reference's (it sequences the commit inside its actor store
// transaction): the repo stays where the log says it is, and the next
// write's #commit follows on the last one logged.
func TestFailedAppendFailsTheWrite(t *testing.T) {
	s, did, c := newWriter(t, "seqfail.test")
	ctx := t.Context()
	before := post(t, c, did, "before")

	// The injected failure: the log's table is not there.
	w := s.seq.DB().Writer()
	if _, err := w.ExecContext(ctx, `ALTER TABLE repo_seq RENAME TO repo_seq_away`); err != nil {
		t.Fatal(err)
	}
	_, err := comatproto.RepoCreateRecord(ctx, c, postInput(did, "lost"))
	if _, err := w.ExecContext(ctx, `ALTER TABLE repo_seq_away RENAME TO repo_seq`); err != nil {
		t.Fatal(err)
	}
	if ae, ok := err.(*atclient.APIError); !ok || ae.StatusCode != 500 {
		t.Fatalf("createRecord with the log unwritable: %v, want a 500", err)
	}
	latest, err := comatproto.SyncGetLatestCommit(ctx, c, did)
	if err != nil || latest.Rev != before {
		t.Fatalf("head after the failed write: %+v, %v; want rev %s", latest, err, before)
	}
	list, err := comatproto.RepoListRecords(ctx, c, "app.bsky.feed.post", "", 10, did, false)
	if err != nil || len(list.Records) != 1 {
		t.Fatalf("records after the failed write: %d, %v; want 1", len(list.Records), err)
	}
	post(t, c, did, "after")
	checkLog(t, s)
	if s.seq.Failed() {
		t.Error("the log is marked failed although nothing is missing from it")
	}
}

// When the #commit fails only at its commit, after the repo's (here a
// deferred constraint the log's trigger breaks), the write stands and the
// #sync crash recovery would send is sequenced at once: a strict
// consumer's chain holds without a restart.
func TestLostEventIsResyncedAtOnce(t *testing.T) {
	s, did, c := newWriter(t, "seqlost.test")
	ctx := t.Context()
	post(t, c, did, "before")

	w := s.seq.DB().Writer()
	for _, q := range []string{
		`CREATE TABLE fault_parent (id INTEGER PRIMARY KEY)`,
		`CREATE TABLE fault_child (parent INTEGER REFERENCES fault_parent (id) DEFERRABLE INITIALLY DEFERRED)`,
		`CREATE TRIGGER fault AFTER INSERT ON repo_seq WHEN NEW.event_type = 'append' BEGIN INSERT INTO fault_child VALUES (-1); END`,
	} {
		if _, err := w.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	out, err := comatproto.RepoCreateRecord(ctx, c, postInput(did, "event lost"))
	if _, err := w.ExecContext(ctx, `DROP TRIGGER fault`); err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("createRecord whose #commit failed to commit: %v", err)
	}
	post(t, c, did, "after")
	var synced bool
	for _, e := range checkLog(t, s) {
		synced = synced || e.Sync != nil && e.Sync.Rev == out.Commit.Rev
	}
	if !synced {
		t.Fatalf("no #sync of rev %s in the log", out.Commit.Rev)
	}
}
