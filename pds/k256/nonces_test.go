package k256_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/fakepds/fakepds/pds/k256"
	"github.com/fakepds/fakepds/pds/random"
)

func TestPooledSignaturesVerify(t *testing.T) {
	key, err := k256.Generate(random.Seeded(3).Stream("k"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	pool := k256.NewNonces(n, n, rand.Reader)
	if lacks, err := pool.Fill(n); err != nil || lacks != 0 {
		t.Fatalf("Fill(%d) = %d, %v; want 0, nil", n, lacks, err)
	}
	signer := k256.Pooled{PrivateKey: key, Nonces: pool}
	msg := []byte("commit bytes")
	rfc6979, err := key.HashAndSign(msg)
	if err != nil {
		t.Fatal(err)
	}
	seenR := map[string]bool{}
	for i := range n {
		sig, err := signer.HashAndSign(msg)
		if err != nil {
			t.Fatal(err)
		}
		// HashAndVerify is indigo's strict check: it refuses a high S,
		// which about half of the raw signatures have before negation.
		if err := pub.HashAndVerify(msg, sig); err != nil {
			t.Fatalf("signature %d: indigo refuses it: %v", i, err)
		}
		if bytes.Equal(sig, rfc6979) {
			t.Fatalf("signature %d is RFC 6979's with the pool still full", i)
		}
		r := string(sig[:32])
		if seenR[r] {
			t.Fatalf("signature %d reuses a nonce", i)
		}
		seenR[r] = true
		if err := pub.HashAndVerify([]byte("another message"), sig); err == nil {
			t.Fatalf("signature %d verifies for another message", i)
		}
	}
	if lacks := pool.Lacks(); lacks != n {
		t.Fatalf("after %d signatures the pool lacks %d, want %d", n, lacks, n)
	}
	// Empty, it signs as PrivateKey does.
	sig, err := signer.HashAndSign(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sig, rfc6979) {
		t.Fatalf("an empty pool's signature is not RFC 6979's:\n%x\n%x", sig, rfc6979)
	}
	if !signer.Equal(key) || !key.Equal(signer) || !signer.Equal(signer) || !key.Equal(signer.PrivateKey) {
		t.Fatal("Pooled is not Equal to its key, both ways")
	}
	other, _ := k256.Generate(rand.Reader)
	if signer.Equal(other) || other.Equal(signer) {
		t.Fatal("Pooled is Equal to another key")
	}
}

func TestNoncesFillStopsAtMax(t *testing.T) {
	pool := k256.NewNonces(3, 3, rand.Reader)
	if lacks, err := pool.Fill(2); err != nil || lacks != 1 {
		t.Fatalf("Fill(2) of 3 = %d, %v; want 1, nil", lacks, err)
	}
	if lacks, err := pool.Fill(10); err != nil || lacks != 0 {
		t.Fatalf("Fill(10) = %d, %v; want 0, nil", lacks, err)
	}
}

// TestNoncesGrow: a pool found empty after it was full doubles its size,
// up to its max; found empty while it is still being filled (as after a
// start), it does not.
func TestNoncesGrow(t *testing.T) {
	key, err := k256.Generate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pool := k256.NewNonces(2, 5, rand.Reader)
	signer := k256.Pooled{PrivateKey: key, Nonces: pool}
	sign := func() {
		t.Helper()
		if _, err := signer.HashAndSign([]byte("commit")); err != nil {
			t.Fatal(err)
		}
	}
	sign() // empty, never full: no growth
	if size := pool.Size(); size != 2 {
		t.Fatalf("a pool never full grew to %d", size)
	}
	for _, want := range []int{4, 5, 5} {
		if lacks, err := pool.Fill(10); err != nil || lacks != 0 {
			t.Fatalf("Fill = %d, %v", lacks, err)
		}
		for range pool.Size() + 1 { // all it holds, then one more
			sign()
		}
		if size := pool.Size(); size != want {
			t.Fatalf("drained: size %d, want %d", size, want)
		}
		sign() // empty again before it was refilled: no second growth
		if size := pool.Size(); size != want {
			t.Fatalf("drained twice before a refill: size %d, want %d", size, want)
		}
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("no entropy") }

func TestNoncesFillFailsOnABrokenSource(t *testing.T) {
	pool := k256.NewNonces(3, 3, failingReader{})
	if _, err := pool.Fill(1); err == nil {
		t.Fatal("Fill from a failing source did not fail")
	}
	// A source that only ever gives the zero scalar (and so no k).
	pool = k256.NewNonces(3, 3, bytes.NewReader(make([]byte, 1<<10)))
	if _, err := pool.Fill(1); err == nil {
		t.Fatal("Fill from a source of zeros did not fail")
	}
	if pool.Lacks() != 3 {
		t.Fatal("a failed Fill added a nonce")
	}
}

// BenchmarkSign: a commit's signature with RFC 6979 (the nonce made on the
// spot), from the pool, and the nonce alone (what the pool's filling costs
// a signature, off the request path).
func BenchmarkSign(b *testing.B) {
	key, err := k256.Generate(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	msg := bytes.Repeat([]byte("c"), 180)
	b.Run("rfc6979", func(b *testing.B) {
		for b.Loop() {
			if _, err := key.HashAndSign(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pooled", func(b *testing.B) {
		pool := k256.NewNonces(256, 256, rand.Reader)
		signer := k256.Pooled{PrivateKey: key, Nonces: pool}
		for b.Loop() {
			if pool.Lacks() == 256 {
				b.StopTimer()
				if _, err := pool.Fill(256); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			if _, err := signer.HashAndSign(msg); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("nonce", func(b *testing.B) {
		pool := k256.NewNonces(1, 1, rand.Reader)
		signer := k256.Pooled{PrivateKey: key, Nonces: pool}
		for b.Loop() {
			if _, err := pool.Fill(1); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			_, _ = signer.HashAndSign(msg)
			b.StartTimer()
		}
	})
}
