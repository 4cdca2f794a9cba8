package pds

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/blob"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

// actor is an open actor store as the cache holds it: the database and
// the prepared statements of repo writes (the repo engine's and the blob
// refs'), made at the first write that runs them (so createAccount's cold
// open does not pay for them, read-only accounts never do, and an account
// that only creates records without blobs never prepares the blob refs'
// nor the repo's statements of updates and deletes).
type actor struct {
	*store.DB
	mu     sync.Mutex
	writer *repo.Writer
	refs   *blob.RefStmts
	// bigCAR: a whole export of the repo was past smallCAR, so exports
	// stream from a reader without trying memory first (answerSmallCAR).
	bigCAR atomic.Bool
}

// writeStmts are the account's repo.Writer, with what writes run
// prepared (current: the write calls Writer.Current), and its
// blob.RefStmts with what writes run prepared: only an update or delete
// (whose record may have had blobs) or a record with blobs runs any.
// Call it before the write's transaction: preparing needs the writer
// connection.
func (a *actor) writeStmts(ctx context.Context, writes []prepared, current bool) (*repo.Writer, *blob.RefStmts, error) {
	ctx = context.WithoutCancel(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.writer == nil {
		w, err := repo.NewWriter(ctx, a.Writer())
		if err != nil {
			return nil, nil, err
		}
		a.writer = w
	}
	ws := make([]repo.Write, len(writes))
	var dissociate, associate bool
	for i, w := range writes {
		ws[i] = w.Write
		dissociate = dissociate || w.Action != repo.ActionCreate
		associate = associate || len(w.blobs) > 0
	}
	if err := a.writer.Prepare(ctx, ws, current); err != nil {
		return nil, nil, err
	}
	if a.refs == nil {
		a.refs = blob.NewRefStmts(a.Writer())
	}
	if err := a.refs.Prepare(ctx, dissociate, associate); err != nil {
		return nil, nil, err
	}
	return a.writer, a.refs, nil
}

// Close closes the statements, then the database.
func (a *actor) Close() error {
	var errs []error
	if a.writer != nil {
		errs = append(errs, a.writer.Close())
	}
	if a.refs != nil {
		errs = append(errs, a.refs.Close())
	}
	return errors.Join(append(errs, a.DB.Close())...)
}

// acquire takes did's actor store from the cache. A wait for a free
// handle is bounded (Config.SlotWait): past it the call answers 503
// NotEnoughResources rather than hang.
func (s *Server) acquire(ctx context.Context, did string) (*actorstore.Handle[*actor], error) {
	h, err := s.actors.Acquire(ctx, did)
	if errors.Is(err, actorstore.ErrBusy) {
		return nil, xrpc.Errorf(http.StatusServiceUnavailable, "NotEnoughResources", "every actor store is in use; try again")
	}
	return h, err
}

// actorOpener opens actor stores for the cache.
func actorOpener(open actorstore.OpenFunc[*store.DB]) actorstore.OpenFunc[*actor] {
	return func(ctx context.Context, did string) (*actor, error) {
		db, err := open(ctx, did)
		if err != nil {
			return nil, err
		}
		return &actor{DB: db}, nil
	}
}

// withActor runs fn on did's actor store.
func (s *Server) withActor(ctx context.Context, did string, fn func(db *store.DB) error) error {
	return s.withActorStore(ctx, did, func(a *actor) error { return fn(a.DB) })
}

// withActorStore runs fn on did's open actor store, repo writer included.
func (s *Server) withActorStore(ctx context.Context, did string, fn func(a *actor) error) error {
	h, err := s.acquire(ctx, did)
	if err != nil {
		return err
	}
	defer h.Release()
	return fn(h.DB)
}

// errNoRepo is an actor store that does not exist.
var errNoRepo = errors.New("pds: repo not found")

// withExistingActor runs fn on did's actor store, errNoRepo when did has
// none (without creating one, as Acquire would).
func (s *Server) withExistingActor(ctx context.Context, did string, fn func(db *store.DB) error) error {
	if _, err := syntax.ParseDID(did); err != nil {
		// A handle in an at:// URI: the reference fails to open a store
		// named by it, a 500.
		return fmt.Errorf("pds: actor store of %q: not a DID", did)
	}
	if _, err := os.Stat(actorstore.Path(s.actorDir(), did)); err != nil {
		return errNoRepo
	}
	return s.withActor(ctx, did, fn)
}
