// Package store opens the SQLite databases of fakepds: the account manager,
// the actor stores (one per account) and the sequencer all go through Open,
// which sets their pragmas and reads them back, so the durability of every
// database is known rather than assumed.
//
// A DB has one writer connection and a small pool of readers. WAL lets the
// readers run beside the writer; the single writer serializes writes. A
// short read runs on the writer connection while no write holds it
// (DB.Query): that connection is open, its schema parsed and its page cache
// warm, where a reader's first use opens a connection.
package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Tunables shared by every database. They are set explicitly: modernc's
// defaults (synchronous=FULL among them) are not what a test PDS wants.
const (
	// BusyTimeout bounds how long a connection waits for a lock held by
	// another connection of the same file (a checkpoint, say).
	BusyTimeout = 5 * time.Second
	// JournalSizeLimit is the size the -wal file is truncated to when SQLite
	// resets it after a checkpoint. With the frame-counting auto-checkpoint
	// below the file normally stays near WALAutoCheckpoint pages; this caps
	// what one oversized transaction leaves behind.
	JournalSizeLimit = 8 << 20
	// WALAutoCheckpoint is SQLite's own default, named so nothing is left
	// implicit: checkpoint once the WAL holds this many pages.
	WALAutoCheckpoint = 1000
	// DefaultReaders is the reader pool size of a DB.
	DefaultReaders = 4
)

// Options configure Open.
type Options struct {
	// Fsync selects synchronous=FULL: every commit waits for the disk.
	// Otherwise synchronous=OFF: a process crash loses nothing acknowledged,
	// an OS crash or power cut may lose the last commits.
	Fsync bool
	// Readers is the size of the reader pool; DefaultReaders when zero.
	Readers int
	// WriterCacheKiB and ReaderCacheKiB bound each connection's page cache
	// (PRAGMA cache_size); zero leaves SQLite's 2,000 KiB. A process with
	// hundreds of databases open holds one cache per connection, each
	// filling up to its bound or its file's size, whichever is smaller.
	WriterCacheKiB, ReaderCacheKiB int
	// Migrations bring the schema up to date: Migrations[i] moves
	// PRAGMA user_version from i to i+1. They run at open, in one write
	// transaction.
	Migrations []string
	// Logger receives the one warning Open logs when a pragma did not take.
	// Nil means slog.Default().
	Logger *slog.Logger
}

// Settings are the pragmas of a DB as SQLite reported them after open.
type Settings struct {
	JournalMode       string // "wal" when WAL took
	Synchronous       int    // 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
	BusyTimeout       time.Duration
	ForeignKeys       bool
	JournalSizeLimit  int64
	WALAutoCheckpoint int
}

// Fsync reports whether commits wait for the disk.
func (s Settings) Fsync() bool { return s.Synchronous >= 2 }

// SyncName is the name of the synchronous level, as PRAGMA synchronous spells it.
func (s Settings) SyncName() string {
	switch s.Synchronous {
	case 0:
		return "OFF"
	case 1:
		return "NORMAL"
	case 2:
		return "FULL"
	case 3:
		return "EXTRA"
	}
	return strconv.Itoa(s.Synchronous)
}

// DB is one SQLite database file.
type DB struct {
	path     string
	want     Settings   // the pragmas its connections are opened with
	wc, rc   *connector // open the writer's and readers' connections
	onClose  []func()   // run by Close once the connections are closed
	w        *sql.DB    // exactly one connection: the writer
	wmu      sync.Mutex // held by a Write, or by a Query on w
	r        *sql.DB    // readers, query_only
	settings Settings
	queries  stmtCache // Query's statements on w

	// Of a DB from OpenLazy: w, r and settings are set, under mu, by the
	// first use; opened says they are.
	opened atomic.Bool
	mu     sync.Mutex
	opts   Options
	closed bool
	failed *sql.DB // what Reader and Writer return while opening fails
	err    failure // why the last open failed
}

// failure is the error of a lazy DB's last failed open, for the pool that
// reports it.
type failure struct {
	mu  sync.Mutex
	err error
}

func (f *failure) set(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *failure) Connect(context.Context) (driver.Conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return nil, f.err
}

func (f *failure) Driver() driver.Driver { return failureDriver{f} }

