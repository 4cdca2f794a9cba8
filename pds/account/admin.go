package account

import (
	"context"
	"database/sql"
	"strings"
	"time"
)

// This file holds what the com.atproto.admin methods need beyond the rest
// of the manager: views over many accounts, takedowns, admin overrides of
// email and password, and invite code administration. The admin methods
// skip existence checks the user-facing ones make, as the reference does,
// so none of these fail with ErrNotFound.

// placeholders is "?, ?, ?" for n values.
func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// ByDIDs finds the accounts of dids (taken down and deactivated included),
// each once, in DID order: the order the reference's "did IN (...)" lookup
// on its primary key returns them in.
func (m *Manager) ByDIDs(ctx context.Context, dids []string) ([]*Account, error) {
	if len(dids) == 0 {
		return nil, nil
	}
	return collectAccounts(m.db.Reader().QueryContext(ctx,
		selectAccount+`WHERE a.did IN (`+placeholders(len(dids))+`) ORDER BY a.did`, anys(dids)...))
}

// SetTakedownRevoking sets (ref != "") or clears (ref == "") did's takedown
// and revokes all its refresh tokens, in one transaction, as the reference's
// admin takedown does whichever way it goes. An unknown did changes nothing.
func (m *Manager) SetTakedownRevoking(ctx context.Context, did, ref string) error {
	var v any
	if ref != "" {
		v = ref
	}
	return m.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE actor SET takedown_ref = ? WHERE did = ?`, v, did); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM refresh_token WHERE did = ?`, did)
		return err
	})
}

// SetEmailAdmin sets did's email (lower-cased by the caller), clears its
// confirmation and deletes all its email tokens. A did without an account
// row changes nothing; an email another account holds is ErrEmailTaken.
func (m *Manager) SetEmailAdmin(ctx context.Context, did, email string) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE account SET email = ?, email_confirmed_at = NULL WHERE did = ?`, email, did); err != nil {
			if isUnique(err, "account.email") {
				return ErrEmailTaken
			}
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM email_token WHERE did = ?`, did)
		return err
	})
}

// SetPasswordAdmin stores a new password hash for did, deletes its password
// reset token and revokes its refresh tokens. An unknown did changes
// nothing and is not an error.
func (m *Manager) SetPasswordAdmin(ctx context.Context, did, passwordScrypt string) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		for _, q := range []struct {
			sql  string
			args []any
		}{
			{`UPDATE account SET password_scrypt = ? WHERE did = ?`, []any{passwordScrypt, did}},
			{`DELETE FROM email_token WHERE did = ? AND purpose = ?`, []any{did, PurposeResetPassword}},
			{`DELETE FROM refresh_token WHERE did = ?`, []any{did}},
		} {
			if _, err := tx.ExecContext(ctx, q.sql, q.args...); err != nil {
				return err
			}
		}
		return nil
	})
}

