package pds_test

import (
	"encoding/json"
	"testing"

	"github.com/fakepds/fakepds/pds"
)

func TestPreferences(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "prefs.test", "prefs@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	put := func(prefs ...map[string]any) error {
		return cl.Post(ctx, "app.bsky.actor.putPreferences", map[string]any{"preferences": prefs}, nil)
	}
	get := func() []map[string]any {
		var out struct {
			Preferences []map[string]any `json:"preferences"`
		}
		if err := cl.Get(ctx, "app.bsky.actor.getPreferences", nil, &out); err != nil {
			t.Fatal(err)
		}
		return out.Preferences
	}
	if len(get()) != 0 {
		t.Fatal("a new account has preferences")
	}
	adult := map[string]any{"$type": "app.bsky.actor.defs#personalDetailsPref", "birthDate": "1990-01-01T00:00:00.000Z"}
	feeds := map[string]any{"$type": "app.bsky.actor.defs#savedFeedsPrefV2", "items": []any{}}
	if err := put(adult, feeds); err != nil {
		t.Fatal(err)
	}
	got := get()
	b, _ := json.Marshal(got)
	if len(got) != 3 || got[2]["$type"] != "app.bsky.actor.defs#declaredAgePref" || got[2]["isOverAge18"] != true {
		t.Fatalf("getPreferences = %s", b)
	}
	// put replaces the whole namespace.
	if err := put(feeds); err != nil {
		t.Fatal(err)
	}
	if got := get(); len(got) != 1 {
		t.Fatalf("after replacing: %v", got)
	}
	apiErr(t, put(map[string]any{"$type": "com.example.pref"}), 400, "InvalidRequest")
	apiErr(t, put(map[string]any{"no": "type"}), 400, "InvalidRequest")
}
