// Package stats keeps per-method server-side latency statistics: a count,
// a mean and percentiles over the most recent calls, in bounded memory.
package stats

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// window is how many recent durations a method keeps for percentiles.
const window = 4096

// MaxMethods bounds how many methods are kept apart: any well-formed NSID
// reaches the mux (an unknown one is answered, or proxied), so without a
// bound a client calling ever new names would grow the map for as long as
// the server runs. Past it, new names are counted together under Other.
const MaxMethods = 1024

// Other is the name the calls of methods past MaxMethods are counted under.
const Other = "(other)"

// Stats records calls per method. Safe for concurrent use.
type Stats struct {
	mu      sync.Mutex
	methods map[string]*method
}

type method struct {
	count  int64
	errors int64
	total  time.Duration
	recent []time.Duration // ring of the last window durations
	next   int
}

// Record adds one call of name that took d; failed calls (status >= 400)
// are counted apart too.
func (s *Stats) Record(name string, status int, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.methods == nil {
		s.methods = map[string]*method{}
	}
	m := s.methods[name]
	if m == nil && len(s.methods) >= MaxMethods {
		name = Other
		m = s.methods[name]
	}
	if m == nil {
		m = &method{}
		s.methods[name] = m
	}
	m.count++
	m.total += d
	if status >= 400 {
		m.errors++
	}
	if len(m.recent) < window {
		m.recent = append(m.recent, d)
	} else {
		m.recent[m.next] = d
		m.next = (m.next + 1) % window
	}
}

// Method is the summary of one method.
type Method struct {
	Name   string        `json:"method"`
	Count  int64         `json:"count"`
	Errors int64         `json:"errors"`
	Mean   time.Duration `json:"meanNs"`
	P50    time.Duration `json:"p50Ns"`
	P95    time.Duration `json:"p95Ns"`
}

// Snapshot summarizes every method, busiest first.
func (s *Stats) Snapshot() []Method {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Method, 0, len(s.methods))
	for name, m := range s.methods {
		r := slices.Clone(m.recent)
		slices.Sort(r)
		out = append(out, Method{
			Name: name, Count: m.count, Errors: m.errors,
			Mean: m.total / time.Duration(m.count),
			P50:  r[len(r)/2], P95: r[len(r)*95/100],
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Reset forgets everything recorded.
func (s *Stats) Reset() {
	s.mu.Lock()
	s.methods = nil
	s.mu.Unlock()
}
