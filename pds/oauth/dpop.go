package oauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/fakepds/fakepds/pds/random"
	"github.com/go-jose/go-jose/v4"
)

// The reference's DPoP windows (oauth-provider's oauth-constants and
// dpop-manager): a proof is at most 10 s old, with 3 minutes of clock
// tolerance; nonces rotate every minute and each is good for three
// rotations.
const (
	dpopMaxAge        = 10 * time.Second
	dpopTolerance     = 3 * time.Minute
	nonceRotation     = time.Minute
	replayWindow      = dpopMaxAge + 2*dpopTolerance
	maxRememberedJTIs = 1 << 17
)

// verifyAlgs are the JWS algorithms accepted in DPoP proofs and client
// assertions, the reference's list (VERIFY_ALGOS) in its order.
var verifyAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, "ES256K", jose.ES384, jose.ES512,
}

func algNames() []string {
	out := make([]string, len(verifyAlgs))
	for i, a := range verifyAlgs {
		out[i] = string(a)
	}
	return out
}

// nonces are the server's DPoP nonces: an HMAC of the rotation counter, so
// the previous, current and next nonce are all accepted without state. Time
// is the real time, not the server's clock: proofs are made with the
// clients' clocks, and a test that moves the server clock forward to expire
// a token must not make every proof stale.
type nonces struct {
	secret []byte
	now    func() time.Time
}

func newNonces(r io.Reader, now func() time.Time) *nonces {
	s := make([]byte, 32)
	random.Read(r, s)
	return &nonces{secret: s, now: now}
}

func (n *nonces) at(counter int64) string {
	m := hmac.New(sha256.New, n.secret)
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(counter))
	m.Write(b[:])
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (n *nonces) counter() int64 { return n.now().UnixNano() / int64(nonceRotation) }

// next is the nonce to hand out: the one of the next rotation, as the
// reference, so it stays valid for the longest.
func (n *nonces) next() string { return n.at(n.counter() + 1) }

func (n *nonces) check(nonce string) bool {
	c := n.counter()
	for d := int64(-1); d <= 1; d++ {
		if hmac.Equal([]byte(n.at(c+d)), []byte(nonce)) {
			return true
		}
	}
	return false
}

// replay remembers the jti of every proof and client assertion (or each
// code challenge) seen within the window in which it could still be
// accepted. Bounded: when full, the expired entries go; if none have, the
// oldest half goes (a flood of proofs then costs replay protection for old
// proofs only, never memory). It keeps each key's SHA-256, not the key: a
// jti is the client's string, as long as a header (1 MiB) or a form
// (64 KiB) lets it be, so keeping keys bounded the count only, and a
// client sending long jtis could make the full map hold gigabytes.
type replay struct {
	mu     sync.Mutex
	seen   map[[sha256.Size]byte]time.Time
	now    func() time.Time
	window time.Duration
}

func newReplay(now func() time.Time, window time.Duration) *replay {
	return &replay{seen: make(map[[sha256.Size]byte]time.Time), now: now, window: window}
}

// unique records key and reports whether it was new.
func (r *replay) unique(key string) bool {
	h := sha256.Sum256([]byte(key))
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if t, ok := r.seen[h]; ok && now.Sub(t) < r.window {
		return false
	}
	if len(r.seen) >= maxRememberedJTIs {
		r.sweep(now)
	}
	r.seen[h] = now
	return true
}

// len is how many keys are remembered.
func (r *replay) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *replay) sweep(now time.Time) {
	for k, t := range r.seen {
		if now.Sub(t) >= r.window {
			delete(r.seen, k)
		}
	}
	if len(r.seen) < maxRememberedJTIs/2 {
		return
	}
	cut := now.Add(-r.window / 2)
	for k, t := range r.seen {
		if t.Before(cut) || len(r.seen) >= maxRememberedJTIs/2 {
			delete(r.seen, k)
		}
	}
}

// proof is a checked DPoP proof.
type proof struct {
	jti string
	jkt string // base64url SHA-256 thumbprint of the proof's key (RFC 7638)
}

type proofClaims struct {
	JTI   any `json:"jti"`
	HTM   any `json:"htm"`
	HTU   any `json:"htu"`
	IAT   any `json:"iat"`
	Nonce any `json:"nonce"`
	ATH   any `json:"ath"`
}

