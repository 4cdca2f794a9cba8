package account

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"strings"
	"time"
)

// Purpose is what an email token authorizes.
type Purpose string

const (
	PurposeConfirmEmail  Purpose = "confirm_email"
	PurposeUpdateEmail   Purpose = "update_email"
	PurposeResetPassword Purpose = "reset_password"
	PurposeDeleteAccount Purpose = "delete_account"
	PurposePLCOperation  Purpose = "plc_operation"
)

// EmailTokenTTL is how long an email token is good for, as the reference's.
const EmailTokenTTL = 15 * time.Minute

// Errors of CheckEmailToken.
var (
	ErrTokenInvalid = errors.New("account: email token invalid")
	ErrTokenExpired = errors.New("account: email token expired")
)

// RandomToken is the reference's short token, xxxxx-xxxxx in base32,
// drawn from r.
func RandomToken(r io.Reader) string {
	s := RandomBase32(r, 10)
	return s[:5] + "-" + s[5:]
}

// CreateEmailToken issues a token for did and purpose, replacing any
// earlier one of that purpose. Tokens are upper case, as the reference's.
func (m *Manager) CreateEmailToken(ctx context.Context, did string, purpose Purpose, now time.Time) (string, error) {
	token := strings.ToUpper(RandomToken(m.Rand))
	err := m.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO email_token (purpose, did, token, requested_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (purpose, did) DO UPDATE SET token = excluded.token, requested_at = excluded.requested_at`,
			purpose, did, token, FormatTime(now))
		return err
	})
	return token, err
}

// CheckEmailToken checks token for purpose; when did is "" it finds the
// account by the token alone (resetPassword). It returns the token's DID.
func (m *Manager) CheckEmailToken(ctx context.Context, did string, purpose Purpose, token string, now time.Time) (string, error) {
	q := `SELECT did, requested_at FROM email_token WHERE purpose = ? AND token = ?`
	args := []any{purpose, strings.ToUpper(token)}
	if did != "" {
		q += ` AND did = ?`
		args = append(args, did)
	}
	var gotDID, at string
	err := m.db.Reader().QueryRowContext(ctx, q, args...).Scan(&gotDID, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrTokenInvalid
	}
	if err != nil {
		return "", err
	}
	requested, err := time.Parse(TimeFormat, at)
	if err != nil {
		return "", err
	}
	if now.Sub(requested) >= EmailTokenTTL {
		return "", ErrTokenExpired
	}
	return gotDID, nil
}

// DeleteEmailToken removes did's token for purpose (once used).
func (m *Manager) DeleteEmailToken(ctx context.Context, did string, purpose Purpose) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM email_token WHERE did = ? AND purpose = ?`, did, purpose)
		return err
	})
}
