package pds_test

import (
	"fmt"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/pds"
)

// BenchmarkCreateAccount: one createAccount over loopback HTTP with
// indigo's client: k256 key, PLC genesis (signed and verified), actor store
// file and empty signed repo, account rows, session tokens and the four
// firehose events.
func BenchmarkCreateAccount(b *testing.B) {
	s := start(b, pds.Config{NoPLCRateLimit: true})
	c := atclient.NewAPIClient(s.URL())
	email, pw := "", "pw"
	i := 0
	for b.Loop() {
		email = fmt.Sprintf("b%d@example.com", i)
		if _, err := comatproto.ServerCreateAccount(b.Context(), c, &comatproto.ServerCreateAccount_Input{
			Handle: fmt.Sprintf("bench%d.test", i), Email: &email, Password: &pw,
		}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkCreateSession: one password login over loopback HTTP.
func BenchmarkCreateSession(b *testing.B) {
	s := start(b, pds.Config{})
	email, pw := "login@example.com", "pw"
	c := atclient.NewAPIClient(s.URL())
	if _, err := comatproto.ServerCreateAccount(b.Context(), c, &comatproto.ServerCreateAccount_Input{Handle: "loginacct.test", Email: &email, Password: &pw}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := comatproto.ServerCreateSession(b.Context(), c, &comatproto.ServerCreateSession_Input{Identifier: "loginacct.test", Password: pw}); err != nil {
			b.Fatal(err)
		}
	}
}
