package actorstore_test

import (
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/store"
)

// TestCloseKeepsEmptyWAL: closing an actor store checkpoints its WAL into
// the file and leaves the -wal (empty) for the next open, and the next
// open reads what was written.
func TestCloseKeepsEmptyWAL(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	const did = "did:plc:walkeeper"
	open := actorstore.Opener(dir, store.Options{})
	db, err := open(ctx, did)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO account_pref (name, value_json) VALUES ('app.bsky.actor.defs#x', '{}')`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	p := actorstore.Path(dir, did)
	fi, err := os.Stat(p + "-wal")
	if err != nil {
		t.Fatalf("-wal after close: %v", err)
	}
	if fi.Size() != 0 {
		t.Errorf("-wal after close is %d bytes, want 0 (checkpointed and truncated)", fi.Size())
	}
	if _, err := os.Stat(p + "-shm"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("-shm after close: %v; want none (the WAL index is in memory)", err)
	}
	db, err = open(ctx, did)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM account_pref`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("after reopening: %d prefs, %v", n, err)
	}
}

// An actor store's connections take the package's bounds, whatever the
// options handed to Opener say of them.
func TestOpenerBoundsConnections(t *testing.T) {
	ctx := t.Context()
	db, err := actorstore.Opener(t.TempDir(), store.Options{Readers: 9})(ctx, "did:plc:bounded")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var w, r int
	if err := db.Writer().QueryRowContext(ctx, "PRAGMA cache_size").Scan(&w); err != nil {
		t.Fatal(err)
	}
	if err := db.Reader().QueryRowContext(ctx, "PRAGMA cache_size").Scan(&r); err != nil {
		t.Fatal(err)
	}
	if w != -actorstore.WriterCacheKiB || r != -actorstore.ReaderCacheKiB {
		t.Errorf("cache_size writer %d, reader %d; want -%d and -%d", w, r, actorstore.WriterCacheKiB, actorstore.ReaderCacheKiB)
	}
	if n := db.Reader().Stats().MaxOpenConnections; n != actorstore.Readers {
		t.Errorf("reader pool of %d, want %d", n, actorstore.Readers)
	}
}
