// Package faults injects failures a real PDS cannot be asked for: fail the
// next N calls of a method with a given status and error, or slow them
// down. Tests use it to exercise retries and error paths of code under test.
package faults

import (
	"sync"
	"time"
)

// Rule is what happens to calls of one method.
type Rule struct {
	// Method is the NSID the rule applies to; "*" matches every method.
	Method string `json:"method"`
	// Times is how many calls the rule affects; 0 means every call until
	// the rule is cleared.
	Times int `json:"times,omitempty"`
	// Status and Error make the call fail with that HTTP status and XRPC
	// error name (and Message); Status 0 lets the call through.
	Status  int    `json:"status,omitempty"`
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
	// Delay is added before the call is handled (or fails).
	Delay time.Duration `json:"delayNs,omitempty"`
}

// Faults holds the active rules. Safe for concurrent use; the zero value
// has none.
type Faults struct {
	mu    sync.Mutex
	rules []*Rule
}

// Add installs a rule. Rules apply in the order added; the first that
// matches a call decides it.
func (f *Faults) Add(r Rule) {
	f.mu.Lock()
	f.rules = append(f.rules, &r)
	f.mu.Unlock()
}

// Clear removes every rule.
func (f *Faults) Clear() {
	f.mu.Lock()
	f.rules = nil
	f.mu.Unlock()
}

// Take returns the rule that applies to a call of method, using one of its
// times, or false when none does.
func (f *Faults) Take(method string) (Rule, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, r := range f.rules {
		if r.Method != method && r.Method != "*" {
			continue
		}
		got := *r
		if r.Times > 0 {
			r.Times--
			if r.Times == 0 {
				f.rules = append(f.rules[:i], f.rules[i+1:]...)
			}
		}
		return got, true
	}
	return Rule{}, false
}

// Rules lists the active rules.
func (f *Faults) Rules() []Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Rule, len(f.rules))
	for i, r := range f.rules {
		out[i] = *r
	}
	return out
}