// checkProof checks the request's DPoP header as the reference's
// DpopManager does, in its order: a missing header is (nil, nil); a bad
// proof is invalid_dpop_proof; a missing or stale nonce is use_dpop_nonce.
// accessToken, when not empty, must be what the proof's ath hashes.
func (p *Provider) checkProof(method string, u *url.URL, header []string, accessToken string) (*proof, error) {
	switch {
	case len(header) == 0:
		return nil, nil
	case len(header) > 1:
		return nil, errDPoP("DPoP header must contain a single proof")
	case header[0] == "":
		return nil, errDPoP("DPoP header cannot be empty")
	}
	j, err := parseJWS(header[0])
	if err != nil {
		return nil, errDPoP("Failed to verify DPoP proof: %v", err)
	}
	if j.header.Typ != "dpop+jwt" {
		return nil, errDPoP(`Failed to verify DPoP proof: unexpected "typ" JWT header value`)
	}
	key, err := parseJWK(j.header.JWK)
	if err != nil {
		return nil, errDPoP(`Failed to verify DPoP proof: "jwk" (JSON Web Key) Header Parameter must be a JSON object`)
	}
	if err := key.verify(j); err != nil {
		return nil, errDPoP("Failed to verify DPoP proof: %v", err)
	}
	payload := j.payload
	var c proofClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, errDPoP("Failed to verify DPoP proof: JWT Claims Set must be a top-level JSON object")
	}
	iat, ok := c.IAT.(float64)
	if !ok {
		return nil, errDPoP(`Failed to verify DPoP proof: "iat" claim must be a number`)
	}
	now := p.realNow()
	issued := time.Unix(int64(iat), 0)
	if issued.After(now.Add(dpopTolerance)) {
		return nil, errDPoP(`Failed to verify DPoP proof: "iat" claim timestamp check failed (it should be in the past)`)
	}
	if now.Sub(issued) > dpopMaxAge+dpopTolerance {
		return nil, errDPoP(`Failed to verify DPoP proof: "iat" claim timestamp check failed (too far in the past)`)
	}
	nonce, isStr := c.Nonce.(string)
	if c.Nonce != nil && !isStr {
		return nil, errDPoP(`Invalid DPoP "nonce" type`)
	}
	jti, _ := c.JTI.(string)
	if jti == "" {
		return nil, errDPoP(`DPoP "jti" missing`)
	}
	if htm, _ := c.HTM.(string); htm != method {
		return nil, errDPoP(`DPoP "htm" mismatch`)
	}
	htu, ok := c.HTU.(string)
	if !ok || htu == "" {
		return nil, errDPoP(`Invalid DPoP "htu" type`)
	}
	pu, err := url.Parse(htu)
	if err != nil || pu.Host == "" {
		return nil, errDPoP(`DPoP "htu" is not a valid URL`)
	}
	if pu.User != nil {
		return nil, errDPoP(`DPoP "htu" must not contain credentials`)
	}
	if pu.Scheme != "http" && pu.Scheme != "https" {
		return nil, errDPoP(`DPoP "htu" must be http or https`)
	}
	if normalHTU(pu) != normalHTU(u) {
		return nil, errDPoP(`DPoP "htu" mismatch`)
	}
	if nonce == "" {
		return nil, errUseNonce("Authorization server requires nonce in DPoP proof")
	}
	if !p.nonces.check(nonce) {
		return nil, errUseNonce(`DPoP "nonce" mismatch`)
	}
	ath, _ := c.ATH.(string)
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		if ath != base64.RawURLEncoding.EncodeToString(sum[:]) {
			return nil, errDPoP(`DPoP "ath" mismatch`)
		}
	} else if c.ATH != nil {
		return nil, errDPoP(`DPoP "ath" claim not allowed`)
	}
	jkt, err := key.thumbprint()
	if err != nil {
		return nil, errDPoP("Failed to calculate jkt")
	}
	if !p.replay.unique("dpop:" + jti) {
		return nil, errDPoP("DPoP proof replayed")
	}
	return &proof{jti: jti, jkt: jkt}, nil
}

// normalHTU is the origin and path of u, lower-cased scheme and host, with
// the default port dropped: what the reference compares (RFC 9449 4.3).
func normalHTU(u *url.URL) string {
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	host = strings.TrimSuffix(host, map[string]string{"http": ":80", "https": ":443"}[scheme])
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path
}
