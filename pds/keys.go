package pds

import (
	"context"
	"fmt"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
)

// keyCache holds parsed repo signing keys: every repo write signs, and
// parsing a key from its bytes costs more than the signature's hashing.
type keyCache struct {
	m sync.Map // did -> *atcrypto.PrivateKeyK256
}

// signingKey is did's repo signing key.
func (s *Server) signingKey(ctx context.Context, did string) (*atcrypto.PrivateKeyK256, error) {
	if k, ok := s.keys.m.Load(did); ok {
		return k.(*atcrypto.PrivateKeyK256), nil
	}
	b, err := s.accounts.SigningKey(ctx, did)
	if err != nil {
		return nil, err
	}
	k, err := atcrypto.ParsePrivateBytesK256(b)
	if err != nil {
		return nil, fmt.Errorf("signing key of %s: %w", did, err)
	}
	s.keys.m.Store(did, k)
	return k, nil
}

// forgetKey drops did's cached key (account deleted).
func (s *Server) forgetKey(did string) { s.keys.m.Delete(did) }
