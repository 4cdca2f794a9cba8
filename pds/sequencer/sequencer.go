// Package sequencer keeps the firehose's event log: every repo, identity and
// account event with a monotonic seq, in one SQLite database, from which
// subscribers are fed live and replayed by cursor.
package sequencer

import (
	"context"
	"database/sql"
	"path/filepath"

	"github.com/fakepds/fakepds/pds/store"
)

// File is the sequencer database's name in the data dir.
const File = "sequencer.sqlite"

// Sequencer owns the event log.
type Sequencer struct {
	db *store.DB
	n  notifier

	// Prepared at Open, outside any transaction: the writer pool has one
	// connection, so preparing while a write holds it would wait forever.
	lastStmt, insertStmt *sql.Stmt
}

// Open opens the sequencer database in dir.
func Open(ctx context.Context, dir string, opts store.Options) (*Sequencer, error) {
	opts.Migrations = Migrations
	db, err := store.Open(ctx, filepath.Join(dir, File), opts)
	if err != nil {
		return nil, err
	}
	s := &Sequencer{db: db}
	w := db.Writer()
	if s.lastStmt, err = w.PrepareContext(ctx, `SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'repo_seq'), 0)`); err == nil {
		s.insertStmt, err = w.PrepareContext(ctx, `INSERT INTO repo_seq (seq, did, event_type, event, sequenced_at) VALUES (?, ?, ?, ?, ?)`)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// DB is the underlying database.
func (s *Sequencer) DB() *store.DB { return s.db }

// Close closes the statements and the database.
func (s *Sequencer) Close() error {
	for _, st := range []*sql.Stmt{s.lastStmt, s.insertStmt} {
		if st != nil {
			st.Close()
		}
	}
	return s.db.Close()
}

// Migrations is the sequencer schema. seq is an INTEGER PRIMARY KEY with
// AUTOINCREMENT so a seq is never reused, even after the newest events are
// deleted (an account deletion removes that account's events).
var Migrations = []string{
	`CREATE TABLE repo_seq (
		seq          INTEGER PRIMARY KEY AUTOINCREMENT,
		did          TEXT NOT NULL,
		event_type   TEXT NOT NULL,
		event        BLOB NOT NULL,
		invalidated  INTEGER NOT NULL DEFAULT 0,
		sequenced_at TEXT NOT NULL
	);
	CREATE INDEX repo_seq_did ON repo_seq (did);
	CREATE INDEX repo_seq_sequenced_at ON repo_seq (sequenced_at);`,
}
