package blob

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/fakepds/fakepds/pds/store"
)

// Errors of a record's blob refs, which the PDS answers with the
// reference's names (a RefError carries name and message).
var (
	// ErrBlobNotFound: the ref names no blob uploaded by this account (or
	// one taken down).
	ErrBlobNotFound = errors.New("blob: referenced blob not found")
	// ErrMimeTypeMismatch: the ref's mimeType is not the upload's.
	ErrMimeTypeMismatch = errors.New("blob: referenced mimeType does not match the upload")
	// ErrSizeMismatch: the ref's size is not the upload's.
	ErrSizeMismatch = errors.New("blob: referenced size does not match the upload")
)

// RefError is a blob ref a write may not make, as the reference names it:
// Name is BlobNotFound, InvalidMimeType or InvalidSize; Message is the
// reference's message. It unwraps to ErrBlobNotFound, ErrMimeTypeMismatch
// or ErrSizeMismatch.
type RefError struct {
	Name, Message string
	err           error
}

func (e *RefError) Error() string { return e.Name + ": " + e.Message }
func (e *RefError) Unwrap() error { return e.err }

// Refs updates the record_blob index of one repo write, inside its
// transaction: Dissociate the records it updates or deletes, Associate the
// records it creates or updates (an update: Dissociate first), then
// Collect, last.
type Refs struct {
	tx      *sql.Tx
	stmts   *RefStmts // nil: prepare per call
	dropped []string
}

// NewRefs starts the blob bookkeeping of a write in tx, the write
// transaction of the account's actor store, with statements prepared on
// its writer connection (nil: prepared per call).
func NewRefs(tx *sql.Tx, stmts *RefStmts) *Refs { return &Refs{tx: tx, stmts: stmts} }

// The statements of Refs. Every update or delete of a record runs
// dissociate, and preparing it was ~35 µs of a putRecord.
type refStmt int

const (
	refDissociate refStmt = iota
	refAssociate
	refLookup
	refPermanent
	refCollect
	numRefStmts
)

var refSQL = [numRefStmts]string{
	refDissociate: `DELETE FROM record_blob WHERE record_uri = ? RETURNING blob_cid`,
	refAssociate:  `INSERT INTO record_blob (blob_cid, record_uri) VALUES (?, ?) ON CONFLICT DO NOTHING`,
	refLookup:     `SELECT temp_key, mime_type, size FROM blob WHERE cid = ? AND takedown_ref IS NULL`,
	refPermanent:  `UPDATE blob SET temp_key = NULL WHERE cid = ?`,
	refCollect:    `DELETE FROM blob WHERE cid = ?1 AND NOT EXISTS (SELECT 1 FROM record_blob WHERE blob_cid = ?1)`,
}

// RefStmts are the statements of Refs prepared on an actor store's writer
// connection, for every write to bind to its transaction. One not
// prepared runs prepared per call.
type RefStmts struct{ st *store.Statements[refStmt] }

// PrepareRefs prepares them all on writer (store.DB.Writer), while no
// transaction holds its one connection.
func PrepareRefs(ctx context.Context, writer *sql.DB) (*RefStmts, error) {
	s := NewRefStmts(writer)
	if err := s.prepare(ctx, refDissociate, refAssociate, refLookup, refPermanent, refCollect); err != nil {
		return nil, err
	}
	return s, nil
}

// NewRefStmts is RefStmts for writer with nothing prepared yet: Prepare
// prepares what a write needs, before its transaction. Most writes create
// records without blobs and need none.
func NewRefStmts(writer *sql.DB) *RefStmts {
	return &RefStmts{st: store.NewStatements[refStmt](writer, refSQL[:])}
}

// Prepare prepares, while no transaction holds the writer connection, the
// statements of Dissociate (dissociate: the write updates or deletes a
// record) and of Associate (associate: it names blobs). Collect's runs
// prepared per call until a write names blobs: it has work only when a
// dissociated record had some.
func (s *RefStmts) Prepare(ctx context.Context, dissociate, associate bool) error {
	var ids []refStmt
	if dissociate {
		ids = append(ids, refDissociate)
	}
	if associate {
		ids = append(ids, refAssociate, refLookup, refPermanent, refCollect)
	}
	return s.prepare(ctx, ids...)
}

