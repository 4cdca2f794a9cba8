package oauth

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"time"

	"github.com/fakepds/fakepds/pds/store"
)

// File is the OAuth database's name in the data dir.
const File = "oauth.sqlite"

// migrations: pending authorization requests (PAR until the code is
// exchanged), token families (one per authorized session, rotated on each
// refresh) and the refresh tokens a family has used, for replay detection.
var migrations = []string{
	`CREATE TABLE request (
		id          TEXT PRIMARY KEY,
		client_id   TEXT NOT NULL,
		client_auth TEXT NOT NULL,
		params      TEXT NOT NULL,
		expires_at  INTEGER NOT NULL,
		did         TEXT,
		csrf        TEXT NOT NULL,
		code        TEXT UNIQUE
	);
	CREATE INDEX request_expires ON request (expires_at);
	CREATE TABLE token (
		id            TEXT PRIMARY KEY,
		did           TEXT NOT NULL,
		client_id     TEXT NOT NULL,
		client_auth   TEXT NOT NULL,
		params        TEXT NOT NULL,
		refresh_token TEXT UNIQUE,
		code          TEXT UNIQUE,
		created_at    INTEGER NOT NULL,
		updated_at    INTEGER NOT NULL,
		expires_at    INTEGER NOT NULL
	);
	CREATE INDEX token_did ON token (did);
	CREATE INDEX token_updated ON token (updated_at);
	CREATE TABLE used_refresh_token (
		refresh_token TEXT PRIMARY KEY,
		token_id      TEXT NOT NULL REFERENCES token (id) ON DELETE CASCADE ON UPDATE CASCADE
	);
	CREATE INDEX used_refresh_token_token ON used_refresh_token (token_id);`,
	// The token's scope: the request's with its include: permission sets
	// expanded, as the reference stores it ('' is the request's).
	`ALTER TABLE token ADD COLUMN scope TEXT NOT NULL DEFAULT '';`,
}

// params are what the client asked for in its pushed authorization request.
type params struct {
	ResponseType        string `json:"response_type"`
	ResponseMode        string `json:"response_mode,omitempty"`
	RedirectURI         string `json:"redirect_uri"`
	Scope               string `json:"scope"`
	State               string `json:"state,omitempty"`
	CodeChallenge       string `json:"code_challenge"`
	CodeChallengeMethod string `json:"code_challenge_method"`
	LoginHint           string `json:"login_hint,omitempty"`
	Prompt              string `json:"prompt,omitempty"`
	DPoPJKT             string `json:"dpop_jkt"`
}

// clientAuth is how the client authenticated: "none", or private_key_jwt
// with the key it signed with (a later request must use the same key).
type clientAuth struct {
	Method string `json:"method"`
	KID    string `json:"kid,omitempty"`
	JKT    string `json:"jkt,omitempty"`
}

type request struct {
	ID, ClientID string
	Auth         clientAuth
	Params       params
	ExpiresAt    time.Time
	DID          string // signed in as; "" until then
	CSRF         string
	Code         string
}

type tokenRow struct {
	ID, DID, ClientID string
	Auth              clientAuth
	Params            params
	// Scope is what the token grants: Params.Scope with its include:
	// permission sets expanded when it was issued or last refreshed.
	Scope        string
	RefreshToken string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	ExpiresAt    time.Time
}

var errNotFound = errors.New("oauth: not found")

type db struct{ *store.DB }

// Store is the provider's database, opened apart from New so a server can
// open it beside its other databases.
type Store struct{ db db }

// OpenStore opens dir/oauth.sqlite. A new one is made by its first use
// (store.OpenLazy): most servers never see an OAuth request, and a start
// should not pay for a database file it does not need.
func OpenStore(ctx context.Context, dir string, opts store.Options) (*Store, error) {
	opts.Migrations = migrations
	d, err := store.OpenLazy(ctx, filepath.Join(dir, File), opts)
	if err != nil {
		return nil, err
	}
	return &Store{db{d}}, nil
}

// Close closes the database (Provider.Close does, once New took it).
func (s *Store) Close() error { return s.db.Close() }

func ms(t time.Time) int64 { return t.UnixMilli() }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings: cannot fail
	}
	return string(b)
}

