package store_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/fakepds/fakepds/internal/stacks"
	"github.com/fakepds/fakepds/pds/store"
)

var testSchema = []string{
	`CREATE TABLE kv (k TEXT PRIMARY KEY, v BLOB NOT NULL)`,
}

func open(t testing.TB, path string, opts store.Options) *store.DB {
	t.Helper()
	if opts.Migrations == nil {
		opts.Migrations = testSchema
	}
	db, err := store.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func put(ctx context.Context, db *store.DB, k string, v []byte) error {
	return db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO kv (k, v) VALUES (?, ?)`, k, v)
		return err
	})
}

func TestPragmasReadBack(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			var logs bytes.Buffer
			db := open(t, filepath.Join(t.TempDir(), "a.sqlite"), store.Options{
				Fsync:  fsync,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			})
			got := db.Settings()
			want := store.Settings{
				JournalMode:       "wal",
				Synchronous:       map[bool]int{false: 0, true: 2}[fsync],
				BusyTimeout:       store.BusyTimeout,
				ForeignKeys:       true,
				JournalSizeLimit:  store.JournalSizeLimit,
				WALAutoCheckpoint: store.WALAutoCheckpoint,
			}
			if got != want {
				t.Errorf("Settings() = %+v, want %+v", got, want)
			}
			if got.Fsync() != fsync {
				t.Errorf("Fsync() = %v, want %v", got.Fsync(), fsync)
			}
			if logs.Len() != 0 {
				t.Errorf("unexpected warning: %s", logs.String())
			}
			// Readers get the same per-connection pragmas through the DSN.
			var sync, fk int
			if err := db.Reader().QueryRowContext(t.Context(), "PRAGMA synchronous").Scan(&sync); err != nil {
				t.Fatal(err)
			}
			if err := db.Reader().QueryRowContext(t.Context(), "PRAGMA foreign_keys").Scan(&fk); err != nil {
				t.Fatal(err)
			}
			if sync != want.Synchronous || fk != 1 {
				t.Errorf("reader synchronous=%d foreign_keys=%d, want %d and 1", sync, fk, want.Synchronous)
			}
		})
	}
}

// The page cache bounds reach every connection: the writer, and each
// reader the pool opens later. Without them a connection keeps SQLite's
// default (-2000: 2,000 KiB).
func TestCacheBounds(t *testing.T) {
	cacheSize := func(t *testing.T, q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}) int {
		t.Helper()
		var n int
		if err := q.QueryRowContext(t.Context(), "PRAGMA cache_size").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	t.Run("default", func(t *testing.T) {
		db := open(t, filepath.Join(t.TempDir(), "a.sqlite"), store.Options{})
		if w, r := cacheSize(t, db.Writer()), cacheSize(t, db.Reader()); w != -2000 || r != -2000 {
			t.Errorf("cache_size writer %d, reader %d; want SQLite's -2000 for both", w, r)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		db := open(t, filepath.Join(t.TempDir(), "a.sqlite"), store.Options{Readers: 2, WriterCacheKiB: 256, ReaderCacheKiB: 128})
		if w := cacheSize(t, db.Writer()); w != -256 {
			t.Errorf("writer cache_size %d, want -256", w)
		}
		// Two readers held at once: the second is a connection of its own.
		ctx := t.Context()
		c1, err := db.Reader().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c1.Close()
		c2, err := db.Reader().Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		for i, c := range []*sql.Conn{c1, c2} {
			if r := cacheSize(t, c); r != -128 {
				t.Errorf("reader %d cache_size %d, want -128", i, r)
			}
		}
		if n := db.Reader().Stats().MaxOpenConnections; n != 2 {
			t.Errorf("reader pool of %d, want 2", n)
		}
	})
}

// TestReleaseMemoryIsProcessWide: SQLite's page caches are one LRU list
// in this build (ENABLE_MEMORY_MANAGEMENT). A connection at its cache_size
// takes another connection's least recently used page rather than one of
// its own, so it keeps growing while others sit idle, and a bound limits
// only the sum; and ReleaseMemory on one database empties every
// connection's cache, not its own alone.
func TestReleaseMemoryIsProcessWide(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	idle := open(t, filepath.Join(dir, "idle.sqlite"), store.Options{WriterCacheKiB: 1024})
	busy := open(t, filepath.Join(dir, "busy.sqlite"), store.Options{WriterCacheKiB: 64})
	fill := func(db *store.DB, n int) {
		t.Helper()
		v := bytes.Repeat([]byte{'x'}, 3000) // a page each
		for i := range n {
			if err := put(ctx, db, fmt.Sprint(i), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	cached := func(db *store.DB) int {
		t.Helper()
		n, err := db.WriterCacheBytes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	fill(idle, 200)
	fill(busy, 200)
	n := cached(busy)
	t.Logf("the busy writer caches %d KiB, its cache_size 64 KiB", n>>10)
	if n < 4*64<<10 {
		t.Errorf("the busy writer caches %d bytes, no more than 4x its cache_size of 64 KiB: are the caches apart now?", n)
	}
	fill(idle, 20) // its pages in use again
	if n := cached(idle); n < 16<<10 {
		t.Fatalf("the idle writer caches %d bytes after writing: the test shows nothing", n)
	}
	if err := busy.ReleaseMemory(ctx); err != nil {
		t.Fatal(err)
	}
	// SQLite keeps a page (5 KiB with its header here).
	for name, db := range map[string]*store.DB{"busy": busy, "idle": idle} {
		if n := cached(db); n > 16<<10 {
			t.Errorf("after ReleaseMemory on busy, %s's writer caches %d bytes, want a page or two", name, n)
		}
	}
	// What it needs is read back.
	if err := put(ctx, busy, "after", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if n := cached(busy); n == 0 {
		t.Error("the writer caches nothing after a write")
	}
}

// A pragma that does not take is reported once, naming the file and what
// SQLite settled on. An in-memory database cannot be WAL.
func TestPragmaWarning(t *testing.T) {
	var logs bytes.Buffer
	db := open(t, ":memory:", store.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if db.Settings().JournalMode != "memory" {
		t.Fatalf("journal mode %q, want memory", db.Settings().JournalMode)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 {
		t.Fatalf("want exactly one warning, got %d:\n%s", n, out)
	}
	for _, s := range []string{"file=:memory:", "journal_mode=memory", "want_journal_mode=wal"} {
		if !strings.Contains(out, s) {
			t.Errorf("warning lacks %q:\n%s", s, out)
		}
	}
}

func TestMigrations(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.sqlite")
	ctx := t.Context()
	v1 := []string{`CREATE TABLE a (x INTEGER)`}
	v2 := append(v1, `ALTER TABLE a ADD COLUMN y TEXT; CREATE TABLE b (z INTEGER)`)

	db, err := store.Open(ctx, path, store.Options{Migrations: v1})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO a (x) VALUES (1)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db, err = store.Open(ctx, path, store.Options{Migrations: v2})
	if err != nil {
		t.Fatal(err)
	}
	var v, x int
	if err := db.Reader().QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if err := db.Reader().QueryRow(`SELECT x FROM a WHERE y IS NULL`).Scan(&x); err != nil {
		t.Fatalf("migrated table: %v", err)
	}
	if v != 2 || x != 1 {
		t.Fatalf("user_version=%d x=%d, want 2 and 1", v, x)
	}
	db.Close()

	// Reopening with the same migrations changes nothing; an older build
	// refuses a newer database instead of running on an unknown schema.
	db, err = store.Open(ctx, path, store.Options{Migrations: v2})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := store.Open(ctx, path, store.Options{Migrations: v1}); !errors.Is(err, store.ErrDirty) {
		t.Fatalf("open with older migrations: err = %v, want ErrDirty", err)
	}
}

// A failed migration leaves the database as it was: user_version and tables.
func TestMigrationFailureRollsBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.sqlite")
	v1 := []string{`CREATE TABLE ok (x INTEGER)`}
	db, err := store.Open(t.Context(), path, store.Options{Migrations: v1})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = store.Open(t.Context(), path, store.Options{Migrations: append(v1,
		`CREATE TABLE bad (x INTEGER); CREATE TABLE worse (y INTEGER); SELECT * FROM missing_table`,
		`CREATE TABLE never (x INTEGER)`,
	)})
	if err == nil {
		t.Fatal("open with a failing migration succeeded")
	}
	db = open(t, path, store.Options{Migrations: v1})
	var v, n int
	db.Reader().QueryRow(`PRAGMA user_version`).Scan(&v)
	db.Reader().QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table'`).Scan(&n)
	if v != 1 || n != 1 {
		t.Fatalf("after failed migration: user_version=%d tables=%d, want 1 and 1", v, n)
	}
	// A new file of a failing list fails, the first (made the long way)
	// and the next (whose template cannot be made).
	for i := range 2 {
		if _, err := store.Open(t.Context(), fmt.Sprintf("%s%d", path, i), store.Options{Migrations: []string{`SELECT * FROM missing_table`}}); err == nil {
			t.Fatalf("open %d of a new file with a failing migration succeeded", i)
		}
	}
}

