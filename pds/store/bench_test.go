package store_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/fakepds/fakepds/internal/fsname"
	"github.com/fakepds/fakepds/pds/store"
)

// BenchmarkCommit measures one small write transaction (4 inserts, the shape
// of a repo write's rows) with the toggle off and on. Run it on a real disk:
// tmpfs ignores fsync and would hide the difference; the log line names the
// filesystem the temp dir is on.
func BenchmarkCommit(b *testing.B) {
	for _, fsync := range []bool{false, true} {
		b.Run(fmt.Sprintf("fsync=%v", fsync), func(b *testing.B) {
			dir := b.TempDir()
			b.Logf("data dir %s on %s", dir, fsname.Of(dir))
			db := open(b, filepath.Join(dir, "bench.sqlite"), store.Options{Fsync: fsync})
			ctx := b.Context()
			val := make([]byte, 200)
			i := 0
			for b.Loop() {
				err := db.Write(ctx, func(tx *sql.Tx) error {
					for j := range 4 {
						if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)`, strconv.Itoa(i*4+j), val); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

// benchSchema has the shape of the server's own databases: a few tables
// with indexes, created by one migration.
var benchSchema = []string{`
	CREATE TABLE a (id TEXT PRIMARY KEY, did TEXT NOT NULL, v BLOB NOT NULL, at INTEGER NOT NULL);
	CREATE INDEX a_did ON a (did);
	CREATE TABLE b (k TEXT PRIMARY KEY, v TEXT NOT NULL) WITHOUT ROWID;
	CREATE TABLE c (seq INTEGER PRIMARY KEY, did TEXT NOT NULL, at INTEGER NOT NULL);
	CREATE INDEX c_did ON c (did, seq);`,
}

// BenchmarkOpenClose is a new database file from nothing to closed, as a
// server start and stop makes each of its databases (and createAccount its
// actor store): Open (file, WAL, schema), one write, Close.
func BenchmarkOpenClose(b *testing.B) {
	dir := b.TempDir()
	b.Logf("data dir %s on %s", dir, fsname.Of(dir))
	ctx := b.Context()
	i := 0
	for b.Loop() {
		p := filepath.Join(dir, strconv.Itoa(i)+".sqlite")
		i++
		db, err := store.Open(ctx, p, store.Options{Migrations: benchSchema})
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO b (k, v) VALUES ('k', 'v')`)
			return err
		}); err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
