package actorstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/fakepds/fakepds/pds/store"
)

// template is an empty actor store (WAL mode, schema applied), made once
// per opener and copied into place for each new account. Creating the file
// from scratch costs a rollback journal (for the switch to WAL) and the
// schema's statements on every createAccount; copying the bytes costs one
// write.
type template struct {
	once sync.Once
	data []byte
	err  error
}

func (t *template) bytes(ctx context.Context, dir string, opts store.Options) ([]byte, error) {
	t.once.Do(func() {
		f, err := os.CreateTemp(dir, ".template-*.sqlite")
		if err != nil {
			t.err = err
			return
		}
		p := f.Name()
		f.Close()
		defer func() {
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(p + suffix)
			}
		}()
		db, err := store.Open(ctx, p, opts)
		if err != nil {
			t.err = err
			return
		}
		// The last connection to close checkpoints the WAL into the file.
		if t.err = db.Close(); t.err != nil {
			return
		}
		t.data, t.err = os.ReadFile(p)
	})
	return t.data, t.err
}

// create writes the template at p unless a file is there already.
func (t *template) create(ctx context.Context, p string, opts store.Options) error {
	if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
		return err // exists (nil), or cannot tell
	}
	data, err := t.bytes(ctx, filepath.Dir(filepath.Dir(p)), opts)
	if err != nil {
		return fmt.Errorf("actorstore: template: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(p)
		return err
	}
	if opts.Fsync {
		// Durable means the file and its name: sync both.
		if err := f.Sync(); err != nil {
			f.Close()
			os.Remove(p)
			return err
		}
		if err := syncDir(filepath.Dir(p)); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
