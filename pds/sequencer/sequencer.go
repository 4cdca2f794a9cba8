// Package sequencer keeps the firehose's event log: every repo, identity and
// account event with a monotonic seq, in one SQLite database, from which
// subscribers are fed live and replayed by cursor.
package sequencer

import (
	"context"
	"path/filepath"

	"github.com/fakepds/fakepds/pds/store"
)

// File is the sequencer database's name in the data dir.
const File = "sequencer.sqlite"

// Sequencer owns the event log.
type Sequencer struct {
	db *store.DB
	n  notifier
}

// Open opens the sequencer database in dir.
func Open(ctx context.Context, dir string, opts store.Options) (*Sequencer, error) {
	opts.Migrations = Migrations
	db, err := store.Open(ctx, filepath.Join(dir, File), opts)
	if err != nil {
		return nil, err
	}
	return &Sequencer{db: db}, nil
}

// DB is the underlying database.
func (s *Sequencer) DB() *store.DB { return s.db }

// Close closes the database.
func (s *Sequencer) Close() error { return s.db.Close() }

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
