package oauth

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/lexicon"

	"github.com/fakepds/fakepds/pds/clock"
)

const basicsSet = `{
  "lexicon": 1,
  "id": "com.example.auth.basics",
  "defs": {
    "main": {
      "type": "permission-set",
      "title": "Basics",
      "permissions": [
        {"type": "permission", "resource": "repo", "collection": ["com.example.auth.post"], "action": ["create"]},
        {"type": "permission", "resource": "repo", "collection": ["com.example.auth.like", "com.example.auth.follow", "com.example.auth.like"]},
        {"type": "permission", "resource": "repo", "collection": ["com.example.auth.post", "com.other.app.post"]},
        {"type": "permission", "resource": "repo", "collection": ["com.example.authz.post"]},
        {"type": "permission", "resource": "rpc", "lxm": ["com.example.auth.getThing"], "inheritAud": true},
        {"type": "permission", "resource": "rpc", "lxm": ["com.example.auth.listThings", "com.example.auth.getThing"], "aud": "*"},
        {"type": "permission", "resource": "rpc", "lxm": ["com.other.app.getThing"], "aud": "*"}
      ]
    }
  }
}`

func setsResolver(t *testing.T, docs ...string) PermissionSetResolver {
	t.Helper()
	sets := map[string]*lexicon.SchemaFile{}
	for _, d := range docs {
		f, err := ParsePermissionSet([]byte(d))
		if err != nil {
			t.Fatal(err)
		}
		sets[f.ID] = f
	}
	return func(_ context.Context, nsid string) (*lexicon.SchemaFile, error) {
		if f := sets[nsid]; f != nil {
			return f, nil
		}
		return nil, ErrNoLexicon
	}
}

