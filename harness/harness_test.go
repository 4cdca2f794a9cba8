package harness_test

import (
	"regexp"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

func TestSharedAccount(t *testing.T) {
	t.Parallel()
	p := harness.Shared(t)
	a := p.NewAccount(t, harness.WithHandlePrefix("Alice-The-Great"))
	if !regexp.MustCompile(`^alice-t-[0-9a-f]{10}\.test$`).MatchString(a.Handle.String()) {
		t.Fatalf("handle %q", a.Handle)
	}
	sess, err := comatproto.ServerGetSession(t.Context(), a.Client)
	if err != nil || sess.Did != a.DID.String() {
		t.Fatalf("getSession = %+v, %v", sess, err)
	}
	// The password works for a fresh login too, and the handle resolves.
	if _, err := atclient.LoginWithPassword(t.Context(), p.Directory(), a.Handle.AtIdentifier(), a.Password, "", nil); err != nil {
		t.Fatalf("LoginWithPassword: %v", err)
	}
	ident, err := p.Directory().LookupHandle(t.Context(), a.Handle)
	if err != nil || ident.DID != a.DID {
		t.Fatalf("LookupHandle = %v, %v", ident, err)
	}
}

// Parallel tests on one shared PDS never collide on handles.
func TestNewAccountsAreUnique(t *testing.T) {
	p := harness.Shared(t)
	seen := make(chan syntax.Handle, 20)
	t.Run("group", func(t *testing.T) {
		for range 20 {
			t.Run("", func(t *testing.T) {
				t.Parallel()
				seen <- p.NewAccount(t).Handle
			})
		}
	})
	close(seen)
	handles := map[syntax.Handle]bool{}
	for h := range seen {
		if handles[h] {
			t.Fatalf("handle %s given twice", h)
		}
		handles[h] = true
	}
	if len(handles) != 20 {
		t.Fatalf("%d accounts", len(handles))
	}
}

func TestPrivatePDS(t *testing.T) {
	t.Parallel()
	p := harness.New(t, harness.WithInvites())
	if p.URL() == harness.Shared(t).URL() {
		t.Fatal("New returned the shared PDS")
	}
	email, pw := "x@example.com", "pw"
	_, err := comatproto.ServerCreateAccount(t.Context(), atclient.NewAPIClient(p.URL()), &comatproto.ServerCreateAccount_Input{Handle: "private.test", Email: &email, Password: &pw})
	if err == nil {
		t.Fatal("WithInvites did not make invites required")
	}
}

// BenchmarkNew is the cost of a private PDS per test: New, and the Close
// its cleanup runs (done here, so the benchmark does not pile servers up).
func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		harness.New(b).Close()
	}
}

func BenchmarkNewAccount(b *testing.B) {
	p := harness.New(b)
	for b.Loop() {
		p.NewAccount(b)
	}
}
