package pds

import (
	"bytes"
	"slices"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// MethodAuth is a registered method and the auth it declared, as
// TestAuthMatrix sees it.
type MethodAuth struct {
	NSID string
	Kind xrpc.Kind
	Auth string // none, access, refresh, admin, moderator, repoReader, migration, uploader
	Full bool   // access: only a full password session (no app passwords)
}

// RegisteredAuth lists every method s serves with its declared auth.
func RegisteredAuth(s *Server) []MethodAuth {
	names := map[authKind]string{
		authNone: "none", authAccess: "access", authRefresh: "refresh", authAdmin: "admin",
		authModerator: "moderator", authRepoReader: "repoReader", authMigration: "migration", authUploader: "uploader",
	}
	var out []MethodAuth
	for _, m := range s.xrpc.Methods() {
		a := m.Auth.(boundAuth).authn
		out = append(out, MethodAuth{
			NSID: m.NSID, Kind: m.Kind, Auth: names[a.kind],
			Full: a.kind == authAccess && !slices.Contains(a.scopes, auth.ScopeAppPass),
		})
	}
	return out
}

// VerifiedRepo is did's repo from sync.getRepo, loaded by indigo, with its
// head commit's signature verified against the key in the DID document
// (resolved through the server's PLC directory).
func VerifiedRepo(t testing.TB, s *Server, did string) (*indigorepo.Commit, *indigorepo.Repo) {
	t.Helper()
	ctx := t.Context()
	car, err := comatproto.SyncGetRepo(ctx, atclient.NewAPIClient(s.URL()), did, "")
	if err != nil {
		t.Fatal(err)
	}
	commit, r, err := indigorepo.LoadRepoFromCAR(ctx, bytes.NewReader(car))
	if err != nil {
		t.Fatal(err)
	}
	ident, err := s.Directory().LookupDID(ctx, syntax.DID(did))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ident.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := commit.VerifySignature(pub); err != nil {
		t.Fatalf("head commit signature: %v", err)
	}
	return commit, r
}
