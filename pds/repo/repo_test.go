package repo_test

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/identity"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/repo"
)

func TestCreate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := f.head
	if c.Since != nil || c.PrevData != nil || len(c.Ops) != 0 {
		t.Fatalf("new repo commit: since %v prevData %v ops %v", c.Since, c.PrevData, c.Ops)
	}
	if _, err := syntax.ParseTID(c.Rev); err != nil {
		t.Fatal(err)
	}
	if _, err := indigorepo.VerifyCommitMessage(t.Context(), roundTrip(t, c.CommitEvent())); err != nil {
		t.Fatalf("#commit: %v", err)
	}

	// The #sync event carries the commit alone, signed by the account key.
	dir := identity.NewMockDirectory()
	dir.Insert(identity.Identity{
		DID:    f.did,
		Handle: "alice.test",
		Keys:   map[string]identity.VerificationMethod{"atproto": {Type: "Multikey", PublicKeyMultibase: f.pub.Multibase()}},
	})
	sync := c.SyncEvent()
	sync.Seq, sync.Time = 2, syntax.DatetimeNow().String()
	var buf bytes.Buffer
	if err := sync.MarshalCBOR(&buf); err != nil {
		t.Fatal(err)
	}
	var got comatproto.SyncSubscribeRepos_Sync
	if err := got.UnmarshalCBOR(&buf); err != nil {
		t.Fatal(err)
	}
	commit, err := indigorepo.VerifySyncMessage(t.Context(), dir, &got)
	if err != nil {
		t.Fatalf("#sync: %v", err)
	}
	if commit.Rev != c.Rev || got.Rev != c.Rev || got.Did != f.did.String() {
		t.Fatalf("#sync rev %s/%s did %s, want %s %s", commit.Rev, got.Rev, got.Did, c.Rev, f.did)
	}

	// The same from the store, as account activation sends it, also after
	// a write.
	for i := range 2 {
		want := c
		if i == 1 {
			want = f.mustApply(create(t, "a", "a"))
		}
		ev, err := repo.SyncEvent(t.Context(), f.db.Reader(), f.did)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ev.Blocks, want.SyncBlocks()) || ev.Rev != want.Rev {
			t.Fatalf("SyncEvent rev %s, want %s (or blocks differ)", ev.Rev, want.Rev)
		}
		if commit, err := indigorepo.VerifySyncMessage(t.Context(), dir, ev); err != nil || commit.Rev != want.Rev {
			t.Fatalf("SyncEvent: %v", err)
		}
	}

	f.checkRepo()
	err = f.db.Write(t.Context(), func(tx *sql.Tx) error {
		_, err := repo.Create(t.Context(), tx, f.did, f.key, time.Now())
		return err
	})
	if !errors.Is(err, repo.ErrRepoExists) {
		t.Fatalf("second Create: %v, want ErrRepoExists", err)
	}
}

func TestApplyLifecycle(t *testing.T) {
	t.Parallel()
	for _, writer := range []bool{false, true} {
		t.Run(fmt.Sprintf("writer=%v", writer), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			if writer {
				f.withWriter()
			}
			testLifecycle(t, f)
		})
	}
}

