package blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"

	"github.com/fakepds/fakepds/pds/random"
	"github.com/fakepds/fakepds/pds/store"
)

// Errors of the store. The PDS answers them as the reference does.
var (
	// ErrTooLarge: the body passed Upload's limit.
	ErrTooLarge = errors.New("blob: larger than the upload limit")
	// ErrNotFound: no such blob to serve (unknown, temporary, taken down
	// or its file gone).
	ErrNotFound = errors.New("blob: not found")
	// ErrTakendown: an upload of a blob an admin took down.
	ErrTakendown = errors.New("blob: has been taken down")
)

// Store keeps blob files under one directory. It holds no state besides
// its configuration: every Store on the same directory is the same store.
// What serializes an upload with the deletion of the same blob is the
// account's actor store writer (both run inside a write transaction).
type Store struct {
	// Rand is where temporary keys are drawn from; crypto/rand when nil.
	Rand io.Reader

	dir   string
	fsync bool
}

// New returns the store of the blob files under dir. With fsync, every
// upload is on disk (file and directory entry) before Upload returns.
func New(dir string, fsync bool) *Store {
	return &Store{dir: dir, fsync: fsync}
}

// Prefix is the CID prefix of every blob: CIDv1, raw, sha2-256.
var Prefix = cid.NewPrefixV1(cid.Raw, multihash.SHA2_256)

// CID is the CID of a blob with the given content.
func CID(data []byte) cid.Cid {
	c, err := Prefix.Sum(data)
	if err != nil {
		panic(err) // sha2-256 cannot fail
	}
	return c
}

// accountDir is the directory of did's blobs.
func (s *Store) accountDir(did string) string {
	sum := sha256.Sum256([]byte(did))
	h := hex.EncodeToString(sum[:])
	return filepath.Join(s.dir, h[:2], h)
}

// Path is the file of blob c of did. ok is false when c cannot be a blob
// of this store (not a sha2-256 multihash).
func (s *Store) Path(did string, c cid.Cid) (path string, ok bool) {
	dh, err := multihash.Decode(c.Hash())
	if err != nil || dh.Code != multihash.SHA2_256 || len(dh.Digest) != sha256.Size {
		return "", false
	}
	return filepath.Join(s.accountDir(did), hex.EncodeToString(dh.Digest)), true
}

// Upload is one uploadBlob call.
type Upload struct {
	DID  string
	Body io.Reader
	// MimeType is the declared media type, kept when Sniff finds none.
	MimeType string
	// Limit is the largest body accepted: ErrTooLarge past it.
	Limit int64
	Now   time.Time
}

// smallBlob is the size below which an upload is held in memory and kept
// in its row of the actor store, written by the transaction that records
// it: no file, no directory, and with fsync one sync (the WAL's) instead of
// the file's and its directory's. Larger uploads stream to a temporary file
// and are renamed into place.
const smallBlob = 64 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, smallBlob); return &b }}

// Upload stores a blob for u.DID and records it in db (the account's
// actor store): Stage, then Commit.
func (s *Store) Upload(ctx context.Context, db *store.DB, u Upload) (atdata.Blob, error) {
	st, err := s.Stage(u)
	if err != nil {
		return atdata.Blob{}, err
	}
	defer st.Close()
	return s.Commit(ctx, db, st, u.Now)
}

// ErrRead wraps an error reading an upload's body (the client's, or its
// Content-Encoding's).
var ErrRead = errors.New("blob: reading the upload")

// Staged is an upload read whole, hashed and sniffed, not yet recorded.
// Staging reads the client's body, which takes as long as the client
// likes, so it needs nothing shared: no actor store, no transaction. The
// body is in memory below 64 KiB, else in a temporary file in the
// account's blob directory (where Commit renames it), as the reference
// stages an upload in its temporary blob store. Close it when done.
type Staged struct {
	// Ref is the blob ref uploadBlob answers with.
	Ref   atdata.Blob
	did   string
	small []byte // the whole blob, when it fits in buf
	tmp   string // else its temporary file
	buf   *[]byte
}

