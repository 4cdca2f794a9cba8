package account

import (
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/store"
)

// A suite creates accounts, logs each in, then writes to each in turn:
// those steps must leave the others' rows cached, and every other write
// must not.
func TestCacheOutlivesOtherAccountsAndTokens(t *testing.T) {
	ctx := t.Context()
	m, err := Open(ctx, t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	create := func(did, handle string) {
		t.Helper()
		if err := m.Create(ctx, NewAccount{DID: did, Handle: handle, Email: handle + "@example.com", PasswordScrypt: "x:y", SigningKey: []byte{1}, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(did string) bool {
		_, ok := m.cache.get(did)
		return ok
	}
	create("did:plc:a", "a.test")
	if _, err := m.ByHandle(ctx, "a.test"); err != nil { // a login by handle
		t.Fatal(err)
	}
	if !cached("did:plc:a") {
		t.Fatal("a lookup by handle left nothing for ByDID")
	}
	create("did:plc:b", "b.test")
	tok := RefreshToken{ID: "r1", DID: "did:plc:b", ExpiresAt: now.Add(time.Hour)}
	if err := m.StoreRefresh(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.Rotate(ctx, "r1", "r2", now, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Revoke(ctx, "r2"); err != nil {
		t.Fatal(err)
	}
	if err := m.RevokeAll(ctx, "did:plc:b"); err != nil {
		t.Fatal(err)
	}
	if !cached("did:plc:a") {
		t.Fatal("another account's creation or session writes dropped a's row")
	}

	// A write of b's row through the door for any table drops every row.
	if err := m.UpdateHandle(ctx, "did:plc:b", "b2.test"); err != nil {
		t.Fatal(err)
	}
	if cached("did:plc:a") {
		t.Fatal("a row survived a write that may change any account")
	}

	// A DID deleted and created again (a migration back) reads as new.
	if _, err := m.ByDID(ctx, "did:plc:a"); err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "did:plc:a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ByDID(ctx, "did:plc:a"); err == nil {
		t.Fatal("deleted account found")
	}
	create("did:plc:a", "a-again.test")
	if acc, err := m.ByDID(ctx, "did:plc:a"); err != nil || acc.Handle != "a-again.test" {
		t.Fatalf("recreated account: %+v, %v", acc, err)
	}

	// A row read before writeAccount ended is never kept past it.
	g := m.cache.gen.Load()
	acc, err := m.ByDID(ctx, "did:plc:b")
	if err != nil {
		t.Fatal(err)
	}
	m.cache.ended("did:plc:b")
	m.cache.put(acc, g)
	if cached("did:plc:b") {
		t.Fatal("a row read before its account's write was kept after it")
	}
	m.cache.put(&Account{DID: "did:plc:c"}, g) // another DID: still good
	if !cached("did:plc:c") {
		t.Fatal("a write of b's rows made c's read stale")
	}
}
