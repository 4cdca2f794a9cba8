package oauth

import (
	"crypto"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/go-jose/go-jose/v4"
)

// Compact JWS checks for DPoP proofs and client assertions. P-256 and
// secp256k1 keys (ES256, ES256K: what atproto clients use) are read and
// checked with indigo's atcrypto, which, like the reference's jose, accepts
// EC coordinates without their leading zero bytes: indigo's own JWK() writes
// them so for about one key in 64, and go-jose refuses those. Other keys
// (RSA, P-384, P-521) go through go-jose.

// jwsHeader is the protected header of a compact JWS.
type jwsHeader struct {
	Alg string          `json:"alg"`
	Typ string          `json:"typ"`
	Kid string          `json:"kid"`
	JWK json.RawMessage `json:"jwk"`
}

// jws is a parsed, not yet verified, compact JWS.
type jws struct {
	token   string
	header  jwsHeader
	input   string // header.payload, what the signature covers
	payload []byte
	sig     []byte
}

// The reference's jose messages, which it passes on in error_description.
var (
	errCompactJWS = errors.New("Invalid Compact JWS")          //lint:ignore ST1005 the reference's message
	errJWSHeader  = errors.New("Invalid JWS Protected Header") //lint:ignore ST1005 the reference's message
)

func parseJWS(token string) (*jws, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errCompactJWS
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	payload, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, errCompactJWS
	}
	j := &jws{token: token, input: parts[0] + "." + parts[1], payload: payload, sig: sig}
	if err := json.Unmarshal(hb, &j.header); err != nil {
		return nil, errJWSHeader
	}
	if !verifyAlg(j.header.Alg) {
		return nil, fmt.Errorf(`"alg" (Algorithm) Header Parameter value not allowed`)
	}
	return j, nil
}

func verifyAlg(alg string) bool {
	for _, a := range verifyAlgs {
		if string(a) == alg {
			return true
		}
	}
	return false
}

// publicJWK is a public key as a JWK, with the members RFC 7638's
// thumbprint uses.
type publicJWK struct {
	raw json.RawMessage
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
	N   string `json:"n"`
	E   string `json:"e"`
	D   string `json:"d"`
	Kid string `json:"kid"`
	Use string `json:"use"`
}

func parseJWK(raw json.RawMessage) (*publicJWK, error) {
	k := &publicJWK{raw: raw}
	if err := json.Unmarshal(raw, k); err != nil || k.Kty == "" {
		return nil, errors.New("invalid JWK")
	}
	if k.D != "" {
		return nil, errors.New(`"jwk" (JSON Web Key) Header Parameter must be a public key`)
	}
	return k, nil
}

// atcryptoCurve is the JWS algorithm of the keys atcrypto handles.
var atcryptoCurve = map[string]string{"P-256": "ES256", "secp256k1": "ES256K"}

// verify checks j's signature with k.
func (k *publicJWK) verify(j *jws) error {
	if want, ok := atcryptoCurve[k.Crv]; ok && k.Kty == "EC" {
		if j.header.Alg != want {
			return errors.New("signature verification failed")
		}
		pub, err := atcrypto.ParsePublicJWK(atcrypto.JWK{KeyType: k.Kty, Curve: k.Crv, X: k.X, Y: k.Y})
		if err != nil {
			return fmt.Errorf("invalid key: %w", err)
		}
		// Lenient: OAuth signatures need not be low-S (atproto's repo
		// signatures must).
		if pub.HashAndVerifyLenient([]byte(j.input), j.sig) != nil {
			return errors.New("signature verification failed")
		}
		return nil
	}
	var jk jose.JSONWebKey
	if err := jk.UnmarshalJSON(k.raw); err != nil || !jk.Valid() {
		return errors.New("invalid key")
	}
	parsed, err := jose.ParseSignedCompact(j.token, verifyAlgs)
	if err != nil {
		return err
	}
	if _, err := parsed.Verify(jk.Public()); err != nil {
		return errors.New("signature verification failed")
	}
	return nil
}

// thumbprint is RFC 7638's SHA-256 thumbprint, base64url, from the
// members as the key gives them (as the reference's jose computes it).
func (k *publicJWK) thumbprint() (string, error) {
	var b []byte
	var err error
	switch k.Kty {
	case "EC":
		b, err = json.Marshal(struct {
			Crv string `json:"crv"`
			Kty string `json:"kty"`
			X   string `json:"x"`
			Y   string `json:"y"`
		}{k.Crv, k.Kty, k.X, k.Y})
	case "RSA":
		b, err = json.Marshal(struct {
			E   string `json:"e"`
			Kty string `json:"kty"`
			N   string `json:"n"`
		}{k.E, k.Kty, k.N})
	default:
		var jk jose.JSONWebKey
		if err := jk.UnmarshalJSON(k.raw); err != nil {
			return "", err
		}
		tp, err := jk.Thumbprint(crypto.SHA256)
		return base64.RawURLEncoding.EncodeToString(tp), err
	}
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
