package blob_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/blob"
	"github.com/fakepds/fakepds/pds/store"
)

const did = "did:plc:blobtestaccount0000000000"

// fixture is one account's actor store and blob store on a temp dir.
type fixture struct {
	t     *testing.T
	db    *store.DB
	blobs *blob.Store
	dir   string
	stmts *blob.RefStmts // what the server's writes use
}

func newFixture(t *testing.T, fsync bool) *fixture {
	t.Helper()
	dir := t.TempDir()
	db, err := actorstore.Opener(filepath.Join(dir, "actors"), store.Options{Fsync: fsync})(t.Context(), did)
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := blob.PrepareRefs(t.Context(), db.Writer())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stmts.Close(); db.Close() })
	return &fixture{t: t, db: db, blobs: blob.New(filepath.Join(dir, "blobs"), fsync), dir: dir, stmts: stmts}
}

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func (f *fixture) upload(data, mime string) atdata.Blob {
	f.t.Helper()
	ref, err := f.blobs.Upload(f.t.Context(), f.db, blob.Upload{DID: did, Body: strings.NewReader(data), MimeType: mime, Limit: 1 << 20, Now: now})
	if err != nil {
		f.t.Fatalf("upload: %v", err)
	}
	return ref
}

// write runs fn as a repo write would: one transaction, Collect last,
// Sweep after the commit.
func (f *fixture) write(fn func(ctx context.Context, r *blob.Refs) error) (blob.Garbage, error) {
	ctx := f.t.Context()
	var g blob.Garbage
	err := f.db.Write(ctx, func(tx *sql.Tx) error {
		r := blob.NewRefs(tx, f.stmts)
		if err := fn(ctx, r); err != nil {
			return err
		}
		var err error
		g, err = r.Collect(ctx)
		return err
	})
	if err != nil {
		return blob.Garbage{}, err
	}
	return g, f.blobs.Sweep(ctx, f.db, did, g)
}

func (f *fixture) mustWrite(fn func(ctx context.Context, r *blob.Refs) error) blob.Garbage {
	f.t.Helper()
	g, err := f.write(fn)
	if err != nil {
		f.t.Fatal(err)
	}
	return g
}

// read returns the blob's bytes as getBlob would serve them.
func (f *fixture) read(ref atdata.Blob) (string, error) {
	c, err := f.blobs.Open(f.t.Context(), f.db.Reader(), did, ref.Ref.CID())
	if err != nil {
		return "", err
	}
	defer c.Close()
	b, err := io.ReadAll(c)
	return string(b), err
}

// exists reports whether the blob's bytes are kept: in its row (a small
// blob) or in its file.
func (f *fixture) exists(ref atdata.Blob) bool {
	p, ok := f.blobs.Path(did, ref.Ref.CID())
	if !ok {
		f.t.Fatalf("no path for %s", ref.Ref)
	}
	var inRow bool
	err := f.db.Reader().QueryRowContext(f.t.Context(), `SELECT EXISTS (SELECT 1 FROM blob WHERE cid = ? AND content IS NOT NULL)`, ref.Ref.String()).Scan(&inRow)
	if err != nil {
		f.t.Fatal(err)
	}
	_, err = os.Stat(p)
	return inRow || err == nil
}

