package actorstore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/store"
)

// TestSpare: after the first new store, a new store is the spare: its
// files (the same inodes, linked; the spare's shard directory becomes the
// store's when that is new) and its database, opened ahead. It keeps what
// is written to it across a close, which checkpoints (the WAL is empty
// after it) and removes the spare's own names; a spare left by an earlier
// run is removed at start. With fsync on as well: the spare is then
// synced.
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
	sp, err := actorstore.NewSpare(dir, store.Options{Fsync: fsync}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	if _, err := os.Lstat(spareDir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an earlier run's spare is still there: %v", err)
	}
	open := sp.Opener()
	var spareOpen string // the spare's database, when the next open claims it
	use := func(did string) {
		t.Helper()
		for i := range 2 {
			db, err := open(ctx, did)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 && spareOpen != "" {
				if _, err := os.Lstat(spareOpen); err != nil {
					t.Errorf("the spare's own name, while its store is open: %v", err)
				}
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
			if fi, err := os.Stat(actorstore.Path(dir, did) + "-wal"); err != nil || fi.Size() != 0 {
				t.Errorf("%s: the WAL after a close, %v: not checkpointed", did, err)
			}
			if i == 0 && spareOpen != "" {
				if _, err := os.Lstat(spareOpen); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("the claimed spare's own name after its store closed: %v", err)
				}
			}
		}
	}
	// spareFiles is the spare made: its database's path, and its files.
	spareFiles := func() (string, map[string]os.FileInfo) {
		t.Helper()
		var dbs []string
		all, _ := filepath.Glob(filepath.Join(spareDir, "[0-9]*"))
		for _, p := range all {
			if !strings.Contains(filepath.Base(p), "-") {
				dbs = append(dbs, p)
			}
		}
		if len(dbs) != 1 {
			t.Fatalf("spares: %v, want one", dbs)
		}
		files := map[string]os.FileInfo{}
		for _, suf := range []string{"", "-wal"} {
			fi, err := os.Lstat(dbs[0] + suf)
			if err != nil {
				t.Fatal(err)
			}
			files[suf] = fi
		}
		return dbs[0], files
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
	sp.Wait()
	var spare map[string]os.FileInfo
	spareOpen, spare = spareFiles()
	spare["dir"] = stat(filepath.Join(spareDir, "shard"))

	fresh := find(func(did string) bool {
		_, err := os.Lstat(shardOf(did))
		return errors.Is(err, fs.ErrNotExist)
	})
	use(fresh)
	p := actorstore.Path(dir, fresh)
	if !os.SameFile(stat(filepath.Dir(p)), spare["dir"]) {
		t.Errorf("the store's new directory %s is not the spare's", filepath.Dir(p))
	}
	for _, suf := range []string{"", "-wal"} {
		if !os.SameFile(stat(p+suf), spare[suf]) {
			t.Errorf("%s is not the spare's db%s", p+suf, suf)
		}
	}

	sp.Wait()
	var again map[string]os.FileInfo
	spareOpen, again = spareFiles()
	shardDir := stat(filepath.Join(spareDir, "shard"))
	beside := find(func(did string) bool { return did != fresh && shardOf(did) == shardOf(fresh) })
	use(beside)
	if p := actorstore.Path(dir, beside); !os.SameFile(stat(p), again[""]) {
		t.Errorf("%s, in an existing directory, is not the spare's db", p)
	}
	if !os.SameFile(stat(filepath.Join(spareDir, "shard")), shardDir) {
		t.Errorf("the spare's shard directory after a claim into an existing one changed")
	}
}

// TestSpareWarm: the warm func runs on each spare before it is claimed,
// on the database the new store then is; a spare whose warming failed is
// not used (the store is made as without a spare).
func TestSpareWarm(t *testing.T) {
	ctx := t.Context()
	var fail atomic.Bool
	var warmed atomic.Int32
	opts := store.Options{Logger: slog.New(slog.DiscardHandler)}
	sp, err := actorstore.NewSpare(t.TempDir(), opts, func(ctx context.Context, db *store.DB) error {
		if fail.Load() {
			return errors.New("warming failed")
		}
		warmed.Add(1)
		return db.Write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO account_pref (name, value_json) VALUES ('warmed', '{}')`)
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	open := sp.Opener()
	prefs := func(did string) int {
		t.Helper()
		db, err := open(ctx, did)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.Reader().QueryRowContext(ctx, `SELECT count(*) FROM account_pref WHERE name = 'warmed'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := prefs("did:plc:first"); n != 0 {
		t.Fatalf("the first store (no spare yet) was warmed: %d rows", n)
	}
	sp.Wait()        // each open starts the next spare
	fail.Store(true) // for the spare the next open starts
	if n := prefs("did:plc:second"); n != 1 || warmed.Load() != 1 {
		t.Fatalf("the store from the spare: %d warm rows, warmed %d times; want 1, 1", n, warmed.Load())
	}
	sp.Wait()
	if n := prefs("did:plc:third"); n != 0 {
		t.Fatalf("a store made after a failed warming has %d warm rows", n)
	}
}
