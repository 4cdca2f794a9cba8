package k256

import (
	"crypto/sha256"
	"fmt"
	"io"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	secp256k1 "gitlab.com/yawning/secp256k1-voi"
	"gitlab.com/yawning/secp256k1-voi/secec"
)

// Nonces is a pool of ECDSA nonces made ahead of the signatures that use
// them. Nearly all of a K-256 signature's cost is its nonce: R = k·G and
// 1/k, which do not depend on the key or the message. Made while the
// server is idle, they leave a signature two scalar products
// (BenchmarkSign: 49-70 µs -> under 1 µs), and a repo write signs one
// commit.
//
// A nonce is a uniform random scalar from the pool's random stream, used
// for one signature and then dropped, as ECDSA requires; it never leaves
// the process. Such signatures are valid ECDSA, but not RFC 6979's: the
// same key signs the same message two ways. A server that must sign
// reproducibly (a seeded one) has no pool.
//
// The pool holds up to a size that starts small and doubles, up to its
// max, when a signature finds it empty after it was full: a test's
// private server that signs a few commits makes a few nonces (~45 µs of
// CPU each), and a suite's runs of writes grow it to what they take
// between idle moments.
type Nonces struct {
	rand io.Reader
	max  int

	mu     sync.Mutex
	free   []nonce
	target int  // the pool's size for now, up to max
	full   bool // free reached target since target last grew
}

// nonce is r = x(k·G) mod n and 1/k, for a random k.
type nonce struct {
	r, kInv secp256k1.Scalar
}

// NewNonces is an empty pool of nonces drawn from rand (crypto/rand's
// Reader, or a stream as good), sized first for initial and at most for
// max.
func NewNonces(initial, max int, rand io.Reader) *Nonces {
	return &Nonces{rand: rand, max: max, target: min(initial, max)}
}

// Fill makes up to n nonces, and adds them while the pool has room. It
// reports how many the pool lacks afterwards.
func (p *Nonces) Fill(n int) (int, error) {
	for range n {
		if p.Lacks() == 0 {
			break
		}
		nc, err := p.make()
		if err != nil {
			return p.Lacks(), err
		}
		p.mu.Lock()
		if len(p.free) < p.target {
			p.free = append(p.free, nc)
		}
		p.full = p.full || len(p.free) == p.target
		p.mu.Unlock()
	}
	return p.Lacks(), nil
}

// Lacks is how many nonces the pool has room for.
func (p *Nonces) Lacks() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return max(p.target-len(p.free), 0)
}

// Size is the pool's size for now (see Nonces).
func (p *Nonces) Size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.target
}

// take hands out a nonce, false when the pool is empty; no other call
// gets the same one. Empty after it was full, the pool grows: its size
// did not last from one idle moment to the next (never full, it is only
// being filled, as after a start).
func (p *Nonces) take() (nonce, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.free) == 0 {
		if p.full {
			p.target, p.full = min(2*p.target, p.max), false
		}
		return nonce{}, false
	}
	nc := p.free[len(p.free)-1]
	p.free[len(p.free)-1] = nonce{}
	p.free = p.free[:len(p.free)-1]
	return nc, true
}

// make draws k by rejection (a uniform scalar in [1, n)) and computes its
// nonce.
func (p *Nonces) make() (nonce, error) {
	var b [secp256k1.ScalarSize]byte
	for range 8 {
		if _, err := io.ReadFull(p.rand, b[:]); err != nil {
			return nonce{}, fmt.Errorf("k256: nonce: %w", err)
		}
		k, err := secp256k1.NewScalarFromCanonicalBytes(&b)
		if err != nil || k.IsZero() != 0 {
			continue
		}
		R := secp256k1.NewIdentityPoint().ScalarBaseMult(k)
		x, _ := secp256k1.SplitUncompressedPoint(R.UncompressedBytes())
		r, _ := secp256k1.NewScalarFromBytes((*[secp256k1.ScalarSize]byte)(x))
		if r.IsZero() != 0 {
			continue
		}
		var nc nonce
		nc.r.Set(r)
		nc.kInv.Invert(k)
		return nc, nil
	}
	return nonce{}, fmt.Errorf("k256: no nonce from 8 draws: the random source is broken")
}

// Pooled is k signing with nonces from a pool, and with RFC 6979 when the
// pool is empty. It is an atcrypto.PrivateKey for indigo's commit signing.
type Pooled struct {
	*PrivateKey
	Nonces *Nonces
}

var _ atcrypto.PrivateKey = Pooled{}

// HashAndSign signs sha256(content): [R | S], S low, as PrivateKey's.
func (k Pooled) HashAndSign(content []byte) ([]byte, error) {
	nc, ok := k.Nonces.take()
	if !ok {
		return k.PrivateKey.HashAndSign(content)
	}
	h := sha256.Sum256(content)
	e, _ := secp256k1.NewScalarFromBytes(&h) // the digest's 256 bits, reduced
	s := secp256k1.NewScalar().Multiply(&nc.r, k.sk.Scalar())
	s.Add(s, e).Multiply(s, &nc.kInv)
	if s.IsZero() != 0 { // odds 2^-256; RFC 6979 makes another k
		return k.PrivateKey.HashAndSign(content)
	}
	s.ConditionalNegate(s, s.IsGreaterThanHalfN())
	return secec.BuildCompactSignature(&nc.r, s), nil
}
