package plc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
	"github.com/fakepds/fakepds/pds/store"
)

// FileName is the database file Open keeps the directory in.
const FileName = "plc.sqlite"

// TimeFormat is how createdAt is written: JavaScript's toISOString, which
// is what the public directory sends (milliseconds, UTC).
const TimeFormat = "2006-01-02T15:04:05.000Z"

// Errors of the read methods. The HTTP API answers them with 404 and 410.
var (
	// ErrNotFound: the directory has no operation for the DID.
	ErrNotFound = errors.New("plc: DID not registered")
	// ErrTombstoned: the DID's current operation is a tombstone, so it has
	// no document (its logs are still served).
	ErrTombstoned = errors.New("plc: DID not available (tombstoned)")
)

// migrations are the schema, versioned by PRAGMA user_version (store.Open).
var migrations = []string{`
CREATE TABLE operations (
	-- Arrival order: the order of a DID's log and the seq of /export.
	-- Rows are never deleted, so INTEGER PRIMARY KEY never reuses a value.
	seq        INTEGER PRIMARY KEY,
	did        TEXT    NOT NULL,
	cid        TEXT    NOT NULL,
	operation  TEXT    NOT NULL, -- JSON, as served by /log
	nullified  INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL, -- Unix milliseconds: JavaScript's precision
	UNIQUE (did, cid)
);
CREATE INDEX operations_did_seq ON operations (did, seq);
CREATE INDEX operations_created ON operations (created_at, cid);
`}

// Options configure Open.
type Options struct {
	// Store configures the SQLite file (Fsync among others). Open sets its
	// Migrations.
	Store store.Options
	// Now is the directory's clock, which stamps createdAt and drives the
	// 72-hour recovery window and the rate limits. time.Now when nil.
	Now func() time.Time
	// NoRateLimit lifts the public directory's per-DID limits (an operation
	// is refused when 10 already came within the hour, 30 within the day or
	// 100 within the week, unless it nullifies). They are on by default
	// because the reference PDS's tests live with them too.
	NoRateLimit bool
}

// Directory is a PLC directory in one SQLite file. Its methods are safe for
// concurrent use.
type Directory struct {
	db          *store.DB
	now         func() time.Time
	noRateLimit bool
	handler     http.Handler

	// Readers.
	headStmt, logStmt *sql.Stmt
	// Writer, bound to each Submit's transaction with tx.StmtContext.
	liveStmt, insertStmt, nullifyStmt *sql.Stmt
}

// Open opens (creating if needed) the directory kept in dir/plc.sqlite.
func Open(ctx context.Context, dir string, opts Options) (*Directory, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plc: %w", err)
	}
	so := opts.Store
	so.Migrations = migrations
	db, err := store.Open(ctx, filepath.Join(dir, FileName), so)
	if err != nil {
		return nil, fmt.Errorf("plc: %w", err)
	}
	d := &Directory{db: db, now: opts.Now, noRateLimit: opts.NoRateLimit}
	if d.now == nil {
		d.now = time.Now
	}
	prepare := func(pool *sql.DB, dst **sql.Stmt, query string) {
		if err != nil {
			return
		}
		*dst, err = pool.PrepareContext(ctx, query)
	}
	prepare(db.Reader(), &d.headStmt,
		`SELECT operation FROM operations WHERE did = ? AND nullified = 0 ORDER BY seq DESC LIMIT 1`)
	prepare(db.Reader(), &d.logStmt,
		`SELECT seq, cid, operation, nullified, created_at FROM operations WHERE did = ? ORDER BY seq`)
	prepare(db.Writer(), &d.liveStmt,
		`SELECT seq, cid, operation, nullified, created_at FROM operations WHERE did = ? AND nullified = 0 ORDER BY seq`)
	prepare(db.Writer(), &d.insertStmt,
		`INSERT INTO operations (did, cid, operation, created_at) VALUES (?, ?, ?, ?)`)
	prepare(db.Writer(), &d.nullifyStmt,
		`UPDATE operations SET nullified = 1 WHERE did = ? AND seq > ? AND nullified = 0`)
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("plc: prepare: %w", err)
	}
	d.handler = d.newHandler()
	return d, nil
}

// Close closes the database. Requests still served by Handler fail.
func (d *Directory) Close() error {
	var errs []error
	for _, s := range []*sql.Stmt{d.headStmt, d.logStmt, d.liveStmt, d.insertStmt, d.nullifyStmt} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(append(errs, d.db.Close())...)
}