func testLifecycle(t *testing.T, f *fixture) {
	a1, a2, b1 := post(t, "a1"), post(t, "a2"), post(t, "b1")
	ca1, ca2, cb1 := cidOf(t, a1), cidOf(t, a2), cidOf(t, b1)
	mk := func(action repo.Action, rkey string, val []byte) repo.Write {
		return repo.Write{Action: action, Collection: posts, RKey: syntax.RecordKey(rkey), Value: val}
	}
	for _, step := range []struct {
		name    string
		writes  []repo.Write
		wantOps []repo.Op // nil: no commit
		wantErr error
	}{
		{"create", []repo.Write{mk(repo.ActionCreate, "a", a1)},
			[]repo.Op{{Action: repo.ActionCreate, Path: "app.bsky.feed.post/a", CID: &ca1}}, nil},
		{"create existing", []repo.Write{mk(repo.ActionCreate, "a", a2)}, nil, repo.ErrRecordExists},
		{"update missing", []repo.Write{mk(repo.ActionUpdate, "zz", a2)}, nil, repo.ErrRecordNotFound},
		{"update", []repo.Write{mk(repo.ActionUpdate, "a", a2)},
			[]repo.Op{{Action: repo.ActionUpdate, Path: "app.bsky.feed.post/a", CID: &ca2, Prev: &ca1}}, nil},
		{"update to same value", []repo.Write{mk(repo.ActionUpdate, "a", a2)}, nil, nil},
		{"same block twice", []repo.Write{mk(repo.ActionCreate, "b", a2), mk(repo.ActionCreate, "c", b1)},
			[]repo.Op{
				{Action: repo.ActionCreate, Path: "app.bsky.feed.post/b", CID: &ca2},
				{Action: repo.ActionCreate, Path: "app.bsky.feed.post/c", CID: &cb1},
			}, nil},
		{"delete one sharer keeps the block", []repo.Write{mk(repo.ActionDelete, "a", nil)},
			[]repo.Op{{Action: repo.ActionDelete, Path: "app.bsky.feed.post/a", Prev: &ca2}}, nil},
		{"delete missing", []repo.Write{mk(repo.ActionDelete, "a", nil)}, nil, nil},
		{"mixed batch", []repo.Write{mk(repo.ActionDelete, "b", nil), mk(repo.ActionCreate, "a", a1), mk(repo.ActionDelete, "nope", nil), mk(repo.ActionUpdate, "c", a2)},
			[]repo.Op{
				{Action: repo.ActionDelete, Path: "app.bsky.feed.post/b", Prev: &ca2},
				{Action: repo.ActionCreate, Path: "app.bsky.feed.post/a", CID: &ca1},
				{Action: repo.ActionUpdate, Path: "app.bsky.feed.post/c", CID: &ca2, Prev: &cb1},
			}, nil},
		{"delete all", []repo.Write{mk(repo.ActionDelete, "a", nil), mk(repo.ActionDelete, "c", nil)},
			[]repo.Op{
				{Action: repo.ActionDelete, Path: "app.bsky.feed.post/a", Prev: &ca1},
				{Action: repo.ActionDelete, Path: "app.bsky.feed.post/c", Prev: &ca2},
			}, nil},
	} {
		before := f.head
		c, err := f.apply(step.writes, nil)
		if !errors.Is(err, step.wantErr) {
			t.Fatalf("%s: err %v, want %v", step.name, err, step.wantErr)
		}
		if err != nil || step.wantOps == nil {
			if c != nil {
				t.Fatalf("%s: commit %s, want none", step.name, c.CID)
			}
			if head, _, _ := repo.Head(t.Context(), f.db.Reader()); !head.Equals(before.CID) {
				t.Fatalf("%s: head moved to %s", step.name, head)
			}
			f.checkRepo()
			continue
		}
		f.checkCommit(c)
		f.checkHead(c)
		if fmt.Sprint(c.Ops) != fmt.Sprint(step.wantOps) {
			t.Fatalf("%s: ops %v, want %v", step.name, c.Ops, step.wantOps)
		}
		for i, w := range step.writes {
			res := c.Results[i]
			if want := syntax.ATURI("at://" + f.did.String() + "/" + w.Path()); res.URI != want {
				t.Fatalf("%s: result %d uri %s, want %s", step.name, i, res.URI, want)
			}
			if (w.Action == repo.ActionDelete) != (res.CID == nil) {
				t.Fatalf("%s: result %d cid %v for a %s", step.name, i, res.CID, w.Action)
			}
		}
		f.checkRepo()
	}
}

