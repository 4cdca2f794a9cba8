// Package auth mints and checks the PDS's credentials: access and refresh
// JWTs (HS256, shaped like the reference PDS's), service auth JWTs signed
// with an account's repo key, and scrypt password hashes.
package auth

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	_ "github.com/bluesky-social/indigo/atproto/auth" // registers ES256K with golang-jwt
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/golang-jwt/jwt/v5"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/k256"
	"github.com/fakepds/fakepds/pds/random"
)

// Scope is the scope claim of a session token.
type Scope string

// The scopes the reference PDS puts in its tokens.
const (
	ScopeAccess            Scope = "com.atproto.access"
	ScopeAppPass           Scope = "com.atproto.appPass"
	ScopeAppPassPrivileged Scope = "com.atproto.appPassPrivileged"
	ScopeRefresh           Scope = "com.atproto.refresh"
	ScopeTakendown         Scope = "com.atproto.takendown"
	ScopeSignupQueued      Scope = "com.atproto.signupQueued"
)

// Token types, the JWT "typ" header.
const (
	TypeAccess  = "at+jwt"
	TypeRefresh = "refresh+jwt"
)

// Lifetimes, as the reference's.
const (
	AccessTTL    = 120 * time.Minute
	RefreshTTL   = 90 * 24 * time.Hour
	RefreshGrace = 2 * time.Hour
)

// Errors of Verify; the PDS maps each to the reference's XRPC error.
var (
	ErrBadType   = errors.New("auth: wrong token type")
	ErrExpired   = errors.New("auth: token expired")
	ErrMalformed = errors.New("auth: malformed token")
	ErrSignature = errors.New("auth: bad token signature")
)

// Claims of a session token.
type Claims struct {
	Scope Scope  `json:"scope"`
	Sub   string `json:"sub"`
	Aud   string `json:"aud"`
	Jti   string `json:"jti,omitempty"`
	Iat   int64  `json:"iat"`
	Exp   int64  `json:"exp"`
	// Bound is set when the token has a cnf claim: a proof-of-possession
	// (OAuth DPoP) token signed with the same secret, never a session's.
	Bound bool `json:"-"`
}

// Tokens mints and verifies the server's session JWTs.
type Tokens struct {
	secret     []byte
	serviceDID string
	clock      clock.Clock
	parser     *jwt.Parser
	verified   verifiedTokens
}

// NewTokens returns a minter for tokens with audience serviceDID, signed
// with secret (HS256).
func NewTokens(secret []byte, serviceDID string, c clock.Clock) *Tokens {
	return &Tokens{
		secret:     secret,
		serviceDID: serviceDID,
		clock:      c,
		// Expiry is checked against our clock, not golang-jwt's.
		parser: jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithoutClaimsValidation()),
	}
}

// Access mints an access token for did with the given scope.
func (t *Tokens) Access(did string, scope Scope) (string, error) {
	now := t.clock.Now()
	return t.sign(TypeAccess, Claims{Scope: scope, Sub: did, Aud: t.serviceDID, Iat: now.Unix(), Exp: now.Add(AccessTTL).Unix()})
}

// Refresh mints a refresh token with id jti, returning it and its expiry.
func (t *Tokens) Refresh(did, jti string) (string, time.Time, error) {
	now := t.clock.Now()
	exp := now.Add(RefreshTTL)
	tok, err := t.sign(TypeRefresh, Claims{Scope: ScopeRefresh, Sub: did, Aud: t.serviceDID, Jti: jti, Iat: now.Unix(), Exp: exp.Unix()})
	return tok, time.Unix(exp.Unix(), 0), err
}

func (t *Tokens) sign(typ string, c Claims) (string, error) {
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, mapClaims(c))
	tok.Header["typ"] = typ
	return tok.SignedString(t.secret)
}

func mapClaims(c Claims) jwt.MapClaims {
	m := jwt.MapClaims{"scope": string(c.Scope), "sub": c.Sub, "aud": c.Aud, "iat": c.Iat, "exp": c.Exp}
	if c.Jti != "" {
		m["jti"] = c.Jti
	}
	return m
}

