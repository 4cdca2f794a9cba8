package store_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds/store"
)

const crashChildEnv = "FAKEPDS_STORE_CRASH_CHILD_DB"

// With fsync off, a process crash loses nothing that was acknowledged: a
// commit is in the OS page cache once Write returns, and the next open
// recovers it from the WAL. The child commits as fast as it can and reports
// each acknowledged commit; the parent SIGKILLs it mid-stream and then finds
// every acknowledged row.
func TestKillNineLosesNothingAcknowledged(t *testing.T) {
	db := filepath.Join(t.TempDir(), "crash.sqlite")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCrashChild$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+db)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := -1
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, ok := strings.CutPrefix(sc.Text(), "ack "); ok {
			acked, _ = strconv.Atoi(n)
			if acked >= 500 {
				break
			}
		}
	}
	// SIGKILL: no deferred Close, no checkpoint, no chance to flush anything.
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if acked < 500 {
		t.Fatalf("child acknowledged only %d commits before ending", acked)
	}

	reopened := open(t, db, store.Options{})
	var n, maxK int
	if err := reopened.Reader().QueryRow(`SELECT count(*), max(CAST(k AS INTEGER)) FROM kv`).Scan(&n, &maxK); err != nil {
		t.Fatal(err)
	}
	t.Logf("acknowledged %d, found %d rows (max key %d)", acked+1, n, maxK)
	if maxK < acked || n < acked+1 {
		t.Fatalf("lost acknowledged commits: acknowledged 0..%d, found %d rows up to %d", acked, n, maxK)
	}
}

// TestCrashChild commits forever, printing "ack i" after commit i returns,
// until it is killed.
func TestCrashChild(t *testing.T) {
	path := os.Getenv(crashChildEnv)
	if path == "" {
		t.Skip("runs only as the child of TestKillNineLosesNothingAcknowledged")
	}
	db, err := store.Open(t.Context(), path, store.Options{Migrations: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		if err := put(t.Context(), db, strconv.Itoa(i), []byte("v")); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(w, "ack %d\n", i)
		w.Flush()
	}
}
