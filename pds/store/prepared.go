package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Statements is a fixed list of queries, by ID, each prepared once on a
// pool when a caller first needs it, for the statements a hot path runs
// every time (parsing them each time was tens of microseconds a write).
// For a write path the pool is DB.Writer, and each transaction binds them
// with tx.StmtContext. Preparing is on demand because it is not cheap
// either: an actor store's 14 write statements were ~200 µs of its first
// write, and most writes run 6 of them.
type Statements[ID ~int] struct {
	pool    *sql.DB
	queries []string
	mu      sync.Mutex
	st      []*sql.Stmt // by ID; nil: not prepared
	closed  bool
}

// NewStatements is queries on pool, none prepared yet.
func NewStatements[ID ~int](pool *sql.DB, queries []string) *Statements[ID] {
	return &Statements[ID]{pool: pool, queries: queries, st: make([]*sql.Stmt, len(queries))}
}

// Prepare prepares those of ids not prepared yet. On the writer pool, a
// caller inside a transaction would wait for its own connection: call it
// before a write begins. The lock is not held while preparing, which waits
// for the pool's connection: a transaction on it binding statements (Get)
// does not wait for a Prepare waiting for it to end.
func (s *Statements[ID]) Prepare(ctx context.Context, ids ...ID) error {
	for _, id := range ids {
		if s.Get(id) != nil {
			continue
		}
		st, err := s.pool.PrepareContext(ctx, s.queries[id])
		if err != nil {
			return fmt.Errorf("prepare %q: %w", s.queries[id], err)
		}
		s.mu.Lock()
		if s.st[id] == nil && !s.closed {
			s.st[id], st = st, nil
		}
		s.mu.Unlock()
		if st != nil { // prepared meanwhile, or closed
			st.Close()
		}
	}
	return nil
}

// Get is statement id if it is prepared, else nil: the caller runs the
// query unprepared (a transaction's PrepareContext or ExecContext).
func (s *Statements[ID]) Get(id ID) *sql.Stmt {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st[id]
}

// Query is the text of statement id.
func (s *Statements[ID]) Query(id ID) string { return s.queries[id] }

// Prepared is how many are prepared.
func (s *Statements[ID]) Prepared() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.st {
		if st != nil {
			n++
		}
	}
	return n
}

// Close releases the statements; close them before the database.
func (s *Statements[ID]) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	var errs []error
	for i, st := range s.st {
		if st != nil {
			errs = append(errs, st.Close())
			s.st[i] = nil
		}
	}
	return errors.Join(errs...)
}
