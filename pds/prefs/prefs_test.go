package prefs_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/prefs"
	"github.com/fakepds/fakepds/pds/store"
)

func names(ps []prefs.Pref) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name+"="+p.Value)
	}
	return strings.Join(out, " ")
}

// Replace touches only its namespace (the name itself and names under it,
// never a name that merely starts with it or matches it as a LIKE pattern),
// spares what keep names, and List gives back the order of the puts.
func TestReplace(t *testing.T) {
	ctx := t.Context()
	db, err := actorstore.Opener(filepath.Join(t.TempDir(), "actors"), store.Options{})(ctx, "did:plc:prefsprefsprefsprefsprefs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	replace := func(keep []string, ps ...prefs.Pref) {
		t.Helper()
		if err := db.Write(ctx, func(tx *sql.Tx) error { return prefs.Replace(ctx, tx, "app.bsky", keep, ps) }); err != nil {
			t.Fatal(err)
		}
	}
	list := func() string {
		t.Helper()
		ps, err := prefs.List(ctx, db.Reader())
		if err != nil {
			t.Fatal(err)
		}
		return names(ps)
	}
	replace(nil, prefs.Pref{Name: "app.bsky.b", Value: "1"}, prefs.Pref{Name: "app.bsky", Value: "2"},
		prefs.Pref{Name: "app.bskyx", Value: "3"}, prefs.Pref{Name: "appxbsky.c", Value: "4"}, prefs.Pref{Name: "app.bsky.secret", Value: "5"})
	if got, want := list(), "app.bsky.b=1 app.bsky=2 app.bskyx=3 appxbsky.c=4 app.bsky.secret=5"; got != want {
		t.Fatalf("after the first put: %s, want %s", got, want)
	}
	replace([]string{"app.bsky.secret"}, prefs.Pref{Name: "app.bsky.a", Value: "6"})
	if got, want := list(), "app.bskyx=3 appxbsky.c=4 app.bsky.secret=5 app.bsky.a=6"; got != want {
		t.Fatalf("after the second put: %s, want %s", got, want)
	}
}