// SetInvitesDisabled sets the account's invitesDisabled flag; an unknown
// did changes nothing.
func (m *Manager) SetInvitesDisabled(ctx context.Context, did string, disabled bool) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE account SET invites_disabled = ? WHERE did = ?`, disabled, did)
		return err
	})
}

// DisableInviteCodes disables the given codes and every code made for the
// given accounts.
func (m *Manager) DisableInviteCodes(ctx context.Context, codes, accounts []string) error {
	return m.write(ctx, func(tx *sql.Tx) error {
		if len(codes) > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE invite_code SET disabled = 1 WHERE code IN (`+placeholders(len(codes))+`)`, anys(codes)...); err != nil {
				return err
			}
		}
		if len(accounts) > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE invite_code SET disabled = 1 WHERE for_account IN (`+placeholders(len(accounts))+`)`, anys(accounts)...); err != nil {
				return err
			}
		}
		return nil
	})
}

const selectInvite = `SELECT code, available, disabled, for_account, created_by, created_at FROM invite_code `

// scanInvites reads invite_code rows (selectInvite's columns) and fills in
// their uses, oldest first.
func (m *Manager) scanInvites(ctx context.Context, rows *sql.Rows, err error) ([]InviteCode, error) {
	if err != nil {
		return nil, err
	}
	var codes []InviteCode
	for rows.Next() {
		var c InviteCode
		if err := rows.Scan(&c.Code, &c.Available, &c.Disabled, &c.ForAccount, &c.CreatedBy, &c.CreatedAt); err != nil {
			rows.Close()
			return nil, err
		}
		codes = append(codes, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(codes) == 0 {
		return codes, nil
	}
	byCode := make(map[string]*InviteCode, len(codes))
	names := make([]string, len(codes))
	for i := range codes {
		codes[i].Uses = []InviteUse{}
		byCode[codes[i].Code] = &codes[i]
		names[i] = codes[i].Code
	}
	urows, err := m.db.Reader().QueryContext(ctx, `SELECT code, used_by, used_at FROM invite_code_use
		WHERE code IN (`+placeholders(len(names))+`) ORDER BY used_at, used_by`, anys(names)...)
	if err != nil {
		return nil, err
	}
	defer urows.Close()
	for urows.Next() {
		var code string
		var u InviteUse
		if err := urows.Scan(&code, &u.UsedBy, &u.UsedAt); err != nil {
			return nil, err
		}
		c := byCode[code]
		c.Uses = append(c.Uses, u)
	}
	return codes, urows.Err()
}

// InviteCodesFor lists the codes made for each of dids (disabled ones
// included), each account's in creation order.
func (m *Manager) InviteCodesFor(ctx context.Context, dids []string) (map[string][]InviteCode, error) {
	out := map[string][]InviteCode{}
	if len(dids) == 0 {
		return out, nil
	}
	rows, err := m.db.Reader().QueryContext(ctx, selectInvite+`WHERE for_account IN (`+placeholders(len(dids))+`) ORDER BY for_account, rowid`, anys(dids)...)
	codes, err := m.scanInvites(ctx, rows, err)
	if err != nil {
		return nil, err
	}
	for _, c := range codes {
		out[c.ForAccount] = append(out[c.ForAccount], c)
	}
	return out, nil
}

// InvitedBy finds, for each of dids that signed up with an invite code,
// that code.
func (m *Manager) InvitedBy(ctx context.Context, dids []string) (map[string]InviteCode, error) {
	out := map[string]InviteCode{}
	if len(dids) == 0 {
		return out, nil
	}
	rows, err := m.db.Reader().QueryContext(ctx, selectInvite+`WHERE code IN (SELECT DISTINCT code FROM invite_code_use
		WHERE used_by IN (`+placeholders(len(dids))+`)) ORDER BY rowid`, anys(dids)...)
	codes, err := m.scanInvites(ctx, rows, err)
	if err != nil {
		return nil, err
	}
	for _, c := range codes {
		for _, u := range c.Uses {
			out[u.UsedBy] = c
		}
	}
	return out, nil
}

// InviteSort orders ListInviteCodes.
type InviteSort int

const (
	// SortRecent is newest first, then by code, descending.
	SortRecent InviteSort = iota
	// SortUsage is most used first, then by code, descending.
	SortUsage
)

// InviteCursor is where a ListInviteCodes page starts: after the code
// whose primary key (creation time for SortRecent, use count for
// SortUsage) and code are these.
type InviteCursor struct {
	CreatedAt time.Time
	Uses      int64
	Code      string
}

// ListInviteCodes lists every invite code, limit at a time, after cursor
// when it is not nil.
func (m *Manager) ListInviteCodes(ctx context.Context, sort InviteSort, limit int, cursor *InviteCursor) ([]InviteCode, error) {
	q := `SELECT code, available, disabled, for_account, created_by, created_at FROM (
		SELECT *, (SELECT count(*) FROM invite_code_use u WHERE u.code = i.code) AS uses FROM invite_code i) `
	var args []any
	order := `ORDER BY created_at DESC, code DESC`
	if sort == SortUsage {
		order = `ORDER BY uses DESC, code DESC`
	}
	if cursor != nil {
		if sort == SortUsage {
			q += `WHERE uses < ? OR (uses = ? AND code < ?) `
			args = append(args, cursor.Uses, cursor.Uses, cursor.Code)
		} else {
			t := FormatTime(cursor.CreatedAt)
			q += `WHERE created_at < ? OR (created_at = ? AND code < ?) `
			args = append(args, t, t, cursor.Code)
		}
	}
	q += order + ` LIMIT ?`
	args = append(args, limit)
	rows, err := m.db.Reader().QueryContext(ctx, q, args...)
	return m.scanInvites(ctx, rows, err)
}
