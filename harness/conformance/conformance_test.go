package conformance

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atcrypto"

	"github.com/fakepds/fakepds/harness"
	_ "github.com/fakepds/fakepds/harness/backend/docker"    // -backends=docker
	_ "github.com/fakepds/fakepds/harness/backend/reference" // -backends=reference
	"github.com/fakepds/fakepds/pds"
	"github.com/fakepds/fakepds/pds/env"
)

var (
	update     = flag.Bool("update", false, "rewrite the goldens in testdata/ from the reference backend (HARNESS_PDS_BACKEND=reference)")
	backendsF  = flag.String("backends", "", "comma-separated backends to run: inprocess, reference, docker, or all (default: inprocess and HARNESS_PDS_BACKEND)")
	reportFile = flag.String("report", "", "write the scenarios x backends report to this markdown file")
)

var report *Report

func TestMain(m *testing.M) {
	flag.Parse()
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	report = NewReport(names)
	code := m.Run()
	if !report.Empty() {
		var buf bytes.Buffer
		report.Markdown(&buf)
		fmt.Printf("\nconformance report\n\n%s", buf.String())
		if *reportFile != "" {
			doc := "# Conformance report\n\nThe last `make conformance` run: every scenario of `harness/conformance` on every backend\n" +
				"(`pass`: the transcript equals the golden; `known`: it differs only as docs/known-differences.md says;\n" +
				"`skip`/`not run`: the backend was not available or not asked for).\n\n" + buf.String()
			if err := os.WriteFile(*reportFile, []byte(doc), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "conformance: writing the report:", err)
				code = 1
			}
		}
	}
	os.Exit(code)
}

// selected is the backends this run covers, in report order.
func selected(t *testing.T) []string {
	vars, err := env.Read()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"inprocess": true, vars.Backend: true}
	if *backendsF != "" {
		want = map[string]bool{}
		for _, b := range strings.Split(*backendsF, ",") {
			b = strings.TrimSpace(b)
			if b == "all" {
				for _, x := range Backends {
					want[x] = true
				}
				continue
			}
			if !slices.Contains(Backends, b) {
				t.Fatalf("-backends: unknown backend %q (accepted: %s, all)", b, strings.Join(Backends, ", "))
			}
			want[b] = true
		}
	}
	var out []string
	for _, b := range Backends {
		if want[b] {
			out = append(out, b)
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	backends := selected(t)
	if *update && !slices.Contains(backends, "reference") {
		t.Fatalf("-update records the goldens from the npm reference: run with %s=reference (after scripts/reference-pds/install.sh)", env.Backend)
	}
	if *update {
		// Record first, then check the other backends against what was
		// recorded.
		slices.SortStableFunc(backends, func(a, b string) int {
			if a == "reference" {
				return -1
			}
			if b == "reference" {
				return 1
			}
			return 0
		})
	}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			if !*update {
				t.Parallel()
			}
			p := startBackend(t, b)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					runScenario(t, b, p, sc)
				})
			}
		})
	}
}

// startBackend starts b, and records a skip of every scenario when it
// cannot run here.
func startBackend(t *testing.T, b string) *harness.PDS {
	t.Helper()
	tb := &skipRecorder{T: t}
	t.Cleanup(func() {
		if t.Skipped() {
			for _, sc := range scenarios {
				report.Set(b, sc.name, Outcome{Status: "skip", Detail: tb.reason})
			}
		}
	})
	// The report records a backend that cannot run here as skipped.
	opts := []harness.Option{harness.SkipUnavailable()}
	if b == "inprocess" {
		opts = append(opts, harness.WithConfig(devEnvConfig(t)))
	}
	p := harness.NewBackend(tb, b, opts...)
	var health struct {
		Version string `json:"version"`
	}
	if err := atclient.NewAPIClient(p.URL()).Get(t.Context(), "_health", nil, &health); err == nil {
		report.SetVersion(b, health.Version)
	}
	return p
}

// devEnvConfig configures fakepds as @atproto/dev-env configures the
// reference (TestPds), so that transcripts differ by behaviour, not by
// settings: a second handle domain, the links describeServer shows, a
// recovery key in every account's rotation keys.
func devEnvConfig(t *testing.T) func(*pds.Config) {
	key, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return func(c *pds.Config) {
		c.HandleDomains = []string{".test", ".example"}
		c.PrivacyPolicyURL = "https://bsky.social/about/support/privacy-policy"
		c.TermsOfServiceURL = "https://bsky.social/about/support/tos"
		c.RecoveryDIDKey = pub.DIDKey()
	}
}

