package harness

import (
	"context"
	"testing"

	"github.com/fakepds/fakepds/fixtures"
)

// WithFixtures loads the fixture file at path (package fixtures; a path
// relative to the test's package directory) into the PDS once it answers:
// the one Main starts or attaches to, or the one New starts. Loading fails
// Main (exit 2) or the test (New) with an error naming the item.
//
// Every load gets handles of its own ("alice" becomes
// "alice-3f9a2c1b.test"), so test binaries sharing one PDS can each load
// the same fixture: find accounts and records by their names in the file,
// with Fixture, FixtureAccount and FixtureRecord. Given twice (or with
// WithFixture), the last one wins.
func WithFixtures(path string) Option {
	return func(s *setup) { s.fixtures, s.fixtureFile = path, nil }
}

// WithFixture is WithFixtures for a fixture already in hand: one built in
// Go, or the embedded fixtures.Social() (nothing to copy into your
// repository).
func WithFixture(f *fixtures.File) Option {
	return func(s *setup) { s.fixtures, s.fixtureFile = "", f }
}

// apply collects what opts ask for (for a PDS attached to, only what
// happens once it answers matters).
func apply(opts []Option) *setup {
	var s setup
	for _, o := range opts {
		o(&s)
	}
	return &s
}

// ready does what the options ask for once the PDS answers.
func (p *PDS) ready(s *setup) error {
	f := s.fixtureFile
	if f == nil && s.fixtures == "" {
		return nil
	}
	var err error
	if f == nil {
		if f, err = fixtures.Open(s.fixtures); err != nil {
			return err
		}
	}
	opts := []fixtures.Option{fixtures.UniqueHandles(), fixtures.WithAdminPassword(p.adminPassword)}
	if s.cfg.Rand.Seeded() {
		opts = append(opts, fixtures.WithClock(s.cfg.Clock.Now), fixtures.WithRand(p.random()))
	}
	p.fixture, err = fixtures.Load(context.Background(), p.url, f, opts...)
	return err
}

// Fixture is what WithFixtures loaded: every account's DID, handle,
// password and session, every named record's URI and CID, every blob. It
// is nil without WithFixtures.
func (p *PDS) Fixture() *fixtures.Loaded { return p.fixture }

// FixtureAccount returns the fixture's account named name, with a client
// logged in as it, ready for the seed helpers (alice.Post(t, "hi")). It
// fails the test when there is no fixture or no such account.
func (p *PDS) FixtureAccount(t testing.TB, name string) *Account {
	t.Helper()
	if p.fixture == nil {
		t.Fatalf("harness.FixtureAccount(%q): no fixture loaded; start the PDS with harness.WithFixtures(path)", name)
	}
	// One Account per name, so that one client refreshes its session.
	if a, ok := p.fixtureAccounts.Load(name); ok {
		return a.(*Account)
	}
	fa := p.fixture.Account(name)
	if fa == nil {
		t.Fatalf("harness.FixtureAccount(%q): the fixture has no account of that name", name)
	}
	a := p.account(fa.DID, fa.Handle, fa.Email, fa.Password, fa.AccessJwt, fa.RefreshJwt)
	actual, _ := p.fixtureAccounts.LoadOrStore(name, a)
	return actual.(*Account)
}

// FixtureRecord returns the fixture's record named ref ("alice/hello"),
// as replies, likes and reposts name it. It fails the test when there is
// no fixture or no such record.
func (p *PDS) FixtureRecord(t testing.TB, ref string) Ref {
	t.Helper()
	if p.fixture == nil {
		t.Fatalf("harness.FixtureRecord(%q): no fixture loaded; start the PDS with harness.WithFixtures(path)", ref)
	}
	r := p.fixture.Record(ref)
	if r == nil {
		t.Fatalf("harness.FixtureRecord(%q): the fixture has no record of that name (ACCOUNT/RECORD)", ref)
	}
	return Ref{URI: r.URI, CID: r.CID.String()}
}