func TestSwap(t *testing.T) {
	t.Parallel()
	val := post(t, "v")
	cur := cidOf(t, val)
	other := cidOf(t, post(t, "other"))
	absent := &cid.Undef
	for _, tc := range []struct {
		name   string
		write  repo.Write
		swap   *cid.Cid
		ok     bool
		record bool // a record swap (else a commit swap) fails
	}{
		{"update at current", repo.Write{Action: repo.ActionUpdate, RKey: "x", Value: post(t, "n"), SwapRecord: &cur}, &cur, true, false},
		{"update at other", repo.Write{Action: repo.ActionUpdate, RKey: "x", Value: post(t, "n"), SwapRecord: &other}, nil, false, true},
		{"update expecting absence", repo.Write{Action: repo.ActionUpdate, RKey: "x", Value: post(t, "n"), SwapRecord: absent}, nil, false, true},
		{"delete at current", repo.Write{Action: repo.ActionDelete, RKey: "x", SwapRecord: &cur}, nil, true, false},
		{"delete at other", repo.Write{Action: repo.ActionDelete, RKey: "x", SwapRecord: &other}, nil, false, true},
		{"create expecting absence", repo.Write{Action: repo.ActionCreate, RKey: "y", Value: val, SwapRecord: absent}, nil, true, false},
		{"create of existing expecting absence", repo.Write{Action: repo.ActionCreate, RKey: "x", Value: val, SwapRecord: absent}, nil, false, true},
		{"create expecting a cid", repo.Write{Action: repo.ActionCreate, RKey: "y", Value: val, SwapRecord: &cur}, nil, false, true},
		{"stale commit", repo.Write{Action: repo.ActionCreate, RKey: "y", Value: val}, &other, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, "")
			f.mustApply(repo.Write{Action: repo.ActionCreate, Collection: posts, RKey: "x", Value: val})
			tc.write.Collection = posts
			swap := tc.swap
			if swap != nil && swap.Equals(cur) {
				swap = &f.head.CID // "the current head"
			}
			c, err := f.apply([]repo.Write{tc.write}, swap)
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				f.checkCommit(c)
				f.checkHead(c)
				return
			}
			var se *repo.SwapError
			if !errors.Is(err, repo.ErrInvalidSwap) || !errors.As(err, &se) || se.Record != tc.record {
				t.Fatalf("err %v, want a %s swap error", err, map[bool]string{true: "record", false: "commit"}[tc.record])
			}
			want := "Commit was at " + f.head.CID.String()
			if tc.record {
				want = "Record was at null"
				if tc.write.RKey == "x" {
					want = "Record was at " + cur.String()
				}
			}
			if se.Error() != want {
				t.Fatalf("message %q, want %q", se.Error(), want)
			}
			f.checkRepo()
		})
	}
}

// Random batches on a repo that grows past a few hundred records, with
// short keys so the tree gets several levels: every commit must verify as
// an inductive firehose event and the tree must stay the canonical one.
func TestRandomWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "").withWriter()
	rng := rand.New(rand.NewPCG(1, 2))
	have := map[string]bool{}
	keys := func() []string {
		out := make([]string, 0, len(have))
		for k := range have {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	for round := range 120 {
		var writes []repo.Write
		touched := map[string]bool{}
		n := 1 + rng.IntN(8)
		if round%10 == 0 {
			n = 60 // a big applyWrites now and then
		}
		existing := keys()
		for range n {
			var w repo.Write
			switch r := rng.IntN(10); {
			case r < 6 || len(existing) == 0:
				rkey := fmt.Sprintf("k%04d", rng.IntN(5000))
				if have[rkey] || touched[rkey] {
					continue
				}
				w = create(t, rkey, fmt.Sprintf("v%d", rng.Int()))
			case r < 8:
				rkey := existing[rng.IntN(len(existing))]
				if touched[rkey] {
					continue
				}
				w = update(t, rkey, fmt.Sprintf("v%d", rng.Int()))
			default:
				rkey := existing[rng.IntN(len(existing))]
				if touched[rkey] {
					continue
				}
				w = del(rkey)
			}
			touched[w.RKey.String()] = true
			writes = append(writes, w)
		}
		if len(writes) == 0 {
			continue
		}
		c := f.mustApply(writes...)
		if len(c.Ops) != len(writes) {
			t.Fatalf("round %d: %d ops for %d writes", round, len(c.Ops), len(writes))
		}
		for _, w := range writes {
			have[w.RKey.String()] = w.Action != repo.ActionDelete
			if w.Action == repo.ActionDelete {
				delete(have, w.RKey.String())
			}
		}
		if round%20 == 19 {
			if got := f.checkRepo(); len(got) != len(have) {
				t.Fatalf("round %d: tree holds %d records, want %d", round, len(got), len(have))
			}
		}
	}
	if len(have) < 200 {
		t.Fatalf("only %d records at the end: the tree stayed too small to test", len(have))
	}
}

func TestTooManyWrites(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "").withWriter()
	writes := make([]repo.Write, repo.MaxWrites+1)
	for i := range writes {
		writes[i] = create(t, fmt.Sprintf("r%d", i), "x")
	}
	if _, err := f.apply(writes, nil); !errors.Is(err, repo.ErrTooManyWrites) {
		t.Fatalf("err %v, want ErrTooManyWrites", err)
	}
	c := f.mustApply(writes[:repo.MaxWrites]...)
	if len(c.Ops) != repo.MaxWrites {
		t.Fatalf("%d ops", len(c.Ops))
	}
	big := make([]repo.Write, 3)
	for i := range big {
		big[i] = create(t, fmt.Sprintf("big%d", i), fmt.Sprint(i)+string(bytes.Repeat([]byte{'x'}, 700_000)))
	}
	if _, err := f.apply(big, nil); !errors.Is(err, repo.ErrTooBig) {
		t.Fatalf("err %v, want ErrTooBig", err)
	}
	f.checkRepo()
}