// putRequest stores a new request, dropping the expired ones first so the
// table stays as small as the requests in flight.
func (d db) putRequest(ctx context.Context, r *request, now time.Time) error {
	return d.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`DELETE FROM request WHERE expires_at <= ?`, ms(now)); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO request (id, client_id, client_auth, params, expires_at, csrf) VALUES (?, ?, ?, ?, ?, ?)`,
			r.ID, r.ClientID, mustJSON(r.Auth), mustJSON(r.Params), ms(r.ExpiresAt), r.CSRF)
		return err
	})
}

const requestCols = `id, client_id, client_auth, params, expires_at, coalesce(did, ''), csrf, coalesce(code, '')`

func scanRequest(row *sql.Row) (*request, error) {
	var r request
	var auth, par string
	var exp int64
	err := row.Scan(&r.ID, &r.ClientID, &auth, &par, &exp, &r.DID, &r.CSRF, &r.Code)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	r.ExpiresAt = time.UnixMilli(exp)
	if err := json.Unmarshal([]byte(auth), &r.Auth); err != nil {
		return nil, err
	}
	return &r, json.Unmarshal([]byte(par), &r.Params)
}

func (d db) request(ctx context.Context, id string) (*request, error) {
	return scanRequest(d.Reader().QueryRowContext(ctx, `SELECT `+requestCols+` FROM request WHERE id = ?`, id))
}

// signIn binds the request to the account that signed in.
func (d db) signIn(ctx context.Context, id, did string) error {
	return d.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE request SET did = ? WHERE id = ? AND code IS NULL`, did, id)
		return err
	})
}

// touch moves a pending request's expiry.
func (d db) touch(ctx context.Context, id string, exp time.Time) error {
	return d.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE request SET expires_at = ? WHERE id = ? AND code IS NULL`, ms(exp), id)
		return err
	})
}

// authorize gives the request its code and a new expiry (the code's).
func (d db) authorize(ctx context.Context, id, code string, exp time.Time) error {
	return d.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE request SET code = ?, expires_at = ? WHERE id = ? AND code IS NULL AND did IS NOT NULL`, code, ms(exp), id)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errNotFound
		}
		return nil
	})
}

func (d db) deleteRequest(ctx context.Context, id string) error {
	return d.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`DELETE FROM request WHERE id = ?`, id)
		return err
	})
}

// exchange turns the request holding code into a token family, in one
// transaction: the request goes, the token comes. A code seen a second
// time finds no request; tokenByCode then tells a replay from garbage.
func (d db) exchange(ctx context.Context, code string, now time.Time, mint func(*request) (*tokenRow, error)) (*tokenRow, error) {
	var t *tokenRow
	var failed error
	err := d.Write(ctx, func(tx *sql.Tx) error {
		r, err := scanRequest(tx.QueryRow(`SELECT `+requestCols+` FROM request WHERE code = ?`, code))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`DELETE FROM request WHERE id = ?`, r.ID); err != nil {
			return err
		}
		// Each new family clears the dead ones, so the table holds only
		// sessions a refresh could still revive.
		if err := purgeTokens(tx, now); err != nil {
			return err
		}
		// The code is spent whatever follows: a failed check commits the
		// delete and returns its error.
		if !now.Before(r.ExpiresAt) {
			failed = errExpiredCode
			return nil
		}
		if t, failed = mint(r); failed != nil {
			return nil
		}
		_, err = tx.Exec(`INSERT INTO token (id, did, client_id, client_auth, params, refresh_token, code, created_at, updated_at, expires_at, scope)
			VALUES (?, ?, ?, ?, ?, nullif(?, ''), ?, ?, ?, ?, ?)`,
			t.ID, t.DID, t.ClientID, mustJSON(t.Auth), mustJSON(t.Params), t.RefreshToken, code, ms(t.CreatedAt), ms(t.UpdatedAt), ms(t.ExpiresAt), t.Scope)
		return err
	})
	if err == nil && failed != nil {
		return nil, failed
	}
	return t, err
}

var errExpiredCode = errors.New("oauth: code expired")

const (
	tokenCols  = `id, did, client_id, client_auth, params, coalesce(refresh_token, ''), created_at, updated_at, expires_at, scope`
	tokenColsT = `t.id, t.did, t.client_id, t.client_auth, t.params, coalesce(t.refresh_token, ''), t.created_at, t.updated_at, t.expires_at, t.scope`
)

