// Package account is the account manager: accounts, handles, passwords, app
// passwords, refresh tokens, invite codes and email tokens, in one SQLite
// database.
package account

import (
	"context"
	"database/sql"
	"io"
	"path/filepath"

	"github.com/fakepds/fakepds/pds/store"
)

// File is the account manager database's name in the data dir.
const File = "account.sqlite"

// Manager owns the account database.
type Manager struct {
	// Rand is where email tokens are drawn from; crypto/rand when nil.
	Rand io.Reader

	db     *store.DB
	cache  accountCache
	writes *store.Statements[writeStmt] // on db's writer
}

// writeStmt names the inserts every createAccount (and createSession) runs,
// prepared at their first use: parsed at each call they were ~50 µs of
// createAccount's account rows.
type writeStmt int

const (
	insertActor writeStmt = iota
	insertAccount
	insertSigningKey
	insertRefresh
)

var writeQueries = []string{
	insertActor:      `INSERT INTO actor (did, handle, created_at, deactivated_at) VALUES (?, ?, ?, ?)`,
	insertAccount:    `INSERT INTO account (did, email, password_scrypt) VALUES (?, ?, ?)`,
	insertSigningKey: `INSERT INTO signing_key (did, key) VALUES (?, ?)`,
	insertRefresh: `INSERT INTO refresh_token (id, did, expires_at, app_pass_name) VALUES (?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`,
}

// exec runs statement id in tx: prepared once on the writer, bound to tx.
func (m *Manager) exec(ctx context.Context, tx *sql.Tx, id writeStmt, args ...any) error {
	var err error
	if st := m.writes.Get(id); st != nil {
		_, err = tx.StmtContext(ctx, st).ExecContext(ctx, args...)
	} else {
		_, err = tx.ExecContext(ctx, m.writes.Query(id), args...)
	}
	return err
}

// Open opens the account database in dir.
func Open(ctx context.Context, dir string, opts store.Options) (*Manager, error) {
	opts.Migrations = Migrations
	db, err := store.Open(ctx, filepath.Join(dir, File), opts)
	if err != nil {
		return nil, err
	}
	return &Manager{db: db, writes: store.NewStatements[writeStmt](db.Writer(), writeQueries)}, nil
}

// DB is the underlying database, for its settings and reads: a write that
// does not go through the Manager would leave its account cache stale.
func (m *Manager) DB() *store.DB { return m.db }

// Ping checks that the database answers a query.
func (m *Manager) Ping(ctx context.Context) error {
	var one int
	return m.db.Reader().QueryRowContext(ctx, `SELECT 1`).Scan(&one)
}

// Close closes the statements and the database.
func (m *Manager) Close() error {
	m.writes.Close()
	return m.db.Close()
}

// Migrations is the account manager schema, one entry per user_version.
var Migrations = []string{
	`CREATE TABLE actor (
		did            TEXT PRIMARY KEY,
		handle         TEXT UNIQUE,
		created_at     TEXT NOT NULL,
		takedown_ref   TEXT,
		deactivated_at TEXT,
		delete_after   TEXT
	);
	CREATE TABLE account (
		did                 TEXT PRIMARY KEY REFERENCES actor (did) ON DELETE CASCADE,
		email               TEXT NOT NULL UNIQUE COLLATE NOCASE,
		password_scrypt     TEXT NOT NULL,
		email_confirmed_at  TEXT,
		invites_disabled    INTEGER NOT NULL DEFAULT 0
	);
	CREATE TABLE app_password (
		did             TEXT NOT NULL REFERENCES actor (did) ON DELETE CASCADE,
		name            TEXT NOT NULL,
		password_scrypt TEXT NOT NULL,
		created_at      TEXT NOT NULL,
		privileged      INTEGER NOT NULL DEFAULT 0,
		PRIMARY KEY (did, name)
	) WITHOUT ROWID;
	CREATE TABLE refresh_token (
		id           TEXT PRIMARY KEY,
		did          TEXT NOT NULL REFERENCES actor (did) ON DELETE CASCADE,
		expires_at   TEXT NOT NULL,
		app_pass_name TEXT,
		next_id      TEXT
	);
	CREATE INDEX refresh_token_did ON refresh_token (did);
	CREATE TABLE invite_code (
		code         TEXT PRIMARY KEY,
		available    INTEGER NOT NULL,
		disabled     INTEGER NOT NULL DEFAULT 0,
		for_account  TEXT NOT NULL,
		created_by   TEXT NOT NULL,
		created_at   TEXT NOT NULL
	);
	CREATE INDEX invite_code_for_account ON invite_code (for_account);
	CREATE TABLE invite_code_use (
		code     TEXT NOT NULL REFERENCES invite_code (code),
		used_by  TEXT NOT NULL,
		used_at  TEXT NOT NULL,
		PRIMARY KEY (code, used_by)
	) WITHOUT ROWID;
	CREATE TABLE signing_key (
		did TEXT PRIMARY KEY REFERENCES actor (did) ON DELETE CASCADE,
		key BLOB NOT NULL
	) WITHOUT ROWID;
	CREATE TABLE server_secret (
		name  TEXT PRIMARY KEY,
		value BLOB NOT NULL
	) WITHOUT ROWID;
	CREATE TABLE email_token (
		purpose      TEXT NOT NULL,
		did          TEXT NOT NULL REFERENCES actor (did) ON DELETE CASCADE,
		token        TEXT NOT NULL,
		requested_at TEXT NOT NULL,
		PRIMARY KEY (purpose, did),
		UNIQUE (purpose, token)
	) WITHOUT ROWID;`,
}