// Close frees the staged upload: its buffer, and its temporary file unless
// Commit moved it in place.
func (st *Staged) Close() {
	if st.tmp != "" {
		os.Remove(st.tmp) // fails harmlessly once renamed
		st.tmp = ""
	}
	if st.buf != nil {
		copyBufs.Put(st.buf)
		st.buf, st.small = nil, nil
	}
}

// Stage reads u.Body to its end: ErrTooLarge past u.Limit, an error
// wrapping ErrRead when the body cannot be read.
func (s *Store) Stage(u Upload) (*Staged, error) {
	dir := s.accountDir(u.DID)
	st := &Staged{did: u.DID, buf: copyBufs.Get().(*[]byte)}
	ok := false
	defer func() {
		if !ok {
			st.Close()
		}
	}()
	buf := *st.buf
	h := sha256.New()
	n, err := io.ReadFull(u.Body, buf)
	switch {
	case int64(n) > u.Limit:
		return nil, ErrTooLarge
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		err = nil
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrRead, err)
	}
	h.Write(buf[:n])
	size := int64(n)
	if n < len(buf) {
		st.small = buf[:n]
	} else {
		if st.tmp, err = s.spill(dir, u, buf, h, &size); err != nil {
			return nil, err
		}
	}

	var mime string
	if st.small != nil {
		mime = Sniff(bytes.NewReader(st.small), size)
	} else {
		f, err := os.Open(st.tmp)
		if err != nil {
			return nil, fmt.Errorf("blob: %w", err)
		}
		mime = Sniff(headReader{head: buf[:min(size, sampleSize)], f: f}, size)
		f.Close()
	}
	if mime == "" {
		mime = u.MimeType
	}
	mh, err := multihash.Encode(h.Sum(nil), multihash.SHA2_256)
	if err != nil {
		return nil, err
	}
	st.Ref = atdata.Blob{Ref: atdata.CIDLink(cid.NewCidV1(cid.Raw, mh)), MimeType: mime, Size: size}
	ok = true
	return st, nil
}