func (f *fixture) rows(table string) int {
	var n int
	if err := f.db.Reader().QueryRowContext(f.t.Context(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		f.t.Fatal(err)
	}
	return n
}

const uri1, uri2 = "at://" + did + "/app.bsky.feed.post/1", "at://" + did + "/app.bsky.feed.post/2"

func TestUploadAssociateServe(t *testing.T) {
	f := newFixture(t, false)
	ref := f.upload("hello world", "text/plain")
	if ref.Ref.CID() != blob.CID([]byte("hello world")) || ref.MimeType != "text/plain" || ref.Size != 11 ||
		ref.Ref.String() != "bafkreifzjut3te2nhyekklss27nh3k72ysco7y32koao5eei66wof36n5e" {
		t.Fatalf("ref = %+v %s", ref, ref.Ref)
	}
	if !f.exists(ref) {
		t.Fatal("no file after upload")
	}
	// A temporary upload is not served, as in the reference.
	if _, err := f.read(ref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("read temporary blob: %v", err)
	}
	// The first ref must match the upload; then it is permanent.
	for _, tc := range []struct {
		ref  atdata.Blob
		name string
		is   error
		msg  string
	}{
		{atdata.Blob{Ref: ref.Ref, MimeType: "image/png", Size: 11}, "InvalidMimeType", blob.ErrMimeTypeMismatch,
			"Referenced Mimetype does not match stored blob. Expected: text/plain, Got: image/png"},
		{atdata.Blob{Ref: ref.Ref, MimeType: "text/plain", Size: 12}, "InvalidSize", blob.ErrSizeMismatch,
			"Referenced Size does not match stored blob. Expected: 11, Got: 12"},
		{atdata.Blob{Ref: atdata.CIDLink(blob.CID([]byte("never uploaded"))), MimeType: "text/plain", Size: 14}, "BlobNotFound", blob.ErrBlobNotFound,
			"Could not find blob: " + blob.CID([]byte("never uploaded")).String()},
	} {
		_, err := f.write(func(ctx context.Context, r *blob.Refs) error { return r.Associate(ctx, uri1, []atdata.Blob{tc.ref}) })
		var re *blob.RefError
		if !errors.As(err, &re) || re.Name != tc.name || re.Message != tc.msg || !errors.Is(err, tc.is) {
			t.Fatalf("associate %+v: %v", tc.ref, err)
		}
	}
	if n := f.rows("record_blob"); n != 0 {
		t.Fatalf("failed writes left %d record_blob rows", n)
	}
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error { return r.Associate(ctx, uri1, []atdata.Blob{ref, ref}) })
	if got, err := f.read(ref); err != nil || got != "hello world" {
		t.Fatalf("read = %q, %v", got, err)
	}
	// Once permanent, refs are not checked any more (the reference's rule).
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error {
		return r.Associate(ctx, uri2, []atdata.Blob{{Ref: ref.Ref, MimeType: "image/png", Size: 99}})
	})
	c, err := f.blobs.Open(t.Context(), f.db.Reader(), did, ref.Ref.CID())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if c.MimeType != "text/plain" || c.Size != 11 {
		t.Fatalf("served as %q %d", c.MimeType, c.Size)
	}
}

func TestSniffedTypeWins(t *testing.T) {
	f := newFixture(t, false)
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + strings.Repeat("\x00", 17) + "\x00\x00\x00\x00IDAT\x00\x00\x00\x00"
	if ref := f.upload(png, "image/jpeg"); ref.MimeType != "image/png" {
		t.Fatalf("PNG declared as JPEG: %q", ref.MimeType)
	}
	if ref := f.upload("BMW", "text/plain"); ref.MimeType != "image/bmp" {
		t.Fatalf(`"BMW": %q, the reference's sniffer says image/bmp`, ref.MimeType)
	}
}

func TestGarbageCollection(t *testing.T) {
	f := newFixture(t, false)
	a, b := f.upload("blob a", "text/plain"), f.upload("blob b", "text/plain")
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error {
		if err := r.Associate(ctx, uri1, []atdata.Blob{a, b}); err != nil {
			return err
		}
		return r.Associate(ctx, uri2, []atdata.Blob{a})
	})

	// A failed transaction deletes nothing: rows and files stay.
	boom := errors.New("boom")
	if _, err := f.write(func(ctx context.Context, r *blob.Refs) error {
		if err := r.Dissociate(ctx, uri1); err != nil {
			return err
		}
		if err := r.Dissociate(ctx, uri2); err != nil {
			return err
		}
		if g, err := r.Collect(ctx); err != nil || g.Len() != 2 {
			t.Fatalf("collect inside = %v, %v", g.CIDs(), err)
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if f.rows("blob") != 2 || f.rows("record_blob") != 3 || !f.exists(a) || !f.exists(b) {
		t.Fatal("a rolled back write lost blobs")
	}

	// An update that keeps a blob, or a delete and a create of the same
	// blob in one write, frees nothing.
	if g := f.mustWrite(func(ctx context.Context, r *blob.Refs) error {
		if err := r.Dissociate(ctx, uri2); err != nil {
			return err
		}
		return r.Associate(ctx, uri2, []atdata.Blob{a})
	}); g.Len() != 0 {
		t.Fatalf("update freed %v", g.CIDs())
	}

	// uri1 goes: b is free, a is still referenced by uri2.
	g := f.mustWrite(func(ctx context.Context, r *blob.Refs) error { return r.Dissociate(ctx, uri1) })
	if g.Len() != 1 || g.CIDs()[0] != b.Ref.String() {
		t.Fatalf("garbage = %v, want [%s]", g.CIDs(), b.Ref)
	}
	if f.exists(b) || !f.exists(a) {
		t.Fatal("sweep deleted the wrong files")
	}
	if _, err := f.read(b); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("read collected blob: %v", err)
	}
	// uri2 goes: a is free too.
	if g := f.mustWrite(func(ctx context.Context, r *blob.Refs) error { return r.Dissociate(ctx, uri2) }); g.Len() != 1 {
		t.Fatalf("garbage = %v", g.CIDs())
	}
	if f.exists(a) || f.rows("blob") != 0 || f.rows("record_blob") != 0 {
		t.Fatal("blob a survived")
	}
}

// An upload of the same bytes between a write's commit and its sweep keeps
// its file.
func TestSweepSparesReupload(t *testing.T) {
	f := newFixture(t, false)
	a := f.upload("again", "text/plain")
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error { return r.Associate(ctx, uri1, []atdata.Blob{a}) })
	var g blob.Garbage
	err := f.db.Write(t.Context(), func(tx *sql.Tx) error {
		r := blob.NewRefs(tx, nil) // statements prepared per call, as importRepo's
		if err := r.Dissociate(t.Context(), uri1); err != nil {
			return err
		}
		var err error
		g, err = r.Collect(t.Context())
		return err
	})
	if err != nil || g.Len() != 1 {
		t.Fatalf("collect = %v, %v", g.CIDs(), err)
	}
	f.upload("again", "text/plain")
	if err := f.blobs.Sweep(t.Context(), f.db, did, g); err != nil {
		t.Fatal(err)
	}
	if !f.exists(a) {
		t.Fatal("sweep deleted the file of a blob uploaded again")
	}
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error { return r.Associate(ctx, uri2, []atdata.Blob{a}) })
	if got, err := f.read(a); err != nil || got != "again" {
		t.Fatalf("read = %q, %v", got, err)
	}
}

