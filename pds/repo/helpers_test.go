package repo_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/atdata"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
)

// fixture is one account's actor store with a repo in it.
type fixture struct {
	t    testing.TB
	db   *store.DB
	w    *repo.Writer // nil: the package-level Apply
	did  syntax.DID
	key  atcrypto.PrivateKey
	pub  atcrypto.PublicKey
	head *repo.Commit // the last commit made through the fixture
}

func openStore(t testing.TB, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(dir, "actor.sqlite"), store.Options{Migrations: actorstore.Migrations})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newKey(t testing.TB) (atcrypto.PrivateKey, atcrypto.PublicKey) {
	t.Helper()
	key, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return key, pub
}

// withWriter gives the fixture a repo.Writer, as the server has one per
// open actor store.
func (f *fixture) withWriter() *fixture {
	f.t.Helper()
	w, err := repo.NewWriter(context.Background(), f.db.Writer())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { w.Close() })
	f.w = w
	return f
}

// newFixture creates an empty repo in a fresh store under dir (a temp dir
// when empty) and checks its commit.
func newFixture(t testing.TB, dir string) *fixture {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	key, pub := newKey(t)
	f := &fixture{t: t, db: openStore(t, dir), did: "did:plc:ewvi7nxzyoun6zhxrhs64oiz", key: key, pub: pub}
	err := f.db.Write(context.Background(), func(tx *sql.Tx) error {
		c, err := repo.Create(context.Background(), tx, f.did, f.key, time.Now())
		f.head = c
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// apply runs Apply in one write transaction.
func (f *fixture) apply(writes []repo.Write, swapCommit *cid.Cid) (*repo.Commit, error) {
	var c *repo.Commit
	err := f.db.Write(context.Background(), func(tx *sql.Tx) error {
		var err error
		if f.w != nil {
			c, err = f.w.Apply(context.Background(), tx, f.did, f.key, writes, swapCommit, time.Now())
		} else {
			c, err = repo.Apply(context.Background(), tx, f.did, f.key, writes, swapCommit, time.Now())
		}
		return err
	})
	return c, err
}

// mustApply applies writes, expects a commit and checks it as a firehose
// consumer would.
func (f *fixture) mustApply(writes ...repo.Write) *repo.Commit {
	f.t.Helper()
	c, err := f.apply(writes, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if c == nil {
		f.t.Fatal("no commit")
	}
	f.checkCommit(c)
	f.checkHead(c)
	return c
}

// checkCommit checks c follows the fixture's head (and makes it the head)
// and that its #commit
// event, through a CBOR round trip, passes indigo's inductive firehose
// verification and carries a valid signature.
func (f *fixture) checkCommit(c *repo.Commit) {
	f.t.Helper()
	prev := f.head
	if c.Rev <= prev.Rev {
		f.t.Fatalf("rev %s not after %s", c.Rev, prev.Rev)
	}
	if c.Since == nil || *c.Since != prev.Rev {
		f.t.Fatalf("since %v, want %s", c.Since, prev.Rev)
	}
	if c.PrevData == nil || !c.PrevData.Equals(prev.Data) {
		f.t.Fatalf("prevData %v, want %s", c.PrevData, prev.Data)
	}
	ev := roundTrip(f.t, c.CommitEvent())
	if _, err := indigorepo.VerifyCommitMessage(context.Background(), ev); err != nil {
		f.t.Fatalf("VerifyCommitMessage: %v", err)
	}
	commit, root, err := indigorepo.LoadCommitFromCAR(context.Background(), bytes.NewReader(ev.Blocks))
	if err != nil {
		f.t.Fatal(err)
	}
	if !root.Equals(c.CID) || commit.Rev != c.Rev || !commit.Data.Equals(c.Data) || commit.DID != f.did.String() {
		f.t.Fatalf("commit block %+v under root %s does not match %+v", commit, root, c)
	}
	if err := commit.VerifySignature(f.pub); err != nil {
		f.t.Fatalf("signature: %v", err)
	}
	f.head = c
}

// checkHead checks c is the repo's head.
func (f *fixture) checkHead(c *repo.Commit) {
	f.t.Helper()
	head, rev, err := repo.Head(context.Background(), f.db.Reader())
	if err != nil || !head.Equals(c.CID) || rev != c.Rev {
		f.t.Fatalf("Head = %s %s %v, want %s %s", head, rev, err, c.CID, c.Rev)
	}
}

// roundTrip encodes and decodes a #commit as the sequencer and a consumer
// would, with the fields the sequencer sets.
func roundTrip(t testing.TB, ev *comatproto.SyncSubscribeRepos_Commit) *comatproto.SyncSubscribeRepos_Commit {
	t.Helper()
	ev.Seq = 1
	ev.Time = syntax.DatetimeNow().String()
	var buf bytes.Buffer
	if err := ev.MarshalCBOR(&buf); err != nil {
		t.Fatal(err)
	}
	var out comatproto.SyncSubscribeRepos_Commit
	if err := out.UnmarshalCBOR(&buf); err != nil {
		t.Fatal(err)
	}
	return &out
}

// checkRepo exports the repo and checks it against everything else: the
// signature, the canonical tree of its records (rebuilt from scratch), the
// record table, listRecords, and that repo_block holds nothing else.
func (f *fixture) checkRepo() map[string]cid.Cid {
	f.t.Helper()
	ctx := context.Background()
	var car bytes.Buffer
	if err := repo.ExportCAR(ctx, f.db.Reader(), &car, ""); err != nil {
		f.t.Fatal(err)
	}
	commit, r, err := indigorepo.LoadRepoFromCAR(ctx, bytes.NewReader(car.Bytes()))
	if err != nil {
		f.t.Fatal(err)
	}
	if err := commit.VerifySignature(f.pub); err != nil {
		f.t.Fatalf("exported commit signature: %v", err)
	}
	head, _, err := repo.Head(ctx, f.db.Reader())
	if err != nil {
		f.t.Fatal(err)
	}
	_, root, _ := indigorepo.LoadCommitFromCAR(ctx, bytes.NewReader(car.Bytes()))
	if !root.Equals(head) {
		f.t.Fatalf("CAR root %s, head %s", root, head)
	}
	if r.MST.IsPartial() {
		f.t.Fatal("exported tree is partial")
	}
	if err := r.MST.Verify(); err != nil {
		f.t.Fatal(err)
	}
	inTree := map[string]cid.Cid{}
	if err := r.MST.WriteToMap(inTree); err != nil {
		f.t.Fatal(err)
	}
	canonical, err := mst.LoadTreeFromMap(inTree)
	if err != nil {
		f.t.Fatal(err)
	}
	if c, err := canonical.RootCID(); err != nil || !c.Equals(commit.Data) {
		f.t.Fatalf("tree built from scratch has root %s, commit data %s", c, commit.Data)
	}

	// Every record listed is in the tree, with its block, and no more.
	cols, err := repo.Collections(ctx, f.db.Reader())
	if err != nil {
		f.t.Fatal(err)
	}
	listed := 0
	for _, col := range cols {
		cursor := ""
		for {
			recs, next, err := repo.ListRecords(ctx, f.db.Reader(), syntax.NSID(col), 7, cursor, false)
			if err != nil {
				f.t.Fatal(err)
			}
			for _, rec := range recs {
				listed++
				path := col + "/" + rec.RKey.String()
				if c, ok := inTree[path]; !ok || !c.Equals(rec.CID) {
					f.t.Fatalf("listed %s at %s, tree has %s", path, rec.CID, c)
				}
				if got, err := cidBuilderSum(rec.Value); err != nil || !got.Equals(rec.CID) {
					f.t.Fatalf("%s: value hashes to %s, want %s", path, got, rec.CID)
				}
			}
			if len(recs) < 7 {
				break
			}
			cursor = next
		}
	}
	if listed != len(inTree) {
		f.t.Fatalf("listed %d records, tree holds %d", listed, len(inTree))
	}

	// repo_block holds exactly the commit, the nodes and the records.
	blocks := 1 + countNodes(r.MST.Root)
	distinct := map[cid.Cid]bool{}
	for _, c := range inTree {
		distinct[c] = true
	}
	blocks += len(distinct)
	var stored int
	if err := f.db.Reader().QueryRow(`SELECT count(*) FROM repo_block`).Scan(&stored); err != nil {
		f.t.Fatal(err)
	}
	if stored != blocks {
		f.t.Fatalf("repo_block holds %d blocks, the repo %d", stored, blocks)
	}
	return inTree
}

func countNodes(n *mst.Node) int {
	count := 1
	for _, e := range n.Entries {
		if e.Child != nil {
			count += countNodes(e.Child)
		}
	}
	return count
}

func cidBuilderSum(b []byte) (cid.Cid, error) {
	return cid.NewPrefixV1(cid.DagCBOR, 0x12).Sum(b)
}

// post is a DAG-CBOR app.bsky.feed.post.
func post(t testing.TB, text string) []byte {
	t.Helper()
	b, err := atdata.MarshalCBOR(map[string]any{
		"$type":     "app.bsky.feed.post",
		"text":      text,
		"createdAt": time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC).Format(time.RFC3339),
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const posts = syntax.NSID("app.bsky.feed.post")

func create(t testing.TB, rkey, text string) repo.Write {
	return repo.Write{Action: repo.ActionCreate, Collection: posts, RKey: syntax.RecordKey(rkey), Value: post(t, text)}
}

func update(t testing.TB, rkey, text string) repo.Write {
	return repo.Write{Action: repo.ActionUpdate, Collection: posts, RKey: syntax.RecordKey(rkey), Value: post(t, text)}
}

func del(rkey string) repo.Write {
	return repo.Write{Action: repo.ActionDelete, Collection: posts, RKey: syntax.RecordKey(rkey)}
}

func cidOf(t testing.TB, b []byte) cid.Cid {
	t.Helper()
	c, err := cidBuilderSum(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// atdataParse encodes a record written in the JSON data model as DAG-CBOR.
func atdataParse(m map[string]any) ([]byte, error) {
	j, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	obj, err := atdata.UnmarshalJSON(j)
	if err != nil {
		return nil, err
	}
	return atdata.MarshalCBOR(obj)
}
