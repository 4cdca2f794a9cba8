package pds

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/prefs"
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
	out := []json.RawMessage{}
	var age json.RawMessage
	var stored []prefs.Pref
	err := s.withActor(r.Context(), c.DID, func(db *store.DB) error {
		return db.Query(func(q store.Querier) error {
			var err error
			stored, err = prefs.List(r.Context(), q)
			return err
		})
	})
	if err != nil {
		return err
	}
	for _, p := range stored {
		if !inNamespace(p.Name) || !prefAllowed(p.Name, full) {
			continue
		}
		out = append(out, json.RawMessage(p.Value))
		if p.Name == personalDetailsPref {
			age, _ = declaredAge(p.Value, s.clock.Now())
		}
	}
	if age != nil {
		// Derived, and last, as the reference appends it.
		out = append(out, age)
	}
	xrpc.WriteJSON(w, http.StatusOK, struct {
		Preferences []json.RawMessage `json:"preferences"`
	}{out})
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
	put := make([]prefs.Pref, 0, len(in.Preferences))
	var forbidden []string
	for _, raw := range in.Preferences {
		// The lexicon made each one an object with a string $type.
		var t struct {
			Type string `json:"$type"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return err
		}
		put = append(put, prefs.Pref{Name: t.Type, Value: string(raw)})
	}
	for _, p := range put {
		if !inNamespace(p.Name) {
			return xrpc.InvalidRequest("", "Some preferences are not in the %s namespace", prefNamespace)
		}
		if !prefAllowed(p.Name, full) {
			forbidden = append(forbidden, p.Name)
		}
	}
	// The declared age is read-only: derived from the birth date, never
	// stored.
	put = slices.DeleteFunc(put, func(p prefs.Pref) bool { return p.Name == declaredAgePref })
	// A session that may not see personal details keeps them as they are.
	var keep []string
	if !full {
		keep = []string{personalDetailsPref}
	}
	if len(forbidden) > 0 {
		return xrpc.InvalidRequest("", "Do not have authorization to set preferences: %s", strings.Join(forbidden, ", "))
	}
	ctx := r.Context()
	err := s.withActor(ctx, c.DID, func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error { return prefs.Replace(ctx, tx, prefNamespace, keep, put) })
	})
	if err != nil {
		return err
	}
	return noOutput(w)
}
