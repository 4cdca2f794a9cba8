package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
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

// TestQueryPreparesOnce: a query Query runs on the writer is prepared the
// first time and reused after, and each run still sees the latest commit;
// PrepareQueries prepares ahead; the statements kept are bounded, the
// least recently used dropped.
func TestQueryPreparesOnce(t *testing.T) {
	ctx := t.Context()
	db := open(t, filepath.Join(t.TempDir(), "q.sqlite"), store.Options{})
	const count = `SELECT count(*) FROM kv`
	n := func(query string) int {
		t.Helper()
		var n int
		if err := db.Query(func(q store.Querier) error { return q.QueryRowContext(ctx, query).Scan(&n) }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, k := range []string{"a", "b", "c"} {
		if err := put(ctx, db, k, []byte("1")); err != nil {
			t.Fatal(err)
		}
		if got := n(count); got != i+1 {
			t.Fatalf("after %d puts the reused statement counted %d", i+1, got)
		}
	}
	if got := store.QueriesPrepared(db); !slices.Equal(got, []string{count}) {
		t.Fatalf("prepared %q, want the one query once", got)
	}

	ahead := `SELECT count(*) FROM kv WHERE k > 'a'`
	if err := db.PrepareQueries(ctx, ahead); err != nil {
		t.Fatal(err)
	}
	if got := store.QueriesPrepared(db); !slices.Equal(got, []string{count, ahead}) {
		t.Fatalf("after PrepareQueries: %q", got)
	}
	if got := n(ahead); got != 2 {
		t.Fatalf("the query prepared ahead counted %d, want 2", got)
	}
	db.DropQueries(ahead, `SELECT 'never kept'`)
	if got := store.QueriesPrepared(db); !slices.Equal(got, []string{count}) {
		t.Fatalf("after DropQueries: %q", got)
	}
	if got := n(ahead); got != 2 { // prepared again, as any query
		t.Fatalf("the query dropped counted %d, want 2", got)
	}
	if err := db.PrepareQueries(ctx, `SELECT nope FROM nowhere`); err == nil {
		t.Fatal("PrepareQueries of a bad query: no error")
	}
	err := db.Query(func(q store.Querier) error {
		var v int
		return q.QueryRowContext(ctx, `SELECT nope FROM nowhere`).Scan(&v)
	})
	if err == nil || !strings.Contains(err.Error(), "no such table") {
		t.Fatalf("Query of a bad query: %v, want SQLite's own error", err)
	}

	var want []string
	for i := range 12 {
		q := fmt.Sprintf(`SELECT count(*) + %d FROM kv`, i)
		if got := n(q); got != 3+i {
			t.Fatalf("%s = %d", q, got)
		}
		want = append(want, q)
	}
	got := store.QueriesPrepared(db)
	if len(got) != 8 || !slices.Equal(got, want[len(want)-8:]) {
		t.Fatalf("kept %d statements %q, want the newest 8", len(got), got)
	}
	// Used again, the oldest is kept and the next oldest goes instead.
	n(want[4])
	n(`SELECT count(*) + 100 FROM kv`)
	got = store.QueriesPrepared(db)
	if slices.Contains(got, want[5]) || !slices.Contains(got, want[4]) {
		t.Fatalf("kept %q: want the least recently used (%q) dropped, not %q", got, want[5], want[4])
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := store.QueriesPrepared(db); len(got) != 0 {
		t.Fatalf("after Close %d statements kept", len(got))
	}
}

// TestInTx: a transaction's statement of a text the DB keeps prepared runs
// through that statement, in the transaction (rolled back with it,
// committed with it); one it does not keep is parsed in the transaction
// and not kept.
func TestInTx(t *testing.T) {
	ctx := t.Context()
	db := open(t, filepath.Join(t.TempDir(), "q.sqlite"), store.Options{})
	const insert = `INSERT INTO kv (k, v) VALUES (?, x'01')`
	if err := db.PrepareQueries(ctx, insert); err != nil {
		t.Fatal(err)
	}
	errRollback := errors.New("roll back")
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := db.InTx(tx).ExecContext(ctx, insert, "gone"); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	var n int
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		q := db.InTx(tx)
		if _, err := q.ExecContext(ctx, insert, "kept"); err != nil {
			return err
		}
		if _, err := q.ExecContext(ctx, `INSERT INTO kv (k, v) VALUES ('other', x'02')`); err != nil {
			return err
		}
		return q.QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n)
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("the transaction saw %d rows of its own, want 2", n)
	}
	var keys []string
	if err := db.Query(func(q store.Querier) error {
		rows, err := q.QueryContext(ctx, `SELECT k FROM kv ORDER BY k`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k string
			if err := rows.Scan(&k); err != nil {
				return err
			}
			keys = append(keys, k)
		}
		return rows.Err()
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"kept", "other"}) {
		t.Fatalf("stored %q, want the committed rows only", keys)
	}
	if got := store.QueriesPrepared(db); !slices.Equal(got, []string{insert, `SELECT k FROM kv ORDER BY k`}) {
		t.Fatalf("kept %q: a transaction's statements were kept", got)
	}
}