// skipRecorder keeps the reason a backend skipped, for the report.
type skipRecorder struct {
	*testing.T
	reason string
}

func (s *skipRecorder) Skipf(format string, args ...any) {
	s.reason = fmt.Sprintf(format, args...)
	if i := strings.Index(s.reason, ": "); i >= 0 && strings.HasPrefix(s.reason, "harness.") {
		s.reason = s.reason[i+2:]
	}
	s.T.Skipf(format, args...)
}

// scenario is one behaviour, written once for every backend.
type scenario struct {
	name string
	// pending, when set, says why the scenario does not run yet.
	pending string
	run     func(r *run)
}

func goldenPath(name string) string { return filepath.Join("testdata", name+".json") }

func runScenario(t *testing.T, backend string, p *harness.PDS, sc scenario) {
	if sc.pending != "" {
		report.Set(backend, sc.name, Outcome{Status: "pending", Detail: sc.pending})
		t.Skipf("pending: %s", sc.pending)
	}
	outcome := Outcome{Status: "fail", Detail: "did not finish"}
	defer func() { report.Set(backend, sc.name, outcome) }()

	r := newRun(t, backend, p)
	sc.run(r)
	got := r.transcript(sc.name)

	if *update && backend == "reference" {
		got.Reference = ReferenceVersion
		b, err := got.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenPath(sc.name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		outcome = Outcome{Status: "recorded"}
		return
	}
	b, err := os.ReadFile(goldenPath(sc.name))
	if err != nil {
		t.Fatalf("no golden transcript for %s: record it with %s=reference go test ./harness/conformance -run 'TestConformance/reference/%s$' -update (%v)", sc.name, env.Backend, sc.name, err)
	}
	var golden Transcript
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatalf("%s: %v", goldenPath(sc.name), err)
	}

	diffs := Compare(&golden, got)
	used := map[string]bool{}
	var unexplained []Diff
	for _, d := range diffs {
		explained := false
		for _, k := range Known {
			if k.Covers(backend, sc.name, d) {
				used[k.ID] = true
				explained = true
			}
		}
		if !explained {
			unexplained = append(unexplained, d)
		}
	}
	for _, k := range Known {
		if contains(k.Scenarios, sc.name) && contains(k.Backends, backend) && !used[k.ID] {
			t.Errorf("known difference %s (%s) no longer seen on %s: remove it from Known and docs/known-differences.md", k.ID, k.Summary, backend)
		}
	}
	if len(unexplained) > 0 {
		var lines []string
		for _, d := range unexplained {
			lines = append(lines, "  "+d.String())
		}
		t.Errorf("%d difference(s) from the reference's golden transcript %s not listed in Known:\n%s\n%s",
			len(unexplained), goldenPath(sc.name), strings.Join(lines, "\n"), saveGot(t, backend, got))
		outcome = Outcome{Status: "fail", Detail: fmt.Sprintf("%d unexplained", len(unexplained))}
		return
	}
	if t.Failed() {
		outcome = Outcome{Status: "fail", Detail: "stale known difference"}
		return
	}
	if len(used) > 0 {
		verdicts := map[string]int{}
		for _, k := range Known {
			if used[k.ID] {
				verdicts[k.Verdict]++
			}
		}
		var parts []string
		for _, v := range []string{"deliberate", "bug", "reference"} {
			if verdicts[v] > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", verdicts[v], v))
			}
		}
		outcome = Outcome{Status: "known", Detail: strings.Join(parts, ", ")}
		return
	}
	outcome = Outcome{Status: "pass"}
}

// saveGot writes a failing run's transcript where a human can diff it
// against the golden.
func saveGot(t *testing.T, backend string, got *Transcript) string {
	dir := filepath.Join(os.TempDir(), "fakepds-conformance", backend)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	b, err := got.Marshal()
	if err != nil {
		return ""
	}
	path := filepath.Join(dir, got.Scenario+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return ""
	}
	return fmt.Sprintf("this run's transcript: %s (diff -u %s %s)", path, goldenPath(got.Scenario), path)
}
