package pds

import (
	"slices"

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
