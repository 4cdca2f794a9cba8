package harness_test

import (
	"fmt"
	"strings"
	"testing"
)

// recorder stands in for the testing.TB of a helper whose failure (or
// skip) a test expects: it records the first Fatal or Skip instead of
// obeying it, and stops the helper with a panic that expect recovers.
type recorder struct {
	testing.TB
	failed, skipped bool
	msg             string
}

type stopped struct{}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	panic(stopped{})
}
func (r *recorder) Fatal(args ...any) {
	r.failed, r.msg = true, fmt.Sprint(args...)
	panic(stopped{})
}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped, r.msg = true, fmt.Sprintf(format, args...)
	panic(stopped{})
}
func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, fmt.Sprint(args...)
	panic(stopped{})
}

// expectFatal runs fn with a recorder and fails t unless fn failed it with
// a message holding every one of want.
func expectFatal(t *testing.T, what string, fn func(tb testing.TB), want ...string) string {
	t.Helper()
	r := &recorder{TB: t}
	func() {
		defer func() {
			if v := recover(); v != nil {
				if _, ok := v.(stopped); !ok {
					panic(v)
				}
			}
		}()
		fn(r)
	}()
	if !r.failed {
		t.Errorf("%s: did not fail the test (skipped %v: %s)", what, r.skipped, r.msg)
		return r.msg
	}
	for _, w := range want {
		if !strings.Contains(r.msg, w) {
			t.Errorf("%s: failed with %q, want it to say %q", what, r.msg, w)
		}
	}
	return r.msg
}
