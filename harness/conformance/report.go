package conformance

import (
	"fmt"
	"io"
	"strings"
	"sync"
)

// Backends are the backends a conformance run knows, in report order.
var Backends = []string{"inprocess", "reference", "docker"}

// Outcome is how a scenario went on a backend.
type Outcome struct {
	Status string // pass, known, fail, skip, pending, recorded
	Detail string // the number of differences, or why it skipped
}

func (o Outcome) cell() string {
	if o.Status == "" {
		return "not run"
	}
	if o.Detail == "" || o.Status == "skip" { // skip reasons are listed below the table
		return o.Status
	}
	return o.Status + " (" + o.Detail + ")"
}

// Report collects the outcomes of a run.
type Report struct {
	mu        sync.Mutex
	scenarios []string
	outcomes  map[string]map[string]Outcome // backend -> scenario -> outcome
	versions  map[string]string             // backend -> version it reported
}

// NewReport is an empty report over these scenarios.
func NewReport(scenarios []string) *Report {
	return &Report{scenarios: scenarios, outcomes: map[string]map[string]Outcome{}, versions: map[string]string{}}
}

// Set records an outcome.
func (r *Report) Set(backend, scenario string, o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outcomes[backend] == nil {
		r.outcomes[backend] = map[string]Outcome{}
	}
	r.outcomes[backend][scenario] = o
}

// SetVersion records the version a backend's /xrpc/_health reported.
func (r *Report) SetVersion(backend, version string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.versions[backend] = version
}

// Empty reports whether nothing ran.
func (r *Report) Empty() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.outcomes) == 0
}

// Markdown writes the scenarios x backends table, with the version of
// each backend that ran, and a line per status count.
func (r *Report) Markdown(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "Goldens recorded from npm @atproto/pds %s.\n\n", ReferenceVersion)
	head := []string{"scenario"}
	sep := []string{"---"}
	for _, b := range Backends {
		h := b
		if v := r.versions[b]; v != "" {
			h += " " + v
		}
		head = append(head, h)
		sep = append(sep, "---")
	}
	fmt.Fprintf(w, "| %s |\n| %s |\n", strings.Join(head, " | "), strings.Join(sep, " | "))
	counts := map[string]map[string]int{}
	reasons := map[string][]string{}
	for _, s := range r.scenarios {
		row := []string{"`" + s + "`"}
		for _, b := range Backends {
			o := r.outcomes[b][s]
			row = append(row, o.cell())
			if counts[b] == nil {
				counts[b] = map[string]int{}
			}
			if o.Status != "" {
				counts[b][o.Status]++
			}
			if o.Status == "skip" && o.Detail != "" && !contains(reasons[b], o.Detail) {
				reasons[b] = append(reasons[b], o.Detail)
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	fmt.Fprintln(w)
	for _, b := range Backends {
		if len(counts[b]) == 0 {
			fmt.Fprintf(w, "- %s: not run\n", b)
			continue
		}
		var parts []string
		for _, st := range []string{"pass", "known", "recorded", "fail", "skip", "pending"} {
			if n := counts[b][st]; n > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", n, st))
			}
		}
		line := strings.Join(parts, ", ")
		if len(reasons[b]) > 0 {
			line += "; skipped: " + strings.Join(reasons[b], "; ")
		}
		fmt.Fprintf(w, "- %s: %s\n", b, line)
	}
}
