package account_test

import (
	"crypto/rand"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/store"
)

func newManager(t testing.TB) *account.Manager {
	t.Helper()
	m, err := account.Open(t.Context(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func create(t *testing.T, m *account.Manager, did, handle, email string) {
	t.Helper()
	if err := m.Create(t.Context(), account.NewAccount{DID: did, Handle: handle, Email: email, PasswordScrypt: "x:y", SigningKey: []byte{1}, Now: t0}); err != nil {
		t.Fatal(err)
	}
}

func TestCreateAndLookups(t *testing.T) {
	m := newManager(t)
	ctx := t.Context()
	create(t, m, "did:plc:a", "alice.test", "Alice@Example.com")

	for _, ident := range []string{"did:plc:a", "alice.test", "alice@example.com", "ALICE@EXAMPLE.COM"} {
		a, err := m.ByIdentifier(ctx, ident)
		if err != nil {
			t.Fatalf("ByIdentifier(%q): %v", ident, err)
		}
		if a.DID != "did:plc:a" || a.Handle != "alice.test" || a.Status() != account.StatusActive || a.CreatedAt != "2026-11-30T12:00:00.000Z" {
			t.Fatalf("ByIdentifier(%q) = %+v", ident, a)
		}
	}
	// A handle is compared exactly, as the reference compares it: the
	// callers that lower-case one first (login, resolveHandle) do so.
	for _, ident := range []string{"bob.test", "ALICE.test"} {
		if _, err := m.ByIdentifier(ctx, ident); !errors.Is(err, account.ErrNotFound) {
			t.Fatalf("ByIdentifier(%q): %v, want not found", ident, err)
		}
	}

	// Taken handle and email (case-insensitively) store nothing.
	err := m.Create(ctx, account.NewAccount{DID: "did:plc:b", Handle: "alice.test", Email: "b@example.com", PasswordScrypt: "x", SigningKey: []byte{1}, Now: t0})
	if !errors.Is(err, account.ErrHandleTaken) {
		t.Fatalf("taken handle: %v", err)
	}
	err = m.Create(ctx, account.NewAccount{DID: "did:plc:b", Handle: "bob.test", Email: "alice@EXAMPLE.com", PasswordScrypt: "x", SigningKey: []byte{1}, Now: t0})
	if !errors.Is(err, account.ErrEmailTaken) {
		t.Fatalf("taken email: %v", err)
	}
	if _, err := m.ByDID(ctx, "did:plc:b"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("a failed create left the actor behind: %v", err)
	}
}

func TestStatusChanges(t *testing.T) {
	m := newManager(t)
	ctx := t.Context()
	create(t, m, "did:plc:a", "alice.test", "a@example.com")
	get := func() *account.Account {
		a, err := m.ByDID(ctx, "did:plc:a")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if err := m.Deactivate(ctx, "did:plc:a", t0, time.Time{}); err != nil {
		t.Fatal(err)
	}
	if get().Status() != account.StatusDeactivated {
		t.Fatal("not deactivated")
	}
	if err := m.SetTakedown(ctx, "did:plc:a", "ref-1"); err != nil {
		t.Fatal(err)
	}
	if get().Status() != account.StatusTakendown {
		t.Fatal("takedown should win over deactivation")
	}
	m.SetTakedown(ctx, "did:plc:a", "")
	m.Activate(ctx, "did:plc:a")
	if get().Status() != account.StatusActive {
		t.Fatal("not active again")
	}
	if err := m.UpdateHandle(ctx, "did:plc:nobody", "x.test"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("update of unknown account: %v", err)
	}
	if err := m.Delete(ctx, "did:plc:a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SigningKey(ctx, "did:plc:a"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("key survived deletion: %v", err)
	}
}

// ByDID answers from a cache; every write must show in the next read, even
// with readers filling the cache while the write runs.
func TestByDIDSeesEveryWrite(t *testing.T) {
	m := newManager(t)
	ctx := t.Context()
	create(t, m, "did:plc:a", "alice.test", "a@example.com")
	get := func() *account.Account {
		t.Helper()
		a, err := m.ByDID(ctx, "did:plc:a")
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	get().Handle = "changed-by-a-caller.test"
	if h := get().Handle; h != "alice.test" {
		t.Fatalf("a caller's change to its copy leaked into the cache: %q", h)
	}
	steps := []struct {
		write func() error
		want  func(a *account.Account) bool
	}{
		{func() error { return m.UpdateHandle(ctx, "did:plc:a", "alice2.test") }, func(a *account.Account) bool { return a.Handle == "alice2.test" }},
		{func() error { return m.UpdateEmail(ctx, "did:plc:a", "new@example.com") }, func(a *account.Account) bool { return a.Email == "new@example.com" }},
		{func() error { return m.ConfirmEmail(ctx, "did:plc:a", t0) }, func(a *account.Account) bool { return a.EmailConfirmedAt != "" }},
		{func() error { return m.UpdatePassword(ctx, "did:plc:a", "p:q") }, func(a *account.Account) bool { return a.PasswordScrypt == "p:q" }},
		{func() error { return m.SetInvitesDisabled(ctx, "did:plc:a", true) }, func(a *account.Account) bool { return a.InvitesDisabled }},
	}
	for i, st := range steps {
		get()
		if err := st.write(); err != nil {
			t.Fatal(err)
		}
		if a := get(); !st.want(a) {
			t.Fatalf("step %d: read after the write: %+v", i, a)
		}
	}

	// Readers keep the cache warm while the status flips; after each write
	// returns, a read must see it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					m.ByDID(ctx, "did:plc:a")
				}
			}
		})
	}
	for i := range 200 {
		var err error
		if i%2 == 0 {
			err = m.Deactivate(ctx, "did:plc:a", t0, time.Time{})
		} else {
			err = m.Activate(ctx, "did:plc:a")
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, want := get().Status(), map[bool]account.Status{true: account.StatusDeactivated, false: account.StatusActive}[i%2 == 0]; got != want {
			close(stop)
			wg.Wait()
			t.Fatalf("write %d: read %s, want %s", i, got, want)
		}
	}
	close(stop)
	wg.Wait()
	if err := m.Delete(ctx, "did:plc:a"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ByDID(ctx, "did:plc:a"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("deleted account still found: %v", err)
	}
}

func TestRefreshRotation(t *testing.T) {
	m := newManager(t)
	ctx := t.Context()
	create(t, m, "did:plc:a", "alice.test", "a@example.com")
	exp := t0.Add(90 * 24 * time.Hour)
	if err := m.StoreRefresh(ctx, account.RefreshToken{ID: "r1", DID: "did:plc:a", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	tok, next, err := m.Rotate(ctx, "r1", "r2", t0, 2*time.Hour)
	if err != nil || next != "r2" || tok.DID != "did:plc:a" {
		t.Fatalf("first rotation: %v %v %+v", next, err, tok)
	}
	// Retrying within the grace period gives the same successor.
	_, next, err = m.Rotate(ctx, "r1", "r3", t0.Add(time.Hour), 2*time.Hour)
	if err != nil || next != "r2" {
		t.Fatalf("retry in grace: %v %v", next, err)
	}
	// Past it, the old token is dead.
	if _, _, err := m.Rotate(ctx, "r1", "r4", t0.Add(2*time.Hour), 2*time.Hour); !errors.Is(err, account.ErrTokenRevoked) {
		t.Fatalf("after grace: %v", err)
	}
	if _, _, err := m.Rotate(ctx, "never", "r5", t0, 2*time.Hour); !errors.Is(err, account.ErrTokenRevoked) {
		t.Fatalf("unknown token: %v", err)
	}
	if ok, err := m.Revoke(ctx, "r1"); !ok || err != nil {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	if ok, _ := m.Revoke(ctx, "r1"); ok {
		t.Fatal("revoked twice")
	}
}

func TestAppPasswords(t *testing.T) {
	m := newManager(t)
	ctx := t.Context()
	create(t, m, "did:plc:a", "alice.test", "a@example.com")
	secret := account.NewAppPasswordSecret(rand.Reader)
	if !regexp.MustCompile(`^[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}-[a-z2-7]{4}$`).MatchString(secret) {
		t.Fatalf("app password %q not in the reference format", secret)
	}
	if _, err := m.CreateAppPassword(ctx, "did:plc:a", "laptop", "hash-1", false, t0); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CreateAppPassword(ctx, "did:plc:a", "laptop", "hash-2", true, t0); !errors.Is(err, account.ErrAppPassTaken) {
		t.Fatalf("duplicate name: %v", err)
	}
	m.CreateAppPassword(ctx, "did:plc:a", "phone", "hash-3", true, t0.Add(time.Minute))
	list, err := m.ListAppPasswords(ctx, "did:plc:a")
	if err != nil || len(list) != 2 || list[0].Name != "phone" || !list[0].Privileged {
		t.Fatalf("list = %+v, %v", list, err)
	}
	ap, err := m.FindAppPassword(ctx, "did:plc:a", "hash-3")
	if err != nil || ap.Name != "phone" {
		t.Fatalf("find = %+v, %v", ap, err)
	}
	m.StoreRefresh(ctx, account.RefreshToken{ID: "rp", DID: "did:plc:a", ExpiresAt: t0.Add(time.Hour), AppPass: ap})
	if err := m.RevokeAppPassword(ctx, "did:plc:a", "phone"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.FindAppPassword(ctx, "did:plc:a", "hash-3"); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("revoked app password still found: %v", err)
	}
	if _, _, err := m.Rotate(ctx, "rp", "rq", t0, time.Hour); !errors.Is(err, account.ErrTokenRevoked) {
		t.Fatalf("session of a revoked app password survived: %v", err)
	}
}

func TestEmailTokens(t *testing.T) {
	m := newManager(t)
	ctx := t.Context()
	create(t, m, "did:plc:a", "alice.test", "a@example.com")
	tok, err := m.CreateEmailToken(ctx, "did:plc:a", account.PurposeConfirmEmail, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[A-Z2-7]{5}-[A-Z2-7]{5}$`).MatchString(tok) {
		t.Fatalf("token %q", tok)
	}
	for _, tc := range []struct {
		did     string
		purpose account.Purpose
		token   string
		at      time.Time
		err     error
	}{
		{"did:plc:a", account.PurposeConfirmEmail, tok, t0.Add(time.Minute), nil},
		{"", account.PurposeConfirmEmail, tok, t0.Add(time.Minute), nil},
		{"did:plc:a", account.PurposeConfirmEmail, strings.ToLower(tok), t0, nil},
		{"did:plc:a", account.PurposeResetPassword, tok, t0, account.ErrTokenInvalid},
		{"did:plc:a", account.PurposeConfirmEmail, "AAAAA-BBBBB", t0, account.ErrTokenInvalid},
		{"did:plc:a", account.PurposeConfirmEmail, tok, t0.Add(account.EmailTokenTTL), account.ErrTokenExpired},
	} {
		did, err := m.CheckEmailToken(ctx, tc.did, tc.purpose, tc.token, tc.at)
		if !errors.Is(err, tc.err) || (err == nil && did != "did:plc:a") {
			t.Errorf("%+v: %q, %v", tc, did, err)
		}
	}
	// A new request replaces the old token.
	tok2, _ := m.CreateEmailToken(ctx, "did:plc:a", account.PurposeConfirmEmail, t0)
	if tok2 == tok {
		t.Fatal("a new request reissued the same token")
	}
	if _, err := m.CheckEmailToken(ctx, "did:plc:a", account.PurposeConfirmEmail, tok, t0); !errors.Is(err, account.ErrTokenInvalid) {
		t.Fatalf("replaced token still valid: %v", err)
	}
}

// The last use of an invite code goes to one sign-up only, however many
// race for it.
func TestInviteLastUseIsNotShared(t *testing.T) {
	m := newManager(t)
	ctx := t.Context()
	create(t, m, "did:plc:owner", "owner.test", "o@example.com")
	code := account.NewInviteCode(rand.Reader, "pds.example.com")
	if !regexp.MustCompile(`^pds-example-com-[a-z2-7]{5}-[a-z2-7]{5}$`).MatchString(code) {
		t.Fatalf("code %q", code)
	}
	if err := m.CreateInviteCodes(ctx, []string{code}, 1, "did:plc:owner", "admin", t0); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			errs[i] = m.Create(ctx, account.NewAccount{
				DID: fmt.Sprintf("did:plc:u%d", i), Handle: fmt.Sprintf("user%d.test", i), Email: fmt.Sprintf("u%d@example.com", i),
				PasswordScrypt: "x", SigningKey: []byte{1}, InviteCode: code, Now: t0,
			})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, account.ErrInviteUnavailable):
			t.Errorf("unexpected error %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d accounts used a single-use code", ok)
	}
	codes, err := m.InviteCodes(ctx, "did:plc:owner")
	if err != nil || len(codes) != 1 || len(codes[0].Uses) != 1 {
		t.Fatalf("codes = %+v, %v", codes, err)
	}
	if err := m.InviteAvailable(ctx, code); !errors.Is(err, account.ErrInviteUnavailable) {
		t.Fatalf("used-up code available: %v", err)
	}
}