// Settings are the pragmas SQLite reported for the directory's file.
func (d *Directory) Settings() store.Settings { return d.db.Settings() }

// Resolve returns the DID document, as GET /{did} serves it.
func (d *Directory) Resolve(ctx context.Context, did syntax.DID) (*Document, error) {
	data, err := d.Data(ctx, did)
	if err != nil {
		return nil, err
	}
	return data.Document(), nil
}

// Data returns the document's data, rotation keys included, as GET
// /{did}/data serves it.
func (d *Directory) Data(ctx context.Context, did syntax.DID) (*Data, error) {
	op, err := d.Last(ctx, did)
	if err != nil {
		return nil, err
	}
	return dataOf(did, op)
}

// Last returns the DID's current operation (a *didplc.RegularOp or a
// *didplc.TombstoneOp), the one the next operation names as prev.
func (d *Directory) Last(ctx context.Context, did syntax.DID) (didplc.Operation, error) {
	b, err := d.lastJSON(ctx, string(did))
	if err != nil {
		return nil, err
	}
	return decodeOp(b)
}

// Log returns the DID's operations from genesis on, nullified ones left
// out, as GET /{did}/log serves them.
func (d *Directory) Log(ctx context.Context, did syntax.DID) ([]didplc.Operation, error) {
	es, err := d.entries(ctx, string(did))
	if err != nil {
		return nil, err
	}
	ops := make([]didplc.Operation, 0, len(es))
	for _, e := range es {
		if e.nullified {
			continue
		}
		op, err := decodeOp(e.op)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// AuditLog returns every operation of the DID, nullified ones included, as
// GET /{did}/log/audit serves them. didplc.VerifyOpLog accepts it.
func (d *Directory) AuditLog(ctx context.Context, did syntax.DID) ([]didplc.LogEntry, error) {
	es, err := d.entries(ctx, string(did))
	if err != nil {
		return nil, err
	}
	out := make([]didplc.LogEntry, len(es))
	for i, e := range es {
		out[i] = didplc.LogEntry{DID: string(did), CID: e.cid, Nullified: e.nullified, CreatedAt: formatMillis(e.createdAt)}
		if err := json.Unmarshal(e.op, &out[i].Operation); err != nil {
			return nil, fmt.Errorf("plc: stored operation %s: %w", e.cid, err)
		}
	}
	return out, nil
}

// entry is one stored operation.
type entry struct {
	seq       int64
	cid       string
	op        []byte // JSON
	nullified bool
	createdAt int64 // Unix milliseconds
}

func (d *Directory) lastJSON(ctx context.Context, did string) ([]byte, error) {
	var b []byte
	err := d.headStmt.QueryRowContext(ctx, did).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("plc: %w", err)
	}
	return b, nil
}

// entries returns all of a DID's operations in order; ErrNotFound when
// there are none.
func (d *Directory) entries(ctx context.Context, did string) ([]entry, error) {
	es, err := scanEntries(d.logStmt.QueryContext(ctx, did))
	if err != nil {
		return nil, fmt.Errorf("plc: %w", err)
	}
	if len(es) == 0 {
		return nil, ErrNotFound
	}
	return es, nil
}

func scanEntries(rows *sql.Rows, err error) ([]entry, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var es []entry
	for rows.Next() {
		var e entry
		if err := rows.Scan(&e.seq, &e.cid, &e.op, &e.nullified, &e.createdAt); err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	return es, rows.Err()
}

// decodeOp decodes a stored operation. Only plc_operation and
// plc_tombstone are ever stored, and a tombstone's fields are a subset of
// an operation's, so one pass into a RegularOp reads both (OpEnum decodes
// twice, which is most of Resolve's cost).
func decodeOp(b []byte) (didplc.Operation, error) {
	var r didplc.RegularOp
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("plc: stored operation: %w", err)
	}
	switch {
	case r.Type == "plc_operation":
		return &r, nil
	case r.Type == "plc_tombstone" && r.Prev != nil:
		return &didplc.TombstoneOp{Type: r.Type, Prev: *r.Prev, Sig: r.Sig}, nil
	}
	return nil, fmt.Errorf("plc: stored operation of type %q", r.Type)
}

func formatMillis(ms int64) string { return time.UnixMilli(ms).UTC().Format(TimeFormat) }
