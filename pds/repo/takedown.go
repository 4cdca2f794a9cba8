package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
)

// SetRecordTakedown sets the takedown reference of the record at
// collection/rkey, or clears it (ref ""). A record that is not there is no
// error, as in the reference.
func SetRecordTakedown(ctx context.Context, tx *sql.Tx, collection syntax.NSID, rkey syntax.RecordKey, ref string) error {
	_, err := tx.ExecContext(ctx, `UPDATE record SET takedown_ref = ? WHERE collection = ? AND rkey = ?`,
		nullString(ref), collection.String(), rkey.String())
	if err != nil {
		return fmt.Errorf("repo: set record takedown: %w", err)
	}
	return nil
}

// RecordTakedown is the record at collection/rkey's CID and takedown
// reference ("" when not taken down); ErrRecordNotFound when it is not
// there.
func RecordTakedown(ctx context.Context, q Querier, collection syntax.NSID, rkey syntax.RecordKey) (cid.Cid, string, error) {
	var raw []byte
	var ref sql.NullString
	err := q.QueryRowContext(ctx, `SELECT cid, takedown_ref FROM record WHERE collection = ? AND rkey = ?`,
		collection.String(), rkey.String()).Scan(&raw, &ref)
	if errors.Is(err, sql.ErrNoRows) {
		return cid.Undef, "", ErrRecordNotFound
	}
	if err != nil {
		return cid.Undef, "", fmt.Errorf("repo: record takedown: %w", err)
	}
	c, err := cid.Cast(raw)
	if err != nil {
		return cid.Undef, "", fmt.Errorf("repo: record takedown: %w", err)
	}
	return c, ref.String, nil
}

// Counts are the repo's block and record counts (checkAccountStatus).
func Counts(ctx context.Context, q Querier) (blocks, records int64, err error) {
	if err := q.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM repo_block), (SELECT count(*) FROM record)`).Scan(&blocks, &records); err != nil {
		return 0, 0, fmt.Errorf("repo: counts: %w", err)
	}
	return blocks, records, nil
}

// nullString stores "" as NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