func TestApplyWithoutRepo(t *testing.T) {
	t.Parallel()
	db := openStore(t, t.TempDir())
	key, _ := newKey(t)
	err := db.Write(t.Context(), func(tx *sql.Tx) error {
		_, err := repo.Apply(t.Context(), tx, "did:plc:nobody", key, []repo.Write{create(t, "a", "x")}, nil, time.Now())
		return err
	})
	if !errors.Is(err, repo.ErrRepoNotFound) {
		t.Fatalf("err %v, want ErrRepoNotFound", err)
	}
	if _, _, err := repo.Head(t.Context(), db.Reader()); !errors.Is(err, repo.ErrRepoNotFound) {
		t.Fatalf("Head: %v", err)
	}
	if err := repo.ExportCAR(t.Context(), db.Reader(), &bytes.Buffer{}, ""); !errors.Is(err, repo.ErrRepoNotFound) {
		t.Fatalf("ExportCAR: %v", err)
	}
}

func TestReadRecords(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	likes := syntax.NSID("app.bsky.feed.like")
	var writes []repo.Write
	for _, rkey := range []string{"3", "1", "5", "2", "4"} {
		writes = append(writes, create(t, rkey, "post "+rkey))
	}
	writes = append(writes, repo.Write{Action: repo.ActionCreate, Collection: likes, RKey: "l1", Value: post(t, "like")})
	f.mustApply(writes...)
	ctx := t.Context()

	cols, err := repo.Collections(ctx, f.db.Reader())
	if err != nil || fmt.Sprint(cols) != "[app.bsky.feed.like app.bsky.feed.post]" {
		t.Fatalf("Collections = %v, %v", cols, err)
	}
	for _, tc := range []struct {
		limit   int
		cursor  string
		reverse bool
		want    string
		next    string
	}{
		{2, "", false, "[5 4]", "4"},
		{2, "4", false, "[3 2]", "2"},
		{10, "2", false, "[1]", "1"},
		{10, "1", false, "[]", ""},
		{3, "", true, "[1 2 3]", "3"},
		{3, "3", true, "[4 5]", "5"},
	} {
		recs, next, err := repo.ListRecords(ctx, f.db.Reader(), posts, tc.limit, tc.cursor, tc.reverse)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range recs {
			got = append(got, r.RKey.String())
			if _, val, err := repo.GetRecord(ctx, f.db.Reader(), posts, r.RKey, &r.CID); err != nil || !bytes.Equal(val, r.Value) {
				t.Fatalf("GetRecord(%s) = %v", r.RKey, err)
			}
		}
		if fmt.Sprint(got) != tc.want && !(tc.want == "[]" && got == nil) || next != tc.next {
			t.Fatalf("ListRecords(limit %d, cursor %q, reverse %v) = %v next %q, want %s next %q", tc.limit, tc.cursor, tc.reverse, got, next, tc.want, tc.next)
		}
	}

	c, val, err := repo.GetRecord(ctx, f.db.Reader(), posts, "3", nil)
	if err != nil || !bytes.Equal(val, post(t, "post 3")) || !c.Equals(cidOf(t, val)) {
		t.Fatalf("GetRecord = %s, %v", c, err)
	}
	other := cidOf(t, post(t, "else"))
	for _, tc := range []struct {
		rkey string
		cid  *cid.Cid
	}{{"9", nil}, {"3", &other}} {
		if _, _, err := repo.GetRecord(ctx, f.db.Reader(), posts, syntax.RecordKey(tc.rkey), tc.cid); !errors.Is(err, repo.ErrRecordNotFound) {
			t.Fatalf("GetRecord(%s, %v): %v, want ErrRecordNotFound", tc.rkey, tc.cid, err)
		}
	}
	// A taken down record is hidden from reads, as in the reference.
	if _, err := f.db.Writer().Exec(`UPDATE record SET takedown_ref = 'x' WHERE rkey = '3'`); err != nil {
		t.Fatal(err)
	}
	if _, _, err := repo.GetRecord(ctx, f.db.Reader(), posts, "3", nil); !errors.Is(err, repo.ErrRecordNotFound) {
		t.Fatalf("taken down record: %v", err)
	}
	if recs, _, _ := repo.ListRecords(ctx, f.db.Reader(), posts, 10, "", false); len(recs) != 4 {
		t.Fatalf("listed %d records with one taken down, want 4", len(recs))
	}
}

