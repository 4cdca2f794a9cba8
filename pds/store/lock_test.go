package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds/store"
)

const lockChildEnv = "FAKEPDS_STORE_LOCK_CHILD_DB"

// A database open here is locked against other processes (the unix-excl
// VFS), and its WAL index is in this process's memory, not a -shm file;
// once closed, another process opens it and finds what was written.
func TestLockedAgainstOtherProcesses(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SQLite's default VFS there")
	}
	path := filepath.Join(t.TempDir(), "held.sqlite")
	db := open(t, path, store.Options{})
	if err := put(t.Context(), db, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path + "-shm"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("-shm beside an open database: %v; want none", err)
	}
	// A reader of this process sees the write through the shared index.
	var n int
	if err := db.Reader().QueryRow(`SELECT count(*) FROM kv`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("a reader here: %d rows, %v", n, err)
	}
	if got := lockChild(t, path, "sqlite3"); !strings.Contains(got, "database is locked") {
		t.Fatalf("another process while it is open: %q, want database is locked", got)
	}
	// A second server on the same data dir: its Open waits out the busy
	// timeout, then says why.
	if got := lockChild(t, path, "store"); !strings.Contains(got, "another process has it open") {
		t.Fatalf("store.Open in another process while it is open: %q", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := lockChild(t, path, "sqlite3"); got != "rows 1" {
		t.Fatalf("another process after the close: %q, want rows 1", got)
	}
}

// TestStaleSHMGoes: a database left by SQLite's default VFS (as a server
// from before unix-excl, or a sqlite3 shell, leaves it: its -wal holding a
// commit not yet checkpointed, and its -shm) opens with that commit, and
// its -shm is removed, which unix-excl would never read.
func TestStaleSHMGoes(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("SQLite's default VFS there")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "old.sqlite")
	old, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	old.SetMaxOpenConns(1)
	for _, q := range append(slices.Clone(testSchema), `PRAGMA user_version = 1`, `INSERT INTO kv (k, v) VALUES ('k', 'in the wal')`) {
		if _, err := old.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// A copy of the files while the old connection has them open: what
	// a process that ended without closing leaves.
	left := filepath.Join(dir, "left.sqlite")
	for _, ext := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(path + ext)
		if err != nil {
			t.Fatalf("the default VFS left no %s file: %v", ext, err)
		}
		if err := os.WriteFile(left+ext, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()

	db := open(t, left, store.Options{})
	if _, err := os.Lstat(left + "-shm"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the stale -shm is still there after Open: %v", err)
	}
	var v string
	if err := db.Reader().QueryRow(`SELECT v FROM kv WHERE k = 'k'`).Scan(&v); err != nil || v != "in the wal" {
		t.Fatalf("the commit in the left -wal: %q, %v", v, err)
	}
}

// lockChild runs TestLockChild on path, opening it as how says, and
// returns what it printed.
func lockChild(t *testing.T, path, how string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLockChild$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+how+":"+path)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		if s, ok := strings.CutPrefix(line, "child: "); ok {
			return strings.TrimSpace(s)
		}
	}
	t.Fatalf("child printed no answer:\n%s", out)
	return ""
}

// TestLockChild reads the database another process may hold, as a
// sqlite3 shell would (SQLite's default VFS, no wait for a lock) or as a
// server would (store.Open), and prints the row count or the error.
func TestLockChild(t *testing.T) {
	how, path, _ := strings.Cut(os.Getenv(lockChildEnv), ":")
	if path == "" {
		t.Skip("runs only as the child of TestLockedAgainstOtherProcesses")
	}
	if how == "store" {
		db, err := store.Open(t.Context(), path, store.Options{Migrations: testSchema})
		if err == nil {
			db.Close()
			err = errors.New("opened")
		}
		fmt.Printf("child: %v\n", err)
		return
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM kv`).Scan(&n); err != nil {
		fmt.Printf("child: %v\n", err)
		return
	}
	fmt.Printf("child: rows %d\n", n)
}
