package account

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// ErrTokenRevoked is a refresh token that is not (or no longer) stored:
// logged out, rotated past its grace period, or never issued here.
var ErrTokenRevoked = errors.New("account: refresh token revoked")

// AppPass names the app password a session was opened with.
type AppPass struct {
	Name       string
	Privileged bool
}

// RefreshToken is a stored refresh token.
type RefreshToken struct {
	ID        string
	DID       string
	ExpiresAt time.Time
	NextID    string
	AppPass   *AppPass
}

// StoreRefresh records a newly minted refresh token. Storing one that
// exists already is a no-op (a re-grant within the grace period).
func (m *Manager) StoreRefresh(ctx context.Context, t RefreshToken) error {
	var name any
	if t.AppPass != nil {
		name = t.AppPass.Name
	}
	if err := m.writes.Prepare(ctx, insertRefresh); err != nil {
		return err
	}
	return m.writeTokens(ctx, func(tx *sql.Tx) error {
		return m.exec(ctx, tx, insertRefresh, t.ID, t.DID, FormatTime(t.ExpiresAt), name)
	})
}

func getRefresh(ctx context.Context, q querier, id string) (*RefreshToken, error) {
	var t RefreshToken
	var exp string
	var next, name sql.NullString
	var priv sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT r.id, r.did, r.expires_at, r.next_id, r.app_pass_name, p.privileged
		FROM refresh_token r LEFT JOIN app_password p ON p.did = r.did AND p.name = r.app_pass_name
		WHERE r.id = ?`, id).Scan(&t.ID, &t.DID, &exp, &next, &name, &priv)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrTokenRevoked
	}
	if err != nil {
		return nil, err
	}
	t.ExpiresAt, _ = time.Parse(TimeFormat, exp)
	t.NextID = next.String
	if name.Valid {
		t.AppPass = &AppPass{Name: name.String, Privileged: priv.Int64 == 1}
	}
	return &t, nil
}

// Rotate moves the refresh token id on to a successor, as refreshSession
// does: the first rotation names newID as its successor and shortens id's
// life to the grace period; a rotation of the same token within the grace
// period returns the same successor again (a client retrying after a lost
// response must not be logged out); past it, or for an unknown id,
// ErrTokenRevoked. It returns the stored token and the successor's id.
func (m *Manager) Rotate(ctx context.Context, id, newID string, now time.Time, grace time.Duration) (*RefreshToken, string, error) {
	var tok *RefreshToken
	var next string
	err := m.writeTokens(ctx, func(tx *sql.Tx) error {
		t, err := getRefresh(ctx, tx, id)
		if err != nil {
			return err
		}
		// Housekeeping as the reference does it: the account's dead
		// tokens go whenever one of its tokens is used.
		if _, err := tx.ExecContext(ctx, `DELETE FROM refresh_token WHERE did = ? AND expires_at <= ?`, t.DID, FormatTime(now)); err != nil {
			return err
		}
		if !now.Before(t.ExpiresAt) {
			return ErrTokenRevoked
		}
		tok = t
		if t.NextID != "" {
			next = t.NextID
			return nil
		}
		next = newID
		exp := now.Add(grace)
		if t.ExpiresAt.Before(exp) {
			exp = t.ExpiresAt
		}
		_, err = tx.ExecContext(ctx, `UPDATE refresh_token SET expires_at = ?, next_id = ? WHERE id = ?`, FormatTime(exp), next, id)
		return err
	})
	return tok, next, err
}

// Revoke deletes a refresh token; it reports whether one was stored.
func (m *Manager) Revoke(ctx context.Context, id string) (bool, error) {
	var n int64
	err := m.writeTokens(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM refresh_token WHERE id = ?`, id)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n > 0, err
}

// RevokeAll deletes every refresh token of did.
func (m *Manager) RevokeAll(ctx context.Context, did string) error {
	return m.writeTokens(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM refresh_token WHERE did = ?`, did)
		return err
	})
}
