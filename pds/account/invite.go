package account

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"strings"
	"time"
)

// Errors of invite codes.
var (
	ErrInviteUnavailable = errors.New("account: invite code not available")
)

// InviteCode is a code with its uses.
type InviteCode struct {
	Code       string
	Available  int
	Disabled   bool
	ForAccount string
	CreatedBy  string
	CreatedAt  string
	Uses       []InviteUse
}

// InviteUse is one account created with a code.
type InviteUse struct {
	UsedBy string
	UsedAt string
}

// NewInviteCode is a code in the reference's format: the service hostname
// with dots as dashes, then xxxxx-xxxxx drawn from r.
func NewInviteCode(r io.Reader, hostname string) string {
	return strings.ReplaceAll(hostname, ".", "-") + "-" + RandomToken(r)
}

// CreateInviteCodes stores codes, each good for useCount accounts.
func (m *Manager) CreateInviteCodes(ctx context.Context, codes []string, useCount int, forAccount, createdBy string, now time.Time) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		for _, c := range codes {
			if _, err := tx.ExecContext(ctx, `INSERT INTO invite_code (code, available, for_account, created_by, created_at) VALUES (?, ?, ?, ?, ?)`,
				c, useCount, forAccount, createdBy, FormatTime(now)); err != nil {
				return err
			}
		}
		return nil
	})
}

// InviteAvailable reports whether code exists, is enabled, has uses left
// and its owner's invites are not disabled.
func (m *Manager) InviteAvailable(ctx context.Context, code string) error {
	return inviteAvailable(ctx, m.db.Reader(), code)
}

func inviteAvailable(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, code string) error {
	var available, disabled, used int
	err := q.QueryRowContext(ctx, `SELECT i.available, i.disabled,
		(SELECT count(*) FROM invite_code_use u WHERE u.code = i.code)
		FROM invite_code i WHERE i.code = ?`, code).Scan(&available, &disabled, &used)
	if errors.Is(err, sql.ErrNoRows) || err == nil && (disabled != 0 || used >= available) {
		return ErrInviteUnavailable
	}
	return err
}

// useInvite records that did used code, checking it again inside the
// account's creation transaction so two sign-ups cannot share the last use.
func useInvite(ctx context.Context, tx *sql.Tx, code, did, now string) error {
	if err := inviteAvailable(ctx, tx, code); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO invite_code_use (code, used_by, used_at) VALUES (?, ?, ?)`, code, did, now)
	return err
}

// InviteCodes lists the codes made for did, with their uses, oldest first.
func (m *Manager) InviteCodes(ctx context.Context, did string) ([]InviteCode, error) {
	rows, err := m.db.Reader().QueryContext(ctx, selectInvite+`WHERE for_account = ? ORDER BY created_at, code`, did)
	return m.scanInvites(ctx, rows, err)
}
