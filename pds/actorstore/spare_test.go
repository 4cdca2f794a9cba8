package actorstore_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/store"
)

// TestSpare: after the first new store, a new store is made of the spare's
// files (the same inodes; the spare's directory becomes the store's when
// that is new, and the files move into it when it exists), it keeps what
// is written to it across a close, and a spare left by an earlier run is
// removed at start. With fsync on as well: the spare is then synced.
func TestSpare(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) { testSpare(t, fsync) })
	}
}

func testSpare(t *testing.T, fsync bool) {
	ctx := t.Context()
	dir := t.TempDir()
	spareDir := filepath.Join(dir, actorstore.SpareDir)
	if err := os.MkdirAll(spareDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spareDir, "db"), []byte("torn by a crash"), 0o600); err != nil {
		t.Fatal(err)
	}
	sp, err := actorstore.NewSpare(dir, store.Options{Fsync: fsync})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := os.Lstat(spareDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an earlier run's spare is still there: %v", err)
	}
	open := sp.Opener()
	use := func(did string) {
		t.Helper()
		for i := range 2 {
			db, err := open(ctx, did)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				err = db.Write(ctx, func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO account_pref (name, value_json) VALUES ('app.bsky.actor.defs#x', '{}')`)
					return err
				})
			} else {
				var n int
				err = db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM account_pref`).Scan(&n)
				if err == nil && n != 1 {
					err = fmt.Errorf("%d prefs after reopening, want 1", n)
				}
			}
			if err = errors.Join(err, db.Close()); err != nil {
				t.Fatalf("%s: %v", did, err)
			}
		}
	}
	stat := func(p string) os.FileInfo {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	shardOf := func(did string) string { return filepath.Dir(actorstore.Path(dir, did)) }
	find := func(ok func(did string) bool) string {
		for i := 0; ; i++ {
			if did := fmt.Sprintf("did:plc:spare%d", i); ok(did) {
				return did
			}
		}
	}

	use("did:plc:first") // no spare yet: made as before, and the spare after it
	actorstore.WaitSpare(sp)
	spare := map[string]os.FileInfo{"dir": stat(spareDir)}
	for _, suf := range []string{"", "-wal", "-shm"} {
		spare[suf] = stat(filepath.Join(spareDir, "db"+suf))
	}

	fresh := find(func(did string) bool {
		_, err := os.Lstat(shardOf(did))
		return errors.Is(err, fs.ErrNotExist)
	})
	use(fresh)
	p := actorstore.Path(dir, fresh)
	if !os.SameFile(stat(filepath.Dir(p)), spare["dir"]) {
		t.Errorf("the store's new directory %s is not the spare's", filepath.Dir(p))
	}
	for _, suf := range []string{"", "-wal", "-shm"} {
		if !os.SameFile(stat(p+suf), spare[suf]) {
			t.Errorf("%s is not the spare's db%s", p+suf, suf)
		}
	}

	actorstore.WaitSpare(sp)
	again := stat(filepath.Join(spareDir, "db"))
	beside := find(func(did string) bool { return did != fresh && shardOf(did) == shardOf(fresh) })
	use(beside)
	if p := actorstore.Path(dir, beside); !os.SameFile(stat(p), again) {
		t.Errorf("%s, in an existing directory, is not the spare's db", p)
	}
	if _, err := os.Lstat(spareDir); err != nil {
		t.Errorf("the spare's directory after a claim into an existing one: %v", err)
	}
}