// Commit records a staged upload in db (the account's actor store) as a
// temporary upload, or as permanent when a record already references it
// (a repo imported before its blobs), with its bytes (a small blob) or
// its file put in place. It returns the blob ref uploadBlob answers with.
func (s *Store) Commit(ctx context.Context, db *store.DB, st *Staged, now time.Time) (atdata.Blob, error) {
	dir := s.accountDir(st.did)
	ref, small, tmpName := st.Ref, st.small, st.tmp
	c := cid.Cid(ref.Ref)
	final, _ := s.Path(st.did, c)

	if small != nil {
		// Prepared once per store: a failure here is the write's to meet.
		_ = db.PrepareQueries(ctx, UploadQueries()...)
	}
	err := db.Write(ctx, func(tx *sql.Tx) error {
		if small != nil {
			done, err := trackNew(ctx, tx, db.InTx(tx), ref, now, s.Rand, small)
			if done || err != nil {
				return err
			}
		}
		// One statement for what the upload needs to know: each costs a
		// parse.
		var existed, referenced bool
		var takedown sql.NullString
		err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM blob WHERE cid = ?1),
			(SELECT takedown_ref FROM blob WHERE cid = ?1),
			EXISTS (SELECT 1 FROM record_blob WHERE blob_cid = ?1)`, c.String()).Scan(&existed, &takedown, &referenced)
		if err != nil {
			return err
		}
		if takedown.Valid {
			return ErrTakendown
		}
		if small != nil {
			// The bytes go in the row, with this transaction.
			return track(ctx, tx, ref, referenced, now, newTempKey(s.Rand), small)
		}
		// The file goes in place inside the transaction: a Sweep of the
		// same blob runs in one too, so it sees this row or runs before.
		if err := os.Rename(tmpName, final); err != nil {
			return fmt.Errorf("blob: %w", err)
		}
		if s.fsync {
			if err := store.SyncDir(dir); err != nil {
				return fmt.Errorf("blob: %w", err)
			}
		}
		err = track(ctx, tx, ref, referenced, now, newTempKey(s.Rand), nil)
		if err != nil && !existed {
			// The file is this upload's alone: the row that would name it
			// is rolled back.
			os.Remove(final)
		}
		return err
	})
	if err != nil {
		return atdata.Blob{}, err
	}
	return ref, nil
}

// spill streams an upload larger than buf to a temporary file in dir,
// buf's bytes first, hashing and counting into h and size. With fsync the
// file is synced.
func (s *Store) spill(dir string, u Upload, buf []byte, h hash.Hash, size *int64) (string, error) {
	if err := s.ensureDir(dir); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return "", fmt.Errorf("blob: %w", err)
	}
	fail := func(err error) (string, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if _, err := tmp.Write(buf); err != nil {
		return fail(fmt.Errorf("blob: %w", err))
	}
	for {
		m, rerr := u.Body.Read(buf)
		if m > 0 {
			if *size+int64(m) > u.Limit {
				return fail(ErrTooLarge)
			}
			h.Write(buf[:m])
			if _, err := tmp.Write(buf[:m]); err != nil {
				return fail(fmt.Errorf("blob: %w", err))
			}
			*size += int64(m)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fail(fmt.Errorf("%w: %w", ErrRead, rerr))
		}
	}
	// buf now holds the last bytes read: put the head back for the sniffer.
	if _, err := tmp.ReadAt(buf[:min(*size, sampleSize)], 0); err != nil {
		return fail(fmt.Errorf("blob: %w", err))
	}
	if s.fsync {
		if err := tmp.Sync(); err != nil {
			return fail(fmt.Errorf("blob: %w", err))
		}
	}
	if err := tmp.Close(); err != nil {
		return fail(fmt.Errorf("blob: %w", err))
	}
	return tmp.Name(), nil
}

// track records an uploaded blob as temporary, unless it is already
// permanent, and makes it permanent at once when records already reference
// it. content is a small blob's bytes, nil for a blob in a file; a row
// that has none (its file lost, say) takes them.
func track(ctx context.Context, tx *sql.Tx, ref atdata.Blob, referenced bool, now time.Time, tempKey string, content []byte) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO blob (cid, mime_type, size, temp_key, created_at, content)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (cid) DO UPDATE SET temp_key = iif(blob.temp_key IS NULL, NULL, excluded.temp_key),
			content = coalesce(blob.content, excluded.content)`,
		ref.Ref.String(), ref.MimeType, ref.Size, tempKey, now.UTC().Format("2006-01-02T15:04:05.000Z"), content)
	if err != nil || !referenced {
		return err
	}
	return NewRefs(tx, nil).makePermanent(ctx, ref)
}

// UploadQueries are the statements of an account's common upload (a
// small blob it does not have yet), for preparing ahead
// (store.DB.PrepareQueries).
func UploadQueries() []string { return newBlobQueries[:] }