// schema is the database's schema as SQLite keeps it, and its user_version.
func schema(t *testing.T, db *store.DB) string {
	t.Helper()
	var b strings.Builder
	var v int
	if err := db.Reader().QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "user_version %d\n", v)
	rows, err := db.Reader().Query(`SELECT type, name, coalesce(sql, '') FROM sqlite_master ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var typ, name, sql string
		if err := rows.Scan(&typ, &name, &sql); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %s\n", typ, name, sql)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A new file is a copy of its migrations' template (from the second of a
// list on): the same schema and user_version as running them, in WAL mode,
// and each list has its own.
func TestNewFileFromTemplate(t *testing.T) {
	dir := t.TempDir()
	v1 := []string{`CREATE TABLE a (x INTEGER PRIMARY KEY, y TEXT NOT NULL); CREATE INDEX a_y ON a (y)`}
	v2 := append(slices.Clip(v1), `CREATE TABLE b (z BLOB)`)

	// The long way: an existing empty file is SQLite's to make a database of.
	long := filepath.Join(dir, "long.sqlite")
	if err := os.WriteFile(long, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	want := schema(t, open(t, long, store.Options{Migrations: v2}))

	for i, migrations := range [][]string{v2, v2, v1, v1, v2} {
		db := open(t, filepath.Join(dir, fmt.Sprintf("%d.sqlite", i)), store.Options{Migrations: migrations})
		got := schema(t, db)
		if len(migrations) == len(v2) && got != want {
			t.Errorf("file %d: schema\n%s\nwant (migrated)\n%s", i, got, want)
		}
		if len(migrations) == len(v1) && (strings.Contains(got, "TABLE b") || !strings.Contains(got, "user_version 1\n")) {
			t.Errorf("file %d, one migration: schema\n%s", i, got)
		}
		if m := db.Settings().JournalMode; m != "wal" {
			t.Errorf("file %d: journal_mode %q", i, m)
		}
		if err := db.Write(t.Context(), func(tx *sql.Tx) error {
			_, err := tx.Exec(`INSERT INTO a (y) VALUES ('w')`)
			return err
		}); err != nil {
			t.Errorf("file %d: write: %v", i, err)
		}
	}
	// The template is made beside the first file and removed.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".template") {
			t.Errorf("template left behind: %s", e.Name())
		}
	}
}

func TestWriteRollsBackOnError(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "a.sqlite"), store.Options{})
	ctx := t.Context()
	boom := errors.New("boom")
	err := db.Write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO kv VALUES ('a', x'01')`); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want boom", err)
	}
	var n int
	if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows after rolled-back write, want 0", n)
	}
}

