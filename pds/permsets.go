package pds

import (
	"context"
	"errors"
	"fmt"

	"github.com/bluesky-social/indigo/atproto/lexicon"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/oauth"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
)

// OAuth permission sets ("include:<nsid>" scopes), resolved offline: the
// reference resolves an NSID by DNS (_lexicon.<authority>) to a DID, then
// reads that repo's com.atproto.lexicon.schema record <nsid>. fakepds
// looks in Config.PermissionSets, then takes the authority as the handle
// of an account on this server (test.alice.auth.basics: alice.test) and
// reads its record, as if the handle's _lexicon record named the account.

const lexiconCollection = "com.atproto.lexicon.schema"

// parsePermissionSets reads Config.PermissionSets, keyed by NSID.
func parsePermissionSets(docs [][]byte) (map[string]*lexicon.SchemaFile, error) {
	sets := make(map[string]*lexicon.SchemaFile, len(docs))
	for i, doc := range docs {
		f, err := oauth.ParsePermissionSet(doc)
		if err != nil {
			return nil, fmt.Errorf("pds: Config.PermissionSets[%d]: %w", i, err)
		}
		if sets[f.ID] != nil {
			return nil, fmt.Errorf("pds: Config.PermissionSets[%d]: %s is listed twice", i, f.ID)
		}
		sets[f.ID] = f
	}
	return sets, nil
}

// permissionSet is the OAuth provider's resolver.
func (s *Server) permissionSet(ctx context.Context, nsid string) (*lexicon.SchemaFile, error) {
	if f := s.permSets[nsid]; f != nil {
		return f, nil
	}
	id, err := syntax.ParseNSID(nsid)
	if err != nil {
		return nil, oauth.ErrNoLexicon
	}
	acc, err := s.accounts.ByHandle(ctx, id.Authority())
	if errors.Is(err, account.ErrNotFound) {
		return nil, oauth.ErrNoLexicon
	}
	if err != nil {
		return nil, err
	}
	if acc.TakedownRef != "" || acc.DeactivatedAt != "" {
		return nil, oauth.ErrNoLexicon
	}
	var val []byte
	err = s.withActor(ctx, acc.DID, func(db *store.DB) error {
		var err error
		_, val, err = repo.GetRecord(ctx, db.Reader(), lexiconCollection, syntax.RecordKey(nsid), nil)
		return err
	})
	if errors.Is(err, repo.ErrRecordNotFound) {
		return nil, oauth.ErrNoLexicon
	}
	if err != nil {
		return nil, err
	}
	doc, err := recordJSON(val)
	if err != nil {
		return nil, err
	}
	f, err := oauth.ParsePermissionSet(doc)
	if err != nil || f.ID != nsid {
		// A record that is no permission set of this NSID resolves to
		// nothing a token could use.
		return nil, oauth.ErrNoLexicon
	}
	return f, nil
}
