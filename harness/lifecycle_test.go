package harness_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fakepds/fakepds/harness"
	"github.com/fakepds/fakepds/pds/env"
)

// Issue 11.10: after Close every helper says the PDS is closed, instead
// of "connection refused" or "database is closed"; the shared PDS cannot
// be closed by a test.
func TestHelpersAfterClose(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	a := p.NewAccount(t)
	post := a.Post(t, "before the close")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for what, fn := range map[string]func(testing.TB){
		"NewAccount":   func(tb testing.TB) { p.NewAccount(tb) },
		"Seq":          func(tb testing.TB) { p.Seq(tb) },
		"Post":         func(tb testing.TB) { a.Post(tb, "after") },
		"GetRecord":    func(tb testing.TB) { p.GetRecord(tb, post.URI) },
		"Firehose":     func(tb testing.TB) { p.Firehose(tb) },
		"Clock.Now":    func(tb testing.TB) { p.Clock(tb).Now() },
		"DeleteRecord": func(tb testing.TB) { a.DeleteRecord(tb, post.URI) },
	} {
		expectFatal(t, what+" after Close", fn, "is closed")
	}

	shared := harness.Shared(t)
	if err := shared.Close(); err == nil || !strings.Contains(err.Error(), "Main closes it") {
		t.Fatalf("Close of the shared PDS = %v", err)
	}
	shared.NewAccount(t) // still serving
}

// Issue 11.13: Restart keeps every account, record and event, on the same
// URLs, as miniredis's Restart does; clients carry on.
func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	p := harness.New(t)
	a := p.NewAccount(t)
	post := a.Post(t, "survives a restart")
	seq := p.Seq(t)
	p.Clock(t).Advance(time.Hour)
	url, plcURL := p.URL(), p.PLCURL()
	old := p.Server()

	p.Restart(t)
	if p.Server() == old || p.URL() != url || p.PLCURL() != plcURL {
		t.Fatalf("after Restart: server %p (was %p), %s %s (were %s %s)", p.Server(), old, p.URL(), p.PLCURL(), url, plcURL)
	}
	p.RequireRecord(t, post.URI)
	if got := p.Seq(t); got != seq {
		t.Fatalf("seq %d after Restart, %d before", got, seq)
	}
	if d := time.Until(p.Clock(t).Now()); d < 59*time.Minute {
		t.Fatalf("the clock lost its offset: %s ahead", d)
	}
	a.Post(t, "after the restart") // the old session still works
	ident, err := p.Directory().LookupHandle(t.Context(), a.Handle)
	if err != nil || ident.DID != a.DID {
		t.Fatalf("LookupHandle after Restart: %v, %v", ident, err)
	}
	expectFatal(t, "Restart of the shared PDS", func(tb testing.TB) { harness.Shared(t).Restart(tb) }, "shared")
}

// Issue 11.8 and 11.9: a backend that cannot run, or a HARNESS_PDS_URL
// where no PDS answers, stops Main before any test (exit 2, saying why and
// what to do), instead of a green run that ran nothing.
func TestMainFailsLoudly(t *testing.T) {
	if os.Getenv(childVar) != "" {
		t.Skip("in the child")
	}
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		want []string
	}{
		{"docker unavailable", []string{env.Backend + "=docker", childVar + "=unavailable"}, []string{"no engine in this child", "harness.SkipUnavailable()", "no test ran"}},
		{"backend not linked", []string{env.Backend + "=reference"}, []string{`import _ "github.com/fakepds/fakepds/harness/backend/reference"`}},
		{"URL without a scheme", []string{env.URL + "=127.0.0.1:2583"}, []string{env.URL, "http://"}},
		{"URL where nothing answers", []string{env.URL + "=http://127.0.0.1:1"}, []string{env.URL, "no PDS answers there"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestSharedAccount$", "-test.count=1")
			cmd.Env = append(append(os.Environ(), childVar+"=1"), tc.env...) // the last value of a variable wins
			out, err := cmd.CombinedOutput()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != 2 {
				t.Fatalf("exit %v, want 2; output:\n%s", err, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "PASS") || strings.Contains(string(out), "SKIP") {
				t.Errorf("tests ran:\n%s", out)
			}
		})
	}
}

// childVar marks a child test binary of TestMainFailsLoudly; "unavailable"
// registers a docker backend that has no engine.
const childVar = "FAKEPDS_HARNESS_TEST_CHILD"

func init() {
	if strings.Contains(os.Getenv(childVar), "unavailable") {
		harness.RegisterBackend("docker", func(env.Vars, *slog.Logger) (*harness.PDS, error) {
			return nil, fmt.Errorf("%w: no engine in this child", harness.ErrBackendUnavailable)
		})
	}
}

// Outside a test, NewStandalone's cleanups close what the helpers
// started, last first, and its context ends; a Fatal exits 1 after them.
func TestStandalone(t *testing.T) {
	if os.Getenv(childVar) == "standalone" {
		s := harness.NewStandalone(os.Stdout)
		s.Cleanup(func() { fmt.Println("cleaned up") })
		s.Fatalf("the message %d", 42)
		fmt.Println("not reached")
		return
	}
	t.Parallel()
	s := harness.NewStandalone(io.Discard)
	var order []int
	s.Cleanup(func() { order = append(order, 1) })
	s.Cleanup(func() { order = append(order, 2) })
	p := harness.New(s)
	s.Errorf("an error")
	if !s.Failed() {
		t.Fatal("Errorf did not mark it failed")
	}
	s.Close()
	if fmt.Sprint(order) != "[2 1]" || s.Context().Err() == nil {
		t.Fatalf("cleanups %v, context %v", order, s.Context().Err())
	}
	expectFatal(t, "NewAccount on the PDS New made for a closed Standalone", func(tb testing.TB) { p.NewAccount(tb) }, "is closed")
	s.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestStandalone$", "-test.count=1")
	cmd.Env = append(os.Environ(), childVar+"=standalone")
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "the message 42\ncleaned up\n") || strings.Contains(string(out), "not reached") {
		t.Fatalf("Fatalf in a child: %v\n%s", err, out)
	}
}
