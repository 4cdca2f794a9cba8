package pds

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/api/bsky"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/indigo/events"
	lexutil "github.com/bluesky-social/indigo/lex/util"

	"github.com/fakepds/fakepds/internal/chain"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
)

// A commit stored without its #commit (the process died between the two
// transactions) gets a #sync of the head at the next start, before any new
// write of the repo is sequenced: a strict consumer's chain holds across it.
func TestRecoverySyncsRepoAheadOfLog(t *testing.T) {
	dir := t.TempDir()
	s := startAt(t, dir)
	const pw = "gap-pass"
	did := createAccount(t, s, "gap.test", pw).Did
	post(t, login(t, s, "gap.test", pw), did, "acknowledged")
	lost := commitUnsequenced(t, s, did)
	crash(t, s)

	s = startAt(t, dir)
	last := post(t, login(t, s, "gap.test", pw), did, "after the restart")
	evts := checkLog(t, s)
	var syncAt, commitAt int64
	for _, e := range evts {
		switch {
		case e.Sync != nil && e.Sync.Rev == lost:
			syncAt = e.Sync.Seq
		case e.Commit != nil && e.Commit.Rev == last:
			commitAt = e.Commit.Seq
		}
	}
	if syncAt == 0 || commitAt < syncAt {
		t.Fatalf("#sync of the unsequenced rev %s at seq %d, next #commit at %d", lost, syncAt, commitAt)
	}
}

// An account whose creation never reached the log (stored, then killed
// before its events) is announced at the next start as createAccount would
// have: #identity, #account, then the #sync of its repo.
func TestRecoveryAnnouncesAccountNeverLogged(t *testing.T) {
	dir := t.TempDir()
	s := startAt(t, dir)
	out := createAccount(t, s, "quiet.test", "quiet-pass")
	if err := s.seq.DeleteAccountEvents(t.Context(), out.Did); err != nil {
		t.Fatal(err)
	}
	crash(t, s)

	s = startAt(t, dir)
	var types []string
	for _, e := range checkLog(t, s) {
		if e.DID == out.Did {
			types = append(types, e.Type)
		}
	}
	if want := "[#identity #account #sync]"; fmt.Sprint(types) != want {
		t.Fatalf("events of the unannounced account: %v, want %s", types, want)
	}
}

// A clean Close leaves a marker that spares the next start the scan (so it
// never opens an actor store), and only for the log it describes.
func TestCleanShutdownSkipsRecovery(t *testing.T) {
	dir := t.TempDir()
	s := startAt(t, dir)
	out := createAccount(t, s, "clean.test", "clean-pass")
	commitUnsequenced(t, s, out.Did) // a gap a clean run cannot have: it shows whether the scan ran
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, cleanMarker)
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("no marker after a clean Close: %v", err)
	}

	s = startAt(t, dir)
	if n := s.seq.Last(); n != 4 {
		t.Fatalf("after a clean shutdown the start sequenced events: last seq %d, want 4", n)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the marker outlived the start that read it: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// A marker naming another seq than the log's is not believed.
	if err := os.WriteFile(marker, []byte("seq 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s = startAt(t, dir)
	if n := s.seq.Last(); n != 5 {
		t.Fatalf("a stale marker skipped the scan: last seq %d, want 5 (the #sync)", n)
	}
}

// startAt starts a server on dir, closed with the test.
func startAt(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := New(Config{DataDir: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// crash ends s as a SIGKILL would leave its data dir: without the marker.
func crash(t *testing.T, s *Server) {
	t.Helper()
	s.Close()
	if err := os.Remove(filepath.Join(s.DataDir(), cleanMarker)); err != nil {
		t.Fatal(err)
	}
}

func createAccount(t *testing.T, s *Server, handle, pw string) *comatproto.ServerCreateAccount_Output {
	t.Helper()
	email := handle + "@example.com"
	out, err := comatproto.ServerCreateAccount(t.Context(), atclient.NewAPIClient(s.URL()),
		&comatproto.ServerCreateAccount_Input{Handle: handle, Email: &email, Password: &pw})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func login(t *testing.T, s *Server, handle, pw string) *atclient.APIClient {
	t.Helper()
	c, err := atclient.LoginWithPasswordHost(t.Context(), s.URL(), handle, pw, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// post creates a post through the API and returns its commit's rev.
func post(t *testing.T, c *atclient.APIClient, did, text string) string {
	t.Helper()
	out, err := comatproto.RepoCreateRecord(t.Context(), c, postInput(did, text))
	if err != nil {
		t.Fatal(err)
	}
	return out.Commit.Rev
}

func postInput(did, text string) *comatproto.RepoCreateRecord_Input {
	return &comatproto.RepoCreateRecord_Input{
		Repo: did, Collection: "app.bsky.feed.post",
		Record: &lexutil.LexiconTypeDecoder{Val: &bsky.FeedPost{Text: text, CreatedAt: time.Now().UTC().Format(time.RFC3339)}},
	}
}

// commitUnsequenced commits a post to did's repo without sequencing it, as
// a process killed after the actor store's commit leaves it, and returns
// the commit's rev.
func commitUnsequenced(t *testing.T, s *Server, did string) string {
	t.Helper()
	ctx := t.Context()
	key, err := s.signingKey(ctx, did)
	if err != nil {
		t.Fatal(err)
	}
	value, err := atdata.MarshalCBOR(map[string]any{"$type": "app.bsky.feed.post", "text": "never sequenced", "createdAt": "2026-12-01T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	var c *repo.Commit
	err = s.withActor(ctx, did, func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error {
			c, err = repo.Apply(ctx, tx, syntax.DID(did), key, []repo.Write{{
				Action: repo.ActionCreate, Collection: "app.bsky.feed.post", RKey: syntax.RecordKey(s.tids.Next().String()), Value: value,
			}}, nil, s.clock.Now())
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return c.Rev
}

type logged struct {
	Type   string
	DID    string
	Commit *comatproto.SyncSubscribeRepos_Commit
	Sync   *comatproto.SyncSubscribeRepos_Sync
}

// checkLog reads s's whole log, checks every repo's chain as a strict
// consumer does and returns the events.
func checkLog(t *testing.T, s *Server) []logged {
	t.Helper()
	ctx := context.Background()
	stored, err := s.seq.After(ctx, 0, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	ck := chain.Checker{Directory: s.Directory()}
	var out []logged
	for _, st := range stored {
		r := bytes.NewReader(st.Frame)
		var h events.EventHeader
		if err := h.UnmarshalCBOR(r); err != nil {
			t.Fatal(err)
		}
		e := logged{Type: h.MsgType, DID: st.DID}
		switch h.MsgType {
		case "#commit":
			e.Commit = new(comatproto.SyncSubscribeRepos_Commit)
			err = e.Commit.UnmarshalCBOR(r)
			if err == nil {
				err = ck.Commit(ctx, e.Commit)
			}
		case "#sync":
			e.Sync = new(comatproto.SyncSubscribeRepos_Sync)
			err = e.Sync.UnmarshalCBOR(r)
			if err == nil {
				err = ck.Sync(ctx, e.Sync)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// A server whose data dir is about to go (Remove) writes no marker.
func TestDiscardedDataDirGetsNoMarker(t *testing.T) {
	dir := t.TempDir()
	s := startAt(t, dir)
	s.discard.Store(true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, cleanMarker)); !os.IsNotExist(err) {
		t.Fatalf("marker written for a discarded data dir: %v", err)
	}
}
