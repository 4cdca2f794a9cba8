package pds

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/fakepds/fakepds/pds/k256"
)

// keyCache holds parsed repo signing keys: every repo write signs, and
// parsing a key from its bytes costs more than the signature's hashing.
type keyCache struct {
	m sync.Map // did -> *k256.PrivateKey
}

// signingKey is did's repo signing key.
func (s *Server) signingKey(ctx context.Context, did string) (*k256.PrivateKey, error) {
	if k, ok := s.keys.m.Load(did); ok {
		return k.(*k256.PrivateKey), nil
	}
	b, err := s.accounts.SigningKey(ctx, did)
	if err != nil {
		return nil, err
	}
	k, err := k256.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("signing key of %s: %w", did, err)
	}
	s.keys.m.Store(did, k)
	return k, nil
}

// rand is the server's random stream for purpose (Config.Rand).
func (s *Server) rand(purpose string) io.Reader { return s.cfg.Rand.Stream(purpose) }

// forgetKey drops did's cached key (account deleted).
func (s *Server) forgetKey(did string) { s.keys.m.Delete(did) }
