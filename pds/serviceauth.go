package pds

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// Service tokens are checked as the reference's xrpc-server verifyJwt
// checks them, in its order and with its error names: the shape, typ,
// exp, lxm and iss first (checkServiceJWT), then the issuer's key and the
// signature, then, for a user's token, the audience (userServiceAuth).

var errBadJwt = xrpc.AuthRequired("BadJwt", "poorly formatted jwt")

// serviceJWT is a service token that passed checkServiceJWT.
type serviceJWT struct {
	iss, aud string
	alg      string
	signed   string // header.payload, what the signature covers
	sig      string // base64url
}

// checkServiceJWT checks what the reference checks of a service JWT
// before it looks up the issuer's key.
func (s *Server) checkServiceJWT(token, nsid string) (*serviceJWT, error) {
	if token == "" {
		return nil, xrpc.AuthRequired("MissingJwt", "missing jwt")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, errBadJwt
	}
	hdr, err := jwtSegment(parts[0])
	if err != nil {
		return nil, err
	}
	alg, ok := hdr["alg"].(string)
	if hdr == nil || !ok {
		return nil, errBadJwt
	}
	if typ, _ := hdr["typ"].(string); typ == auth.TypeAccess || typ == auth.TypeRefresh || typ == "dpop+jwt" {
		return nil, xrpc.AuthRequired("BadJwtType", "Invalid jwt type %q", typ)
	}
	p, err := jwtSegment(parts[1])
	if err != nil {
		return nil, err
	}
	iss, issOK := p["iss"].(string)
	aud, audOK := p["aud"].(string)
	exp, expOK := p["exp"].(float64)
	if p == nil || !issOK || !audOK || !expOK || !stringOrFalsy(p["lxm"]) || !stringOrFalsy(p["nonce"]) {
		return nil, errBadJwt
	}
	if float64(s.clock.Now().UnixMilli())/1000 > exp {
		return nil, xrpc.AuthRequired("JwtExpired", "jwt expired")
	}
	if lxm, present := p["lxm"]; lxm != nsid {
		if present {
			return nil, xrpc.AuthRequired("BadJwtLexiconMethod", `bad jwt lexicon method ("lxm"). must match: %s`, nsid)
		}
		return nil, xrpc.AuthRequired("BadJwtLexiconMethod", `missing jwt lexicon method ("lxm"). must match: %s`, nsid)
	}
	did, frag, hasFrag := strings.Cut(iss, "#")
	if _, err := syntax.ParseDID(did); err != nil || hasFrag && (frag == "" || strings.Contains(frag, "#")) {
		return nil, xrpc.AuthRequired("BadJwtIss", "jwt iss is not a valid did")
	}
	return &serviceJWT{iss: iss, aud: aud, alg: alg, signed: parts[0] + "." + parts[1], sig: parts[2]}, nil
}

// userServiceAuth checks a user's service token for the method nsid
// (createAccount's migration, uploadBlob): signed with the atproto key of
// the issuer's DID document and meant for this service. It returns the
// issuer, the DID the token speaks for.
func (s *Server) userServiceAuth(ctx context.Context, token, nsid string) (string, error) {
	j, err := s.checkServiceJWT(token, nsid)
	if err != nil {
		return "", err
	}
	did, frag, _ := strings.Cut(j.iss, "#")
	keyID := "atproto"
	if frag == "atproto_labeler" {
		keyID = "atproto_label"
	}
	ident, err := s.Directory().LookupDID(ctx, syntax.DID(did))
	if err != nil {
		return "", xrpc.AuthRequired("", "could not resolve iss did")
	}
	key, err := ident.GetPublicKey(keyID)
	if err != nil {
		return "", xrpc.AuthRequired("", "missing or bad key in did doc")
	}
	if j.alg != jwtAlg(key) {
		// The reference's verifier throws on an alg its key does not
		// sign with.
		return "", xrpc.AuthRequired("BadJwtSignature", "could not verify jwt signature")
	}
	// Lenient: the reference allows high-S signatures in service tokens.
	sig, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(j.sig, "="))
	if err != nil || key.HashAndVerifyLenient([]byte(j.signed), sig) != nil {
		return "", xrpc.AuthRequired("BadJwtSignature", "jwt signature does not match jwt issuer")
	}
	if j.aud != s.ServiceDID() {
		return "", xrpc.AuthRequired("BadJwtAudience", "jwt audience does not match service did")
	}
	return j.iss, nil
}

// jwtAlg is the JWT alg of a key's signatures.
func jwtAlg(k atcrypto.PublicKey) string {
	switch k.(type) {
	case *atcrypto.PublicKeyK256:
		return "ES256K"
	case *atcrypto.PublicKeyP256:
		return "ES256"
	}
	return ""
}

// jwtSegment decodes a JWT header or payload: nil when it is JSON but not
// an object; a 500 when it is not JSON at all, as in the reference, whose
// JSON.parse throws a plain error there.
func jwtSegment(seg string) (map[string]any, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return nil, fmt.Errorf("jwt segment: %w", err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("jwt segment: %w", err)
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// stringOrFalsy: the reference refuses a claim that is truthy but not a
// string.
func stringOrFalsy(v any) bool {
	switch v := v.(type) {
	case nil, string:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	}
	return false
}