func TestBlobRefs(t *testing.T) {
	t.Parallel()
	img, err := cid.Decode("bafkreiccldh766hwcnuxnf2wh6jgzepf2nlu2lvcllt63eww5p6chi4ity")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		record map[string]any
		want   int
	}{
		{"none", map[string]any{"$type": "app.bsky.feed.post", "text": "hi"}, 0},
		{"embed", map[string]any{"$type": "app.bsky.feed.post", "embed": map[string]any{
			"$type": "app.bsky.embed.images",
			"images": []any{
				map[string]any{"alt": "", "image": map[string]any{"$type": "blob", "ref": map[string]any{"$link": img.String()}, "mimeType": "image/png", "size": 10}},
				map[string]any{"alt": "", "image": map[string]any{"$type": "blob", "ref": map[string]any{"$link": img.String()}, "mimeType": "image/png", "size": 10}},
			},
		}}, 2},
		{"legacy", map[string]any{"$type": "app.bsky.actor.profile", "avatar": map[string]any{"cid": img.String(), "mimeType": "image/png"}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			obj, err := atdataParse(tc.record)
			if err != nil {
				t.Fatal(err)
			}
			refs, err := repo.BlobRefs(obj)
			if err != nil {
				t.Fatal(err)
			}
			if len(refs) != tc.want {
				t.Fatalf("%d refs, want %d", len(refs), tc.want)
			}
			for _, r := range refs {
				if !r.Ref.CID().Equals(img) || r.MimeType != "image/png" {
					t.Fatalf("ref %+v", r)
				}
			}
		})
	}
	if _, err := repo.BlobRefs([]byte{0xff}); err == nil {
		t.Fatal("no error for bad CBOR")
	}
}

// A write whose transaction rolls back after Apply leaves no trace: the
// next write starts from the old head, and the node cache (which kept the
// rolled back nodes) does not lead it astray.
func TestRollback(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "").withWriter()
	f.mustApply(create(t, "a", "a"), create(t, "b", "b"))
	errLater := errors.New("a later step failed")
	err := f.db.Write(t.Context(), func(tx *sql.Tx) error {
		if _, err := f.w.Apply(t.Context(), tx, f.did, f.key, []repo.Write{create(t, "c", "c"), del("a")}, nil, time.Now()); err != nil {
			return err
		}
		return errLater
	})
	if !errors.Is(err, errLater) {
		t.Fatal(err)
	}
	if head, _, _ := repo.Head(t.Context(), f.db.Reader()); !head.Equals(f.head.CID) {
		t.Fatal("head moved by a rolled back write")
	}
	f.checkRepo()
	f.mustApply(create(t, "c", "c2"), del("b"))
	f.checkRepo()
}

// Writers queue for the store's one writer connection: concurrent Applies
// all land, as a chain of commits whose revs strictly increase.
func TestConcurrentApply(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "").withWriter()
	const workers, each = 4, 10
	commits := make(chan *repo.Commit, workers*each)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				c, err := f.apply([]repo.Write{create(t, fmt.Sprintf("w%d-%d", w, i), "x")}, nil)
				if err != nil {
					t.Error(err)
					return
				}
				commits <- c
			}
		})
	}
	wg.Wait()
	close(commits)
	bySince := map[string]*repo.Commit{}
	for c := range commits {
		bySince[*c.Since] = c
	}
	// Follow the chain from the first commit: every commit is its
	// predecessor's successor, so all of them form one line.
	n := 0
	for c := bySince[f.head.Rev]; c != nil; c = bySince[c.Rev] {
		f.checkCommit(c)
		n++
	}
	if n != workers*each {
		t.Fatalf("chain of %d commits, want %d", n, workers*each)
	}
	if got := f.checkRepo(); len(got) != workers*each {
		t.Fatalf("%d records", len(got))
	}
}

