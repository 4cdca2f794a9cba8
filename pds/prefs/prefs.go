// Package prefs holds an account's app preferences: the actor store's
// account_pref table, one row per preference, its JSON as sent, in the
// order they were put. Which preferences a session may read or write is
// the caller's policy (pds/api_prefs.go); this package only stores them.
package prefs

import (
	"context"
	"database/sql"
	"fmt"
)

// Pref is one stored preference: its $type and its JSON.
type Pref struct {
	Name  string
	Value string
}

// Querier reads the actor store: its reader pool or a transaction.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// List is every stored preference, in the order they were put.
func List(ctx context.Context, q Querier) ([]Pref, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, value_json FROM account_pref ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("prefs: list: %w", err)
	}
	defer rows.Close()
	var out []Pref
	for rows.Next() {
		var p Pref
		if err := rows.Scan(&p.Name, &p.Value); err != nil {
			return nil, fmt.Errorf("prefs: list: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("prefs: list: %w", err)
	}
	return out, nil
}

// Replace deletes the preferences of namespace (names equal to it or under
// it, "ns.x"), but for those named in keep, and stores prefs in their
// place, in order, in tx.
func Replace(ctx context.Context, tx *sql.Tx, namespace string, keep []string, prefs []Pref) error {
	q := `DELETE FROM account_pref WHERE (name = ? OR name LIKE ? ESCAPE '\')`
	args := []any{namespace, escapeLike(namespace) + `.%`}
	for _, k := range keep {
		q += ` AND name != ?`
		args = append(args, k)
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("prefs: replace: %w", err)
	}
	for _, p := range prefs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO account_pref (name, value_json) VALUES (?, ?)`, p.Name, p.Value); err != nil {
			return fmt.Errorf("prefs: replace: %w", err)
		}
	}
	return nil
}

// escapeLike escapes LIKE's wildcards in s.
func escapeLike(s string) string {
	var b []byte
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '%' || c == '_' || c == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(b)
}
