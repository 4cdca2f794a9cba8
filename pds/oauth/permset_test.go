package oauth

import (
	"context"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/lexicon"
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
	p := &Provider{opts: Options{PermissionSet: setsResolver(t, basicsSet)}}
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