func TestMissingAndList(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	var refs []atdata.Blob
	for _, s := range []string{"one", "two", "three", "four", "five"} {
		refs = append(refs, atdata.Blob{Ref: atdata.CIDLink(blob.CID([]byte(s))), MimeType: "text/plain", Size: int64(len(s))})
	}
	// An import references blobs before they are uploaded.
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error {
		if err := r.Import(ctx, uri1, refs[:3]); err != nil {
			return err
		}
		return r.Import(ctx, uri2, refs[2:])
	})
	missing, err := blob.ListMissing(ctx, f.db.Reader(), "", 500)
	if err != nil || len(missing) != 5 {
		t.Fatalf("missing = %v, %v", missing, err)
	}
	for i := 1; i < len(missing); i++ {
		if missing[i-1].CID >= missing[i].CID {
			t.Fatalf("not in CID order: %v", missing)
		}
	}
	// Uploading one makes it permanent at once: it is served.
	two := f.upload("two", "text/plain")
	if got, err := f.read(two); err != nil || got != "two" {
		t.Fatalf("read imported blob = %q, %v", got, err)
	}
	var page []blob.Missing
	for cursor := ""; ; {
		p, err := blob.ListMissing(ctx, f.db.Reader(), cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == 0 {
			break
		}
		page = append(page, p...)
		cursor = p[len(p)-1].CID
	}
	if len(page) != 4 {
		t.Fatalf("paged missing = %v", page)
	}
	for _, m := range page {
		if m.CID == two.Ref.String() {
			t.Fatal("uploaded blob still missing")
		}
	}

	// listBlobs lists what records reference, uploaded or not, paged.
	var all []string
	for cursor := ""; ; {
		p, err := blob.List(ctx, f.db.Reader(), did, "", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == 0 {
			break
		}
		all = append(all, p...)
		cursor = p[len(p)-1]
	}
	if len(all) != 5 {
		t.Fatalf("listed %v", all)
	}
	// since: only records written after a rev.
	for _, r := range []struct{ rkey, rev string }{{"1", "3aaaaaaaaaa22"}, {"2", "3bbbbbbbbbb22"}} {
		if err := f.db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO record (collection, rkey, cid, repo_rev) VALUES ('app.bsky.feed.post', ?, x'00', ?)`, r.rkey, r.rev)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := blob.List(ctx, f.db.Reader(), did, "3aaaaaaaaaa22", "", 500)
	if err != nil || len(got) != 3 {
		t.Fatalf("since = %v, %v (want the 3 blobs of record 2)", got, err)
	}
}

func TestUploadLimitAndTakedown(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	_, err := f.blobs.Upload(ctx, f.db, blob.Upload{DID: did, Body: strings.NewReader(strings.Repeat("x", 101)), MimeType: "text/plain", Limit: 100, Now: now})
	if !errors.Is(err, blob.ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	if _, err := f.blobs.Upload(ctx, f.db, blob.Upload{DID: did, Body: strings.NewReader(strings.Repeat("x", 100)), MimeType: "text/plain", Limit: 100, Now: now}); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	ref := f.upload("taken", "text/plain")
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error { return r.Associate(ctx, uri1, []atdata.Blob{ref}) })
	if err := f.db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE blob SET takedown_ref = 'mod-1' WHERE cid = ?`, ref.Ref.String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.read(ref); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("read taken down: %v", err)
	}
	if _, err := f.blobs.Upload(ctx, f.db, blob.Upload{DID: did, Body: strings.NewReader("taken"), MimeType: "text/plain", Limit: 100, Now: now}); !errors.Is(err, blob.ErrTakendown) {
		t.Fatalf("re-upload taken down: %v", err)
	}
	if _, err := f.write(func(ctx context.Context, r *blob.Refs) error { return r.Associate(ctx, uri2, []atdata.Blob{ref}) }); !errors.Is(err, blob.ErrBlobNotFound) {
		t.Fatalf("reference taken down: %v", err)
	}
	// No temporary file is left behind by any of it (small blobs need no
	// directory at all).
	p, _ := f.blobs.Path(did, ref.Ref.CID())
	ents, err := os.ReadDir(filepath.Dir(p))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".upload-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
	if err := f.blobs.RemoveAccount(did); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
		t.Fatalf("account dir after RemoveAccount: %v", err)
	}
}

