package auth_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	indigoauth "github.com/bluesky-social/indigo/atproto/auth"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/golang-jwt/jwt/v5"

	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/clock"
)

func TestAccessAndRefreshTokens(t *testing.T) {
	var c clock.Shifted
	tk := auth.NewTokens([]byte("secret"), "did:web:localhost", &c)

	acc, err := tk.Access("did:plc:abc", auth.ScopeAppPass)
	if err != nil {
		t.Fatal(err)
	}
	// The shape the reference mints: header typ/alg, claims scope/aud/sub/iat/exp.
	parsed, _, err := jwt.NewParser().ParseUnverified(acc, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Header["typ"] != "at+jwt" || parsed.Header["alg"] != "HS256" {
		t.Errorf("access header %v", parsed.Header)
	}
	cl, err := tk.Verify(acc, auth.TypeAccess)
	if err != nil {
		t.Fatal(err)
	}
	if cl.Scope != auth.ScopeAppPass || cl.Sub != "did:plc:abc" || cl.Aud != "did:web:localhost" || cl.Exp-cl.Iat != int64(auth.AccessTTL/time.Second) {
		t.Errorf("claims %+v", cl)
	}

	ref, exp, err := tk.Refresh("did:plc:abc", "jti-1")
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d < auth.RefreshTTL-time.Minute || d > auth.RefreshTTL+time.Minute {
		t.Errorf("refresh expiry in %v", d)
	}
	cl, err = tk.Verify(ref, auth.TypeRefresh)
	if err != nil || cl.Jti != "jti-1" || cl.Scope != auth.ScopeRefresh {
		t.Fatalf("refresh claims %+v, %v", cl, err)
	}

	// A refresh token is not an access token, and the other way round.
	if _, err := tk.Verify(ref, auth.TypeAccess); !errors.Is(err, auth.ErrBadType) {
		t.Errorf("refresh as access: %v", err)
	}
	if _, err := tk.Verify(acc, auth.TypeRefresh); !errors.Is(err, auth.ErrBadType) {
		t.Errorf("access as refresh: %v", err)
	}
	// Another server's secret, or a tampered token, fails the signature.
	other := auth.NewTokens([]byte("other"), "did:web:localhost", &c)
	if _, err := other.Verify(acc, auth.TypeAccess); !errors.Is(err, auth.ErrSignature) {
		t.Errorf("foreign token: %v", err)
	}
	if _, err := tk.Verify("garbage", auth.TypeAccess); !errors.Is(err, auth.ErrMalformed) {
		t.Errorf("garbage: %v", err)
	}
	// Verified tokens are remembered; a changed one is checked afresh, and
	// a caller's change to its claims stays its own.
	tampered := acc[:len(acc)-2] + map[bool]string{true: "AA", false: "BB"}[acc[len(acc)-2:] != "AA"]
	if _, err := tk.Verify(tampered, auth.TypeAccess); !errors.Is(err, auth.ErrSignature) && !errors.Is(err, auth.ErrMalformed) {
		t.Errorf("tampered token after the good one: %v", err)
	}
	cl, _ = tk.Verify(acc, auth.TypeAccess)
	cl.Sub = "did:plc:someone-else"
	if cl, _ = tk.Verify(acc, auth.TypeAccess); cl.Sub != "did:plc:abc" {
		t.Errorf("a caller's change reached the remembered claims: %q", cl.Sub)
	}
	// Expiry follows the server clock.
	c.Advance(auth.AccessTTL + time.Second)
	if _, err := tk.Verify(acc, auth.TypeAccess); !errors.Is(err, auth.ErrExpired) {
		t.Errorf("after the clock passed exp: %v", err)
	}
	if _, err := tk.Verify(ref, auth.TypeRefresh); err != nil {
		t.Errorf("refresh expired early: %v", err)
	}
}

func TestPasswordHashes(t *testing.T) {
	for _, n := range []int{auth.CheapScryptN, auth.ReferenceScryptN} {
		h := auth.Hasher{N: n}
		stored, err := h.Hash("hunter2")
		if err != nil {
			t.Fatal(err)
		}
		if parts := strings.Split(stored, ":"); (n == auth.ReferenceScryptN) != (len(parts) == 2) {
			t.Errorf("N=%d: stored %q", n, stored)
		}
		for pw, want := range map[string]bool{"hunter2": true, "hunter3": false, "": false} {
			if ok, err := auth.Verify(pw, stored); ok != want || err != nil {
				t.Errorf("N=%d Verify(%q) = %v, %v", n, pw, ok, err)
			}
		}
	}
	// A hash made by the reference PDS (Node's crypto.scrypt, N=16384) verifies.
	ref := "0123456789abcdef0123456789abcdef:4971254c23d915ca81fee56d02cb00bf641a7461bd516d17175bcb314c8abad13e74b1c8f6e11649cb30cee8f888fdd4c8baee55535fd8b628d65e8c655edffe"
	if ok, err := auth.Verify("hunter2", ref); !ok || err != nil {
		t.Fatalf("reference hash: %v %v", ok, err)
	}
	// One made at fakepds's cost before it was lowered (a kept data dir).
	old := "16:000102030405060708090a0b0c0d0e0f:4a6c6298c70cecdebdd05451862a9739aa0286a210ea5cd1632547a9c66f20f473d34f24e77d2e9b39cdfd59479432b71cc8941fe04afa82cd570937b0b3909c"
	if ok, err := auth.Verify("hunter2", old); !ok || err != nil {
		t.Fatalf("hash at N=16: %v %v", ok, err)
	}
	if ok, _ := auth.Verify("hunter3", old); ok {
		t.Fatal("hash at N=16 accepts another password")
	}
	if _, err := auth.Verify("x", "nocolon"); err == nil {
		t.Error("malformed hash accepted")
	}
}

// indigo's validator accepts our service auth tokens.
func TestServiceAuthAcceptedByIndigo(t *testing.T) {
	priv, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := priv.PublicKey()
	did := syntax.DID("did:plc:ewvi7nxzyoun6zhxrhs64oiz")
	dir := identity.NewMockDirectory()
	dir.Insert(identity.Identity{
		DID:  did,
		Keys: map[string]identity.VerificationMethod{"atproto": {Type: "Multikey", PublicKeyMultibase: pub.Multibase()}},
	})
	v := indigoauth.ServiceAuthValidator{Audience: "did:web:appview.test", Dir: dir}
	now := time.Now()
	lxm := syntax.NSID("app.bsky.feed.getTimeline")
	tok, err := auth.ServiceAuth(rand.Reader, did, "did:web:appview.test", lxm.String(), now, now.Add(time.Minute), priv)
	if err != nil {
		t.Fatal(err)
	}
	got, err := v.Validate(context.Background(), tok, &lxm)
	if err != nil || got != did {
		t.Fatalf("Validate = %v, %v", got, err)
	}
	other := syntax.NSID("app.bsky.feed.getAuthorFeed")
	if _, err := v.Validate(context.Background(), tok, &other); err == nil {
		t.Fatal("token for one method accepted for another")
	}
}

func BenchmarkHashCheap(b *testing.B) {
	h := auth.Hasher{N: auth.CheapScryptN}
	for b.Loop() {
		h.Hash("hunter2")
	}
}

func BenchmarkHashReference(b *testing.B) {
	h := auth.Hasher{N: auth.ReferenceScryptN}
	for b.Loop() {
		h.Hash("hunter2")
	}
}
