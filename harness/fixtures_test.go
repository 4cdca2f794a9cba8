package harness_test

import (
	"regexp"
	"testing"

	"github.com/fakepds/fakepds/fixtures"
	"github.com/fakepds/fakepds/harness"
)

const social = "../fixtures/social/social.json"

func TestWithFixtures(t *testing.T) {
	t.Parallel()
	// WithInvites too: the fixture's accounts get invite codes made with
	// the admin password.
	p := harness.New(t, harness.WithInvites(), harness.WithFixtures(social))
	if got := len(p.Fixture().Accounts); got != 5 {
		t.Fatalf("%d accounts", got)
	}
	alice := p.FixtureAccount(t, "alice")
	if !regexp.MustCompile(`^alice-[0-9a-f]{8}\.test$`).MatchString(alice.Handle.String()) {
		t.Fatalf("handle %s: every load gets handles of its own", alice.Handle)
	}
	if p.FixtureAccount(t, "alice") != alice {
		t.Fatal("two Accounts for one fixture account")
	}
	hello := p.FixtureRecord(t, "alice/hello")
	if v := p.RequireRecord(t, hello.URI); v["text"] != "Hello from alice! First post on the test network." {
		t.Fatalf("alice/hello = %v", v)
	}
	// The account's client works with the seed helpers.
	bob := p.FixtureAccount(t, "bob")
	reply := bob.Reply(t, hello, p.FixtureRecord(t, "alice/reply2"), "another reply")
	if reply.URI.Authority().String() != bob.DID.String() {
		t.Fatalf("reply at %s", reply.URI)
	}
}

// The embedded social fixture needs no file in the user's repository.
func TestWithFixtureSocial(t *testing.T) {
	t.Parallel()
	p := harness.New(t, harness.WithFixture(fixtures.Social()))
	hello := p.FixtureRecord(t, "alice/hello")
	p.FixtureAccount(t, "bob").Like(t, hello)
	if v := p.RequireRecord(t, hello.URI); v["text"] == "" {
		t.Fatalf("alice/hello = %v", v)
	}
}

func TestWithoutFixtures(t *testing.T) {
	t.Parallel()
	if f := harness.New(t).Fixture(); f != nil {
		t.Fatalf("Fixture() = %+v without WithFixtures", f)
	}
}
