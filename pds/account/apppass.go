package account

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"strings"
	"time"

	"github.com/fakepds/fakepds/pds/random"
)

// ErrAppPassTaken is an app password name the account already uses.
var ErrAppPassTaken = errors.New("account: app password name taken")

// AppPassword is a listed app password (its secret is shown once, at
// creation).
type AppPassword struct {
	Name       string
	CreatedAt  string
	Privileged bool
}

const base32Alphabet = "abcdefghijklmnopqrstuvwxyz234567"

// RandomBase32 returns n random characters (drawn from r) of the
// lower-case base32 alphabet the reference uses for app passwords and
// tokens.
func RandomBase32(r io.Reader, n int) string {
	b := make([]byte, n)
	random.Read(r, b)
	for i := range b {
		b[i] = base32Alphabet[b[i]&31]
	}
	return string(b)
}

// NewAppPasswordSecret returns a secret in the reference's format,
// xxxx-xxxx-xxxx-xxxx, drawn from r.
func NewAppPasswordSecret(r io.Reader) string {
	s := RandomBase32(r, 16)
	return s[0:4] + "-" + s[4:8] + "-" + s[8:12] + "-" + s[12:16]
}

// CreateAppPassword stores an app password whose hash is passwordScrypt
// (hashed with the did-derived salt, so a login can find it by hash).
func (m *Manager) CreateAppPassword(ctx context.Context, did, name, passwordScrypt string, privileged bool, now time.Time) (AppPassword, error) {
	ap := AppPassword{Name: name, CreatedAt: FormatTime(now), Privileged: privileged}
	err := m.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO app_password (did, name, password_scrypt, created_at, privileged) VALUES (?, ?, ?, ?, ?)`,
			did, name, passwordScrypt, ap.CreatedAt, privileged)
		if err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed") {
			return ErrAppPassTaken
		}
		return err
	})
	return ap, err
}

// ListAppPasswords lists did's app passwords, newest first.
func (m *Manager) ListAppPasswords(ctx context.Context, did string) ([]AppPassword, error) {
	rows, err := m.db.Reader().QueryContext(ctx, `SELECT name, created_at, privileged FROM app_password WHERE did = ? ORDER BY created_at DESC, name`, did)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []AppPassword{}
	for rows.Next() {
		var ap AppPassword
		if err := rows.Scan(&ap.Name, &ap.CreatedAt, &ap.Privileged); err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, rows.Err()
}

// RevokeAppPassword deletes did's app password name and the sessions opened
// with it.
func (m *Manager) RevokeAppPassword(ctx context.Context, did, name string) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM app_password WHERE did = ? AND name = ?`, did, name); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM refresh_token WHERE did = ? AND app_pass_name = ?`, did, name)
		return err
	})
}

// FindAppPassword finds did's app password with the given hash.
func (m *Manager) FindAppPassword(ctx context.Context, did, passwordScrypt string) (*AppPass, error) {
	var ap AppPass
	err := m.db.Reader().QueryRowContext(ctx, `SELECT name, privileged FROM app_password WHERE did = ? AND password_scrypt = ?`,
		did, passwordScrypt).Scan(&ap.Name, &ap.Privileged)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &ap, nil
}