// newBlobQueries are trackNew's statements.
var newBlobQueries = [...]string{
	`INSERT INTO blob (cid, mime_type, size, temp_key, created_at, content)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
	`SELECT 1 FROM record_blob WHERE blob_cid = ? LIMIT 1`,
}

// trackNew is track of a small blob the account does not have yet, the
// common upload, in two plain statements (Commit's general ones, three
// subqueries and an upsert, cost three times as much to parse), which
// the store keeps prepared (newBlobQueries): parsing them was a third of
// an upload's transaction. done is false, with nothing written, when the
// account has the blob already: Commit's general path then decides
// (taken down, temporary or permanent, its bytes).
func trackNew(ctx context.Context, tx *sql.Tx, q store.TxQuerier, ref atdata.Blob, now time.Time, rand io.Reader, content []byte) (done bool, err error) {
	key := ref.Ref.String()
	res, err := q.ExecContext(ctx, newBlobQueries[0],
		key, ref.MimeType, ref.Size, newTempKey(rand), now.UTC().Format("2006-01-02T15:04:05.000Z"), content)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	// Records that already reference it (a repo imported before its
	// blobs) make it permanent at once, as track does.
	var one int
	err = q.QueryRowContext(ctx, newBlobQueries[1], key).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return true, NewRefs(tx, nil).makePermanent(ctx, ref)
}

// newTempKey is what marks a blob temporary. The reference names its
// temporary file with it; here the file is already where it stays.
func newTempKey(r io.Reader) string {
	var b [20]byte
	random.Read(r, b[:])
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
}

// headReader serves the first bytes of an upload from memory and the rest
// from its file.
type headReader struct {
	head []byte
	f    *os.File
}

func (r headReader) ReadAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) <= int64(len(r.head)) {
		return copy(p, r.head[off:]), nil
	}
	return r.f.ReadAt(p, off)
}

// Content is a blob opened for reading: Reader is the file (an *os.File,
// which net/http sends with sendfile) or, for a small blob, its bytes.
type Content struct {
	io.Reader
	MimeType string
	Size     int64
	f        *os.File
}

// Close closes the blob's file, if it has one.
func (c *Content) Close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}

// Querier is what the read functions query: a *sql.DB (an actor store's
// Reader) or a *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Open opens blob c of did for getBlob: ErrNotFound unless it is permanent,
// not taken down, and its file is there. The caller closes it.
func (s *Store) Open(ctx context.Context, q Querier, did string, c cid.Cid) (*Content, error) {
	path, ok := s.Path(did, c)
	if !ok {
		return nil, ErrNotFound
	}
	var out Content
	var temp bool
	var content []byte
	err := q.QueryRowContext(ctx, `SELECT mime_type, size, temp_key IS NOT NULL, content FROM blob
		WHERE cid = ? AND takedown_ref IS NULL`, c.String()).Scan(&out.MimeType, &out.Size, &temp, &content)
	if errors.Is(err, sql.ErrNoRows) || err == nil && temp {
		// A temporary blob's bytes are, in the reference, not yet where
		// getBlob looks.
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if content != nil {
		out.Reader = bytes.NewReader(content)
		return &out, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("blob: %w", err)
	}
	out.Reader, out.f = f, f
	return &out, nil
}

// Sweep deletes the files of g, blobs a committed transaction left without
// rows. Call it after that transaction commits, never inside it. It checks
// again, in a write transaction of db (the account's actor store), that no
// upload has brought a blob back since; that transaction is what keeps a
// concurrent Upload of the same bytes from losing its file.
func (s *Store) Sweep(ctx context.Context, db *store.DB, did string, g Garbage) error {
	if len(g.cids) == 0 {
		return nil
	}
	return db.Write(ctx, func(tx *sql.Tx) error {
		var errs []error
		for _, key := range g.cids {
			var one int
			err := tx.QueryRowContext(ctx, `SELECT 1 FROM blob WHERE cid = ?`, key).Scan(&one)
			if err == nil {
				continue // uploaded again since
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			c, err := cid.Decode(key)
			if err != nil {
				continue
			}
			if path, ok := s.Path(did, c); ok {
				if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
		return errors.Join(errs...)
	})
}

// RemoveAccount deletes every blob file of did, as the reference does when
// it deletes an account.
func (s *Store) RemoveAccount(did string) error {
	if err := os.RemoveAll(s.accountDir(did)); err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	return nil
}

// ensureDir makes an account's directory. With fsync, the entries of the
// directories it created are synced in their parents too.
func (s *Store) ensureDir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	if !s.fsync {
		return nil
	}
	for d := dir; ; {
		parent := filepath.Dir(d)
		if err := store.SyncDir(parent); err != nil {
			return fmt.Errorf("blob: %w", err)
		}
		if d == s.dir || parent == d {
			return nil
		}
		d = parent
	}
}
