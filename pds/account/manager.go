package account

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/fakepds/fakepds/pds/random"
	"github.com/fakepds/fakepds/pds/store"
)

// TimeFormat is how timestamps are stored and sent: ISO 8601 in UTC with
// milliseconds, as JavaScript's toISOString writes them in the reference.
const TimeFormat = "2006-01-02T15:04:05.000Z"

// FormatTime formats t in TimeFormat.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Errors of the manager. Handlers map them to the reference's XRPC errors.
var (
	ErrNotFound    = errors.New("account: not found")
	ErrHandleTaken = errors.New("account: handle already taken")
	ErrEmailTaken  = errors.New("account: email already taken")
)

// Status is an account's state as the firehose and checkAccountStatus
// name it.
type Status string

const (
	StatusActive      Status = "active"
	StatusTakendown   Status = "takendown"
	StatusDeactivated Status = "deactivated"
	StatusDeleted     Status = "deleted"
)

// Account is an actor with its account row.
type Account struct {
	DID              string
	Handle           string // "" when the actor has none
	CreatedAt        string
	TakedownRef      string
	DeactivatedAt    string
	DeleteAfter      string
	Email            string
	EmailConfirmedAt string
	InvitesDisabled  bool
	PasswordScrypt   string
}

// Status is the account's state; a takedown wins over a deactivation.
func (a *Account) Status() Status {
	switch {
	case a.TakedownRef != "":
		return StatusTakendown
	case a.DeactivatedAt != "":
		return StatusDeactivated
	}
	return StatusActive
}

// Active reports whether the account is neither taken down nor deactivated.
func (a *Account) Active() bool { return a.Status() == StatusActive }

const selectAccount = `SELECT a.did, coalesce(a.handle, ''), a.created_at, coalesce(a.takedown_ref, ''),
	coalesce(a.deactivated_at, ''), coalesce(a.delete_after, ''), coalesce(c.email, ''),
	coalesce(c.email_confirmed_at, ''), coalesce(c.invites_disabled, 0), coalesce(c.password_scrypt, '')
	FROM actor a LEFT JOIN account c ON c.did = a.did `

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanAccountFrom(sc scanner) (*Account, error) {
	var a Account
	var inv int
	if err := sc.Scan(&a.DID, &a.Handle, &a.CreatedAt, &a.TakedownRef, &a.DeactivatedAt, &a.DeleteAfter,
		&a.Email, &a.EmailConfirmedAt, &inv, &a.PasswordScrypt); err != nil {
		return nil, err
	}
	a.InvitesDisabled = inv != 0
	return &a, nil
}

