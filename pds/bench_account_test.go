package pds_test

import (
	"fmt"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/pds"
)

// BenchmarkCreateAccount: one createAccount over loopback HTTP with
// indigo's client: k256 key, PLC genesis (signed and verified), actor store
// file and empty signed repo, account rows, session tokens and the four
// firehose events. srv-p50-us is the server's own p50 of the calls (its
// stats), without the client's cost. "burst" runs them back to back;
// "spaced" leaves 10 ms between them (untimed), as a test does between
// the accounts it makes, time for work done in the background (the next
// spare actor store) to be done.
func BenchmarkCreateAccount(b *testing.B) {
	for _, bc := range []struct {
		name  string
		gap   time.Duration
		cache int // Config.ActorStoreCache
	}{
		{"burst", 0, 0},
		{"spaced", 10 * time.Millisecond, 0},
		// A suite past the actor store cache's bound (256; 16 here): each
		// new account's store takes the place of an older one.
		{"spaced-past-cache", 10 * time.Millisecond, 16},
	} {
		b.Run(bc.name, func(b *testing.B) { benchCreateAccount(b, bc.gap, bc.cache) })
	}
}

func benchCreateAccount(b *testing.B, gap time.Duration, cache int) {
	s := start(b, pds.Config{NoPLCRateLimit: true, ActorStoreCache: cache})
	c := atclient.NewAPIClient(s.URL())
	email, pw := "", "pw"
	i := 0
	for b.Loop() {
		if gap > 0 {
			b.StopTimer()
			time.Sleep(gap)
			b.StartTimer()
		}
		email = fmt.Sprintf("b%d@example.com", i)
		if _, err := comatproto.ServerCreateAccount(b.Context(), c, &comatproto.ServerCreateAccount_Input{
			Handle: fmt.Sprintf("bench%d.test", i), Email: &email, Password: &pw,
		}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	for _, m := range s.Stats().Snapshot() {
		if m.Name == "com.atproto.server.createAccount" {
			b.ReportMetric(float64(m.P50.Microseconds()), "srv-p50-us")
		}
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
