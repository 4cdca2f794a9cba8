// Package stacks counts goroutines by their stacks, for tests that must
// know a server goroutine is where they put it (blocked reading a body,
// waiting for a store, writing to a stalled socket, gone after a hang-up)
// without sleeping and hoping.
package stacks

import (
	"bytes"
	"runtime/pprof"
	"strings"
)

// Count is the number of goroutines whose state begins with state (as the
// goroutine profile prints it: "select", "IO wait"; "" for any) and whose
// stack holds every one of frames (function names as a trace prints them).
func Count(state string, frames ...string) int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	n := 0
next:
	for g := range strings.SplitSeq(buf.String(), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, "["+state) {
			continue
		}
		for _, f := range frames {
			if !strings.Contains(g, f) {
				continue next
			}
		}
		n++
	}
	return n
}
