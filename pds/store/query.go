package store

import (
	"context"
	"database/sql"
)

// Querier is what a read runs its statements on: a *sql.DB (the writer or
// the reader pool) or a *sql.Tx.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*sql.DB)(nil)
	_ Querier = (*sql.Tx)(nil)
)

// Query runs fn, a short read of autocommit statements (no transaction:
// each statement sees the latest commit), on the writer connection when
// no write holds it, else on the reader pool. A test suite touches a
// different account on nearly every call, so an actor store's reader pool
// is mostly cold: its first read opened a connection and parsed the schema,
// ~0.25 ms of a getRecord that takes 0.03 ms warm. The writer connection is
// open from the start and its page cache holds what the last write
// touched. fn must not call Write (the writer stays held while fn runs),
// nor run long: a write of this DB waits for it. Reads that may run long
// (a whole repo's export) use Read or Reader.
func (db *DB) Query(fn func(q Querier) error) error {
	if err := db.ready(context.Background()); err != nil {
		return err
	}
	if db.wmu.TryLock() {
		defer db.wmu.Unlock()
		return fn(db.w)
	}
	return fn(db.r)
}