func (s *RefStmts) prepare(ctx context.Context, ids ...refStmt) error {
	if err := s.st.Prepare(ctx, ids...); err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	return nil
}

// Close releases the statements; close it before the database.
func (s *RefStmts) Close() error { return s.st.Close() }

// stmt is statement id bound to r's transaction, nil when it is not
// prepared (the caller runs its SQL on the transaction).
func (r *Refs) stmt(ctx context.Context, id refStmt) *sql.Stmt {
	if r.stmts == nil {
		return nil
	}
	st := r.stmts.st.Get(id)
	if st == nil {
		return nil
	}
	return r.tx.StmtContext(ctx, st)
}

// Statements run detached from ctx's cancellation: they are short, and
// modernc would watch a cancellable ctx with a goroutine per statement.

func (r *Refs) query(ctx context.Context, id refStmt, args ...any) (*sql.Rows, error) {
	ctx = context.WithoutCancel(ctx)
	if st := r.stmt(ctx, id); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.tx.QueryContext(ctx, refSQL[id], args...)
}

func (r *Refs) queryRow(ctx context.Context, id refStmt, args ...any) *sql.Row {
	ctx = context.WithoutCancel(ctx)
	if st := r.stmt(ctx, id); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.tx.QueryRowContext(ctx, refSQL[id], args...)
}

func (r *Refs) exec(ctx context.Context, id refStmt, args ...any) (sql.Result, error) {
	ctx = context.WithoutCancel(ctx)
	if st := r.stmt(ctx, id); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return r.tx.ExecContext(ctx, refSQL[id], args...)
}

// Dissociate forgets the blob refs of recordURI (an updated or deleted
// record). Blobs left without a record are deleted by Collect.
func (r *Refs) Dissociate(ctx context.Context, recordURI string) error {
	rows, err := r.query(ctx, refDissociate, recordURI)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return err
		}
		r.dropped = append(r.dropped, c)
	}
	return rows.Err()
}

// Associate records that recordURI (a created or updated record)
// references refs, and makes those blobs permanent. A ref to a blob this
// account never uploaded (or one taken down) is a RefError BlobNotFound;
// the first ref to a temporary upload must carry its mimeType and size
// (InvalidMimeType, InvalidSize); later refs are not checked, as in the
// reference.
func (r *Refs) Associate(ctx context.Context, recordURI string, refs []atdata.Blob) error {
	for _, ref := range refs {
		key := ref.Ref.String()
		if _, err := r.exec(ctx, refAssociate, key, recordURI); err != nil {
			return err
		}
		if err := r.makePermanent(ctx, ref); err != nil {
			return err
		}
	}
	return nil
}

// Import records that recordURI references refs without checking that
// the blobs were uploaded: importRepo's way, which is what makes blobs
// "missing" (listMissingBlobs) until they are uploaded.
func (r *Refs) Import(ctx context.Context, recordURI string, refs []atdata.Blob) error {
	for _, ref := range refs {
		if _, err := r.exec(ctx, refAssociate, ref.Ref.String(), recordURI); err != nil {
			return err
		}
	}
	return nil
}

// makePermanent is the reference's verifyBlobAndMakePermanent.
func (r *Refs) makePermanent(ctx context.Context, ref atdata.Blob) error {
	key := ref.Ref.String()
	var temp sql.NullString
	var mime string
	var size int64
	err := r.queryRow(ctx, refLookup, key).Scan(&temp, &mime, &size)
	if errors.Is(err, sql.ErrNoRows) {
		return &RefError{Name: "BlobNotFound", Message: "Could not find blob: " + key, err: ErrBlobNotFound}
	}
	if err != nil || !temp.Valid {
		return err
	}
	if ref.MimeType != mime {
		return &RefError{Name: "InvalidMimeType", err: ErrMimeTypeMismatch,
			Message: fmt.Sprintf("Referenced Mimetype does not match stored blob. Expected: %s, Got: %s", mime, ref.MimeType)}
	}
	if ref.Size != size {
		return &RefError{Name: "InvalidSize", err: ErrSizeMismatch,
			Message: fmt.Sprintf("Referenced Size does not match stored blob. Expected: %d, Got: %d", size, ref.Size)}
	}
	_, err = r.exec(ctx, refPermanent, key)
	return err
}

