// Package actorstore holds the per-account databases: one SQLite file per
// account (repo blocks, records, blob metadata, preferences), found by a
// hash of the DID and opened through a bounded cache of handles.
package actorstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fakepds/fakepds/pds/store"
)

// Path is the file of did's actor store under dir. The name is a hash of
// the DID, so no DID, however crafted, can name a path outside dir; two hex
// digits of fan-out keep directories small with many accounts.
func Path(dir, did string) string {
	sum := sha256.Sum256([]byte(did))
	name := hex.EncodeToString(sum[:])
	return filepath.Join(dir, name[:2], name+".sqlite")
}

// What one open actor store may hold in SQLite page caches: a PDS keeps
// hundreds open (Cache), each with a writer and up to Readers readers, and
// at SQLite's default of 2,000 KiB a connection a long run's caches grew
// with the repos to gigabytes (a 2-minute soak of 256 accounts: SQLite's
// allocations 119 -> 374 MiB and still climbing; with these bounds they
// level off at 287 MiB). A test's repos are small, and a page the cache
// has let go is one pread from the OS's cache away. The writer's 192 KiB
// (256 before): RSS after benchcompare's suite, hot and concurrent
// workloads 103 -> 97-98 MiB, and no change to see in a read or write of
// a repo of 100 or 10,000 records; at 128 KiB (91 MiB) listRecords of a
// 100-record repo took ~1.5x.
const (
	Readers        = 2
	WriterCacheKiB = 192
	ReaderCacheKiB = 128
)

// Opener returns the OpenFunc that opens (creating if needed) actor stores
// under dir with the given store options and this package's schema and
// connection bounds.
func Opener(dir string, opts store.Options) OpenFunc[*store.DB] {
	return opener(dir, opts, nil)
}

// Opener is the package's Opener of the stores under s's dir, whose new
// stores are made of the spare's files when it has them.
func (s *Spare) Opener() OpenFunc[*store.DB] {
	return opener(s.dir, s.opts, s)
}

func opener(dir string, opts store.Options, spare *Spare) OpenFunc[*store.DB] {
	opts.Migrations = Migrations
	opts.Readers, opts.WriterCacheKiB, opts.ReaderCacheKiB = Readers, WriterCacheKiB, ReaderCacheKiB
	return func(ctx context.Context, did string) (*store.DB, error) {
		p := Path(dir, did)
		if spare != nil {
			if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
				if db := spare.claim(p); db != nil {
					return db, nil
				}
			}
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return nil, fmt.Errorf("actorstore: %w", err)
		}
		// A new store not claimed from the spare is a copy of store's
		// template of Migrations.
		return openStore(ctx, p, opts)
	}
}

// openStore opens the actor store at path, with opts as opener sets them.
func openStore(ctx context.Context, p string, opts store.Options) (*store.DB, error) {
	db, err := store.Open(ctx, p, opts)
	if err != nil {
		return nil, err
	}
	if err := persistWAL(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("actorstore: %s: %w", p, err)
	}
	return db, nil
}

// persistWAL keeps the store's -wal file when it closes
// (SQLITE_FCNTL_PERSIST_WAL on the writer, the connection that closes
// last): the close still checkpoints, then truncates the WAL to nothing
// (journal_size_limit is set) instead of deleting it. A test suite with
// more accounts in use than the cache holds closes and reopens stores all
// the time, and deleting its files at each close to create them again at
// the next open was about half of an open and close
// (1.6-10 ms -> 0.8-1.2 ms an open, a write and a close, on a busy disk).
func persistWAL(ctx context.Context, db *store.DB) error {
	c, err := db.Writer().Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		fc, ok := dc.(interface {
			FileControlPersistWAL(schema string, mode int) (int, error)
		})
		if !ok {
			return fmt.Errorf("driver connection %T has no FileControlPersistWAL", dc)
		}
		_, err := fc.FileControlPersistWAL("main", 1)
		return err
	})
}

// Migrations is the actor store schema, one entry per PRAGMA user_version.
//
// The repo tables (repo_root, repo_block, record) belong to package repo,
// which keeps them in step with the MST in every write transaction:
//   - repo_root is one row: the head commit, its rev and its MST root (data),
//     so a write finds the tree without decoding the commit block.
//   - repo_block holds exactly the live blocks (head commit, MST nodes,
//     records): a write deletes what it replaces, so sync.getRepo is a table
//     scan. A rowid table with a unique index, not WITHOUT ROWID: MST nodes
//     and records are mostly larger than the ~200 bytes below which SQLite
//     advises clustering rows on their key. CIDs are stored as binary.
//   - record is the index of the MST's leaves, clustered on (collection,
//     rkey) so listRecords is a range scan; record_cid finds other records
//     sharing a block before that block is deleted.
var Migrations = []string{
	`CREATE TABLE repo_root (
		id   INTEGER PRIMARY KEY CHECK (id = 1),
		did  TEXT NOT NULL,
		cid  BLOB NOT NULL,
		rev  TEXT NOT NULL,
		data BLOB NOT NULL
	);
	CREATE TABLE repo_block (
		cid      BLOB NOT NULL UNIQUE,
		repo_rev TEXT NOT NULL,
		content  BLOB NOT NULL
	);
	CREATE INDEX repo_block_rev ON repo_block (repo_rev);
	CREATE TABLE record (
		collection   TEXT NOT NULL,
		rkey         TEXT NOT NULL,
		cid          BLOB NOT NULL,
		repo_rev     TEXT NOT NULL,
		takedown_ref TEXT,
		PRIMARY KEY (collection, rkey)
	) WITHOUT ROWID;
	CREATE INDEX record_cid ON record (cid);
	CREATE TABLE blob (
		cid          TEXT PRIMARY KEY,
		mime_type    TEXT NOT NULL,
		size         INTEGER NOT NULL,
		temp_key     TEXT,
		created_at   TEXT NOT NULL,
		takedown_ref TEXT
	);
	CREATE TABLE record_blob (
		blob_cid   TEXT NOT NULL,
		record_uri TEXT NOT NULL,
		PRIMARY KEY (blob_cid, record_uri)
	) WITHOUT ROWID;
	CREATE INDEX record_blob_uri ON record_blob (record_uri);
	CREATE TABLE account_pref (
		id         INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		value_json TEXT NOT NULL
	);`,
	// 2: repo_block_rev goes. Its only reader is getRepo with since, which
	// scans the table like getRepo without since; keeping it cost every
	// write ~2.5 WAL pages (the deleted blocks' older revs sit apart from
	// the new ones), 21 -> 18.5 pages a createRecord on a repo of 1,000.
	`DROP INDEX repo_block_rev;`,
	// 3: a blob smaller than 64 KiB keeps its bytes in its row (package
	// blob): an upload is then one transaction, where a file cost the
	// account's blob directory on its first upload and a file creation on
	// each (most of uploadBlob's time in a test suite). NULL: in a file.
	`ALTER TABLE blob ADD COLUMN content BLOB;`,
}