// A COMMIT that fails leaves SQLite in the transaction (here a deferred
// foreign key still broken at COMMIT): Write reports the failure, rolls
// back, and the writer takes the next transaction as if nothing happened.
func TestFailedCommitRollsBack(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "a.sqlite"), store.Options{Migrations: []string{
		`CREATE TABLE parent (k TEXT PRIMARY KEY)`,
		`CREATE TABLE child (k TEXT PRIMARY KEY, p TEXT REFERENCES parent (k) DEFERRABLE INITIALLY DEFERRED)`,
	}})
	ctx := t.Context()
	for range 3 {
		err := db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO child VALUES ('c', 'missing')`)
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "FOREIGN KEY") {
			t.Fatalf("Write of a broken foreign key = %v, want its COMMIT's failure", err)
		}
	}
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO parent VALUES ('p')`)
		if err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO child VALUES ('c', 'p')`)
		}
		return err
	}); err != nil {
		t.Fatalf("the write after the failed commits: %v", err)
	}
	var n int
	if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM child WHERE p = 'p'`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after: %d, %v; want the one good child", n, err)
	}
}

// Readers see committed snapshots while the writer works: WAL in action.
func TestReadersBesideWriter(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "a.sqlite"), store.Options{})
	ctx := t.Context()
	if err := put(ctx, db, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	inTx := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		db.Write(ctx, func(tx *sql.Tx) error {
			tx.ExecContext(ctx, `UPDATE kv SET v = '2' WHERE k = 'a'`)
			close(inTx)
			<-release
			return nil
		})
	}()
	<-inTx
	// The write transaction is open and holds the write lock; a read
	// completes anyway and sees the last committed value.
	var v string
	err := db.Read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'a'`).Scan(&v)
	})
	close(release)
	wg.Wait()
	if err != nil || v != "1" {
		t.Fatalf("read during write: v=%q err=%v, want 1", v, err)
	}
	if err := db.Reader().QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'a'`).Scan(&v); err != nil || v != "2" {
		t.Fatalf("read after write: v=%q err=%v, want 2", v, err)
	}
	if _, err := db.Reader().ExecContext(ctx, `DELETE FROM kv`); err == nil {
		t.Fatal("reader pool accepted a write; it must be query_only")
	}
}

