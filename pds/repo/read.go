package repo

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
)

// The reads in this file are each one short statement, run without ctx's
// cancellation: modernc watches a cancellable context with a goroutine per
// statement, ~5% of a listRecords call. (ExportCAR and GetBlocks, which can
// run long, keep it.)

// Head is the repo's current commit and rev (sync.getLatestCommit).
func Head(ctx context.Context, q Querier) (cid.Cid, string, error) {
	var cc []byte
	var rev string
	err := q.QueryRowContext(context.WithoutCancel(ctx), `SELECT cid, rev FROM repo_root WHERE id = 1`).Scan(&cc, &rev)
	if errors.Is(err, sql.ErrNoRows) {
		return cid.Undef, "", ErrRepoNotFound
	}
	if err != nil {
		return cid.Undef, "", fmt.Errorf("repo: head: %w", err)
	}
	c, err := cid.Cast(cc)
	if err != nil {
		return cid.Undef, "", fmt.Errorf("repo: head: %w", err)
	}
	return c, rev, nil
}

const getRecordQuery = `SELECT r.cid, b.content FROM record r JOIN repo_block b ON b.cid = r.cid
	WHERE r.collection = ? AND r.rkey = ? AND r.takedown_ref IS NULL`

// CommonQueries are the texts of the reads a test suite runs most (a
// getRecord, a listRecords of the default page, a whole small getRepo),
// for a Querier that prepares statements ahead (store.DB.PrepareQueries).
func CommonQueries() []string {
	return []string{getRecordQuery, listQuery(false, false, defaultListLimit), exportQuery}
}

// defaultListLimit is listRecords' default page.
const defaultListLimit = 50

// GetRecord is the record at collection/rkey: its CID and DAG-CBOR bytes.
// With want set, the record must be at that CID. A missing record, or one
// taken down, is ErrRecordNotFound.
func GetRecord(ctx context.Context, q Querier, collection syntax.NSID, rkey syntax.RecordKey, want *cid.Cid) (cid.Cid, []byte, error) {
	var cc, content []byte
	err := q.QueryRowContext(context.WithoutCancel(ctx), getRecordQuery,
		collection.String(), rkey.String()).Scan(&cc, &content)
	if errors.Is(err, sql.ErrNoRows) {
		return cid.Undef, nil, ErrRecordNotFound
	}
	if err != nil {
		return cid.Undef, nil, fmt.Errorf("repo: get record: %w", err)
	}
	c, err := cid.Cast(cc)
	if err != nil {
		return cid.Undef, nil, fmt.Errorf("repo: get record: %w", err)
	}
	if want != nil && !want.Equals(c) {
		return cid.Undef, nil, ErrRecordNotFound
	}
	return c, content, nil
}

// Record is one record of a listing.
type Record struct {
	RKey  syntax.RecordKey
	CID   cid.Cid
	Value []byte // DAG-CBOR
}

// ListRecords lists up to limit records of collection in the reference's
// order: rkey descending, or ascending with reverse; cursor is the rkey to
// continue after. The next cursor is the last rkey listed ("" when none
// was), even on a short page, as the reference answers. Taken down records
// are left out.
func ListRecords(ctx context.Context, q Querier, collection syntax.NSID, limit int, cursor string, reverse bool) ([]Record, string, error) {
	out := make([]Record, 0, min(limit, 100))
	next, err := EachRecord(ctx, q, collection, limit, cursor, reverse, func(r RawRecord) error {
		c, err := cid.Cast(r.CID)
		if err != nil {
			return err
		}
		out = append(out, Record{RKey: syntax.RecordKey(r.RKey), CID: c, Value: bytes.Clone(r.Value)})
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// RawRecord is a record of a listing as EachRecord hands it over: the
// driver's bytes, valid only during the call.
type RawRecord struct {
	RKey  []byte
	CID   []byte // binary, checked as cid.Cast checks it
	Value []byte // DAG-CBOR
}

// EachRecord is ListRecords calling fn with each record in turn instead of
// copying them into a slice (listRecords writes each into its answer as
// it comes). An error from fn stops the listing and is returned.
func EachRecord(ctx context.Context, q Querier, collection syntax.NSID, limit int, cursor string, reverse bool, fn func(RawRecord) error) (string, error) {
	args := []any{collection.String()}
	if cursor != "" {
		args = append(args, cursor)
	}
	query := listQuery(cursor != "", reverse, limit)
	rows, err := q.QueryContext(context.WithoutCancel(ctx), query, args...)
	if err != nil {
		return "", fmt.Errorf("repo: list records: %w", err)
	}
	defer rows.Close()
	// Declared once: Scan's pointers make them escape.
	var r RawRecord
	var rkey, cc, value sql.RawBytes
	var last []byte
	for rows.Next() {
		if err := rows.Scan(&rkey, &cc, &value); err != nil {
			return "", fmt.Errorf("repo: list records: %w", err)
		}
		if err := checkCID(cc); err != nil {
			return "", fmt.Errorf("repo: list records: %w", err)
		}
		r.RKey, r.CID, r.Value = rkey, cc, value
		if err := fn(r); err != nil {
			return "", err
		}
		last = append(last[:0], rkey...)
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("repo: list records: %w", err)
	}
	return string(last), nil
}

// listQuery is EachRecord's statement: with a cursor or not, in which
// order, how many.
func listQuery(cursor, reverse bool, limit int) string {
	query := `SELECT r.rkey, r.cid, b.content FROM record r JOIN repo_block b ON b.cid = r.cid
		WHERE r.collection = ? AND r.takedown_ref IS NULL`
	if cursor {
		if reverse {
			query += ` AND r.rkey > ?`
		} else {
			query += ` AND r.rkey < ?`
		}
	}
	// The limit is written into the query, not bound: SQLite's planner
	// looks at a bound LIMIT, so the statement was compiled again at its
	// first step after the bind (~40% of a prepare, every call).
	if reverse {
		return query + ` ORDER BY r.rkey ASC LIMIT ` + strconv.Itoa(limit)
	}
	return query + ` ORDER BY r.rkey DESC LIMIT ` + strconv.Itoa(limit)
}

// Collections lists the collections that hold records, sorted
// (describeRepo). It hops from one collection to the next through the
// (collection, rkey) key instead of reading every record.
func Collections(ctx context.Context, q Querier) ([]string, error) {
	rows, err := q.QueryContext(context.WithoutCancel(ctx), `WITH RECURSIVE c(name) AS (
			SELECT min(collection) FROM record
			UNION ALL
			SELECT (SELECT min(collection) FROM record WHERE collection > c.name) FROM c WHERE c.name IS NOT NULL
		) SELECT name FROM c WHERE name IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("repo: collections: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("repo: collections: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: collections: %w", err)
	}
	return out, nil
}
