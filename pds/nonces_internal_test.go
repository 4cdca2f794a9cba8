package pds

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/k256"
	"github.com/fakepds/fakepds/pds/random"
)

// TestCommitsSignWithPooledNonces: an unseeded server fills its nonce
// pool once no request is being answered, each write's commit takes one
// nonce from it, and the commits verify against the DID document's key; a
// seeded server has no pool, so its signatures stay RFC 6979's.
func TestCommitsSignWithPooledNonces(t *testing.T) {
	s := startAt(t, t.TempDir())
	ctx := t.Context()
	a := createAccount(t, s, "nonces.test", "pw")
	pool := s.nonces.pool
	if pool == nil {
		t.Fatal("an unseeded server has no nonce pool")
	}
	for deadline := time.Now().Add(10 * time.Second); pool.Lacks() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the pool still lacks %d of %d nonces 10s after the last request", pool.Lacks(), pool.Size())
		}
	}
	cl := login(t, s, "nonces.test", "pw")
	const writes = 3 // below nonceRefillAt: nothing refills meanwhile
	for range writes {
		post(t, cl, a.Did, "signed with a pooled nonce")
	}
	if lacks := pool.Lacks(); lacks != writes {
		t.Fatalf("after %d writes the pool lacks %d nonces, want %d (one a commit)", writes, lacks, writes)
	}

	commit, _ := VerifiedRepo(t, s, a.Did)
	key, err := s.signingKey(ctx, a.Did)
	if err != nil {
		t.Fatal(err)
	}
	unsigned, err := commit.UnsignedBytes()
	if err != nil {
		t.Fatal(err)
	}
	if rfc6979, _ := key.HashAndSign(unsigned); bytes.Equal(rfc6979, commit.Sig) {
		t.Fatal("the head commit carries RFC 6979's signature: it did not sign with the pool")
	}

	seeded, err := New(Config{DataDir: t.TempDir(), Rand: random.Seeded(1), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer seeded.Close()
	if seeded.nonces.pool != nil {
		t.Fatal("a seeded server has a nonce pool: its signatures would not be reproducible")
	}
	if _, ok := seeded.pooled(key).(*k256.PrivateKey); !ok {
		t.Fatal("a seeded server signs commits with another key than its RFC 6979 one")
	}
}
