package oauth

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	indigo "github.com/bluesky-social/indigo/atproto/auth/oauth"
)

// TestProofKeysWithShortCoordinates: indigo writes a P-256 JWK's x and y
// without leading zero bytes (about one key in 64 has such a coordinate);
// the reference accepts those proofs, and so must fakepds, or one login in
// 64 of an indigo client fails.
func TestProofKeysWithShortCoordinates(t *testing.T) {
	ts := newTestServer(t)
	u, _ := url.Parse(ts.url + "/oauth/par")
	short := 0
	for short < 3 {
		k, err := atcrypto.GeneratePrivateKeyP256()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := k.PublicKey()
		j, _ := pub.JWK()
		if len(j.X) == 43 && len(j.Y) == 43 {
			continue
		}
		short++
		p, err := indigo.NewAuthDPoP("POST", u.String(), ts.p.nonces.next(), k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ts.p.checkProof("POST", u, []string{p}, ""); err != nil {
			t.Fatalf("proof with key x=%s y=%s: %v", j.X, j.Y, err)
		}
	}
}

// TestProofK256: ES256K proofs (secp256k1 keys) are accepted, as the
// reference accepts them.
func TestProofK256(t *testing.T) {
	ts := newTestServer(t)
	u, _ := url.Parse(ts.url + "/oauth/par")
	k, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		t.Fatal(err)
	}
	p, err := (&k256Signer{k}).proof("POST", u.String(), ts.p.nonces.next())
	if err != nil {
		t.Fatal(err)
	}
	pr, err := ts.p.checkProof("POST", u, []string{p}, "")
	if err != nil || pr.jkt == "" {
		t.Fatalf("ES256K proof: %v", err)
	}
	// A proof signed by another key than the one it carries is refused.
	k2, _ := atcrypto.GeneratePrivateKeyK256()
	forged, _ := (&k256Signer{k2}).proofWithKey("POST", u.String(), ts.p.nonces.next(), k)
	if _, err := ts.p.checkProof("POST", u, []string{forged}, ""); err == nil {
		t.Fatal("a proof signed by another key passed")
	}
}

// k256Signer makes ES256K DPoP proofs by hand (indigo's client makes
// ES256 ones only).
type k256Signer struct{ k *atcrypto.PrivateKeyK256 }

func (s *k256Signer) proof(method, htu, nonce string) (string, error) {
	return s.proofWithKey(method, htu, nonce, s.k)
}

func (s *k256Signer) proofWithKey(method, htu, nonce string, shown *atcrypto.PrivateKeyK256) (string, error) {
	pub, err := shown.PublicKey()
	if err != nil {
		return "", err
	}
	jwk, err := pub.JWK()
	if err != nil {
		return "", err
	}
	h, _ := json.Marshal(map[string]any{"alg": "ES256K", "typ": "dpop+jwt", "jwk": jwk})
	c, _ := json.Marshal(map[string]any{"jti": randomID(nil, "", 8), "htm": method, "htu": htu, "iat": time.Now().Unix(), "nonce": nonce})
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	sig, err := s.k.HashAndSign([]byte(input))
	if err != nil {
		return "", err
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
