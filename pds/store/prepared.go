package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Prepared is a fixed list of statements prepared once on a pool, for the
// statements a hot path runs every time (parsing them each time was tens
// of microseconds a write). For a write path the pool is DB.Writer, and
// each transaction binds the statements with tx.StmtContext.
type Prepared []*sql.Stmt

// Prepare prepares queries on pool, in order. On the writer pool, call it
// while no transaction holds its one connection (right after Open, or
// before a write begins): preparing needs the connection.
func Prepare(ctx context.Context, pool *sql.DB, queries ...string) (Prepared, error) {
	p := make(Prepared, 0, len(queries))
	for _, q := range queries {
		st, err := pool.PrepareContext(ctx, q)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("prepare %q: %w", q, err)
		}
		p = append(p, st)
	}
	return p, nil
}

// Close releases the statements; close them before the database.
func (p Prepared) Close() error {
	var errs []error
	for _, st := range p {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}