// Garbage is blobs a write left without any record: their rows are
// deleted in its transaction, their files by Store.Sweep once it commits.
type Garbage struct {
	cids []string
}

// Len is the number of blobs to delete.
func (g Garbage) Len() int { return len(g.cids) }

// CIDs are the blobs to delete.
func (g Garbage) CIDs() []string { return g.cids }

// Collect deletes the rows of the dissociated blobs that no record
// references any more and returns them for Store.Sweep. Call it last in
// the transaction, after every Associate.
func (r *Refs) Collect(ctx context.Context) (Garbage, error) {
	var g Garbage
	seen := make(map[string]bool, len(r.dropped))
	for _, key := range r.dropped {
		if seen[key] {
			continue
		}
		seen[key] = true
		res, err := r.exec(ctx, refCollect, key)
		if err != nil {
			return Garbage{}, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return Garbage{}, err
		} else if n > 0 {
			g.cids = append(g.cids, key)
		}
	}
	r.dropped = nil
	return g, nil
}

// Missing is a blob a record references that the account never uploaded.
type Missing struct {
	CID       string `json:"cid"`
	RecordURI string `json:"recordUri"`
}

// ListMissing is listMissingBlobs: referenced blobs without a blob row,
// by CID, after cursor.
func ListMissing(ctx context.Context, q Querier, cursor string, limit int) ([]Missing, error) {
	// Two texts rather than "(? = '' OR blob_cid > ?)": that OR would keep
	// SQLite from starting the scan of the primary key at the cursor.
	query := `SELECT blob_cid, record_uri FROM record_blob
		WHERE NOT EXISTS (SELECT 1 FROM blob WHERE blob.cid = record_blob.blob_cid)
		GROUP BY blob_cid ORDER BY blob_cid LIMIT ?1`
	if cursor != "" {
		query = `SELECT blob_cid, record_uri FROM record_blob
		WHERE blob_cid > ?2 AND NOT EXISTS (SELECT 1 FROM blob WHERE blob.cid = record_blob.blob_cid)
		GROUP BY blob_cid ORDER BY blob_cid LIMIT ?1`
	}
	args := []any{limit}
	if cursor != "" {
		args = append(args, cursor)
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Missing{}
	for rows.Next() {
		var m Missing
		if err := rows.Scan(&m.CID, &m.RecordURI); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// List is listBlobs: the CIDs records of did reference (uploaded or not),
// in order, after cursor; with since, only those of records written after
// that rev.
func List(ctx context.Context, q Querier, did, since, cursor string, limit int) ([]string, error) {
	after := ""
	if cursor != "" {
		after = "AND rb.blob_cid > ?2"
	}
	query := `SELECT rb.blob_cid FROM record_blob rb WHERE 1 ` + after + `
		GROUP BY rb.blob_cid ORDER BY rb.blob_cid LIMIT ?1`
	if since != "" {
		// The record table has no URI column: rebuild the URI of each
		// record written after since.
		query = `SELECT rb.blob_cid FROM record r
			JOIN record_blob rb ON rb.record_uri = 'at://' || ?3 || '/' || r.collection || '/' || r.rkey
			WHERE r.repo_rev > ?4 ` + after + `
			GROUP BY rb.blob_cid ORDER BY rb.blob_cid LIMIT ?1`
	}
	// SQLite counts parameters up to the highest number used.
	args := []any{limit, cursor, did, since}
	switch {
	case since != "":
	case cursor != "":
		args = args[:2]
	default:
		args = args[:1]
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}
