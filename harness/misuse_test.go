package harness_test

import (
	"testing"
	"time"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/pds/faults"
)

// Issue 11.11: a power asked for something it cannot do fails the test,
// saying what is wrong, rather than do nothing.
func TestPowersRefuseMisuse(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	for _, tc := range []struct {
		what string
		fn   func(testing.TB)
		want string
	}{
		{"Fail with a method that is not an NSID", func(tb testing.TB) { p.Fail(tb, "createRecord", 1, 500, "InternalServerError") }, "not an NSID"},
		{"Fail with status 200", func(tb testing.TB) { p.Fail(tb, "com.atproto.repo.createRecord", 1, 200, "Fine") }, "not an error status"},
		{"Fail without an error name", func(tb testing.TB) { p.Fail(tb, "com.atproto.repo.createRecord", 1, 500, "") }, "error name"},
		{"Fail with negative times", func(tb testing.TB) { p.Fail(tb, "*", -1, 500, "InternalServerError") }, "negative times"},
		{"Delay of nothing", func(tb testing.TB) { p.Delay(tb, "*", 1, 0) }, "would do nothing"},
		{"AddFault with an error and no status", func(tb testing.TB) { p.AddFault(tb, faults.Rule{Method: "*", Error: "X"}) }, "without a status"},
		{"Clock.Advance back", func(tb testing.TB) { p.Clock(tb).Advance(-time.Second) }, "only moves forward"},
		{"Emails with a purpose typo", func(tb testing.TB) { p.Emails(tb, "a@example.com", "password_reset") }, `"reset_password"`},
		{"EmailToken with a purpose typo", func(tb testing.TB) { p.EmailToken(tb, "a@example.com", "confirm") }, "not one of"},
	} {
		expectFatal(t, tc.what, tc.fn, tc.want)
	}
	// What is valid still works.
	p.Fail(t, "*", 1, 503, "NotEnoughResources")
	p.Delay(t, "com.atproto.server.describeServer", 1, time.Millisecond)
	p.ClearFaults(t)
	p.Clock(t).Advance(0)
	if got := p.Emails(t, "", harness.PurposeConfirmEmail); len(got) != 0 {
		t.Fatalf("emails %v", got)
	}
}