// A batch may touch one path twice (the reference applies such writes in
// order too); what is stored is the end state.
func TestSamePathTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c, err := f.apply([]repo.Write{create(t, "d", "first"), del("d"), create(t, "e", "e"), update(t, "e", "e2")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Ops) != 4 {
		t.Fatalf("ops %v", c.Ops)
	}
	if got := f.checkRepo(); len(got) != 1 || !got["app.bsky.feed.post/e"].Equals(cidOf(t, post(t, "e2"))) {
		t.Fatalf("records %v", got)
	}
}

// A Writer keeps the tree of its last commit and the next write starts
// from it: a long run of posts at the right edge (TID keys), with updates
// and deletes of recent ones, must leave exactly the live blocks, as a
// store written without a kept tree would.
func TestKeptTree(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "").withWriter()
	clock := syntax.NewTIDClock(0)
	var recent []string
	for i := range 400 {
		rkey := clock.Next().String()
		writes := []repo.Write{create(t, rkey, fmt.Sprint("post ", i))}
		switch {
		case i%7 == 3 && len(recent) > 2:
			writes = append(writes, update(t, recent[len(recent)-2], fmt.Sprint("edited ", i)))
		case i%11 == 5 && len(recent) > 3:
			writes = append(writes, del(recent[len(recent)-3]))
			recent = append(recent[:len(recent)-3], recent[len(recent)-2:]...)
		}
		recent = append(recent, rkey)
		f.mustApply(writes...)
		if i%100 == 99 {
			f.checkRepo()
		}
	}
	// A write the Writer did not make (the package-level Apply) moves the
	// head: the kept tree no longer matches and is not used.
	w := f.w
	f.w = nil
	if _, err := f.apply([]repo.Write{create(t, clock.Next().String(), "without the writer")}, nil); err != nil {
		t.Fatal(err)
	}
	f.w = w
	if _, err := f.apply([]repo.Write{create(t, clock.Next().String(), "with it again")}, nil); err != nil {
		t.Fatal(err)
	}
	f.checkRepo()
}

// A Writer prepares the statements of updates and deletes only once a
// write has one (Prepare); a write that runs one not prepared yet still
// applies, preparing it in its own transaction, and the next Prepare
// prepares it, whatever that write holds.
func TestWriterPreparesOnNeed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "").withWriter()
	ctx := t.Context()
	creates := []repo.Write{create(t, "a", "1"), create(t, "b", "1")}
	if err := f.w.Prepare(ctx, creates, false); err != nil {
		t.Fatal(err)
	}
	f.mustApply(creates...)
	base := f.w.NumPrepared()
	f.mustApply(update(t, "a", "2"), del("b")) // not prepared: per transaction
	if n := f.w.NumPrepared(); n != base {
		t.Fatalf("creates and an unprepared update left %d statements prepared, want the %d of creates", n, base)
	}
	more := []repo.Write{create(t, "c", "1")}
	if err := f.w.Prepare(ctx, more, false); err != nil {
		t.Fatal(err)
	}
	if n := f.w.NumPrepared(); n <= base {
		t.Fatalf("Prepare after a write ran statements unprepared left %d statements prepared, want more than %d", n, base)
	}
	f.mustApply(more...)
	f.checkRepo()
}

// After PrepareRest a Writer has what small updates and deletes run:
// Prepare for them finds nothing left to prepare.
func TestWriterPrepareRest(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "").withWriter()
	ctx := t.Context()
	f.mustApply(create(t, "a", "1"), create(t, "b", "1"))
	// What the creates ran unprepared, if anything (an MST node read).
	if err := f.w.Prepare(ctx, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := f.w.PrepareRest(ctx); err != nil {
		t.Fatal(err)
	}
	base := f.w.NumPrepared()
	writes := []repo.Write{update(t, "a", "2"), del("b")}
	if err := f.w.Prepare(ctx, writes, true); err != nil {
		t.Fatal(err)
	}
	if n := f.w.NumPrepared(); n != base {
		t.Fatalf("Prepare of an update and a delete after PrepareRest prepared %d more statements, want none", n-base)
	}
	f.mustApply(writes...)
	f.checkRepo()
}
