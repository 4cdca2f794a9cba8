package store

import (
	"context"
	"database/sql"
	"slices"
	"sync"
)

// Querier is what a read runs its statements on: a *sql.DB (the writer or
// the reader pool), a *sql.Tx, or the writer's prepared statements (what
// Query hands fn on the writer).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*sql.DB)(nil)
	_ Querier = (*sql.Tx)(nil)
	_ Querier = (*stmtCache)(nil)
)

// Query runs fn, a short read of autocommit statements (no transaction:
// each statement sees the latest commit), on the writer connection when
// no write holds it, else on the reader pool. A test suite touches a
// different account on nearly every call, so an actor store's reader pool
// is mostly cold: its first read opened a connection and parsed the schema,
// ~0.25 ms of a getRecord that takes 0.03 ms warm. The writer connection is
// open from the start and its page cache holds what the last write
// touched. On the writer, fn's statements are prepared once (see
// PrepareQueries) rather than at every call. fn must not call Write (the
// writer stays held while fn runs), nor run long: a write of this DB waits
// for it. Reads that may run long (a whole repo's export) use Read or
// Reader.
func (db *DB) Query(fn func(q Querier) error) error {
	if err := db.ready(context.Background()); err != nil {
		return err
	}
	if db.wmu.TryLock() {
		defer db.wmu.Unlock()
		return fn(&db.queries)
	}
	return fn(db.r)
}

// PrepareQueries prepares queries on the writer connection for Query's
// reads, ahead of the first (an account's read after its first write was
// mostly the statement's preparing: 50-60 µs of a ~100 µs getRecord). It
// holds the writer as a Query does: call it where nothing waits on the
// caller, in the background after a write.
func (db *DB) PrepareQueries(ctx context.Context, queries ...string) error {
	if err := db.ready(ctx); err != nil {
		return err
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	for _, q := range queries {
		if _, err := db.queries.stmt(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// DropQueries releases the statements PrepareQueries kept for queries, for
// a caller that will not run them again (an actor store's createAccount
// statements once it has run them): kept, they would stay until pushed
// out, a few KiB each in every open store. It holds the writer as a Query
// does.
func (db *DB) DropQueries(queries ...string) {
	if !db.opened.Load() {
		return
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	db.queries.drop(queries)
}

// Kept reports whether the DB keeps a prepared statement of query (see
// PrepareQueries).
func (db *DB) Kept(query string) bool { return db.queries.prepared(query) != nil }

// maxQueries bounds the statements a DB keeps prepared for Query: the
// few reads a test suite repeats, not every listRecords limit a caller
// tries (each is its own text: see repo.EachRecord).
const maxQueries = 8

// stmtCache is the writer's statements prepared for Query, by text, the
// least recently used dropped past maxQueries. As a Querier it runs a
// query through its statement, preparing it on first use. Its users hold the writer
// (DB.wmu), so a statement is not dropped while another runs it.
type stmtCache struct {
	db    *DB
	mu    sync.Mutex // against close
	stmts map[string]*sql.Stmt
	order []string // the keys of stmts, least recently used first
}

// used moves query, kept, to the end of c.order.
func (c *stmtCache) used(query string) {
	i := slices.Index(c.order, query)
	c.order = append(append(c.order[:i], c.order[i+1:]...), query)
}

// stmt is query's statement on the writer, prepared now if it was not.
func (c *stmtCache) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.stmts[query]; st != nil {
		c.used(query)
		return st, nil
	}
	st, err := c.db.w.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if c.stmts == nil {
		c.stmts = make(map[string]*sql.Stmt, maxQueries)
	}
	if len(c.order) == maxQueries {
		c.stmts[c.order[0]].Close()
		delete(c.stmts, c.order[0])
		c.order = append(c.order[:0], c.order[1:]...)
	}
	c.stmts[query] = st
	c.order = append(c.order, query)
	return st, nil
}

// QueryContext runs query through its prepared statement; a query that
// does not prepare fails as it would unprepared.
func (c *stmtCache) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return c.db.w.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext is QueryContext for one row.
func (c *stmtCache) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := c.stmt(ctx, query)
	if err != nil {
		return c.db.w.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// drop closes and forgets the statements of queries it keeps.
func (c *stmtCache) drop(queries []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, q := range queries {
		if st := c.stmts[q]; st != nil {
			st.Close()
			delete(c.stmts, q)
			c.order = slices.DeleteFunc(c.order, func(k string) bool { return k == q })
		}
	}
}

// close closes the statements (DB.Close, before the writer's pool).
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		st.Close()
	}
	c.stmts, c.order = nil, nil
}

// TxQuerier runs a transaction's statements, through the DB's prepared
// statement of the same text when it keeps one (see PrepareQueries), else
// parsed in the transaction.
type TxQuerier struct {
	tx *sql.Tx
	c  *stmtCache
}

// InTx is tx, a transaction of Write or Begin, as a TxQuerier. A
// statement it runs is never dropped while tx is open: the DB prepares
// and drops them only while it holds the writer, as tx does.
func (db *DB) InTx(tx *sql.Tx) TxQuerier { return TxQuerier{tx: tx, c: &db.queries} }

// ExecContext is tx.ExecContext.
func (t TxQuerier) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.c.prepared(query); st != nil {
		return t.tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	}
	return t.tx.ExecContext(ctx, query, args...)
}

// QueryRowContext is tx.QueryRowContext.
func (t TxQuerier) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.c.prepared(query); st != nil {
		return t.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
	}
	return t.tx.QueryRowContext(ctx, query, args...)
}

// prepared is query's statement if it is kept, without preparing it.
func (c *stmtCache) prepared(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stmts[query]
	if st != nil {
		c.used(query)
	}
	return st
}
