// Package k256 is the server's K-256 (secp256k1) key: indigo's
// atcrypto.PrivateKeyK256, signing with RFC 6979 deterministic nonces as the
// reference PDS's key (noble-secp256k1) does, so a key signs a message one
// way, and made from a random stream the server chooses (a seeded one
// makes the same keys every run).
//
// indigo's HashAndSign hedges its nonce with crypto/rand, so the same
// commit signed twice differs; both are valid signatures.
package k256

import (
	"crypto"
	"crypto/sha256"
	"fmt"
	"io"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"gitlab.com/yawning/secp256k1-voi/secec"
)

// PrivateKey is a K-256 private key. It is an atcrypto.PrivateKeyExportable
// everywhere indigo takes a key (commits, PLC operations, ES256K JWTs).
type PrivateKey struct {
	*atcrypto.PrivateKeyK256
	sk *secec.PrivateKey
}

var _ atcrypto.PrivateKeyExportable = (*PrivateKey)(nil)

// Parse loads a key from its 32 bytes (as Bytes returns them).
func Parse(b []byte) (*PrivateKey, error) {
	k, err := atcrypto.ParsePrivateBytesK256(b)
	if err != nil {
		return nil, err
	}
	sk, err := secec.NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("k256: %w", err)
	}
	return &PrivateKey{PrivateKeyK256: k, sk: sk}, nil
}

// Generate makes a key from r's bytes, by rejection as secec.GenerateKey
// samples crypto/rand: 32 bytes are a key unless zero or not below the
// curve order (odds about 2^-128).
func Generate(r io.Reader) (*PrivateKey, error) {
	var b [32]byte
	for range 8 {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, fmt.Errorf("k256: %w", err)
		}
		if k, err := Parse(b[:]); err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("k256: no key from 8 draws: the random source is broken")
}

var signOptions = &secec.ECDSAOptions{Hash: crypto.SHA256, Encoding: secec.EncodingCompact}

// HashAndSign signs sha256(content) with an RFC 6979 nonce: [R | S], S low
// (secec always makes S <= n/2, as atproto requires).
func (k *PrivateKey) HashAndSign(content []byte) ([]byte, error) {
	h := sha256.Sum256(content)
	return k.sk.Sign(secec.RFC6979SHA256(), h[:], signOptions)
}

// Equal reports whether other is the same key (a *PrivateKey, a Pooled
// or indigo's).
func (k *PrivateKey) Equal(other atcrypto.PrivateKey) bool {
	switch o := other.(type) {
	case *PrivateKey:
		other = o.PrivateKeyK256
	case Pooled:
		other = o.PrivateKeyK256
	}
	return k.PrivateKeyK256.Equal(other)
}
