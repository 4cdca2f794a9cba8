package actorstore

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/fakepds/fakepds/pds/store"
)

// Spare makes the next new actor store ahead of its account, files and
// open database both: createAccount then links its files into place and
// takes the database as it is, instead of creating and opening them.
//
// Creating a file or directory is the costly part of making one: on ext4
// without a journal each new inode is a search past the inodes freed in
// the last minute (a test machine's temp dir frees thousands), 0.3-1 ms
// of kernel CPU a file measured under /tmp, against ~17 us a link. A store
// takes two (the database and its -wal; the WAL index is in memory, see
// pds/store's vfs), and a third for its directory while most of the 256
// are still to be made. Opening it is the
// other: SQLite parses the schema and sets the pragmas of its connection,
// ~0.5-1 ms (modernc's parser is slow).
//
// A spare is a database copied from store's template with an empty -wal,
// named by its number in SpareDir, opened by the opener's steps:
// what the opener would make. Its files are linked, not renamed, to the
// store's names, and its own names stay until the store is closed: the
// writer connection keeps the name it was opened by, and SQLite
// checkpoints at a close only while that name still names the file. A
// directory kept beside it becomes the store's directory when that does
// not exist yet.
//
// One spare at a time, made in the background after each claim (and after
// a store made without one), so the first new store of a server pays as
// before and so do those of a burst faster than the spare is remade: a
// claim that finds none does not wait for the one being made, since two
// made side by side keep a burst's pace (BenchmarkCreateAccount: burst
// unchanged by waiting or not, spaced 2.7-3.1 -> 1.3-2.2 ms a call at the
// server with the spare opened ahead).
type Spare struct {
	dir  string // the actor store dir
	opts store.Options
	log  *slog.Logger
	warm func(context.Context, *store.DB) error

	mu     sync.Mutex
	ready  *made // the spare, complete and open; nil while there is none
	n      int   // spares made, each under its own name
	making bool  // a goroutine is making one
	closed bool
	wg     sync.WaitGroup
}

// made is a spare: its database's path, and the database open.
type made struct {
	path string
	db   *store.DB
}

// remove unlinks the spare's names.
func (m *made) remove() error {
	var errs []error
	for _, suf := range []string{"", "-wal"} {
		if err := os.Remove(m.path + suf); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// SpareDir is the spares' directory under the actor store dir. A leading
// dot: no store's directory (two hex digits) can have its name.
const SpareDir = ".spare"

// A spare's database is named for its number in SpareDir; not .sqlite,
// so nothing counting stores counts it.

// shardName is the directory kept in SpareDir for the next store whose
// directory does not exist yet.
const shardName = "shard"

// NewSpare returns the spare maker of the actor stores under dir. Spares
// left by an earlier run are removed: after an OS crash with fsync off
// their files may not be whole, and a claimed store's are names of files
// it also has under its own. warm, when not nil, runs on each spare once
// it is open, before it can be claimed: what its account's first request
// would do on a connection still cold (the store's first statement parses
// the schema), such as preparing that request's statements.
func NewSpare(dir string, opts store.Options, warm func(context.Context, *store.DB) error) (*Spare, error) {
	opts.Migrations = Migrations
	opts.Readers, opts.WriterCacheKiB, opts.ReaderCacheKiB = Readers, WriterCacheKiB, ReaderCacheKiB
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := os.RemoveAll(filepath.Join(dir, SpareDir)); err != nil {
		return nil, err
	}
	return &Spare{dir: dir, opts: opts, log: log, warm: warm}, nil
}

// Close stops making spares, waits for the one being made, and closes and
// removes one not claimed.
func (s *Spare) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	m := s.ready
	s.ready = nil
	s.mu.Unlock()
	if m != nil {
		m.db.Close()
		m.remove()
	}
}

// Wait waits for the spare being made, if one is: after it, the next new
// store is made from a spare (unless making it failed).
func (s *Spare) Wait() { s.wg.Wait() }

// claim links the spare's files to path (an actor store's database file,
// not there yet) and returns its open database, or nil when there is no
// spare or linking failed: path is then to be made the usual way. Either
// way it starts making the next spare.
func (s *Spare) claim(path string) *store.DB {
	s.mu.Lock()
	m := s.ready
	s.ready = nil
	if s.closed && m != nil {
		m = nil // Close has it
	}
	s.mu.Unlock()
	defer s.refill()
	if m == nil {
		return nil
	}
	if err := s.link(m, path); err != nil {
		s.log.Warn("actor store from the spare", "path", path, "err", err)
		m.db.Close()
		m.remove()
		return nil
	}
	m.db.Moved(path)
	m.db.OnClose(func() {
		if err := m.remove(); err != nil {
			s.log.Warn("removing a claimed spare's names", "err", err)
		}
	})
	return m.db
}

// link gives the spare's files the names of the store at path: the -wal
// first and the database last, so a store whose database file exists
// is whole (an existence check is what finds a store). When path's
// directory does not exist, the spare's shard directory becomes it. On a
// failure it unlinks what it linked.
func (s *Spare) link(m *made, path string) (err error) {
	shard := filepath.Dir(path)
	if _, err := os.Lstat(shard); errors.Is(err, fs.ErrNotExist) {
		// Made meanwhile by a store made the usual way: then the rename
		// fails, and the directory is there all the same.
		if err := os.Rename(filepath.Join(s.dir, SpareDir, shardName), shard); err != nil {
			if _, statErr := os.Lstat(shard); statErr != nil {
				return err
			}
		}
	}
	var linked []string
	defer func() {
		if err != nil {
			for _, p := range linked {
				os.Remove(p)
			}
		}
	}()
	for _, suf := range []string{"-wal", ""} {
		if err := os.Link(m.path+suf, path+suf); err != nil {
			return err
		}
		linked = append(linked, path+suf)
	}
	if s.opts.Fsync {
		// Durable: the files' new names, and a new directory's.
		return errors.Join(store.SyncDir(shard), store.SyncDir(s.dir))
	}
	return nil
}

// refill starts making a spare unless one is there or being made.
func (s *Spare) refill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready != nil || s.making || s.closed {
		return
	}
	s.making = true
	s.n++
	n := s.n
	s.wg.Go(func() {
		m, err := s.make(n)
		if err != nil {
			s.log.Warn("making a spare actor store", "err", err)
		}
		s.mu.Lock()
		s.making = false
		s.ready = m
		s.mu.Unlock()
	})
}

// make makes spare n: the shard directory if claimed with the last spare,
// then an empty -wal and the database from the template, opened.
// One directory holds every spare: a directory of its own made and
// removed for each was ~2 ms more a spare.
func (s *Spare) make(n int) (*made, error) {
	spares := filepath.Join(s.dir, SpareDir)
	if err := os.MkdirAll(filepath.Join(spares, shardName), 0o700); err != nil {
		return nil, err
	}
	m := &made{path: filepath.Join(spares, strconv.Itoa(n))}
	if err := s.makeAt(m); err != nil {
		m.remove()
		return nil, err
	}
	return m, nil
}

func (s *Spare) makeAt(m *made) error {
	f, err := os.OpenFile(m.path+"-wal", os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	// Without cancellation: Close waits for it, and it is short.
	ctx := context.Background()
	if err := store.CreateFile(ctx, m.path, s.opts); err != nil {
		return err
	}
	db, err := openStore(ctx, m.path, s.opts)
	if err != nil {
		return err
	}
	if s.warm != nil {
		if err := s.warm(ctx, db); err != nil {
			db.Close()
			return err
		}
	}
	m.db = db
	return nil
}
