package pds

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/auth"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

func (s *Server) registerSync(x *xrpc.Mux) {
	s.handle(x, xrpc.Query, "com.atproto.sync.getRepo", repoReader, s.syncGetRepo)
	s.handle(x, xrpc.Query, "com.atproto.sync.getLatestCommit", repoReader, s.syncGetLatestCommit)
	s.handle(x, xrpc.Query, "com.atproto.sync.getRecord", repoReader, s.syncGetRecord)
	s.handle(x, xrpc.Query, "com.atproto.sync.getBlocks", repoReader, s.syncGetBlocks)
	s.handle(x, xrpc.Query, "com.atproto.sync.listRepos", noAuth, s.syncListRepos)
	s.handle(x, xrpc.Query, "com.atproto.sync.getRepoStatus", noAuth, s.syncGetRepoStatus)
}

// repoReader is the sync reads' optional auth: no credentials, the
// admin's Basic credentials, or an access token (takendown scope
// included), as the reference's optional verifier; bad credentials fail the
// request.
func (s *Server) repoReader(r *http.Request) (*caller, error) {
	scheme, _, err := authHeader(r)
	if err != nil {
		return nil, err
	}
	switch scheme {
	case "":
		return nil, nil
	case "BASIC":
		if err := s.admin(r); err != nil {
			return nil, err
		}
		return &caller{Admin: true}, nil
	}
	return s.bearer(r, auth.TypeAccess, append(scopesStandard, auth.ScopeTakendown), check{})
}

// readsOwnRepo: the admin, or the account itself, may read a repo that is
// taken down or deactivated.
func (c *caller) readsOwnRepo(did string) bool {
	return c != nil && (c.Admin || c.DID == did)
}

// availableRepo is the reference's assertRepoAvailability for a caller
// of repoReader's auth.
func (s *Server) availableRepo(ctx context.Context, c *caller, did string) (*account.Account, error) {
	return s.assertRepoAvailable(ctx, did, c.readsOwnRepo(did))
}

// assertRepoAvailable: the account must exist, and unless exempt, be
// neither taken down nor deactivated.
func (s *Server) assertRepoAvailable(ctx context.Context, id string, exempt bool) (*account.Account, error) {
	acc, err := s.accounts.ByIdentifier(ctx, id)
	if errors.Is(err, account.ErrNotFound) {
		return nil, xrpc.InvalidRequest("RepoNotFound", "Could not find repo for DID: %s", id)
	}
	if err != nil || exempt {
		return acc, err
	}
	if acc.TakedownRef != "" {
		return nil, xrpc.InvalidRequest("RepoTakendown", "Repo has been takendown: %s", id)
	}
	if acc.DeactivatedAt != "" {
		return nil, xrpc.InvalidRequest("RepoDeactivated", "Repo has been deactivated: %s", id)
	}
	return acc, nil
}

// answerCAR answers the CAR fn writes from did's actor store, read in one
// snapshot; a store that holds no repo answers notFound (when not nil).
// The CAR is streamed as fn writes it (ExportCAR and GetBlocks hand it on
// in 64 KiB pieces), so a large repo is never whole in memory; the status
// goes out with the first bytes, so an error before them is answered as
// any other. The snapshot and the actor store handle are held until the
// client has taken the last byte: each write must be taken within
// Config.WriteTimeout, or the response is cut off and both are freed.
func (s *Server) answerCAR(w http.ResponseWriter, r *http.Request, did string, notFound error, fn func(tx *sql.Tx, car io.Writer) error) error {
	out := &carStream{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	err := s.withActor(r.Context(), did, func(db *store.DB) error {
		return db.Read(r.Context(), func(tx *sql.Tx) error { return fn(tx, out) })
	})
	if out.started {
		if err != nil {
			// The status is sent: cut the response off so the client
			// sees a broken CAR, not a short one that parses. What is
			// still buffered must not wait on the client either.
			s.log.Debug("sync: CAR response cut off", "did", did, "err", err)
			_ = out.rc.SetWriteDeadline(time.Now())
			panic(http.ErrAbortHandler)
		}
		return nil // net/http clears the deadline before the next request
	}
	if notFound != nil && errors.Is(err, repo.ErrRepoNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	out.start()
	return nil
}

// carStream is a CAR response written as it is made.
type carStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration // per write; none when not positive
	started bool
}

func (c *carStream) start() {
	c.w.Header().Set("Content-Type", "application/vnd.ipld.car")
	c.w.WriteHeader(http.StatusOK)
	c.started = true
}

func (c *carStream) Write(p []byte) (int, error) {
	if !c.started {
		c.start()
	}
	if c.timeout > 0 {
		if err := c.rc.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return 0, err
		}
	}
	return c.w.Write(p)
}

