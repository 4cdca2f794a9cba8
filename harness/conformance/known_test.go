package conformance

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const knownDoc = "../../docs/known-differences.md"

// docRow is one row of the "Found by the conformance suite" table.
type docRow struct {
	scenarios, backends []string
	verdict             string
}

func readDocTable(t *testing.T) (map[string]docRow, string) {
	t.Helper()
	b, err := os.ReadFile(knownDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "\n## Found by the conformance suite")
	if i < 0 {
		t.Fatalf("%s has no \"## Found by the conformance suite\" section", knownDoc)
	}
	section := doc[i+1:]
	if j := strings.Index(section[3:], "\n## "); j >= 0 {
		section = section[:j+3]
	}
	ticked := regexp.MustCompile("`([^`]+)`")
	rows := map[string]docRow{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		if len(cells) != 5 {
			t.Errorf("%s: row %q: want 5 cells (id, difference, scenarios, backends, verdict)", knownDoc, line)
			continue
		}
		id := strings.Trim(strings.TrimSpace(cells[0]), "`")
		var sc []string
		for _, m := range ticked.FindAllStringSubmatch(cells[2], -1) {
			sc = append(sc, m[1])
		}
		var be []string
		for _, b := range strings.Split(cells[3], ",") {
			be = append(be, strings.TrimSpace(b))
		}
		if _, dup := rows[id]; dup {
			t.Errorf("%s lists %s twice", knownDoc, id)
		}
		rows[id] = docRow{scenarios: sc, backends: be, verdict: strings.TrimSpace(cells[4])}
	}
	return rows, section
}

// docs/known-differences.md mirrors Known.
func TestKnownDifferencesDocumented(t *testing.T) {
	rows, section := readDocTable(t)
	if !strings.Contains(section, "@atproto/pds` "+ReferenceVersion) {
		t.Errorf("%s: the section does not name the reference version %s", knownDoc, ReferenceVersion)
	}
	for _, k := range Known {
		row, ok := rows[k.ID]
		if !ok {
			t.Errorf("%s does not list %s (%s)", knownDoc, k.ID, k.Summary)
			continue
		}
		delete(rows, k.ID)
		if !slices.Equal(row.scenarios, k.Scenarios) {
			t.Errorf("%s: %s is bounded by %q in the doc, %q in Known", knownDoc, k.ID, row.scenarios, k.Scenarios)
		}
		if !slices.Equal(row.backends, k.Backends) {
			t.Errorf("%s: %s shows on %q in the doc, %q in Known", knownDoc, k.ID, row.backends, k.Backends)
		}
		if row.verdict != k.Verdict {
			t.Errorf("%s: %s is %q in the doc, %q in Known", knownDoc, k.ID, row.verdict, k.Verdict)
		}
	}
	for id := range rows {
		t.Errorf("%s lists %s, which Known does not have", knownDoc, id)
	}
}

// Every entry is well formed and names steps its scenarios' goldens have.
func TestKnownEntries(t *testing.T) {
	names := map[string]bool{}
	for _, s := range scenarios {
		names[s.name] = true
	}
	ids := map[string]bool{}
	for _, k := range Known {
		if k.ID == "" || ids[k.ID] {
			t.Errorf("Known: empty or repeated ID %q", k.ID)
		}
		ids[k.ID] = true
		if !slices.Contains([]string{"deliberate", "bug", "reference"}, k.Verdict) {
			t.Errorf("%s: verdict %q", k.ID, k.Verdict)
		}
		if k.Reference == "" || k.Summary == "" || len(k.At) == 0 || len(k.Scenarios) == 0 || len(k.Backends) == 0 {
			t.Errorf("%s: Reference, Summary, At, Scenarios and Backends are all required", k.ID)
		}
		for _, b := range k.Backends {
			if !slices.Contains(Backends, b) || b == "reference" {
				t.Errorf("%s: backend %q (the reference is what the others are compared with)", k.ID, b)
			}
		}
		steps := map[string]bool{}
		for _, sc := range k.Scenarios {
			if !names[sc] {
				t.Errorf("%s: no scenario %q", k.ID, sc)
				continue
			}
			b, err := os.ReadFile(goldenPath(sc))
			if err != nil {
				t.Errorf("%s: %v", k.ID, err)
				continue
			}
			var g Transcript
			if err := json.Unmarshal(b, &g); err != nil {
				t.Errorf("%s: %v", goldenPath(sc), err)
				continue
			}
			for _, s := range g.Steps {
				steps[s.Name] = true
			}
		}
		for _, at := range k.At {
			step, _, _ := strings.Cut(at, " > ")
			if step != "*" && !steps[step] {
				t.Errorf("%s: At %q: no step %q in the goldens of %q", k.ID, at, step, k.Scenarios)
			}
		}
	}
}