// A database made by another tool in rollback-journal mode becomes WAL on
// its first open through the store.
func TestDeleteJournalConvertsToWAL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.sqlite")
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(DELETE)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`CREATE TABLE kv (k TEXT PRIMARY KEY, v BLOB NOT NULL); INSERT INTO kv VALUES ('a', 'b')`); err != nil {
		t.Fatal(err)
	}
	var mode string
	raw.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	raw.Close()
	if mode != "delete" {
		t.Fatalf("setup: journal_mode %q, want delete", mode)
	}

	db := open(t, path, store.Options{Migrations: []string{}})
	if got := db.Settings().JournalMode; got != "wal" {
		t.Fatalf("journal_mode after open = %q, want wal", got)
	}
	var v string
	if err := db.Reader().QueryRow(`SELECT v FROM kv WHERE k = 'a'`).Scan(&v); err != nil || v != "b" {
		t.Fatalf("data after conversion: %q, %v", v, err)
	}
}

// The driver must be built without the global malloc statistics mutex,
// which every allocation would otherwise take.
func TestCompileOptionsMemstatusOff(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "a.sqlite"), store.Options{})
	rows, err := db.Reader().Query(`PRAGMA compile_options`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var all []string
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			t.Fatal(err)
		}
		all = append(all, o)
	}
	for _, o := range all {
		if o == "DEFAULT_MEMSTATUS=0" {
			return
		}
	}
	t.Fatalf("compile_options lacks DEFAULT_MEMSTATUS=0: %v", all)
}

// walBound is the documented ceiling of the -wal file of a database written
// by small commits: SQLite checkpoints every WALAutoCheckpoint pages and then
// rewinds the WAL, so it stays near that many pages; JournalSizeLimit is the
// most a reset leaves on disk.
const walBound = store.JournalSizeLimit

func TestWALStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 commits; skipped in -short")
	}
	path := filepath.Join(t.TempDir(), "wal.sqlite")
	db := open(t, path, store.Options{})
	ctx := t.Context()
	val := bytes.Repeat([]byte{'x'}, 100)
	var peak int64
	for i := range 20000 {
		if err := put(ctx, db, fmt.Sprint(i), val); err != nil {
			t.Fatal(err)
		}
		// A reader now and then, as a serving PDS has: checkpoints must
		// still get through.
		if i%100 == 0 {
			var n int
			if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path + "-wal")
			if err != nil {
				t.Fatal(err)
			}
			peak = max(peak, fi.Size())
		}
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	peak = max(peak, fi.Size())
	t.Logf("-wal after 20000 commits: %d bytes, peak seen %d, bound %d", fi.Size(), peak, walBound)
	if peak > walBound {
		t.Fatalf("-wal file reached %d bytes, over the bound %d", peak, walBound)
	}
}

// Statements prepares a statement only when asked, once; one not
// prepared is nil (its caller runs the query unprepared).
func TestStatements(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "p.sqlite"), store.Options{})
	ctx := t.Context()
	const insert, sel, bad = 0, 1, 2
	p := store.NewStatements[int](db.Writer(), []string{`INSERT INTO kv (k, v) VALUES (?, ?)`, `SELECT v FROM kv WHERE k = ?`, `SELECT nope FROM nowhere`})
	if p.Get(insert) != nil || p.Prepared() != 0 {
		t.Fatal("prepared before asked")
	}
	if err := p.Prepare(ctx, insert); err != nil {
		t.Fatal(err)
	}
	first := p.Get(insert)
	if err := p.Prepare(ctx, insert, sel); err != nil {
		t.Fatal(err)
	}
	if p.Get(insert) != first || p.Prepared() != 2 {
		t.Fatalf("prepared again, or not all: %d", p.Prepared())
	}
	err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, p.Get(insert)).ExecContext(ctx, "a", []byte("1"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var v []byte
	if err := p.Get(sel).QueryRowContext(ctx, "a").Scan(&v); err != nil || string(v) != "1" {
		t.Fatalf("read back %q, %v", v, err)
	}
	// A bad statement fails, naming itself, and keeps the others.
	if err := p.Prepare(ctx, bad); err == nil || !strings.Contains(err.Error(), "nowhere") || p.Prepared() != 2 {
		t.Fatalf("bad statement: %v", err)
	}
	if err := p.Close(); err != nil || p.Get(insert) != nil {
		t.Fatal(err)
	}
}

// OpenLazy makes no file until the DB's first use; a use that cannot open
// it fails with the reason and the next one tries again; after Close every
// use fails. A file already there is opened at once.
func TestOpenLazy(t *testing.T) {
	ctx := t.Context()
	dir := filepath.Join(t.TempDir(), "later") // not there yet
	path := filepath.Join(dir, "l.sqlite")
	db, err := store.OpenLazy(ctx, path, store.Options{Migrations: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	if db.Opened() || db.Settings() != (store.Settings{}) {
		t.Fatalf("opened before use: %v %+v", db.Opened(), db.Settings())
	}
	// The directory is missing: every use fails, naming the file.
	if err := put(ctx, db, "a", []byte("1")); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write with no directory = %v", err)
	}
	var n int
	if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Reader with no directory = %v", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, db, "a", []byte("1")); err != nil {
		t.Fatalf("Write once the directory is there: %v", err)
	}
	if !db.Opened() || db.Settings().JournalMode != "wal" {
		t.Fatalf("after first use: opened %v, %+v", db.Opened(), db.Settings())
	}
	if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("count = %d, %v", n, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := put(ctx, db, "b", nil); err == nil {
		t.Fatal("Write after Close succeeded")
	}

	// There now: opened by OpenLazy itself.
	db = open(t, path, store.Options{Migrations: testSchema})
	db.Close()
	db, err = store.OpenLazy(ctx, path, store.Options{Migrations: testSchema})
	if err != nil || !db.Opened() {
		t.Fatalf("OpenLazy of a file there: opened %v, %v", db.Opened(), err)
	}
	db.Close()

	// Closed unused: no file, and uses fail.
	never := filepath.Join(dir, "never.sqlite")
	db, err = store.OpenLazy(ctx, never, store.Options{Migrations: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Reader().QueryRowContext(ctx, `SELECT 1`).Scan(&n); err == nil {
		t.Fatal("Reader after Close succeeded")
	}
	if _, err := os.Stat(never); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a lazy DB closed unused made its file: %v", err)
	}
}

// Concurrent first uses of a lazy DB open it once.
func TestOpenLazyConcurrentFirstUse(t *testing.T) {
	ctx := t.Context()
	db, err := store.OpenLazy(ctx, filepath.Join(t.TempDir(), "c.sqlite"), store.Options{Migrations: testSchema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			if i%2 == 0 {
				errs <- put(ctx, db, strconv.Itoa(i), []byte("v"))
				return
			}
			var n int
			errs <- db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM kv`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("count = %d, %v", n, err)
	}
}

// A Prepare waiting for the writer connection does not hold up the
// transaction holding it while that binds a prepared statement (Get):
// the transaction ends, then the Prepare prepares. (Holding the lock
// while preparing, the two waited for each other for ever.)
func TestStatementsPrepareWhileWriting(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "w.sqlite"), store.Options{})
	ctx := t.Context()
	const insert, sel = 0, 1
	p := store.NewStatements[int](db.Writer(), []string{`INSERT INTO kv (k, v) VALUES (?, ?)`, `SELECT v FROM kv WHERE k = ?`})
	if err := p.Prepare(ctx, insert); err != nil {
		t.Fatal(err)
	}
	prepared := make(chan error, 1)
	err := db.Write(ctx, func(tx *sql.Tx) error {
		go func() { prepared <- p.Prepare(ctx, sel) }()
		for stacks.Count("select", "store.(*Statements[...]).Prepare", "database/sql.(*DB).conn") == 0 {
			runtime.Gosched()
		}
		_, err := tx.StmtContext(ctx, p.Get(insert)).ExecContext(ctx, "a", []byte("1"))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-prepared; err != nil || p.Get(sel) == nil {
		t.Fatalf("Prepare after the transaction: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// A DB told its files have another name (Moved) opens every connection
// from then on by that name, and runs OnClose's funcs after its close.
func TestMoved(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.sqlite"), filepath.Join(dir, "b.sqlite")
	db := open(t, a, store.Options{})
	if err := put(ctx, db, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	for _, suf := range []string{"-wal", ""} {
		if err := os.Link(a+suf, b+suf); err != nil {
			t.Fatal(err)
		}
	}
	db.Moved(b)
	closed := false
	db.OnClose(func() { closed = true })
	// The old names gone, a reader opened now must find the file by the
	// new one: by the old, SQLite would make an empty database there.
	for _, suf := range []string{"-wal", ""} {
		if err := os.Remove(a + suf); err != nil {
			t.Fatal(err)
		}
	}
	var v []byte
	if err := db.Read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'k'`).Scan(&v)
	}); err != nil || string(v) != "v" {
		t.Fatalf("a reader opened after Moved: %q, %v", v, err)
	}
	if err := put(ctx, db, "k2", []byte("v2")); err != nil {
		t.Fatalf("a write after Moved: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if !closed {
		t.Fatal("OnClose's func did not run")
	}
	if _, err := os.Lstat(a); err == nil {
		t.Fatal("something opened the old name again")
	}
	db2 := open(t, b, store.Options{})
	if err := db2.Read(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT v FROM kv WHERE k = 'k2'`).Scan(&v)
	}); err != nil || string(v) != "v2" {
		t.Fatalf("after reopening by the new name: %q, %v", v, err)
	}
}