// Verify checks a token's signature, its typ header against wantType and
// its expiry against the server's clock.
func (t *Tokens) Verify(token, wantType string) (*Claims, error) {
	v, ok := t.verified.get(token)
	if !ok {
		var err error
		if v, err = t.parse(token); err != nil {
			return nil, err
		}
		t.verified.put(token, v)
	}
	if v.typ != wantType {
		return nil, fmt.Errorf("%w: %q", ErrBadType, v.typ)
	}
	c := v.claims // a copy: the cached claims stay as signed
	if t.clock.Now().Unix() >= c.Exp {
		return &c, ErrExpired
	}
	return &c, nil
}

// parse checks a token's signature and reads its claims.
func (t *Tokens) parse(token string) (verified, error) {
	var m jwt.MapClaims
	tok, err := t.parser.ParseWithClaims(token, &m, func(*jwt.Token) (any, error) { return t.secret, nil })
	if err != nil {
		if errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			return verified{}, ErrSignature
		}
		return verified{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var v verified
	v.typ, _ = tok.Header["typ"].(string)
	c := &v.claims
	c.Scope = Scope(str(m["scope"]))
	c.Sub, c.Aud, c.Jti = str(m["sub"]), str(m["aud"]), str(m["jti"])
	c.Iat, c.Exp = num(m["iat"]), num(m["exp"])
	_, c.Bound = m["cnf"]
	if c.Sub == "" || c.Exp == 0 {
		return verified{}, fmt.Errorf("%w: missing sub or exp", ErrMalformed)
	}
	return v, nil
}

// verifiedTokens remembers tokens whose signature checked out: a client
// sends the same access token with every call, and parsing and checking it
// (JSON twice, base64, HMAC) was ~15 µs of each. What depends on the time or
// the call (expiry, the wanted type) is still checked every time.
type verifiedTokens struct {
	mu sync.Mutex
	m  map[string]verified
}

type verified struct {
	typ    string
	claims Claims
}

// maxVerifiedTokens bounds the map; past it, it starts over.
const maxVerifiedTokens = 4096

func (vt *verifiedTokens) get(token string) (verified, bool) {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	v, ok := vt.m[token]
	return v, ok
}

func (vt *verifiedTokens) put(token string, v verified) {
	vt.mu.Lock()
	defer vt.mu.Unlock()
	if vt.m == nil || len(vt.m) >= maxVerifiedTokens {
		vt.m = make(map[string]verified)
	}
	vt.m[token] = v
}

func str(v any) string { s, _ := v.(string); return s }

func num(v any) int64 {
	switch n := v.(type) {
	case float64:
		return int64(n)
	case int64:
		return n
	}
	return 0
}

// NewRefreshID is a refresh token's jti: 32 random bytes in unpadded
// standard base64, as the reference's, drawn from r.
func NewRefreshID(r io.Reader) string {
	b := make([]byte, 32)
	random.Read(r, b)
	return base64.RawStdEncoding.EncodeToString(b)
}

// ServiceAuth mints a service auth token (ES256K with the account's repo
// key, its jti drawn from r) as com.atproto.server.getServiceAuth returns
// it; indigo's ServiceAuthValidator accepts it.
func ServiceAuth(r io.Reader, iss syntax.DID, aud string, lxm string, iat, exp time.Time, key atcrypto.PrivateKey) (string, error) {
	claims := jwt.MapClaims{"iss": iss.String(), "aud": aud, "iat": iat.Unix(), "exp": exp.Unix(), "jti": randomNonce(r)}
	if lxm != "" {
		claims["lxm"] = lxm
	}
	var alg string
	switch key.(type) {
	case *atcrypto.PrivateKeyK256, *k256.PrivateKey:
		alg = "ES256K"
	case *atcrypto.PrivateKeyP256:
		alg = "ES256"
	default:
		return "", fmt.Errorf("auth: unsupported key type %T", key)
	}
	return jwt.NewWithClaims(jwt.GetSigningMethod(alg), claims).SignedString(key)
}

func randomNonce(r io.Reader) string {
	b := make([]byte, 16)
	random.Read(r, b)
	return fmt.Sprintf("%x", b)
}
