package pds

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// Preferences of the app.bsky namespace, kept in the actor store as the
// reference keeps them: one row per preference, its JSON as sent.
const (
	prefNamespace       = "app.bsky"
	personalDetailsPref = "app.bsky.actor.defs#personalDetailsPref"
	declaredAgePref     = "app.bsky.actor.defs#declaredAgePref"
)

func (s *Server) registerPrefs(x *xrpc.Mux) {
	s.handle(x, xrpc.Query, "app.bsky.actor.getPreferences", access(append(scopesStandard, auth.ScopeTakendown), check{}), s.getPreferences)
	handleInput(s, x, "app.bsky.actor.putPreferences", xrpc.JSONLimit, accessStandard, s.putPreferences)
}

func inNamespace(name string) bool {
	return name == prefNamespace || strings.HasPrefix(name, prefNamespace+".")
}

// prefAllowed: personal details need a full password session.
func prefAllowed(typ string, full bool) bool { return full || typ != personalDetailsPref }

func (s *Server) getPreferences(w http.ResponseWriter, r *http.Request, c *caller) error {
	full := c.Scope == auth.ScopeAccess
	prefs := []json.RawMessage{}
	var age json.RawMessage
	err := s.withActor(r.Context(), c.DID, func(db *store.DB) error {
		rows, err := db.Reader().QueryContext(r.Context(), `SELECT name, value_json FROM account_pref ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var name, value string
			if err := rows.Scan(&name, &value); err != nil {
				return err
			}
			if !inNamespace(name) || !prefAllowed(name, full) {
				continue
			}
			prefs = append(prefs, json.RawMessage(value))
			if name == personalDetailsPref {
				age, _ = declaredAge(value, s.clock.Now())
			}
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	if age != nil {
		// Derived, and last, as the reference appends it.
		prefs = append(prefs, age)
	}
	xrpc.WriteJSON(w, http.StatusOK, struct {
		Preferences []json.RawMessage `json:"preferences"`
	}{prefs})
	return nil
}

// declaredAge is the read-only preference the reference derives from a
// birth date.
func declaredAge(personal string, now time.Time) (json.RawMessage, bool) {
	var p struct {
		BirthDate string `json:"birthDate"`
	}
	if json.Unmarshal([]byte(personal), &p) != nil || p.BirthDate == "" {
		return nil, false
	}
	born, err := time.Parse(time.RFC3339Nano, p.BirthDate)
	if err != nil {
		if born, err = time.Parse("2006-01-02", p.BirthDate[:min(10, len(p.BirthDate))]); err != nil {
			return nil, false
		}
	}
	age := now.Year() - born.Year()
	if now.YearDay() < born.YearDay() {
		age--
	}
	b, _ := json.Marshal(map[string]any{"$type": declaredAgePref, "isOverAge13": age >= 13, "isOverAge16": age >= 16, "isOverAge18": age >= 18})
	return b, true
}

type putPreferencesInput struct {
	Preferences []json.RawMessage `json:"preferences"`
}

func (s *Server) putPreferences(w http.ResponseWriter, r *http.Request, c *caller, in *putPreferencesInput) error {
	full := c.Scope == auth.ScopeAccess
	prefs := make([]pref, 0, len(in.Preferences))
	var forbidden []string
	for _, raw := range in.Preferences {
		// The lexicon made each one an object with a string $type.
		var t struct {
			Type string `json:"$type"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return err
		}
		prefs = append(prefs, pref{t.Type, string(raw)})
	}
	for _, p := range prefs {
		if !inNamespace(p.name) {
			return xrpc.InvalidRequest("", "Some preferences are not in the %s namespace", prefNamespace)
		}
		if !prefAllowed(p.name, full) {
			forbidden = append(forbidden, p.name)
		}
	}
	if len(forbidden) > 0 {
		return xrpc.InvalidRequest("", "Do not have authorization to set preferences: %s", strings.Join(forbidden, ", "))
	}
	ctx := r.Context()
	err := s.withActor(ctx, c.DID, func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error { return replacePrefs(ctx, tx, full, prefs) })
	})
	if err != nil {
		return err
	}
	return ok(w)
}

type pref struct{ name, value string }

// replacePrefs replaces the namespace's preferences the session may touch
// (all of them for a full session; all but personal details otherwise).
func replacePrefs(ctx context.Context, tx *sql.Tx, full bool, prefs []pref) error {
	q := `DELETE FROM account_pref WHERE (name = 'app.bsky' OR name LIKE 'app.bsky.%')`
	if !full {
		q += ` AND name != '` + personalDetailsPref + `'`
	}
	if _, err := tx.ExecContext(ctx, q); err != nil {
		return err
	}
	for _, p := range prefs {
		if p.name == declaredAgePref {
			continue // read-only: derived from the birth date, never stored
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO account_pref (name, value_json) VALUES (?, ?)`, p.name, p.value); err != nil {
			return err
		}
	}
	return nil
}
