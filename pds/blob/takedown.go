package blob

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SetTakedown sets the takedown reference of blob c, or clears it (ref
// ""). A blob that is not there is no error, as in the reference. A taken
// down blob is not served (Open answers ErrNotFound).
func SetTakedown(ctx context.Context, tx *sql.Tx, c, ref string) error {
	var v any
	if ref != "" {
		v = ref
	}
	if _, err := tx.ExecContext(ctx, `UPDATE blob SET takedown_ref = ? WHERE cid = ?`, v, c); err != nil {
		return fmt.Errorf("blob: set takedown: %w", err)
	}
	return nil
}

// Takedown is blob c's takedown reference ("" when not taken down);
// ErrNotFound when the actor store has no such blob.
func Takedown(ctx context.Context, q Querier, c string) (string, error) {
	var ref sql.NullString
	err := q.QueryRowContext(ctx, `SELECT takedown_ref FROM blob WHERE cid = ?`, c).Scan(&ref)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("blob: takedown: %w", err)
	}
	return ref.String, nil
}

// Counts are the blobs the account's records reference (distinct) and the
// blobs it holds (checkAccountStatus's expectedBlobs, importedBlobs).
func Counts(ctx context.Context, q Querier) (expected, imported int64, err error) {
	err = q.QueryRowContext(ctx, `SELECT (SELECT count(DISTINCT blob_cid) FROM record_blob), (SELECT count(*) FROM blob)`).Scan(&expected, &imported)
	if err != nil {
		return 0, 0, fmt.Errorf("blob: counts: %w", err)
	}
	return expected, imported, nil
}