func (s *Server) syncGetRepo(w http.ResponseWriter, r *http.Request, c *caller) error {
	did := param(r, "did")
	acc, err := s.availableRepo(r.Context(), c, did)
	if err != nil {
		return err
	}
	since := r.URL.Query().Get("since")
	notFound := xrpc.InvalidRequest("RepoNotFound", "Could not find repo for DID: %s", did)
	switch err := s.answerSmallCAR(w, r, acc.DID, since); {
	case errors.Is(err, repo.ErrRepoNotFound):
		return notFound
	case !errors.Is(err, repo.ErrExportTooLarge):
		return err
	}
	return s.answerCAR(w, r, acc.DID, notFound,
		func(tx *sql.Tx, car io.Writer) error { return repo.ExportCAR(r.Context(), tx, car, since) })
}

// smallCAR is the largest repo export answerSmallCAR holds in memory.
// Reading it holds up the account's writes for ~1 ms at most.
const smallCAR = 256 << 10

var carBufs = sync.Pool{New: func() any { return new([]byte) }}

// answerSmallCAR answers did's repo export (since a rev, when since is not
// "") when the CAR is at most smallCAR bytes, read whole on the actor
// store's writer connection when no write holds it (store.DB.Query): a
// suite's getRepo is often the first read of its account that needs a
// reader connection, and opening one (SQLite's open, WAL index and
// schema) was more than half of a getRepo of 100 records. The CAR is sent
// once read, with neither the store nor its writer held. Past smallCAR it
// answers nothing and returns repo.ErrExportTooLarge: the caller streams
// the export from a reader instead (answerCAR), and so do the store's
// later whole exports, without reading the first smallCAR bytes for
// nothing.
func (s *Server) answerSmallCAR(w http.ResponseWriter, r *http.Request, did, since string) error {
	buf := carBufs.Get().(*[]byte)
	defer carBufs.Put(buf)
	err := s.withActorStore(r.Context(), did, func(a *actor) error {
		if a.bigCAR.Load() && since == "" {
			return repo.ErrExportTooLarge
		}
		ctx := context.WithoutCancel(r.Context()) // a short read, as store.DB.Query's are
		err := a.Query(func(q store.Querier) error {
			var err error
			*buf, err = repo.ExportCARBytes(ctx, q, (*buf)[:0], since, smallCAR)
			return err
		})
		if errors.Is(err, repo.ErrExportTooLarge) && since == "" {
			a.bigCAR.Store(true)
		}
		return err
	})
	if err != nil {
		return err
	}
	out := &carStream{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	if _, err := out.Write(*buf); err != nil {
		// As answerCAR: the status is sent, so the response is cut off.
		s.log.Debug("sync: CAR response cut off", "did", did, "err", err)
		_ = out.rc.SetWriteDeadline(time.Now())
		panic(http.ErrAbortHandler)
	}
	return nil
}

func (s *Server) syncGetLatestCommit(w http.ResponseWriter, r *http.Request, c *caller) error {
	did := param(r, "did")
	acc, err := s.availableRepo(r.Context(), c, did)
	if err != nil {
		return err
	}
	var head cid.Cid
	var rev string
	err = s.withActor(r.Context(), acc.DID, func(db *store.DB) error {
		return db.Query(func(q store.Querier) error {
			var err error
			head, rev, err = repo.Head(r.Context(), q)
			return err
		})
	})
	if errors.Is(err, repo.ErrRepoNotFound) {
		return xrpc.InvalidRequest("RepoNotFound", "Could not find root for DID: %s", did)
	}
	if err != nil {
		return err
	}
	xrpc.WriteJSON(w, http.StatusOK, comatproto.SyncGetLatestCommit_Output{Cid: head.String(), Rev: rev})
	return nil
}

func (s *Server) syncGetRecord(w http.ResponseWriter, r *http.Request, c *caller) error {
	did := param(r, "did")
	// The lexicon's nsid and record-key formats are indigo's syntax.
	collection, rkey := syntax.NSID(param(r, "collection")), syntax.RecordKey(param(r, "rkey"))
	acc, err := s.availableRepo(r.Context(), c, did)
	if err != nil {
		return err
	}
	return s.answerCAR(w, r, acc.DID, xrpc.InvalidRequest("", "Could not find repo for DID: %s", did),
		func(tx *sql.Tx, car io.Writer) error {
			return repo.RecordProofCAR(r.Context(), tx, collection, rkey, car)
		})
}

func (s *Server) syncGetBlocks(w http.ResponseWriter, r *http.Request, c *caller) error {
	did := param(r, "did")
	raw := paramList(r, "cids")
	cids := make([]cid.Cid, len(raw))
	for i, v := range raw {
		var err error
		if cids[i], err = cid.Decode(v); err != nil {
			return fmt.Errorf("cids: a CID the lexicon passed: %w", err)
		}
	}
	acc, err := s.availableRepo(r.Context(), c, did)
	if err != nil {
		return err
	}
	// GetBlocks reads no repo root: a store without one lists its cids as
	// missing.
	return s.answerCAR(w, r, acc.DID, nil, func(tx *sql.Tx, car io.Writer) error {
		missing, err := repo.GetBlocks(r.Context(), tx, cids, car)
		if err != nil || len(missing) == 0 {
			return err
		}
		names := make([]string, len(missing))
		for i, c := range missing {
			names[i] = c.String()
		}
		return xrpc.InvalidRequest("", "Could not find cids: %s", strings.Join(names, ","))
	})
}

func (s *Server) syncGetRepoStatus(w http.ResponseWriter, r *http.Request, _ *caller) error {
	did := param(r, "did")
	acc, err := s.accounts.ByDID(r.Context(), did)
	if errors.Is(err, account.ErrNotFound) {
		return xrpc.InvalidRequest("RepoNotFound", "Could not find repo for DID: %s", did)
	}
	if err != nil {
		return err
	}
	active, status := accountStatus(acc)
	out := comatproto.SyncGetRepoStatus_Output{Did: did, Active: *active, Status: status}
	if *active {
		err := s.withActor(r.Context(), did, func(db *store.DB) error {
			return db.Query(func(q store.Querier) error {
				_, rev, err := repo.Head(r.Context(), q)
				out.Rev = &rev
				return err
			})
		})
		if err != nil {
			return err
		}
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) syncListRepos(w http.ResponseWriter, r *http.Request, _ *caller) error {
	q := r.URL.Query()
	limit := paramInt(r, "limit", 500)
	var afterTime, afterDID string
	if c := q.Get("cursor"); c != "" {
		ms, did, ok := strings.Cut(c, "::")
		n, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil {
			return xrpc.InvalidRequest("", "Malformed cursor")
		}
		afterTime, afterDID = account.FormatTime(time.UnixMilli(n)), did
	}
	ctx := r.Context()
	accs, err := s.accounts.List(ctx, afterTime, afterDID, limit)
	if err != nil {
		return err
	}
	out := comatproto.SyncListRepos_Output{Repos: []*comatproto.SyncListRepos_Repo{}}
	for _, acc := range accs {
		var head cid.Cid
		var rev string
		err := s.withActor(ctx, acc.DID, func(db *store.DB) error {
			return db.Query(func(q store.Querier) error {
				var err error
				head, rev, err = repo.Head(ctx, q)
				return err
			})
		})
		if errors.Is(err, repo.ErrRepoNotFound) {
			continue // no repo yet: the reference's join on repo_root skips it
		}
		if err != nil {
			return err
		}
		active, status := accountStatus(acc)
		out.Repos = append(out.Repos, &comatproto.SyncListRepos_Repo{Did: acc.DID, Head: head.String(), Rev: rev, Active: active, Status: status})
	}
	if n := len(accs); n > 0 {
		last := accs[n-1]
		t, _ := time.Parse(account.TimeFormat, last.CreatedAt)
		c := strconv.FormatInt(t.UnixMilli(), 10) + "::" + last.DID
		out.Cursor = &c
	}
	xrpc.WriteJSON(w, http.StatusOK, out)
	return nil
}
