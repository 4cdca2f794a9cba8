package repo_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
)

// A store of the schema before repo_block.refs (migration 3: the
// record_cid index instead) migrates with each block's references
// counted, and writes then free a shared block only with its last record.
func TestRefsMigration(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	src := newFixture(t, "").withWriter()
	src.mustApply(create(t, "a", "shared"), create(t, "b", "shared"), create(t, "c", "alone"))

	// The same repo, copied row by row into a store made by the first
	// three migrations.
	dir := t.TempDir()
	path := filepath.Join(dir, "actor.sqlite")
	old, err := store.Open(ctx, path, store.Options{Migrations: actorstore.Migrations[:3]})
	if err != nil {
		t.Fatal(err)
	}
	err = old.Write(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`ATTACH DATABASE ? AS src`,
			`INSERT INTO repo_root SELECT * FROM src.repo_root`,
			`INSERT INTO repo_block (cid, repo_rev, content) SELECT cid, repo_rev, content FROM src.repo_block`,
			`INSERT INTO record SELECT * FROM src.record`,
		} {
			var args []any
			if q == `ATTACH DATABASE ? AS src` {
				args = append(args, src.db.Path())
			}
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var index int
	if err := old.Reader().QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'record_cid'`).Scan(&index); err != nil || index != 1 {
		t.Fatalf("old schema: record_cid %d, %v", index, err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	f := &fixture{t: t, db: openStore(t, dir), did: src.did, key: src.key, pub: src.pub, head: src.head}
	if err := f.db.Reader().QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'record_cid'`).Scan(&index); err != nil || index != 0 {
		t.Fatalf("migrated: record_cid %d, %v", index, err)
	}
	f.withWriter()
	var shared int
	if err := f.db.Reader().QueryRow(`SELECT count(*) FROM repo_block WHERE refs = 2`).Scan(&shared); err != nil || shared != 1 {
		t.Fatalf("blocks of 2 records after migrating: %d, %v", shared, err)
	}
	f.checkRepo()
	sharedCID := cidOf(t, post(t, "shared"))
	has := func() bool {
		var n int
		if err := f.db.Reader().QueryRow(`SELECT count(*) FROM repo_block WHERE cid = ?`, sharedCID.Bytes()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	f.mustApply(del("a"))
	f.checkRepo()
	if !has() {
		t.Fatal("the block of a and b went with a")
	}
	f.mustApply(update(t, "b", "other"), update(t, "c", "shared"))
	f.checkRepo()
	if !has() {
		t.Fatal("the block b left and c took went")
	}
	f.mustApply(del("c"))
	f.checkRepo()
	if has() {
		t.Fatal("the block of no record stayed")
	}
}

// Import keeps references right where the imported repo shares blocks
// with the one it replaces: a block kept with fewer records, one that
// stays with as many, one the import adds records to.
func TestImportRefs(t *testing.T) {
	t.Parallel()
	src := newFixture(t, "")
	src.mustApply(create(t, "a", "x"), create(t, "e", "x"), create(t, "f", "y"), create(t, "g", "z"), create(t, "h", "z"))
	carFile := export(t, src, "")

	dst := newFixture(t, "").withWriter()
	dst.mustApply(create(t, "a", "x"), create(t, "b", "x"), create(t, "c", "x"), create(t, "d", "y"), create(t, "g", "z"))
	err := dst.db.Write(t.Context(), func(tx *sql.Tx) error {
		_, err := repo.Import(t.Context(), tx, dst.did, bytes.NewReader(carFile), time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	dstKey := dst.pub
	dst.pub = src.pub
	dst.checkRepo()
	_, rev, err := repo.Head(context.Background(), dst.db.Reader())
	if err != nil {
		t.Fatal(err)
	}
	dst.pub, dst.head = dstKey, src.head
	dst.head.Rev = rev
	dst.mustApply(del("a"), del("f"), del("g"))
	dst.checkRepo()
	dst.mustApply(del("e"), del("h"))
	dst.checkRepo()
}

// A write of more blocks than go one statement each, some of them
// records already stored, some shared within the write, counts each
// block's references once.
func TestRefsBigWrite(t *testing.T) {
	t.Parallel()
	for _, writer := range []bool{false, true} {
		f := newFixture(t, "")
		if writer {
			f.withWriter()
		}
		f.mustApply(create(t, "a", "old 1"), create(t, "b", "old 2"))
		var writes []repo.Write
		for i := range 12 {
			text := fmt.Sprint("new ", i%5)
			if i < 2 {
				text = fmt.Sprint("old ", i+1)
			}
			writes = append(writes, create(t, fmt.Sprint("n", i), text))
		}
		writes = append(writes, update(t, "a", "new 0"), del("b"))
		f.mustApply(writes...)
		f.checkRepo()
		var dels []repo.Write
		for i := range 12 {
			dels = append(dels, del(fmt.Sprint("n", i)))
		}
		f.mustApply(dels...)
		f.checkRepo()
		f.mustApply(del("a"))
		f.checkRepo()
	}
}
