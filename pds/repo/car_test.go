package repo_test

import (
	"bufio"
	"bytes"
	"database/sql"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	cbornode "github.com/ipfs/go-ipld-cbor"
	car "github.com/ipld/go-car"
	carutil "github.com/ipld/go-car/util"

	"github.com/fakepds/fakepds/pds/repo"
)

// readCAR returns a CAR's roots and its blocks in order, checking each
// block's hash. It reads the framing itself: go-car's reader refuses a CAR
// without roots, which sync.getBlocks answers (as the reference does).
func readCAR(t *testing.T, b []byte) ([]cid.Cid, []cid.Cid, map[cid.Cid][]byte) {
	t.Helper()
	br := bufio.NewReader(bytes.NewReader(b))
	hb, err := carutil.LdRead(br)
	if err != nil {
		t.Fatal(err)
	}
	var h car.CarHeader
	if err := cbornode.DecodeInto(hb, &h); err != nil || h.Version != 1 {
		t.Fatalf("CAR header %+v: %v", h, err)
	}
	var order []cid.Cid
	data := map[cid.Cid][]byte{}
	for {
		c, blk, err := carutil.ReadNode(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if sum, err := c.Prefix().Sum(blk); err != nil || !sum.Equals(c) {
			t.Fatalf("block %s hashes to %s", c, sum)
		}
		order = append(order, c)
		data[c] = blk
	}
	return h.Roots, order, data
}

func writeCAR(t *testing.T, roots []cid.Cid, order []cid.Cid, data map[cid.Cid][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := car.WriteHeader(&car.CarHeader{Roots: roots, Version: 1}, &buf); err != nil {
		t.Fatal(err)
	}
	for _, c := range order {
		if err := carutil.LdWrite(&buf, c.Bytes(), data[c]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func export(t *testing.T, f *fixture, since string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := repo.ExportCAR(t.Context(), f.db.Reader(), &buf, since); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExportSince(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c1 := f.mustApply(create(t, "a", "a"), create(t, "b", "b"))
	c2 := f.mustApply(create(t, "c", "c"))
	c3 := f.mustApply(update(t, "b", "b2"))

	_, full, fullData := readCAR(t, export(t, f, ""))
	if !full[0].Equals(c3.CID) {
		t.Fatalf("first block %s, want the head commit %s", full[0], c3.CID)
	}
	for _, tc := range []struct {
		since string
		want  []cid.Cid // must be in
		not   []cid.Cid // must not
	}{
		{c1.Rev, []cid.Cid{c3.CID, *c2.Results[0].CID, *c3.Results[0].CID}, []cid.Cid{*c1.Results[0].CID}},
		{c2.Rev, []cid.Cid{c3.CID, *c3.Results[0].CID}, []cid.Cid{*c1.Results[0].CID, *c2.Results[0].CID}},
		{c3.Rev, nil, []cid.Cid{c3.CID}},
	} {
		roots, got, _ := readCAR(t, export(t, f, tc.since))
		if len(roots) != 1 || !roots[0].Equals(c3.CID) {
			t.Fatalf("since %s: roots %v", tc.since, roots)
		}
		for _, c := range got {
			if _, ok := fullData[c]; !ok {
				t.Fatalf("since %s: block %s not in the full export", tc.since, c)
			}
		}
		for _, c := range tc.want {
			if !slices.Contains(got, c) {
				t.Fatalf("since %s: %s missing", tc.since, c)
			}
		}
		for _, c := range tc.not {
			if slices.Contains(got, c) {
				t.Fatalf("since %s: %s (older) sent", tc.since, c)
			}
		}
	}
}

// ExportCARBytes answers ExportCAR's bytes while they fit in its limit,
// and both frame each block as go-car does (the CAR written again with
// go-car's LdWrite from the blocks read is the same bytes).
func TestExportCARBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c1 := f.mustApply(create(t, "a", "a"), create(t, "b", "b"))
	f.mustApply(create(t, "c", "c"), update(t, "a", "a2"))
	for _, since := range []string{"", c1.Rev} {
		want := export(t, f, since)
		roots, order, data := readCAR(t, want)
		if again := writeCAR(t, roots, order, data); !bytes.Equal(again, want) {
			t.Fatalf("since %q: the export is not go-car's framing of its blocks", since)
		}
		prefix := []byte("kept")
		got, err := repo.ExportCARBytes(t.Context(), f.db.Reader(), prefix, since, len(want))
		if err != nil || !bytes.Equal(got, append([]byte("kept"), want...)) {
			t.Fatalf("since %q: ExportCARBytes = %d bytes, %v; want %d after the prefix", since, len(got), err, len(want))
		}
		got, err = repo.ExportCARBytes(t.Context(), f.db.Reader(), prefix, since, len(want)-1)
		if !errors.Is(err, repo.ErrExportTooLarge) || string(got) != "kept" {
			t.Fatalf("since %q, a byte short: ExportCARBytes = %q, %v; want the prefix, ErrExportTooLarge", since, got, err)
		}
	}
}

func TestRecordProofCAR(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	var writes []repo.Write
	for i := range 300 {
		writes = append(writes, create(t, syntax.NewTIDFromInteger(uint64(i)<<12).String(), "p"))
	}
	f.mustApply(writes[:150]...)
	c := f.mustApply(writes[150:]...)
	for _, tc := range []struct {
		rkey    syntax.RecordKey
		present bool
	}{
		{writes[0].RKey, true},
		{writes[150].RKey, true},
		{writes[299].RKey, true},
		{"absent", false},
		{"3zzzzzzzzzzzz", false},
	} {
		var buf bytes.Buffer
		err := f.db.Read(t.Context(), func(tx *sql.Tx) error {
			return repo.RecordProofCAR(t.Context(), tx, posts, tc.rkey, &buf)
		})
		if err != nil {
			t.Fatal(err)
		}
		commit, r, err := indigorepo.LoadRepoFromCAR(t.Context(), bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		if err := commit.VerifySignature(f.pub); err != nil || !commit.Data.Equals(c.Data) {
			t.Fatalf("proof commit: %v, data %s want %s", err, commit.Data, c.Data)
		}
		if !r.MST.IsPartial() {
			t.Fatal("the proof holds the whole tree, not a path")
		}
		got, err := r.MST.Get([]byte(posts.String() + "/" + tc.rkey.String()))
		if err != nil {
			t.Fatalf("%s: the proof does not cover the key: %v", tc.rkey, err)
		}
		if (got != nil) != tc.present {
			t.Fatalf("%s: proof says %v, want present=%v", tc.rkey, got, tc.present)
		}
		if tc.present {
			val, rc, err := r.GetRecordBytes(t.Context(), posts, tc.rkey)
			if err != nil || !rc.Equals(cidOf(t, val)) {
				t.Fatalf("%s: record block: %v", tc.rkey, err)
			}
		}
	}
}

func TestGetBlocks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "")
	c := f.mustApply(create(t, "a", "a"), create(t, "b", "b"))
	want := []cid.Cid{*c.Results[1].CID, c.CID, *c.Results[0].CID}
	var buf bytes.Buffer
	missing, err := repo.GetBlocks(t.Context(), f.db.Reader(), want, &buf)
	if err != nil || missing != nil {
		t.Fatalf("GetBlocks: %v, missing %v", err, missing)
	}
	roots, got, data := readCAR(t, buf.Bytes())
	if len(roots) != 0 || !slices.Equal(got, want) {
		t.Fatalf("roots %v blocks %v, want none and %v", roots, got, want)
	}
	if !bytes.Equal(data[want[0]], post(t, "b")) {
		t.Fatal("wrong content")
	}
	gone := cidOf(t, post(t, "never written"))
	buf.Reset()
	missing, err = repo.GetBlocks(t.Context(), f.db.Reader(), []cid.Cid{c.CID, gone}, &buf)
	if err != nil || len(missing) != 1 || !missing[0].Equals(gone) || buf.Len() != 0 {
		t.Fatalf("GetBlocks with a missing cid: %v, missing %v, wrote %d bytes", err, missing, buf.Len())
	}
}

func TestImport(t *testing.T) {
	t.Parallel()
	src := newFixture(t, "")
	src.mustApply(create(t, "same", "same"), create(t, "changed", "new"), create(t, "added", "added"),
		repo.Write{Action: repo.ActionCreate, Collection: "app.bsky.graph.follow", RKey: "f", Value: post(t, "follow")})
	carFile := export(t, src, "")

	dst := newFixture(t, "")
	dst.mustApply(create(t, "same", "same"), create(t, "changed", "old"), create(t, "dropped", "dropped"))
	var ops []repo.Op
	err := dst.db.Write(t.Context(), func(tx *sql.Tx) error {
		var err error
		ops, err = repo.Import(t.Context(), tx, dst.did, bytes.NewReader(carFile), time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, op := range ops {
		got = append(got, string(op.Action)+" "+op.Path)
	}
	want := []string{
		"create app.bsky.feed.post/added",
		"update app.bsky.feed.post/changed",
		"delete app.bsky.feed.post/dropped",
		"create app.bsky.graph.follow/f",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ops %v, want %v", got, want)
	}
	// The head is the imported commit under a fresh rev, after the one
	// it replaced, as the reference sets it.
	before := dst.head.Rev
	head, rev, err := repo.Head(t.Context(), dst.db.Reader())
	if err != nil || !head.Equals(src.head.CID) || rev <= before || rev <= src.head.Rev {
		t.Fatalf("head after import %s %s, want %s under a rev after %s and %s", head, rev, src.head.CID, before, src.head.Rev)
	}
	// The imported commit is the source's, signed with its key.
	dstKey := dst.pub
	dst.pub = src.pub
	dst.checkRepo()
	srcRoots, _, srcBlocks := readCAR(t, carFile)
	dstRoots, _, dstBlocks := readCAR(t, export(t, dst, ""))
	if !slices.Equal(srcRoots, dstRoots) || len(srcBlocks) != len(dstBlocks) {
		t.Fatalf("export after import: roots %v, %d blocks; imported %v, %d", dstRoots, len(dstBlocks), srcRoots, len(srcBlocks))
	}
	for c, b := range srcBlocks {
		if !bytes.Equal(dstBlocks[c], b) {
			t.Fatalf("block %s not exported after import", c)
		}
	}

	// The repo goes on from there, signed with the new key, since the
	// fresh rev.
	dst.pub, dst.head = dstKey, src.head
	dst.head.Rev = rev
	dst.mustApply(create(t, "after", "after"), del("same"))
	dst.checkRepo()

	// Into a store without a repo yet.
	empty := &fixture{t: t, db: openStore(t, t.TempDir()), did: src.did, pub: src.pub}
	err = empty.db.Write(t.Context(), func(tx *sql.Tx) error {
		_, err := repo.Import(t.Context(), tx, src.did, bytes.NewReader(carFile), time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	empty.checkRepo()
}

// Another account's repo imports as the reference imports it (npm 0.5.35
// answers 200): neither its DID nor its signature is checked. Its commit
// becomes the head as it is; the next commit names the importing DID.
func TestImportAnotherAccountsRepo(t *testing.T) {
	t.Parallel()
	key, pub := newKey(t)
	src := &fixture{t: t, db: openStore(t, t.TempDir()), did: "did:plc:someoneelse00000000000000", key: key, pub: pub}
	if err := src.db.Write(t.Context(), func(tx *sql.Tx) error {
		c, err := repo.Create(t.Context(), tx, src.did, src.key, time.Now())
		src.head = c
		return err
	}); err != nil {
		t.Fatal(err)
	}
	src.mustApply(create(t, "theirs", "theirs"))
	dst := newFixture(t, "")
	dst.mustApply(create(t, "mine", "mine"))
	var ops []repo.Op
	if err := dst.db.Write(t.Context(), func(tx *sql.Tx) error {
		var err error
		ops, err = repo.Import(t.Context(), tx, dst.did, bytes.NewReader(export(t, src, "")), time.Now())
		return err
	}); err != nil {
		t.Fatalf("import of %s's repo into %s: %v", src.did, dst.did, err)
	}
	if len(ops) != 2 || ops[0].Path != "app.bsky.feed.post/mine" || ops[0].Action != repo.ActionDelete || ops[1].Path != "app.bsky.feed.post/theirs" {
		t.Fatalf("ops %+v, want mine deleted and theirs created", ops)
	}
	head, rev, err := repo.Head(t.Context(), dst.db.Reader())
	if err != nil || !head.Equals(src.head.CID) {
		t.Fatalf("head %s (%v), want the imported commit %s", head, err, src.head.CID)
	}
	dst.head = src.head
	dst.head.Rev = rev
	dst.mustApply(create(t, "after", "after"))
	var car bytes.Buffer
	if err := repo.ExportCAR(t.Context(), dst.db.Reader(), &car, ""); err != nil {
		t.Fatal(err)
	}
	commit, _, err := indigorepo.LoadRepoFromCAR(t.Context(), &car)
	if err != nil || commit.DID != dst.did.String() {
		t.Fatalf("commit after import of %+v (%v), want one of %s", commit, err, dst.did)
	}
}

func TestImportRejects(t *testing.T) {
	t.Parallel()
	src := newFixture(t, "")
	src.mustApply(create(t, "a", "a"), create(t, "b", "b"))
	full := export(t, src, "")
	roots, order, data := readCAR(t, full)
	withoutRecord := writeCAR(t, roots, slices.DeleteFunc(slices.Clone(order), func(c cid.Cid) bool {
		return c.Equals(*src.head.Results[0].CID)
	}), data)
	var proof bytes.Buffer
	if err := src.db.Read(t.Context(), func(tx *sql.Tx) error {
		return repo.RecordProofCAR(t.Context(), tx, posts, "a", &proof)
	}); err != nil {
		t.Fatal(err)
	}
	withoutCommit := writeCAR(t, roots, slices.DeleteFunc(slices.Clone(order), func(c cid.Cid) bool {
		return c.Equals(roots[0])
	}), data)
	// What the reference refuses as InvalidRequest is ErrInvalidRepo; what
	// it cannot read at all (its 500) is ErrUnreadableRepo.
	for _, tc := range []struct {
		name string
		did  syntax.DID
		car  []byte
		want error
		msg  string
	}{
		{"two roots", src.did, writeCAR(t, []cid.Cid{roots[0], roots[0]}, order, data), repo.ErrInvalidRepo, "expected one root"},
		{"no root", src.did, writeCAR(t, nil, order, data), repo.ErrInvalidRepo, "expected one root"},
		{"record missing", src.did, withoutRecord, repo.ErrInvalidRepo, "Could not parse record at 'app.bsky.feed.post/a'"},
		{"not a CAR", src.did, []byte("hello"), repo.ErrUnreadableRepo, ""},
		{"empty", src.did, nil, repo.ErrUnreadableRepo, ""},
		{"commit missing", src.did, withoutCommit, repo.ErrUnreadableRepo, ""},
		{"partial tree", src.did, proof.Bytes(), repo.ErrUnreadableRepo, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := newFixture(t, "")
			before, _, _ := repo.Head(t.Context(), dst.db.Reader())
			err := dst.db.Write(t.Context(), func(tx *sql.Tx) error {
				_, err := repo.Import(t.Context(), tx, tc.did, bytes.NewReader(tc.car), time.Now())
				return err
			})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want %v (%q)", err, tc.want, tc.msg)
			}
			if errors.Is(err, repo.ErrInvalidRepo) == errors.Is(err, repo.ErrUnreadableRepo) {
				t.Fatalf("err %v is both or neither", err)
			}
			if after, _, _ := repo.Head(t.Context(), dst.db.Reader()); !after.Equals(before) {
				t.Fatal("head moved")
			}
		})
	}
}