func TestPathsStayInside(t *testing.T) {
	s := blob.New("/data/blobs", false)
	for _, d := range []string{"did:plc:abc", "../../etc", "did:web:x/../../y", ""} {
		p, ok := s.Path(d, blob.CID([]byte("x")))
		if !ok || !strings.HasPrefix(p, "/data/blobs/") || strings.Contains(p[len("/data/blobs/"):], "..") {
			t.Errorf("Path(%q) = %q, %v", d, p, ok)
		}
	}
	// A CID that is not sha2-256 names no file.
	c, err := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: 0x12, MhLength: -1}.Sum([]byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Path("did:plc:abc", c); !ok {
		t.Error("sha2-256 CID refused")
	}
	id, err := cid.Prefix{Version: 1, Codec: cid.Raw, MhType: 0x00, MhLength: -1}.Sum([]byte("../x"))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.Path("did:plc:abc", id); ok {
		t.Errorf("identity CID named %q", p)
	}
}

// Uploads past the in-memory size stream through a temporary file.
func TestLargeUpload(t *testing.T) {
	f := newFixture(t, false)
	ctx := t.Context()
	data := strings.Repeat("0123456789", 30_000) // 300 kB
	png := pngHeader + data
	ref, err := f.blobs.Upload(ctx, f.db, blob.Upload{DID: did, Body: strings.NewReader(png), MimeType: "application/octet-stream", Limit: 1 << 20, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if ref.Ref.CID() != blob.CID([]byte(png)) || ref.Size != int64(len(png)) || ref.MimeType != "image/png" {
		t.Fatalf("ref = %s %q %d", ref.Ref, ref.MimeType, ref.Size)
	}
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error { return r.Associate(ctx, uri1, []atdata.Blob{ref}) })
	if got, err := f.read(ref); err != nil || got != png {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	_, err = f.blobs.Upload(ctx, f.db, blob.Upload{DID: did, Body: strings.NewReader(data), MimeType: "text/plain", Limit: 200_000, Now: now})
	if !errors.Is(err, blob.ErrTooLarge) {
		t.Fatalf("300 kB over a 200 kB limit: %v", err)
	}
	p, _ := f.blobs.Path(did, ref.Ref.CID())
	ents, err := os.ReadDir(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Fatalf("files left: %v", ents)
	}
}

const pngHeader = "\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR" + "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00IDAT"

// A blob below 64 KiB is kept in its row: its upload makes no directory
// and no file, and it is served from the row; one of 64 KiB is a file.
func TestSmallBlobInRow(t *testing.T) {
	f := newFixture(t, false)
	small := f.upload("small blob", "text/plain")
	f.mustWrite(func(ctx context.Context, r *blob.Refs) error { return r.Associate(ctx, uri1, []atdata.Blob{small}) })
	p, _ := f.blobs.Path(did, small.Ref.CID())
	if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
		t.Fatalf("account blob directory after a small upload: %v", err)
	}
	if got, err := f.read(small); err != nil || got != "small blob" {
		t.Fatalf("read = %q, %v", got, err)
	}
	large := f.upload(strings.Repeat("x", 64<<10), "text/plain")
	p, _ = f.blobs.Path(did, large.Ref.CID())
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("file of a 64 KiB upload: %v", err)
	}
	var inRow int
	if err := f.db.Reader().QueryRowContext(t.Context(), `SELECT count(*) FROM blob WHERE content IS NOT NULL`).Scan(&inRow); err != nil {
		t.Fatal(err)
	}
	if inRow != 1 {
		t.Fatalf("%d blobs kept in their row, want the small one", inRow)
	}
}
