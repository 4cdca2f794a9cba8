package store_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/store"
)

// queryOnly is PRAGMA query_only of the connection Query ran on: 0 on the
// writer, 1 on a reader.
func queryOnly(t *testing.T, db *store.DB) int {
	t.Helper()
	var v int
	if err := db.Query(func(q store.Querier) error {
		return q.QueryRowContext(t.Context(), `SELECT query_only FROM pragma_query_only`).Scan(&v)
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestQueryUsesIdleWriter: a Query runs on the writer connection while no
// write holds it, and on a reader, without waiting, while one does; it sees
// what was committed either way.
func TestQueryUsesIdleWriter(t *testing.T) {
	ctx := t.Context()
	db := open(t, filepath.Join(t.TempDir(), "q.sqlite"), store.Options{})
	if err := put(ctx, db, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if got := queryOnly(t, db); got != 0 {
		t.Errorf("idle: Query ran on a reader (query_only %d), want the writer", got)
	}

	inWrite, release := make(chan struct{}), make(chan struct{})
	wrote := make(chan error, 1)
	go func() {
		wrote <- db.Write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO kv (k, v) VALUES ('b', x'02')`); err != nil {
				return err
			}
			close(inWrite)
			<-release
			return nil
		})
	}()
	<-inWrite
	done := make(chan int, 1)
	var seen int
	go func() {
		v := queryOnly(t, db)
		_ = db.Query(func(q store.Querier) error {
			return q.QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&seen)
		})
		done <- v
	}()
	var v int
	select {
	case v = <-done:
	case <-time.After(10 * time.Second):
		t.Error("Query waited for the write to end")
		close(release)
		v = <-done
		release = nil
	}
	if v != 1 {
		t.Errorf("during a write: Query ran on the writer (query_only %d), want a reader", v)
	}
	if seen != 1 {
		t.Errorf("during a write: Query saw %d rows, want the 1 committed", seen)
	}
	if release != nil {
		close(release)
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
}
