// Package strace runs a test's child process under strace, for the tests
// that prove at the system-call level what a setting does (the fsync
// toggle of the databases and of blob files).
package strace

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Require is the variable that turns a missing strace from a skip into a
// failure: CI sets it to 1, so there the proofs run.
const Require = "FAKEPDS_REQUIRE_STRACE"

// Child runs the test named child of this test binary (a TestXxx that does
// its work only when env names it) under strace with flags (for example
// "-c" for a summary, "-y" to name each call's file), tracing the
// comma-separated syscalls. It fails t unless the child succeeds and
// prints done, and returns strace's report. Without strace it skips t, or
// fails it when Require is 1.
func Child(t testing.TB, flags []string, syscalls, child string, env []string, done string) []byte {
	t.Helper()
	bin, err := exec.LookPath("strace")
	if err != nil {
		const why = "strace is not installed (apt-get install strace; .ci/run installs it), so the syscall proof cannot run"
		if os.Getenv(Require) == "1" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	out := filepath.Join(t.TempDir(), "strace.txt")
	args := append([]string{"-f"}, flags...)
	args = append(args, "-o", out, "-e", "trace="+syscalls, os.Args[0], "-test.run=^"+child+"$", "-test.v")
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = append(os.Environ(), env...)
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child under strace: %v\n%s", err, log)
	}
	if !bytes.Contains(log, []byte(done)) {
		t.Fatalf("child did not print %q:\n%s", done, log)
	}
	report, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return report
}
