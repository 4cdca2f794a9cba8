package store_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/internal/strace"
	"github.com/fakepds/fakepds/pds/env"
	"github.com/fakepds/fakepds/pds/store"
)

// childEnv marks the re-executed test binary as the child that commits.
const childEnv = "FAKEPDS_STORE_FSYNC_CHILD_DIR"

const childCommits = 200

// TestFsyncSyscalls proves the HARNESS_PDS_FSYNC toggle where it matters, at
// the system call level: N commits through the store in a child process
// under strace make no fsync or fdatasync with the toggle off, and at least
// N with it on.
func TestFsyncSyscalls(t *testing.T) {
	for _, tc := range []struct {
		value   string
		atLeast int
		atMost  int
	}{
		{value: "", atLeast: 0, atMost: 0},
		{value: "0", atLeast: 0, atMost: 0},
		{value: "1", atLeast: childCommits, atMost: -1},
	} {
		t.Run("HARNESS_PDS_FSYNC="+tc.value, func(t *testing.T) {
			report := strace.Child(t, []string{"-c"}, "fsync,fdatasync", "TestFsyncChild",
				[]string{childEnv + "=" + t.TempDir(), env.Fsync + "=" + tc.value}, fmt.Sprintf("committed %d", childCommits))
			n, err := syncCalls(report)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d commits, %d fsync+fdatasync calls", childCommits, n)
			if n < tc.atLeast || (tc.atMost >= 0 && n > tc.atMost) {
				t.Fatalf("fsync+fdatasync calls = %d, want in [%d, %d]\n%s", n, tc.atLeast, tc.atMost, report)
			}
		})
	}
}

// syncCalls sums the calls column of fsync and fdatasync in a strace -c
// report. strace writes no table at all when nothing matched.
func syncCalls(report []byte) (int, error) {
	total := 0
	sc := bufio.NewScanner(bytes.NewReader(report))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		name := f[len(f)-1]
		if name != "fsync" && name != "fdatasync" {
			continue
		}
		// Columns: % time, seconds, usecs/call, calls, [errors], syscall.
		n, err := strconv.Atoi(f[3])
		if err != nil {
			return 0, fmt.Errorf("parse strace line %q: %w", sc.Text(), err)
		}
		total += n
	}
	return total, sc.Err()
}

// TestFsyncChild is the child of TestFsyncSyscalls: it reads the toggle from
// the environment the way fakepds does and commits through the store.
func TestFsyncChild(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestFsyncSyscalls")
	}
	vars, err := env.Read()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(t.Context(), filepath.Join(dir, "child.sqlite"), store.Options{
		Fsync: vars.Fsync, Migrations: testSchema,
	})
	if err != nil {
		t.Fatal(err)
	}
	if db.Settings().Fsync() != vars.Fsync {
		t.Fatalf("settings %+v do not match fsync=%v", db.Settings(), vars.Fsync)
	}
	for i := range childCommits {
		if err := put(t.Context(), db, strconv.Itoa(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	// Reads and the closing checkpoint must not sync either.
	var n int
	if err := db.Reader().QueryRow(`SELECT count(*) FROM kv`).Scan(&n); err != nil || n != childCommits {
		t.Fatalf("count = %d, %v", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("committed %d\n", childCommits)
}
