package oauth

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/store"
)

// The OAuth database is made by its first use, not by a server's start;
// one already there is opened at start and its dead families purged.
func TestStoreOpenedOnFirstUse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, File)
	c := &clock.Shifted{}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	provider := func() *Provider {
		t.Helper()
		st, err := OpenStore(t.Context(), dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(t.Context(), Options{
			Store: st, Issuer: func() string { return "http://localhost" }, Audience: "did:web:localhost",
			Secret: secret, Clock: c, Accounts: fakeAccounts{},
		})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	exists := func() bool {
		t.Helper()
		_, err := os.Stat(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return err == nil
	}

	p := provider()
	if exists() {
		t.Fatalf("%s made before any use", File)
	}
	if s, err := p.Sessions(t.Context(), "did:plc:alice"); err != nil || len(s) != 0 {
		t.Fatalf("Sessions = %v, %v", s, err)
	}
	if !exists() {
		t.Fatalf("%s not made by its first use", File)
	}
	// Two families: one idle past the longest refresh lifetime, one not.
	now := c.Now()
	insert := func(id string, updated time.Time) {
		t.Helper()
		err := p.db.Write(t.Context(), func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO token (id, did, client_id, client_auth, params, created_at, updated_at, expires_at) VALUES (?, 'did:plc:alice', 'c', '{}', '{}', ?, ?, ?)`,
				id, ms(updated), ms(updated), ms(updated.Add(time.Hour)))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("dead", now.Add(-refreshLifetimeLong-time.Hour))
	insert("live", now.Add(-time.Hour))
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	p = provider()
	defer p.Close()
	s, err := p.Sessions(context.Background(), "did:plc:alice")
	if err != nil || len(s) != 1 {
		t.Fatalf("after a restart: %d sessions (%v), want the live one only", len(s), err)
	}
}
