package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/fakepds/fakepds/pds/random"
	"golang.org/x/crypto/scrypt"
)

// ReferenceScryptN is the cost the reference PDS hashes passwords with
// (Node's scrypt defaults: N=16384, r=8, p=1, 64-byte key). About 50 ms a
// hash: right for production, most of a login's cost in a test.
const ReferenceScryptN = 16384

// CheapScryptN is fakepds's default cost: the same algorithm and format,
// thousands of times cheaper. Test passwords protect nothing. It is the
// least scrypt allows: at 16 (until 2026-12) a hash took ~70 µs
// (BenchmarkHashCheap; 19 µs at 2), about half of a createSession. A hash
// stores its cost, so one made at 16 still verifies.
const CheapScryptN = 2

// Password limits of the reference.
const (
	NewPasswordMaxLength = 256
	OldPasswordMaxLength = 512
)

// Hasher hashes and checks passwords with scrypt at cost N, with salts
// drawn from Rand (crypto/rand when nil).
type Hasher struct {
	N    int
	Rand io.Reader
}

// Hash returns "salt:hash" (hex, the reference's format) at the reference
// cost, and "N:salt:hash" at any other, so a data dir read with another
// cost still verifies.
func (h Hasher) Hash(password string) (string, error) {
	b := make([]byte, 16)
	random.Read(h.Rand, b)
	return h.withSalt(password, hex.EncodeToString(b))
}

// HashAppPassword hashes an app password with the reference's salt: the
// first 16 bytes of sha256(did), hex.
func (h Hasher) HashAppPassword(did, password string) (string, error) {
	sum := sha256.Sum256([]byte(did))
	return h.withSalt(password, hex.EncodeToString(sum[:16]))
}

func (h Hasher) withSalt(password, salt string) (string, error) {
	dk, err := derive(password, salt, h.N)
	if err != nil {
		return "", err
	}
	if h.N == ReferenceScryptN {
		return salt + ":" + hex.EncodeToString(dk), nil
	}
	return strconv.Itoa(h.N) + ":" + salt + ":" + hex.EncodeToString(dk), nil
}

// Verify reports whether password matches stored, in constant time.
func Verify(password, stored string) (bool, error) {
	parts := strings.Split(stored, ":")
	n := ReferenceScryptN
	switch len(parts) {
	case 2:
	case 3:
		var err error
		if n, err = strconv.Atoi(parts[0]); err != nil {
			return false, fmt.Errorf("auth: bad password hash cost %q", parts[0])
		}
		parts = parts[1:]
	default:
		return false, fmt.Errorf("auth: bad password hash format")
	}
	want, err := hex.DecodeString(parts[1])
	if err != nil {
		return false, fmt.Errorf("auth: bad password hash: %w", err)
	}
	got, err := derive(password, parts[0], n)
	if err != nil {
		return false, err
	}
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// derive is scrypt as Node's crypto.scrypt with the salt given as a string.
func derive(password, salt string, n int) ([]byte, error) {
	return scrypt.Key([]byte(password), []byte(salt), n, 8, 1, 64)
}