func scanToken(row interface{ Scan(...any) error }) (*tokenRow, error) {
	var t tokenRow
	var auth, par string
	var c, u, e int64
	err := row.Scan(&t.ID, &t.DID, &t.ClientID, &auth, &par, &t.RefreshToken, &c, &u, &e, &t.Scope)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNotFound
	}
	if err != nil {
		return nil, err
	}
	t.CreatedAt, t.UpdatedAt, t.ExpiresAt = time.UnixMilli(c), time.UnixMilli(u), time.UnixMilli(e)
	if err := json.Unmarshal([]byte(auth), &t.Auth); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(par), &t.Params); err != nil {
		return nil, err
	}
	if t.Scope == "" {
		t.Scope = t.Params.Scope
	}
	return &t, nil
}

func (d db) tokenByID(ctx context.Context, id string) (*tokenRow, error) {
	return scanToken(d.Reader().QueryRowContext(ctx, `SELECT `+tokenCols+` FROM token WHERE id = ?`, id))
}

func (d db) tokenByCode(ctx context.Context, code string) (*tokenRow, error) {
	return scanToken(d.Reader().QueryRowContext(ctx, `SELECT `+tokenCols+` FROM token WHERE code = ?`, code))
}

// tokenByRefresh finds the family of a refresh token, current or used;
// current says which.
func (d db) tokenByRefresh(ctx context.Context, refresh string) (t *tokenRow, current bool, err error) {
	t, err = scanToken(d.Reader().QueryRowContext(ctx, `SELECT `+tokenCols+` FROM token WHERE refresh_token = ?`, refresh))
	if err == nil {
		return t, true, nil
	}
	if !errors.Is(err, errNotFound) {
		return nil, false, err
	}
	t, err = scanToken(d.Reader().QueryRowContext(ctx, `SELECT `+tokenColsT+` FROM used_refresh_token u JOIN token t ON t.id = u.token_id WHERE u.refresh_token = ?`, refresh))
	return t, false, err
}

// rotate moves the family from old to its next token id and refresh
// token; it fails with errNotFound when old is no longer current (a
// concurrent refresh won).
func (d db) rotate(ctx context.Context, t *tokenRow, oldID, oldRefresh string) error {
	return d.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE token SET id = ?, refresh_token = ?, updated_at = ?, expires_at = ?, client_auth = ?, scope = ? WHERE id = ? AND refresh_token = ?`,
			t.ID, t.RefreshToken, ms(t.UpdatedAt), ms(t.ExpiresAt), mustJSON(t.Auth), t.Scope, oldID, oldRefresh)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return errNotFound
		}
		_, err = tx.Exec(`INSERT INTO used_refresh_token (refresh_token, token_id) VALUES (?, ?)`, oldRefresh, t.ID)
		return err
	})
}

// deleteToken ends a family (its used refresh tokens go with it).
func (d db) deleteToken(ctx context.Context, id string) error {
	return d.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`DELETE FROM token WHERE id = ?`, id)
		return err
	})
}

// purgeTokens drops the families no refresh can revive: idle longer than
// the longest refresh lifetime (a confidential client's).
func (d db) purgeTokens(ctx context.Context, now time.Time) error {
	return d.Write(ctx, func(tx *sql.Tx) error { return purgeTokens(tx, now) })
}

func purgeTokens(tx *sql.Tx, now time.Time) error {
	_, err := tx.Exec(`DELETE FROM token WHERE updated_at <= ?`, ms(now.Add(-refreshLifetimeLong)))
	return err
}

// tokensOf lists an account's families, newest first.
func (d db) tokensOf(ctx context.Context, did string) ([]*tokenRow, error) {
	rows, err := d.Reader().QueryContext(ctx, `SELECT `+tokenCols+` FROM token WHERE did = ? ORDER BY created_at DESC, rowid DESC`, did)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*tokenRow
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// deleteTokensOf ends an account's families, of one client or of all
// ("").
func (d db) deleteTokensOf(ctx context.Context, did, clientID string) (n int64, err error) {
	err = d.Write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`DELETE FROM token WHERE did = ? AND (? = '' OR client_id = ?)`, did, clientID, clientID)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