func scanAccount(row *sql.Row) (*Account, error) {
	a, err := scanAccountFrom(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

// collectAccounts reads every account of a selectAccount query.
func collectAccounts(rows *sql.Rows, err error) ([]*Account, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Account
	for rows.Next() {
		a, err := scanAccountFrom(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// The lookups run on every authenticated write: they use statements
// prepared once, and no cancellable context (a one-row indexed read ends
// sooner than modernc's context watcher starts).

// ByDID finds an account by DID, from memory when no write that may have
// changed it has ended since it was last read (see accountCache).
func (m *Manager) ByDID(ctx context.Context, did string) (*Account, error) {
	if acc, ok := m.cache.get(did); ok {
		return acc, nil
	}
	g := m.cache.gen.Load()
	acc, err := m.lookup(ctx, selectAccount+`WHERE a.did = ?`, did)
	if err == nil {
		m.cache.put(acc, g)
	}
	return acc, err
}

// ByHandle finds an account by handle, compared exactly as the reference
// compares it: handles are stored lower case, so one given in another case
// is not found unless the caller normalized it first, as the reference's
// resolveHandle and login do and its repo methods do not.
func (m *Manager) ByHandle(ctx context.Context, handle string) (*Account, error) {
	g := m.cache.gen.Load()
	acc, err := m.lookup(ctx, selectAccount+`WHERE a.handle = ?`, handle)
	if err == nil {
		m.cache.put(acc, g) // for the account's next ByDID: a login, then writes
	}
	return acc, err
}

// ByEmail finds an account by email, case-insensitively.
func (m *Manager) ByEmail(ctx context.Context, email string) (*Account, error) {
	g := m.cache.gen.Load()
	acc, err := m.lookup(ctx, selectAccount+`WHERE c.email = ?`, email)
	if err == nil {
		m.cache.put(acc, g)
	}
	return acc, err
}

// lookup runs an account query on the writer connection when it is free
// (store.DB.Query: prepared once, and its page cache outlives the writes
// between logins, where a reader's is dropped by every commit of another
// connection: BenchmarkByHandleAfterWrite 57-62 -> 36-42 µs).
func (m *Manager) lookup(ctx context.Context, query string, arg string) (*Account, error) {
	ctx = context.WithoutCancel(ctx)
	var acc *Account
	err := m.db.Query(func(q store.Querier) error {
		var err error
		acc, err = scanAccount(q.QueryRowContext(ctx, query, arg))
		return err
	})
	return acc, err
}

// ByIdentifier finds an account by DID, email or handle: what a login's
// identifier may be.
func (m *Manager) ByIdentifier(ctx context.Context, ident string) (*Account, error) {
	switch {
	case strings.HasPrefix(ident, "did:"):
		return m.ByDID(ctx, ident)
	case strings.Contains(ident, "@"):
		return m.ByEmail(ctx, ident)
	}
	return m.ByHandle(ctx, ident)
}

// NewAccount is what Create stores.
type NewAccount struct {
	DID            string
	Handle         string
	Email          string
	PasswordScrypt string
	SigningKey     []byte // the repo signing key, as atcrypto exports it
	InviteCode     string // "" when none was used
	Deactivated    bool
	Now            time.Time
}

// Create stores a new account in one transaction. A taken handle or email
// fails with ErrHandleTaken or ErrEmailTaken and stores nothing.
func (m *Manager) Create(ctx context.Context, n NewAccount) error {
	now := FormatTime(n.Now)
	// Before the transaction: preparing needs the writer's one connection.
	if err := m.writes.Prepare(ctx, insertActor, insertAccount, insertSigningKey); err != nil {
		return err
	}
	return m.writeAccount(ctx, n.DID, func(tx *sql.Tx) error {
		var deactivated any
		if n.Deactivated {
			deactivated = now
		}
		if err := m.exec(ctx, tx, insertActor, n.DID, n.Handle, now, deactivated); err != nil {
			if isUnique(err, "actor.handle") {
				return ErrHandleTaken
			}
			return err
		}
		// As the reference: an account without a password has no account
		// row (and so no email, and no way to log in).
		if n.PasswordScrypt != "" {
			if err := m.exec(ctx, tx, insertAccount, n.DID, n.Email, n.PasswordScrypt); err != nil {
				if isUnique(err, "account.email") {
					return ErrEmailTaken
				}
				return err
			}
		}
		if err := m.exec(ctx, tx, insertSigningKey, n.DID, n.SigningKey); err != nil {
			return err
		}
		if n.InviteCode != "" {
			return useInvite(ctx, tx, n.InviteCode, n.DID, now)
		}
		return nil
	})
}

// isUnique reports whether err is SQLite's UNIQUE constraint failure on
// column (as "table.column").
func isUnique(err error, column string) bool {
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") && strings.Contains(s, column)
}

// SigningKey is the account's repo signing key, as stored by Create.
func (m *Manager) SigningKey(ctx context.Context, did string) ([]byte, error) {
	var key []byte
	err := m.db.Reader().QueryRowContext(ctx, `SELECT key FROM signing_key WHERE did = ?`, did).Scan(&key)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return key, err
}

// Secret returns the server secret called name, creating it with make the
// first time, so secrets (the JWT key, the PLC rotation key) survive a
// restart on a kept data dir.
func (m *Manager) Secret(ctx context.Context, name string, make func() ([]byte, error)) ([]byte, error) {
	var v []byte
	err := m.write(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `SELECT value FROM server_secret WHERE name = ?`, name).Scan(&v)
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if v, err = make(); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO server_secret (name, value) VALUES (?, ?)`, name, v)
		return err
	})
	return v, err
}

// RandomSecret is a make function for Secret: n bytes drawn from r.
func RandomSecret(r io.Reader, n int) func() ([]byte, error) {
	return func() ([]byte, error) {
		b := make([]byte, n)
		random.Read(r, b)
		return b, nil
	}
}

// UpdateHandle changes did's handle; ErrHandleTaken when another account
// holds it.
func (m *Manager) UpdateHandle(ctx context.Context, did, handle string) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE actor SET handle = ? WHERE did = ?`, handle, did)
		if err != nil {
			if isUnique(err, "actor.handle") {
				return ErrHandleTaken
			}
			return err
		}
		return mustAffect(res)
	})
}

// UpdateEmail changes did's email and clears its confirmation.
func (m *Manager) UpdateEmail(ctx context.Context, did, email string) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE account SET email = ?, email_confirmed_at = NULL WHERE did = ?`, email, did)
		if err != nil {
			if isUnique(err, "account.email") {
				return ErrEmailTaken
			}
			return err
		}
		return mustAffect(res)
	})
}

// ConfirmEmail marks did's email confirmed at now.
func (m *Manager) ConfirmEmail(ctx context.Context, did string, now time.Time) error {
	return m.exec1(ctx, `UPDATE account SET email_confirmed_at = ? WHERE did = ?`, FormatTime(now), did)
}

// UpdatePassword stores a new password hash and revokes every session,
// as the reference does on a password change.
func (m *Manager) UpdatePassword(ctx context.Context, did, passwordScrypt string) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE account SET password_scrypt = ? WHERE did = ?`, passwordScrypt, did)
		if err != nil {
			return err
		}
		if err := mustAffect(res); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM refresh_token WHERE did = ?`, did)
		return err
	})
}

// SetTakedown sets (ref != "") or clears (ref == "") did's takedown.
func (m *Manager) SetTakedown(ctx context.Context, did, ref string) error {
	var v any
	if ref != "" {
		v = ref
	}
	return m.exec1(ctx, `UPDATE actor SET takedown_ref = ? WHERE did = ?`, v, did)
}

// Deactivate marks did deactivated at now, to be deleted after deleteAfter
// when that is not zero.
func (m *Manager) Deactivate(ctx context.Context, did string, now, deleteAfter time.Time) error {
	var after any
	if !deleteAfter.IsZero() {
		after = FormatTime(deleteAfter)
	}
	return m.exec1(ctx, `UPDATE actor SET deactivated_at = ?, delete_after = ? WHERE did = ?`, FormatTime(now), after, did)
}

// Activate clears did's deactivation.
func (m *Manager) Activate(ctx context.Context, did string) error {
	return m.exec1(ctx, `UPDATE actor SET deactivated_at = NULL, delete_after = NULL WHERE did = ?`, did)
}

// Delete removes did and everything that hangs off it (tokens, app
// passwords, its key, email tokens) in one transaction.
func (m *Manager) Delete(ctx context.Context, did string) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		// Foreign keys cascade from actor. Invite codes stay, as in the
		// reference: other accounts' invitedBy still names them.
		res, err := tx.ExecContext(ctx, `DELETE FROM actor WHERE did = ?`, did)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
}

func (m *Manager) exec1(ctx context.Context, q string, args ...any) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
}

func mustAffect(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// List returns up to limit accounts in creation order (then DID), after
// the given (createdAt, did) position; "" starts at the beginning.
func (m *Manager) List(ctx context.Context, afterTime, afterDID string, limit int) ([]*Account, error) {
	return collectAccounts(m.db.Reader().QueryContext(ctx, selectAccount+`WHERE (a.created_at, a.did) > (?, ?) ORDER BY a.created_at, a.did LIMIT ?`,
		afterTime, afterDID, limit))
}
