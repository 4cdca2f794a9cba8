// Package sequencer keeps the firehose's event log: every repo, identity and
// account event with a monotonic seq, in one SQLite database, from which
// subscribers are fed live and replayed by cursor.
package sequencer

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"time"

	"github.com/fakepds/fakepds/pds/store"
)

// File is the sequencer database's name in the data dir.
const File = "sequencer.sqlite"

// Sequencer owns the event log.
type Sequencer struct {
	db   *store.DB
	n    notifier
	tail tail

	// Prepared at Open, outside any transaction: the writer pool has one
	// connection, so preparing while a write holds it would wait forever.
	insertStmt *sql.Stmt

	// qmu guards queue, the Appends waiting for a commit to take them,
	// and leading: an Append is committing, or handing over to the next.
	qmu     sync.Mutex
	queue   []*appendCall
	leading bool

	// mu serializes Append's commits and Pendings (the single writer
	// connection does too) and guards what they keep between calls: the last seq given
	// out, read once at Open instead of once a write, the newest time
	// stamped, and the encoding buffer.
	mu       sync.Mutex
	last     int64
	lastTime time.Time // no event is stamped before it (see Append)
	buf      bytes.Buffer
	failed   bool // an Append failed since Open (see Failed)
}

// Open opens the sequencer database in dir.
func Open(ctx context.Context, dir string, opts store.Options) (*Sequencer, error) {
	opts.Migrations = Migrations
	db, err := store.Open(ctx, filepath.Join(dir, File), opts)
	if err != nil {
		return nil, err
	}
	s := &Sequencer{db: db}
	if s.last, err = s.readLast(ctx); err == nil {
		s.lastTime, err = s.readLastTime(ctx)
	}
	if err == nil {
		s.insertStmt, err = db.Writer().PrepareContext(ctx, `INSERT INTO repo_seq (seq, did, event_type, event, sequenced_at) VALUES (?, ?, ?, ?, ?)`)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// DB is the underlying database.
func (s *Sequencer) DB() *store.DB { return s.db }

// readLast is the last seq given out: the newest event's, or the mark
// a deletion of the newest events left (see markLast), so a seq is never
// reused.
func (s *Sequencer) readLast(ctx context.Context) (int64, error) {
	var last int64
	err := s.db.Writer().QueryRowContext(ctx, `SELECT max(coalesce((SELECT max(seq) FROM repo_seq), 0),
		coalesce((SELECT seq FROM seq_mark WHERE id = 1), 0))`).Scan(&last)
	return last, err
}

// readLastTime is the newest time stamped on a stored event (zero when
// none): the newest event's, since times grow with seq (see Append).
func (s *Sequencer) readLastTime(ctx context.Context) (time.Time, error) {
	var t string
	err := s.db.Writer().QueryRowContext(ctx, `SELECT sequenced_at FROM repo_seq ORDER BY seq DESC LIMIT 1`).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(timeFormat, t)
}

// Close closes the statement and the database.
func (s *Sequencer) Close() error {
	if s.insertStmt != nil {
		s.insertStmt.Close()
	}
	return s.db.Close()
}

// Migrations is the sequencer schema. A seq is never reused, even after
// the newest events are deleted (an account deletion removes that
// account's events): seq_mark keeps the last one given out whenever a
// deletion may remove it (see markLast).
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
	// 2: repo_seq without AUTOINCREMENT, whose sqlite_sequence row was a
	// page of the WAL at every commit (4 -> 3 pages an event in a suite's
	// writes); seq_mark takes over its record of the last seq.
	`CREATE TABLE seq_mark (
		id  INTEGER PRIMARY KEY CHECK (id = 1),
		seq INTEGER NOT NULL
	);
	INSERT INTO seq_mark (id, seq) SELECT 1, seq FROM sqlite_sequence WHERE name = 'repo_seq';
	CREATE TABLE repo_seq_2 (
		seq          INTEGER PRIMARY KEY,
		did          TEXT NOT NULL,
		event_type   TEXT NOT NULL,
		event        BLOB NOT NULL,
		invalidated  INTEGER NOT NULL DEFAULT 0,
		sequenced_at TEXT NOT NULL
	);
	INSERT INTO repo_seq_2 (seq, did, event_type, event, invalidated, sequenced_at)
		SELECT seq, did, event_type, event, invalidated, sequenced_at FROM repo_seq ORDER BY seq;
	DROP TABLE repo_seq;
	ALTER TABLE repo_seq_2 RENAME TO repo_seq;
	CREATE INDEX repo_seq_did ON repo_seq (did);
	CREATE INDEX repo_seq_sequenced_at ON repo_seq (sequenced_at);`,
	// 3: repo_seq_sequenced_at goes: times grow with seq, so LastBefore
	// bisects the rows by seq instead, and an append writes one B-tree
	// fewer (a page of the WAL at every commit: BenchmarkAppend 37-39 ->
	// 28-35 µs an event; LastBefore, once a subscription, 13-15 -> 107-135).
	`DROP INDEX repo_seq_sequenced_at;`,
}