// TestTokenScope: an include: grants exactly the set's repo: and rpc:
// permissions under the set's own NSID group, written as the reference
// writes them, before the request's other scopes.
func TestTokenScope(t *testing.T) {
	p := &Provider{opts: Options{PermissionSet: setsResolver(t, basicsSet), Clock: &clock.Shifted{}}}
	for _, tc := range []struct{ scope, want, err string }{
		{scope: "atproto transition:generic", want: "atproto transition:generic"},
		{scope: "atproto include:com.example.auth.basics", want: "repo:com.example.auth.post?action=create " +
			"repo?collection=com.example.auth.follow&collection=com.example.auth.like " +
			"rpc?lxm=com.example.auth.getThing&lxm=com.example.auth.listThings&aud=* atproto"},
		{scope: "include:com.example.auth.basics?aud=did:web:api.example%23svc atproto", want: "repo:com.example.auth.post?action=create " +
			"repo?collection=com.example.auth.follow&collection=com.example.auth.like " +
			"rpc:com.example.auth.getThing?aud=did%3Aweb%3Aapi.example%23svc " +
			"rpc?lxm=com.example.auth.getThing&lxm=com.example.auth.listThings&aud=* atproto"},
		{scope: "atproto include:com.example.auth.missing", err: "Could not resolve Lexicon for NSID (com.example.auth.missing)"},
	} {
		got, err := p.tokenScope(t.Context(), tc.scope)
		if tc.err != "" {
			if e, ok := err.(*Error); !ok || e.Code != "invalid_scope" || e.Description != tc.err {
				t.Errorf("%q: %v, want invalid_scope %q", tc.scope, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q:\n got %q (%v)\nwant %q", tc.scope, got, err, tc.want)
		}
	}

	scope, err := p.tokenScope(t.Context(), "atproto include:com.example.auth.basics")
	if err != nil {
		t.Fatal(err)
	}
	g := &Grant{perms: newPermissions(scope)}
	for _, c := range []struct {
		collection, action string
		want               bool
	}{
		{"com.example.auth.post", "create", true},
		{"com.example.auth.post", "delete", false},
		{"com.example.auth.like", "delete", true},
		{"com.other.app.post", "create", false},
		{"com.example.authz.post", "create", false},
	} {
		if got := g.AllowsRepo(c.collection, c.action); got != c.want {
			t.Errorf("AllowsRepo(%s, %s) = %v, want %v", c.collection, c.action, got, c.want)
		}
	}
	if !g.AllowsRPC("did:web:api.example#svc", "com.example.auth.listThings") || g.AllowsRPC("did:web:api.example#svc", "com.other.app.getThing") {
		t.Error("rpc: the set's methods only")
	}
}

func TestParsePermissionSet(t *testing.T) {
	for _, bad := range []string{
		`{"lexicon": 1, "id": "com.example.auth.rec", "defs": {"main": {"type": "record", "key": "tid", "record": {"type": "object", "properties": {}}}}}`,
		`{"lexicon": 1, "id": "not an nsid", "defs": {"main": {"type": "permission-set", "permissions": []}}}`,
		`{"lexicon": 1, "id": "com.example.auth.wild", "defs": {"main": {"type": "permission-set", "permissions": [{"type": "permission", "resource": "repo", "collection": ["*"]}]}}}`,
		`{"lexicon": 1, "id": "com.example.auth.blob", "defs": {"main": {"type": "permission-set", "permissions": [{"type": "permission", "resource": "blob", "accept": ["image/*"]}]}}}`,
		`not json`,
	} {
		if _, err := ParsePermissionSet([]byte(bad)); err == nil {
			t.Errorf("accepted %s", strings.TrimSpace(bad)[:40])
		}
	}
}

// TestRefreshPermissionSetGone: a refresh rebuilds the token's scope from
// the permission sets; one that stopped resolving keeps its last document,
// as in the reference's lexicon store, also past lexiconRefresh when it is
// asked again; one the provider has no document for ends the session with
// the reference's 500 server_error.
func TestRefreshPermissionSetGone(t *testing.T) {
	ts := newTestServer(t)
	var gone atomic.Bool
	have := setsResolver(t, basicsSet)
	ts.p.opts.PermissionSet = func(ctx context.Context, nsid string) (*lexicon.SchemaFile, error) {
		if gone.Load() {
			return nil, ErrNoLexicon
		}
		return have(ctx, nsid)
	}
	redirect := "http://127.0.0.1:9999/cb"
	scope := "atproto include:com.example.auth.basics"
	c := ts.client(loopbackID(redirect, scope))
	a := c.post("/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {c.authorize(parForm(redirect, scope))}, "redirect_uri": {redirect}, "code_verifier": {c.verifier}})
	granted, _ := a.body["scope"].(string)
	if a.status != 200 || !strings.HasPrefix(granted, "repo:com.example.auth.post?action=create ") {
		t.Fatalf("exchange: %d %v", a.status, a.body)
	}
	refresh := func() answer {
		t.Helper()
		return c.post("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {a.body["refresh_token"].(string)}})
	}
	gone.Store(true)
	for _, wait := range []time.Duration{0, lexiconRefresh + time.Second} {
		ts.clock.Advance(wait)
		if a = refresh(); a.status != 200 || a.body["scope"] != granted {
			t.Fatalf("refresh %v after the set stopped resolving: %d %v", wait, a.status, a.body)
		}
	}

	// A provider that never had the document (it keeps them in memory:
	// after a restart).
	ts.p.lexicons = lexicons{}
	last := a
	if a = refresh(); a.status != 500 || a.err() != "server_error" || a.desc() != "Server error" {
		t.Fatalf("refresh with no document for the set: %d %v", a.status, a.body)
	}
	gone.Store(false)
	a = last
	if a = refresh(); a.status != 400 || a.desc() != "Invalid refresh token" {
		t.Fatalf("refresh after the session ended: %d %v", a.status, a.body)
	}
}

// TestUnresolvedBounded: the failures remembered are bounded (any client
// can name NSIDs nobody has), the resolved sets kept.
func TestUnresolvedBounded(t *testing.T) {
	ck := &clock.Shifted{}
	p := &Provider{opts: Options{PermissionSet: setsResolver(t, basicsSet), Clock: ck}}
	if _, err := p.permissionSet(t.Context(), "com.example.auth.basics"); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * maxUnresolved {
		if i == maxUnresolved {
			ck.Advance(lexiconRefresh)
		}
		if _, err := p.permissionSet(t.Context(), fmt.Sprintf("com.example.none%d.set", i)); err == nil {
			t.Fatal("an unknown NSID resolved")
		}
	}
	if n := len(p.lexicons.m); n > maxUnresolved+1 || p.lexicons.unresolved > maxUnresolved || p.lexicons.m["com.example.auth.basics"].file == nil {
		t.Fatalf("%d remembered, %d unresolved, basics %+v", n, p.lexicons.unresolved, p.lexicons.m["com.example.auth.basics"])
	}
}
