package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/internal/fsname"
	"github.com/fakepds/fakepds/pds/store"
)

// BenchmarkStorage compares where a database can live, for the question
// of an in-memory option (docs/perf.md, "In memory"): files in the temp
// dir (what a run without a data dir gets), files on /dev/shm (tmpfs, when
// the machine has it), and SQLite's memdb VFS, which keeps the database in
// the process's memory but has no WAL (journal_mode is memory, so readers
// and the writer exclude each other). commit is one write transaction of 4
// inserts (BenchmarkCommit's); create is a new database to its first
// write and closed (an account's actor store, without the spare).
func BenchmarkStorage(b *testing.B) {
	type backend struct {
		name string
		open func(b *testing.B, i int) (exec func(ctx context.Context, fn func(tx *sql.Tx) error) error, close func())
	}
	files := func(dir string) func(b *testing.B, i int) (func(context.Context, func(*sql.Tx) error) error, func()) {
		return func(b *testing.B, i int) (func(context.Context, func(*sql.Tx) error) error, func()) {
			db, err := store.Open(b.Context(), filepath.Join(dir, strconv.Itoa(i)+".sqlite"), store.Options{Migrations: testSchema})
			if err != nil {
				b.Fatal(err)
			}
			return db.Write, func() { db.Close() }
		}
	}
	memdb := func(b *testing.B, i int) (func(context.Context, func(*sql.Tx) error) error, func()) {
		db, err := sql.Open("sqlite", fmt.Sprintf("file:/bench-%d.sqlite?vfs=memdb&_pragma=synchronous(off)", i))
		if err != nil {
			b.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		for _, q := range testSchema {
			if _, err := db.ExecContext(b.Context(), q); err != nil {
				b.Fatal(err)
			}
		}
		write := func(ctx context.Context, fn func(tx *sql.Tx) error) error {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			if err := fn(tx); err != nil {
				tx.Rollback()
				return err
			}
			return tx.Commit()
		}
		return write, func() { db.Close() }
	}
	tmp := b.TempDir()
	backends := []backend{{"files-tmpdir", files(tmp)}}
	if strings.HasPrefix(fsname.Of("/dev/shm"), "tmpfs") {
		shm, err := os.MkdirTemp("/dev/shm", "bench-")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(shm) })
		backends = append(backends, backend{"files-shm", files(shm)})
	}
	backends = append(backends, backend{"memdb", memdb})
	b.Logf("temp dir %s on %s", tmp, fsname.Of(tmp))
	val := make([]byte, 200)
	put := func(ctx context.Context, i int) func(tx *sql.Tx) error {
		return func(tx *sql.Tx) error {
			for j := range 4 {
				if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)`, strconv.Itoa(i*4+j), val); err != nil {
					return err
				}
			}
			return nil
		}
	}
	n := 0
	for _, be := range backends {
		b.Run(be.name+"/commit", func(b *testing.B) {
			n++
			write, closeDB := be.open(b, n)
			defer closeDB()
			ctx := b.Context()
			i := 0
			for b.Loop() {
				if err := write(ctx, put(ctx, i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(be.name+"/create", func(b *testing.B) {
			ctx := b.Context()
			for b.Loop() {
				n++
				write, closeDB := be.open(b, n)
				if err := write(ctx, put(ctx, 0)); err != nil {
					b.Fatal(err)
				}
				closeDB()
			}
		})
	}
}
