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
// Bounded as the account cache is: a key is ~700 bytes here, and a shared
// server that makes an account per test would otherwise keep one for
// every account it ever made.
type keyCache struct {
	mu sync.Mutex
	m  map[string]*k256.PrivateKey // by DID
}

// maxCachedKeys bounds the map; past it, it starts over.
const maxCachedKeys = 4096

func (c *keyCache) get(did string) (*k256.PrivateKey, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k, ok := c.m[did]
	return k, ok
}

func (c *keyCache) put(did string, k *k256.PrivateKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCachedKeys {
		c.m = make(map[string]*k256.PrivateKey)
	}
	c.m[did] = k
}

func (c *keyCache) forget(did string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, did)
}

func (c *keyCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// signingKey is did's repo signing key.
func (s *Server) signingKey(ctx context.Context, did string) (*k256.PrivateKey, error) {
	if k, ok := s.keys.get(did); ok {
		return k, nil
	}
	b, err := s.accounts.SigningKey(ctx, did)
	if err != nil {
		return nil, err
	}
	k, err := k256.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("signing key of %s: %w", did, err)
	}
	s.keys.put(did, k)
	return k, nil
}

// rand is the server's random stream for purpose (Config.Rand).
func (s *Server) rand(purpose string) io.Reader { return s.cfg.Rand.Stream(purpose) }

// forgetKey drops did's cached key (account deleted).
func (s *Server) forgetKey(did string) { s.keys.forget(did) }
