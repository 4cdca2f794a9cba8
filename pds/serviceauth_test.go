package pds_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atcrypto"
	indigoauth "github.com/bluesky-social/indigo/atproto/auth"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
)

// createAccount with a DID (a migration) under a service token from the
// old PDS, on a second server sharing the first one's PLC directory: each
// bad token gets the error the reference's verifyJwt gives, in its order
// (shape and lxm, then the issuer's key and signature, then the
// audience); a good token for another DID is "Missing auth".
func TestCreateAccountServiceAuthErrors(t *testing.T) {
	t.Parallel()
	old := start(t, pds.Config{})
	s := start(t, pds.Config{PLCURL: old.PLCURL()})
	if s.PLCURL() != old.PLCURL() {
		t.Fatalf("PLCURL %s, want %s", s.PLCURL(), old.PLCURL())
	}
	a := createAccount(t, old, "mover.test", "mover@example.com", "pw")
	b := createAccount(t, old, "bystander.test", "bystander@example.com", "pw")
	oldClient := func(out *comatproto.ServerCreateAccount_Output) *atclient.APIClient {
		return atclient.ResumePasswordSession(atclient.PasswordSessionData{
			AccessToken: out.AccessJwt, RefreshToken: out.RefreshJwt, AccountDID: syntax.DID(out.Did), Host: old.URL(),
		}, nil)
	}
	const lxm = "com.atproto.server.createAccount"
	token := func(out *comatproto.ServerCreateAccount_Output, aud, lxm string) string {
		t.Helper()
		res, err := comatproto.ServerGetServiceAuth(t.Context(), oldClient(out), aud, 0, lxm)
		if err != nil {
			t.Fatalf("getServiceAuth: %v", err)
		}
		return res.Token
	}
	aud := s.ServiceDID()
	good := token(a, aud, lxm)
	parts := strings.Split(good, ".")
	stranger, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		t.Fatal(err)
	}
	m := syntax.NSID(lxm)
	signed := func(iss syntax.DID) string {
		t.Helper()
		tok, err := indigoauth.SignServiceAuth(iss, aud, time.Minute, &m, stranger)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	es256 := base64.RawURLEncoding.EncodeToString([]byte(`{"typ":"JWT","alg":"ES256"}`))
	flipped := []byte(parts[2])
	flipped[10] ^= 1 // a valid base64url character still, another signature
	for _, tc := range []struct {
		name, token     string
		errName, errMsg string
	}{
		{"wrong lxm", token(a, aud, "com.atproto.repo.createRecord"), "BadJwtLexiconMethod", `bad jwt lexicon method ("lxm"). must match: ` + lxm},
		{"unknown issuer", signed("did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"), "AuthenticationRequired", "could not resolve iss did"},
		{"alg not the key's", es256 + "." + parts[1] + "." + parts[2], "BadJwtSignature", "could not verify jwt signature"},
		{"signed by another key", signed(syntax.DID(a.Did)), "BadJwtSignature", "jwt signature does not match jwt issuer"},
		{"signature altered", parts[0] + "." + parts[1] + "." + string(flipped), "BadJwtSignature", "jwt signature does not match jwt issuer"},
		{"for another service", token(a, "did:web:elsewhere.test", lxm), "BadJwtAudience", "jwt audience does not match service did"},
		{"for another DID", token(b, aud, lxm), "AuthenticationRequired", "Missing auth to create account with did: " + a.Did},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := atclient.NewAPIClient(s.URL())
			c.Auth = &atclient.PasswordAuth{Session: atclient.PasswordSessionData{AccountDID: syntax.DID(a.Did), AccessToken: tc.token}}
			email, pw := "mover@example.com", "pw"
			_, err := comatproto.ServerCreateAccount(t.Context(), c, &comatproto.ServerCreateAccount_Input{Did: &a.Did, Handle: "mover.test", Email: &email, Password: &pw})
			xrpcErr(t, err, 401, tc.errName, tc.errMsg)
		})
	}
	// The good token: the account is created, deactivated, on s.
	c := atclient.NewAPIClient(s.URL())
	c.Auth = &atclient.PasswordAuth{Session: atclient.PasswordSessionData{AccountDID: syntax.DID(a.Did), AccessToken: good}}
	email, pw := "mover@example.com", "pw"
	out, err := comatproto.ServerCreateAccount(t.Context(), c, &comatproto.ServerCreateAccount_Input{Did: &a.Did, Handle: "mover.test", Email: &email, Password: &pw})
	if err != nil || out.Did != a.Did {
		t.Fatalf("createAccount with the good token: %+v %v", out, err)
	}
	st, err := comatproto.SyncGetRepoStatus(t.Context(), atclient.NewAPIClient(s.URL()), a.Did)
	if err != nil || st.Active || st.Status == nil || *st.Status != "deactivated" {
		t.Fatalf("getRepoStatus on the new PDS: %+v %v, want deactivated", st, err)
	}
}