type failureDriver struct{ f *failure }

func (d failureDriver) Open(string) (driver.Conn, error) { return d.f.Connect(context.Background()) }

// ErrDirty is returned by Open when a database's schema is newer than the
// migrations this build knows.
var ErrDirty = errors.New("store: database schema is newer than this build")

// Open opens (creating if needed, from a template: see template.go) the
// database at path, applies its pragmas, reads them back and runs pending
// migrations.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if err := fromTemplate(ctx, path, opts); err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return open(ctx, path, opts)
}

// OpenLazy is Open for a database most runs never use (OAuth's): when no
// file is at path, it costs nothing until the DB's first use (Write, Read,
// Reader, Writer), which creates and opens it; a failure there is that
// call's error, and the next use tries again. A file already at path is
// opened now, as Open does.
func OpenLazy(ctx context.Context, path string, opts Options) (*DB, error) {
	if _, err := os.Lstat(path); err == nil {
		return Open(ctx, path, opts)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db := &DB{path: path, opts: opts}
	db.queries.db = db
	return db, nil
}

// Opened reports whether the database is open: always for Open, after the
// first use for OpenLazy.
func (db *DB) Opened() bool { return db.opened.Load() }

// errClosed is what a use of a lazy DB answers after Close.
var errClosed = errors.New("store: database is closed")

// ready opens a lazy DB on its first use.
func (db *DB) ready(ctx context.Context) error {
	if db.opened.Load() {
		return nil
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.opened.Load() {
		return nil
	}
	if db.closed {
		return errClosed
	}
	o, err := Open(ctx, db.path, db.opts)
	if err != nil {
		db.err.set(err)
		return err
	}
	db.w, db.r, db.settings = o.w, o.r, o.settings
	db.wc, db.rc, db.want = o.wc, o.rc, o.want
	db.opened.Store(true)
	if db.failed != nil {
		db.failed.Close()
		db.failed = nil
	}
	return nil
}

// pools returns the reader and writer pools, opening a lazy DB first; while
// that fails, both are a pool whose every use fails with the reason.
func (db *DB) pools() (r, w *sql.DB) {
	err := db.ready(context.Background())
	if err == nil {
		return db.r, db.w
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.failed == nil {
		db.err.set(err)
		db.failed = sql.OpenDB(&db.err)
		if db.closed {
			db.failed.Close() // fails every use: "sql: database is closed"
		}
	}
	return db.failed, db.failed
}

// open is Open of a file that is there (or that SQLite creates).
func open(ctx context.Context, path string, opts Options) (*DB, error) {
	readers := opts.Readers
	if readers <= 0 {
		readers = DefaultReaders
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	want := Settings{
		JournalMode:       "wal",
		Synchronous:       0,
		BusyTimeout:       BusyTimeout,
		ForeignKeys:       true,
		JournalSizeLimit:  JournalSizeLimit,
		WALAutoCheckpoint: WALAutoCheckpoint,
	}
	if opts.Fsync {
		want.Synchronous = 2
	}

	wc := newConnector(dsn(path, want, opts.WriterCacheKiB, false))
	w := sql.OpenDB(wc)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)

	db := &DB{path: path, want: want, wc: wc, w: w, opts: opts}
	db.queries.db = db
	got, version, err := readSettings(ctx, w)
	if err != nil {
		w.Close()
		if se, ok := errors.AsType[*sqlite.Error](err); ok && se.Code()&0xff == sqlite3.SQLITE_BUSY {
			// Locked for another process (see vfs): say so.
			return nil, fmt.Errorf("store: open %s: another process has it open (a server on the same data dir?): %w", path, err)
		}
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.settings = got
	db.opened.Store(true)
	if vfs == "unix-excl" {
		removeStaleSHM(path, log)
	}
	if got != want {
		// Asked, not told: say once, per file, what SQLite settled on.
		log.Warn("sqlite pragmas did not all take",
			"file", path,
			"journal_mode", got.JournalMode, "want_journal_mode", want.JournalMode,
			"synchronous", got.SyncName(), "want_synchronous", want.SyncName(),
			"busy_timeout", got.BusyTimeout, "foreign_keys", got.ForeignKeys,
			"journal_size_limit", got.JournalSizeLimit, "wal_autocheckpoint", got.WALAutoCheckpoint)
	}
	if err := db.migrate(ctx, version, opts.Migrations); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: migrate %s: %w", path, err)
	}

	// Readers are opened lazily by database/sql; the writer has already
	// switched the file to WAL, so they only need the per-connection pragmas.
	db.rc = newConnector(dsn(path, want, opts.ReaderCacheKiB, true))
	r := sql.OpenDB(db.rc)
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	db.r = r
	return db, nil
}

// removeStaleSHM removes the -shm file a database opened through SQLite's
// default VFS left beside it (a data dir made before unix-excl, or one a
// sqlite3 shell opened): unix-excl keeps the WAL index in memory and never
// reads the file, and no other process can have it mapped while this one
// holds the database (the lock readSettings took), so it was 32 KiB of
// disk per store kept for nothing.
func removeStaleSHM(path string, log *slog.Logger) {
	if err := os.Remove(path + "-shm"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn("sqlite: a stale -shm file stays", "file", path+"-shm", "err", err)
	}
}

// sqliteDriver is modernc's registered driver, which connectors open
// connections with.
var sqliteDriver = func() driver.Driver {
	db, _ := sql.Open("sqlite", "") // opens no connection
	defer db.Close()
	return db.Driver()
}()

// connector opens connections by a DSN that Moved may change.
type connector struct{ dsn atomic.Pointer[string] }

func newConnector(dsn string) *connector {
	c := &connector{}
	c.dsn.Store(&dsn)
	return c
}

func (c *connector) Connect(context.Context) (driver.Conn, error) {
	return sqliteDriver.Open(*c.dsn.Load())
}

func (c *connector) Driver() driver.Driver { return sqliteDriver }

// Moved tells an open DB that its file has another name now: the caller
// linked its files (database and -wal) there. The connections open
// keep the name they were opened by, and SQLite knows the file by its
// inode, so they and those opened from now on, by path, share its locks
// and WAL index. The old name must stay linked until the DB is
// closed: at the close the writer checkpoints only while the name it was
// opened by still names its file.
func (db *DB) Moved(path string) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.path = path
	if db.wc == nil { // lazy, not open: the next open is by path
		return
	}
	w, r := dsn(path, db.want, db.opts.WriterCacheKiB, false), dsn(path, db.want, db.opts.ReaderCacheKiB, true)
	db.wc.dsn.Store(&w)
	db.rc.dsn.Store(&r)
}

// OnClose has Close run fn once it has closed the DB's connections.
func (db *DB) OnClose(fn func()) {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.onClose = append(db.onClose, fn)
}

// dsn builds the connection string. Pragmas go in the DSN so every
// connection the pools ever (re)open gets them, not just the first.
func dsn(path string, s Settings, cacheKiB int, reader bool) string {
	q := url.Values{}
	add := func(p string) { q.Add("_pragma", p) }
	add("busy_timeout(" + strconv.FormatInt(s.BusyTimeout.Milliseconds(), 10) + ")")
	add("synchronous(" + strconv.Itoa(s.Synchronous) + ")")
	add("foreign_keys(1)")
	if cacheKiB > 0 {
		add("cache_size(-" + strconv.Itoa(cacheKiB) + ")") // negative: KiB, not pages
	}
	if reader {
		add("query_only(1)")
	} else {
		// journal_mode goes through the driver's shorthand key, which it
		// applies after the _pragma list: converting a new file to WAL
		// writes a rollback journal, and under the default synchronous=FULL
		// that would fsync before our synchronous setting took.
		q.Set("_journal_mode", s.JournalMode)
		add("journal_size_limit(" + strconv.FormatInt(s.JournalSizeLimit, 10) + ")")
		add("wal_autocheckpoint(" + strconv.Itoa(s.WALAutoCheckpoint) + ")")
		// BEGIN IMMEDIATE: a write transaction takes the write lock up front
		// instead of failing with SQLITE_BUSY when it first writes.
		q.Set("_txlock", "immediate")
	}
	if vfs != "" {
		q.Set("vfs", vfs)
	}
	return "file:" + path + "?" + q.Encode()
}

// vfs is the SQLite VFS every connection opens its file through:
// unix-excl, where SQLite has it. Its first connection to a file takes an
// exclusive lock on it for the process, kept until the process's last
// connection to it closes, and the WAL index lives in the process's heap
// (SQLite keeps it per inode, so every connection of the process to the
// file shares it) instead of a -shm file mapped by all. The locks a
// transaction takes are then counters in the process, not ~6 fcntl calls
// on the -shm file: BenchmarkCommit 56-67 -> 46-52 us a commit, and getRecord's
// server time ~10 us less (BenchmarkSuiteShaped). An actor store also makes one file fewer
// (no -shm), and a new inode is most of what a new file costs
// (actorstore.Spare). What it costs: while a server has a database open,
// another process cannot read it (it waits busy_timeout for the lock,
// then fails "database is locked"), so a second server on a data dir in
// use fails to start instead of writing beside the first.
var vfs = func() string {
	if runtime.GOOS == "windows" {
		return "" // no unix VFS there; SQLite's default
	}
	return "unix-excl"
}()

// readSettings reads the pragmas back, and the schema's user_version with
// them so that an up-to-date database needs no write transaction to find out.
func readSettings(ctx context.Context, db *sql.DB) (s Settings, version int, err error) {
	var busyMS int64
	var fk int
	// Few round trips: opening an actor store is on createAccount's path.
	// wal_autocheckpoint has no table-valued form, so it is asked alone.
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT journal_mode FROM pragma_journal_mode),
		(SELECT synchronous FROM pragma_synchronous),
		(SELECT timeout FROM pragma_busy_timeout),
		(SELECT foreign_keys FROM pragma_foreign_keys),
		(SELECT journal_size_limit FROM pragma_journal_size_limit),
		(SELECT user_version FROM pragma_user_version)`).
		Scan(&s.JournalMode, &s.Synchronous, &busyMS, &fk, &s.JournalSizeLimit, &version)
	if err == nil {
		err = db.QueryRowContext(ctx, `PRAGMA wal_autocheckpoint`).Scan(&s.WALAutoCheckpoint)
	}
	if err != nil {
		return Settings{}, 0, fmt.Errorf("read back pragmas: %w", err)
	}
	s.JournalMode = strings.ToLower(s.JournalMode)
	s.BusyTimeout = time.Duration(busyMS) * time.Millisecond
	s.ForeignKeys = fk == 1
	return s, version, nil
}

// migrate runs the migrations past version (the user_version read at
// open). Up to date, it writes nothing; otherwise it reads user_version
// again inside the write transaction, which is what decides.
func (db *DB) migrate(ctx context.Context, version int, migrations []string) error {
	if version == len(migrations) {
		return nil
	}
	if version > len(migrations) {
		return fmt.Errorf("%w: user_version %d, known %d", ErrDirty, version, len(migrations))
	}
	return db.Write(ctx, func(tx *sql.Tx) error {
		var v int
		if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
			return err
		}
		if v > len(migrations) {
			return fmt.Errorf("%w: user_version %d, known %d", ErrDirty, v, len(migrations))
		}
		for i := v; i < len(migrations); i++ {
			if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		if v == len(migrations) {
			return nil
		}
		_, err := tx.ExecContext(ctx, "PRAGMA user_version = "+strconv.Itoa(len(migrations)))
		return err
	})
}

// Path is the file the DB lives in.
func (db *DB) Path() string { return db.path }

// Settings are the pragmas SQLite reported after open; the zero Settings
// while a lazy DB is not open yet.
func (db *DB) Settings() Settings {
	if !db.opened.Load() {
		return Settings{}
	}
	return db.settings
}

// Write runs fn in one write transaction (BEGIN IMMEDIATE) on the writer
// connection and commits it if fn returns nil. Callers queue for the writer;
// a logical write must be one call, never a series of implicit transactions.
//
// A ctx already done fails the call; once begun, the transaction is not
// tied to ctx (see detach).
func (db *DB) Write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	ctx, err := db.takeWriter(ctx)
	if err != nil {
		return err
	}
	defer db.wmu.Unlock()
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// takeWriter detaches ctx (see detach), opens a lazy DB, and takes the
// writer: the caller unlocks db.wmu.
func (db *DB) takeWriter(ctx context.Context) (context.Context, error) {
	ctx, err := detach(ctx)
	if err != nil {
		return nil, err
	}
	if err := db.ready(ctx); err != nil {
		return nil, err
	}
	db.wmu.Lock()
	return ctx, nil
}

// Begin starts a write transaction as Write does, for a caller that must
// end it after work elsewhere (the sequencer commits a repo write's event
// only once the repo's own transaction has committed). The writer stays
// held until end is called, exactly once: end(true) commits, end(false)
// rolls back.
func (db *DB) Begin(ctx context.Context) (tx *sql.Tx, end func(commit bool) error, err error) {
	if ctx, err = db.takeWriter(ctx); err != nil {
		return nil, nil, err
	}
	if tx, err = db.w.BeginTx(ctx, nil); err != nil {
		db.wmu.Unlock()
		return nil, nil, err
	}
	return tx, func(commit bool) error {
		defer db.wmu.Unlock()
		if commit {
			return tx.Commit()
		}
		return tx.Rollback()
	}, nil
}

// ReleaseMemory frees cached pages (PRAGMA shrink_memory on the writer,
// once no write holds it): not db's alone but every connection's of the
// process, since SQLite's page caches are one LRU list in this build (see
// TestReleaseMemoryIsProcessWide). What a connection needs again it reads
// back from its file, which the OS still caches.
func (db *DB) ReleaseMemory(ctx context.Context) error {
	ctx, err := db.takeWriter(ctx)
	if err != nil {
		return err
	}
	defer db.wmu.Unlock()
	_, err = db.w.ExecContext(ctx, "PRAGMA shrink_memory")
	return err
}

// WriterCacheBytes is how much memory the pages cached by the writer's
// connection take (SQLITE_DBSTATUS_CACHE_USED).
func (db *DB) WriterCacheBytes(ctx context.Context) (int, error) {
	if err := db.ready(ctx); err != nil {
		return 0, err
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	c, err := db.w.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	var n int
	err = c.Raw(func(dc any) error {
		st, ok := dc.(sqlite.DBStatus)
		if !ok {
			return fmt.Errorf("store: %T reports no status", dc)
		}
		n, _, err = st.Status(sqlite.DBStatusCacheUsed, false)
		return err
	})
	return n, err
}

// Read runs fn in a read transaction on a reader connection, so everything
// fn reads comes from one snapshot.
func (db *DB) Read(ctx context.Context, fn func(tx *sql.Tx) error) error {
	ctx, err := detach(ctx)
	if err != nil {
		return err
	}
	if err := db.ready(ctx); err != nil {
		return err
	}
	tx, err := db.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // read-only: nothing to lose
	return fn(tx)
}

// detach is ctx without its cancellation, or ctx's error when it is done.
// database/sql watches a cancellable context with a goroutine per
// transaction and modernc one per statement: two goroutine hand-offs, ~20 µs
// of a write measured at ~280 µs (pds/repo BenchmarkApply), for
// transactions that last well under a millisecond. What a cancellation
// could still stop is the wait for a connection, and writes are short.
func detach(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// Reader is the reader pool, for single statements that need no snapshot
// across queries. Its connections are query_only. A lazy DB that fails to
// open returns a pool whose every use fails with the reason.
func (db *DB) Reader() *sql.DB {
	r, _ := db.pools()
	return r
}

// Writer is the writer pool (one connection), for preparing statements that
// Write callers bind to their transaction with tx.StmtContext; the
// connection's prepared statement is then reused, not re-prepared. A lazy
// DB that fails to open returns a pool whose every use fails.
func (db *DB) Writer() *sql.DB {
	_, w := db.pools()
	return w
}

// Close closes the readers, then the writer; the last connection to close
// checkpoints the WAL (with the DB's synchronous setting). A lazy DB never
// used has nothing to close, and stays closed.
func (db *DB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.closed = true
	if db.failed != nil {
		db.failed.Close() // kept: a use after Close fails, as on a closed pool
	}
	if !db.opened.Load() {
		return nil
	}
	db.queries.close()
	var errR error
	if db.r != nil {
		errR = db.r.Close()
	}
	err := errors.Join(errR, db.w.Close())
	for _, fn := range db.onClose {
		fn()
	}
	db.onClose = nil
	return err
}
