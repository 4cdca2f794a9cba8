package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A new database file is a copy of a template: an empty database of the
// same migrations, already in WAL mode, made once per process, at the
// second new file of those migrations (a process that makes one, as the
// fakepds binary makes each of its own, pays nothing for it). Creating
// the file through SQLite costs a rollback journal (the switch to WAL is a
// write to a file not yet in WAL), the schema's pages written one frame at
// a time and a checkpoint at close; a copy is one file written whole.
// Opening it then runs no migration: its user_version is already theirs.

// template is the bytes of one migration list's empty database, once made.
// A failure is not kept: the next Open tries again (the directory may exist
// by then).
type template struct {
	mu   sync.Mutex
	seen bool // a file of these migrations was made the long way
	data []byte
}

// bytes returns the template, or nil for the first file of its migrations
// unless always.
func (t *template) bytes(ctx context.Context, dir string, opts Options, always bool) ([]byte, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.seen && !always {
		t.seen = true
		return nil, nil
	}
	t.seen = true
	if t.data == nil {
		b, err := makeTemplate(ctx, dir, opts)
		if err != nil {
			return nil, fmt.Errorf("template: %w", err)
		}
		t.data = b
	}
	return t.data, nil
}

// templates holds a *template per migration list (its statements joined).
var templates sync.Map

// fromTemplate writes the template of opts.Migrations at path when no file
// is there. A name SQLite treats specially (":memory:", a "file:" URI, "")
// is left to SQLite.
func fromTemplate(ctx context.Context, path string, opts Options) error {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return err // there (nil), or cannot tell
	}
	err := writeTemplate(ctx, path, opts, false)
	if errors.Is(err, fs.ErrExist) {
		return nil // made meanwhile by another Open: SQLite's to share
	}
	return err
}

// CreateFile writes a new database of opts.Migrations at path, which must
// not exist, as Open would create it (from the template, made now if it
// is not yet), without opening it: a file to be moved into place before
// its first Open (pds/actorstore's spare stores). With opts.Fsync the
// file and its directory entry are durable when it returns.
func CreateFile(ctx context.Context, path string, opts Options) error {
	return writeTemplate(ctx, path, opts, true)
}

// writeTemplate writes the template of opts.Migrations at path (always:
// even for the first file of those migrations, which fromTemplate leaves
// to SQLite). It fails with fs.ErrExist when a file is there.
func writeTemplate(ctx context.Context, path string, opts Options, always bool) error {
	v, _ := templates.LoadOrStore(strings.Join(opts.Migrations, "\x00"), &template{})
	data, err := v.(*template).bytes(ctx, filepath.Dir(path), opts, always)
	if err != nil || data == nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && opts.Fsync {
		// Durable means the file and its name.
		err = f.Sync()
		if err == nil {
			err = SyncDir(filepath.Dir(path))
		}
	}
	if err = errors.Join(err, f.Close()); err != nil {
		os.Remove(path)
	}
	return err
}

// makeTemplate creates a database of opts.Migrations in dir the long way
// and returns its bytes once closed (the close checkpoints the WAL into
// the file).
func makeTemplate(ctx context.Context, dir string, opts Options) ([]byte, error) {
	f, err := os.CreateTemp(dir, ".template-*.sqlite")
	if err != nil {
		return nil, err
	}
	p := f.Name()
	f.Close()
	defer func() {
		for _, suffix := range []string{"", "-wal"} {
			os.Remove(p + suffix)
		}
	}()
	// The file exists (empty), so this Open creates it the long way. Its
	// durability does not matter: only its bytes are kept.
	opts.Fsync = false
	db, err := open(ctx, p, opts)
	if err != nil {
		return nil, err
	}
	if err := db.Close(); err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// SyncDir makes a directory's entries (a file made or removed there)
// durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
