package account_test

import (
	"fmt"
	"testing"

	"github.com/fakepds/fakepds/pds/account"
)

// BenchmarkCreate is what createAccount writes to the account database:
// the account's rows (one transaction), then its session's refresh token
// (another).
func BenchmarkCreate(b *testing.B) {
	m := newManager(b)
	ctx := b.Context()
	i := 0
	for b.Loop() {
		did := fmt.Sprintf("did:plc:bench%d", i)
		if err := m.Create(ctx, account.NewAccount{DID: did, Handle: fmt.Sprintf("b%d.test", i), Email: fmt.Sprintf("b%d@example.com", i),
			PasswordScrypt: "x:y", SigningKey: []byte{1}, Now: t0}); err != nil {
			b.Fatal(err)
		}
		if err := m.StoreRefresh(ctx, account.RefreshToken{ID: fmt.Sprintf("r%d", i), DID: did, ExpiresAt: t0}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkByHandleAfterWrite is a login's lookup in a test suite: another
// session's refresh token was written just before (the timed part is only
// ByHandle), over 200 accounts.
func BenchmarkByHandleAfterWrite(b *testing.B) {
	m := newManager(b)
	ctx := b.Context()
	const n = 200
	for i := range n {
		if err := m.Create(ctx, account.NewAccount{DID: fmt.Sprintf("did:plc:bench%d", i), Handle: fmt.Sprintf("b%d.test", i),
			Email: fmt.Sprintf("b%d@example.com", i), PasswordScrypt: "x:y", SigningKey: []byte{1}, Now: t0}); err != nil {
			b.Fatal(err)
		}
	}
	i := 0
	for b.Loop() {
		b.StopTimer()
		if err := m.StoreRefresh(ctx, account.RefreshToken{ID: fmt.Sprintf("r%d", i), DID: fmt.Sprintf("did:plc:bench%d", i%n), ExpiresAt: t0}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := m.ByHandle(ctx, fmt.Sprintf("b%d.test", (i*7)%n)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
