package actorstore

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/fakepds/fakepds/pds/store"
)

// Spare makes the files of the next new actor store ahead of its account:
// createAccount then moves them into place (renames) instead of creating
// them. Creating a file or directory is what a new store costs most: on
// ext4 without a journal each new inode is a search past the inodes freed
// in the last minute (a test machine's temp dir frees thousands), 0.3-1 ms
// a file measured under /tmp, against ~15 us a rename. A store takes three
// (the database, its -wal and -shm), and a fourth for its directory while
// most of the 256 are still to be made. The spare is a directory,
// SpareDir under the actor store dir, holding a database copied from
// store's template and an empty -wal and -shm: what Open would make, so
// the store opened on them is the one Open would have made. When the
// store's directory does not exist yet, the spare's directory becomes it.
//
// One spare at a time, made in the background after each claim (and after
// a store made without one), so the first new store of a server pays as
// before and so do those of a burst faster than the spare is remade.
type Spare struct {
	dir  string // the actor store dir
	opts store.Options
	log  *slog.Logger

	mu     sync.Mutex
	ready  bool // the spare's files are complete
	making bool // a goroutine is making them
	closed bool
	wg     sync.WaitGroup
}

// SpareDir is the spare's directory under the actor store dir. A leading
// dot: no store's directory (two hex digits) can have its name.
const SpareDir = ".spare"

// spareName is the spare database's name in SpareDir until claimed; not
// .sqlite, so nothing counting stores counts it.
const spareName = "db"

// NewSpare returns the spare maker of the actor stores under dir. A spare
// left by an earlier run is removed: after an OS crash with fsync off its
// files may not be whole.
func NewSpare(dir string, opts store.Options) (*Spare, error) {
	opts.Migrations = Migrations
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	if err := os.RemoveAll(filepath.Join(dir, SpareDir)); err != nil {
		return nil, err
	}
	return &Spare{dir: dir, opts: opts, log: log}, nil
}

// Close stops making spares and waits for the one being made. The files of
// an unclaimed spare stay (NewSpare removes them).
func (s *Spare) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}

// claim moves the spare's files to path (an actor store's database file,
// not there yet) and reports whether it did; false leaves path to be made
// the usual way. Either way it starts making the next spare.
func (s *Spare) claim(path string) bool {
	s.mu.Lock()
	ok := s.ready && !s.closed
	s.ready = false
	s.mu.Unlock()
	defer s.refill()
	if !ok {
		return false
	}
	if err := s.move(path); err != nil {
		// What moved is a valid start (a database file, empty -wal or -shm),
		// what did not is made again by the next refill.
		s.log.Warn("actor store from the spare", "path", path, "err", err)
		_, err := os.Lstat(path)
		return err == nil
	}
	return true
}

// move renames the spare's files to path: the -wal and -shm first and the
// database last, so a store whose database file exists is whole (an
// existence check is what finds a store).
func (s *Spare) move(path string) error {
	spare := filepath.Join(s.dir, SpareDir)
	shard := filepath.Dir(path)
	base := filepath.Base(path)
	// renameAll renames the database's three files, from names made by
	// from to names made by to, the database last.
	renameAll := func(from, to func(suf string) string) error {
		for _, suf := range []string{"-wal", "-shm", ""} {
			if err := os.Rename(from(suf), to(suf)); err != nil {
				return err
			}
		}
		return nil
	}
	inSpare := func(name string) func(string) string {
		return func(suf string) string { return filepath.Join(spare, name+suf) }
	}
	atPath := func(suf string) string { return path + suf }
	from := inSpare(spareName)
	if _, err := os.Lstat(shard); errors.Is(err, fs.ErrNotExist) {
		// The spare's directory becomes the store's: its files renamed
		// inside it, then it, one directory fewer to make.
		if err := renameAll(from, inSpare(base)); err != nil {
			return err
		}
		if err := os.Rename(spare, shard); err == nil {
			if s.opts.Fsync {
				// Durable: the directory's name, and its files' new names.
				return errors.Join(store.SyncDir(shard), store.SyncDir(s.dir))
			}
			return nil
		}
		// Made meanwhile by a store made the usual way: move the files in.
		from = inSpare(base)
	}
	if err := renameAll(from, atPath); err != nil {
		return err
	}
	if s.opts.Fsync {
		return store.SyncDir(shard)
	}
	return nil
}

// refill starts making a spare unless one is there or being made.
func (s *Spare) refill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready || s.making || s.closed {
		return
	}
	s.making = true
	s.wg.Go(func() {
		err := s.make()
		if err != nil {
			s.log.Warn("making a spare actor store", "err", err)
		}
		s.mu.Lock()
		s.making = false
		s.ready = err == nil
		s.mu.Unlock()
	})
}

// make creates the spare's files: its directory if claimed with the last
// spare, an empty -wal and -shm, then the database from the template.
func (s *Spare) make() error {
	spare := filepath.Join(s.dir, SpareDir)
	if err := os.MkdirAll(spare, 0o700); err != nil {
		return err
	}
	p := filepath.Join(spare, spareName)
	for _, suf := range []string{"", "-wal", "-shm"} {
		// Left by a claim that failed halfway.
		if err := os.Remove(p + suf); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	for _, suf := range []string{"-wal", "-shm"} {
		f, err := os.OpenFile(p+suf, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	// Without cancellation: Close waits for it, and it is short.
	return store.CreateFile(context.Background(), p, s.opts)
}
