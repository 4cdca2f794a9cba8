package pds

import (
	"context"
	"errors"
	"sync"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
)

// actor is an open actor store as the cache holds it: the database and
// the repo engine's prepared statements, made on the first write (so
// createAccount's cold open does not pay for them, and read-only accounts
// never do).
type actor struct {
	*store.DB
	once   sync.Once
	writer *repo.Writer
	err    error
}

// repoWriter is the account's repo.Writer, prepared once per open store.
func (a *actor) repoWriter(ctx context.Context) (*repo.Writer, error) {
	a.once.Do(func() { a.writer, a.err = repo.NewWriter(context.WithoutCancel(ctx), a.Writer()) })
	return a.writer, a.err
}

// Close closes the statements, then the database.
func (a *actor) Close() error {
	var err error
	if a.writer != nil {
		err = a.writer.Close()
	}
	return errors.Join(err, a.DB.Close())
}

// actorOpener opens actor stores under dir for the cache.
func actorOpener(dir string, opts store.Options) actorstore.OpenFunc[*actor] {
	open := actorstore.Opener(dir, opts)
	return func(ctx context.Context, did string) (*actor, error) {
		db, err := open(ctx, did)
		if err != nil {
			return nil, err
		}
		return &actor{DB: db}, nil
	}
}
