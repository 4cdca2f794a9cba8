package pds_test

import (
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds"
)

func TestUpdateHandle(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "before.test", "before@example.com", "pw")
	other := createAccount(t, s, "otheracct.test", "other@example.com", "pw")
	events := firehose(t, s, "?cursor=8")
	cl := bearer(s, a.AccessJwt)
	if err := comatproto.IdentityUpdateHandle(ctx, cl, &comatproto.IdentityUpdateHandle_Input{Handle: "After.test"}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, events, "identity:9:"+a.Did+":after.test")
	// The PLC document names the new handle; the directory resolves it.
	ident, err := (&identity.BaseDirectory{PLCURL: s.PLCURL()}).LookupDID(ctx, syntax.DID(a.Did))
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := ident.DeclaredHandle(); h != "after.test" {
		t.Fatalf("PLC handle %q", h)
	}
	if got, err := s.Directory().LookupHandle(ctx, "after.test"); err != nil || got.DID.String() != a.Did {
		t.Fatalf("Directory after update: %v %v", got, err)
	}
	if _, err := s.Directory().LookupHandle(ctx, "before.test"); err == nil {
		t.Fatal("the old handle still resolves")
	}
	err = comatproto.IdentityUpdateHandle(ctx, cl, &comatproto.IdentityUpdateHandle_Input{Handle: "otheracct.test"})
	apiErr(t, err, 400, "HandleNotAvailable")
	err = comatproto.IdentityUpdateHandle(ctx, bearer(s, other.AccessJwt), &comatproto.IdentityUpdateHandle_Input{Handle: "x.test"})
	apiErr(t, err, 400, "InvalidHandle")
}

// The migration flow of DID credentials: request a signature (email token),
// sign an operation, submit it.
func TestPLCOperationFlow(t *testing.T) {
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "plcop.test", "plcop@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	// Raw JSON: indigo's generated type wants $type in the "unknown"
	// verificationMethods and services objects, which carry none.
	var creds struct {
		AlsoKnownAs         []string                     `json:"alsoKnownAs"`
		RotationKeys        []string                     `json:"rotationKeys"`
		VerificationMethods map[string]string            `json:"verificationMethods"`
		Services            map[string]map[string]string `json:"services"`
	}
	if err := cl.Get(ctx, "com.atproto.identity.getRecommendedDidCredentials", nil, &creds); err != nil {
		t.Fatal(err)
	}
	if len(creds.AlsoKnownAs) != 1 || creds.AlsoKnownAs[0] != "at://plcop.test" || len(creds.RotationKeys) != 1 ||
		creds.Services["atproto_pds"]["endpoint"] != s.URL() || creds.VerificationMethods["atproto"] == "" {
		t.Fatalf("recommended credentials %+v", creds)
	}
	_, err := comatproto.IdentitySignPlcOperation(ctx, cl, &comatproto.IdentitySignPlcOperation_Input{})
	apiErr(t, err, 400, "InvalidRequest")
	if err := comatproto.IdentityRequestPlcOperationSignature(ctx, cl); err != nil {
		t.Fatal(err)
	}
	tok := lastToken(t, s, a.Did, "plc_operation")
	aka := []string{"at://plcop.test", "https://example.com/me"}
	// indigo's generated call cannot decode the output: the operation is
	// an "unknown" without $type, which its decoder insists on. Raw JSON.
	var signed struct {
		Operation map[string]any `json:"operation"`
	}
	if err := cl.Post(ctx, "com.atproto.identity.signPlcOperation", map[string]any{"token": tok, "alsoKnownAs": aka}, &signed); err != nil {
		t.Fatal(err)
	}
	// A tampered operation (another signing key) is refused before PLC.
	op := map[string]any{}
	for k, v := range signed.Operation {
		op[k] = v
	}
	op["verificationMethods"] = map[string]any{"atproto": "did:key:zQ3shXjHeiBuRCKmM36cuYnm7YEMzhGnCmCyW92sRJ9pribSF"}
	err = cl.Post(ctx, "com.atproto.identity.submitPlcOperation", map[string]any{"operation": op}, nil)
	apiErr(t, err, 400, "InvalidRequest")
	if err := cl.Post(ctx, "com.atproto.identity.submitPlcOperation", map[string]any{"operation": signed.Operation}, nil); err != nil {
		t.Fatal(err)
	}
	ident, err := (&identity.BaseDirectory{PLCURL: s.PLCURL()}).LookupDID(ctx, syntax.DID(a.Did))
	if err != nil {
		t.Fatal(err)
	}
	if len(ident.AlsoKnownAs) != 2 || ident.AlsoKnownAs[1] != "https://example.com/me" {
		t.Fatalf("alsoKnownAs after submit: %v", ident.AlsoKnownAs)
	}
	// The token was spent.
	err = cl.Post(ctx, "com.atproto.identity.signPlcOperation", map[string]any{"token": tok}, nil)
	apiErr(t, err, 400, "InvalidToken")
}
