package pds

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/bluesky-social/indigo/atproto/atcrypto"

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

// commitKey is did's key for signing a commit: with a nonce made in idle
// time when the server has them (see k256.Nonces; signing on the spot was
// 50-110 µs of a write's 0.3-0.5 ms on 2 cores, its biggest single piece),
// with RFC 6979 when the pool is empty or the server is seeded and must
// sign reproducibly.
func (s *Server) commitKey(ctx context.Context, did string) (atcrypto.PrivateKey, error) {
	k, err := s.signingKey(ctx, did)
	if err != nil {
		return nil, err
	}
	return s.pooled(k), nil
}

// pooled is k signing with the server's nonces, when it has them.
func (s *Server) pooled(k *k256.PrivateKey) atcrypto.PrivateKey {
	if s.nonces.pool == nil {
		return k
	}
	s.nonces.topUp(&s.idle, s.log)
	return k256.Pooled{PrivateKey: k, Nonces: s.nonces.pool}
}

// commitNonces is the server's pool of signature nonces (nil pool: a
// seeded server) and whether idle work to fill it is queued.
type commitNonces struct {
	pool   *k256.Nonces
	queued atomic.Bool
}

const (
	// firstNonces and maxNonces bound the pool's size (k256.Nonces grows
	// it when a signature finds it empty): a test's private server signs
	// a few commits; a suite's writes come in runs (an operation across
	// its accounts) that grow it.
	firstNonces = 16
	maxNonces   = 1024
	// nonceRefillAt is how many the pool lacks before it is topped up.
	nonceRefillAt = 8
	// noncesPerPiece is one piece of idle work: ~45 µs each on 2 cores,
	// so that a request arriving meanwhile waits little for the CPU.
	noncesPerPiece = 4
)

// topUp queues the pool's filling as idle work once it lacks
// nonceRefillAt, unless that is queued already.
func (n *commitNonces) topUp(idle *idleWork, log *slog.Logger) {
	if n.pool.Lacks() < nonceRefillAt || !n.queued.CompareAndSwap(false, true) {
		return
	}
	var fill func()
	fill = func() {
		lacks, err := n.pool.Fill(noncesPerPiece)
		if err != nil {
			log.Warn("signature nonces", "err", err)
		} else if lacks > 0 && idle.start(fill) {
			return
		}
		n.queued.Store(false)
	}
	if !idle.start(fill) {
		n.queued.Store(false)
	}
}

// rand is the server's random stream for purpose (Config.Rand).
func (s *Server) rand(purpose string) io.Reader { return s.cfg.Rand.Stream(purpose) }

// forgetKey drops did's cached key (account deleted).
func (s *Server) forgetKey(did string) { s.keys.forget(did) }
