package pds

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/blob"
	"github.com/fakepds/fakepds/pds/jsvalue"
	"github.com/fakepds/fakepds/pds/lexval"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
	"github.com/fakepds/fakepds/pds/xrpc"
)

func (s *Server) registerRepo(x *xrpc.Mux) {
	handleInput(s, x, "com.atproto.repo.createRecord", xrpc.RecordLimit, access(scopesStandard, check{}), s.createRecord)
	handleInput(s, x, "com.atproto.repo.putRecord", xrpc.RecordLimit, access(scopesStandard, check{}), s.putRecord)
	handleInput(s, x, "com.atproto.repo.deleteRecord", xrpc.JSONLimit, access(scopesStandard, check{}), s.deleteRecord)
	handleInput(s, x, "com.atproto.repo.applyWrites", xrpc.RecordLimit, access(scopesStandard, check{}), s.applyWrites)
	s.handle(x, xrpc.Query, "com.atproto.repo.getRecord", noAuth, s.getRecord)
	s.handle(x, xrpc.Query, "com.atproto.repo.listRecords", noAuth, s.listRecords)
	s.handle(x, xrpc.Query, "com.atproto.repo.describeRepo", noAuth, s.describeRepo)
	s.handle(x, xrpc.Procedure, "com.atproto.repo.importRepo", accessFull, s.importRepo)
}

// repoLocks serialize a repo's commit with its firehose event: the event
// of rev N is sequenced before rev N+1 commits, and only after rev N's
// transaction has committed, so a consumer that fetches what an event names
// finds it. One mutex per DID with a write under way, dropped by its last
// holder: a fixed set of stripes made two accounts that hash alike wait
// for each other (with 16 writers on 256 stripes, a pair collides about
// one run in three, and their writes made the p95 of
// BenchmarkConcurrentWriters).
type repoLocks struct {
	mu sync.Mutex
	m  map[string]*repoLock
}

type repoLock struct {
	sync.Mutex
	refs int // holders and waiters; guarded by repoLocks.mu
}

func (l *repoLocks) lock(did string) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]*repoLock{}
	}
	rl := l.m[did]
	if rl == nil {
		rl = &repoLock{}
		l.m[did] = rl
	}
	rl.refs++
	l.mu.Unlock()
	rl.Lock()
	return func() {
		rl.Unlock()
		l.mu.Lock()
		if rl.refs--; rl.refs == 0 {
			delete(l.m, did)
		}
		l.mu.Unlock()
	}
}

// writer finds the account a write names (a DID or handle), checks it may
// be written (not taken down or deactivated) and that the caller owns it.
func (s *Server) writer(ctx context.Context, c *caller, repoID string) (*account.Account, error) {
	acc, err := s.accounts.ByIdentifier(ctx, repoID)
	if errors.Is(err, account.ErrNotFound) {
		return nil, xrpc.Errorf(http.StatusForbidden, "AccountNotFound", "Account not found")
	}
	if err != nil {
		return nil, err
	}
	if acc.TakedownRef != "" {
		return nil, xrpc.AuthRequired("AccountTakedown", "Account has been taken down")
	}
	if acc.DeactivatedAt != "" {
		return nil, xrpc.AuthRequired("AccountDeactivated", "Account is deactivated")
	}
	if acc.DID != c.DID {
		return nil, xrpc.AuthRequired("", "")
	}
	return acc, nil
}

// prepared is a write checked and converted, ready for repo.Apply.
type prepared struct {
	repo.Write
	cid    cid.Cid // of Value; cid.Undef for deletes
	blobs  []atdata.Blob
	status string // validationStatus; "" for deletes
}

func (p prepared) uri(did string) syntax.ATURI {
	return syntax.ATURI("at://" + did + "/" + p.Path())
}

// prepareRecord checks a record and converts it to DAG-CBOR; write is its
// index in applyWrites, -1 elsewhere. The lexicon has checked collection
// and rkey's formats (a generated rkey is a TID); the check here holds the
// repo engine to indigo's syntax all the same (lexval's regexp-free one).
func (s *Server) prepareRecord(write int, action repo.Action, collection, rkey string, record lexval.Value, validate *bool) (prepared, error) {
	if !lexval.ValidNSID(collection) {
		return prepared{}, xrpc.InvalidRequest("", "Invalid collection: %s", collection)
	}
	if !lexval.ValidRecordKey(rkey) {
		return prepared{}, xrpc.InvalidRequest("", "Invalid record key: %s", rkey)
	}
	nsid, rk := syntax.NSID(collection), syntax.RecordKey(rkey)
	p := prepared{Write: repo.Write{Action: action, Collection: nsid, RKey: rk}}
	if action == repo.ActionDelete {
		return p, nil
	}
	rec, err := prepareRecordValue(write, nsid, rk, record, validate)
	if err != nil {
		return prepared{}, err
	}
	p.Value, p.cid, p.blobs, p.status = rec.cbor, rec.cid, rec.blobs, rec.status
	return p, nil
}

// precheck looks at the repo inside the write's transaction, before the
// writes apply: it may adjust them, refuse them, or say there is nothing to
// do (false). Checks of the current state made there cannot race another
// write of the repo, and cost no second trip to the actor store. current
// is the CID a write's record has as of the transaction, nil when absent.
type precheck func(current func(w prepared) (*cid.Cid, error), writes []prepared) (bool, error)

// applyPrepared commits writes to did's repo as one commit and sequences
// it. A nil commit means nothing changed.
func (s *Server) applyPrepared(ctx context.Context, did string, writes []prepared, swapCommit *cid.Cid, check precheck) (*repo.Commit, error) {
	key, err := s.commitKey(ctx, did)
	if err != nil {
		return nil, err
	}
	unlock := s.repoLocks.lock(did)
	defer unlock()
	var commit *repo.Commit
	err = s.withActorStoreThen(ctx, did, func(a *actor) (func(*actor), error) {
		rw, refStmts, err := a.writeStmts(ctx, writes, check != nil)
		if err != nil {
			return nil, err
		}
		var garbage blob.Garbage
		var event *sequencer.Pending
		defer func() {
			// Its batch waits for it: even a panic must end it.
			if event != nil {
				event.Abort()
			}
		}()
		err = a.Write(ctx, func(tx *sql.Tx) error {
			if check != nil {
				current := func(w prepared) (*cid.Cid, error) { return rw.Current(ctx, tx, w.Collection, w.RKey) }
				if proceed, err := check(current, writes); err != nil || !proceed {
					return err
				}
			}
			ws := make([]repo.Write, len(writes))
			for i, w := range writes {
				ws[i] = w.Write
			}
			var err error
			commit, err = rw.Apply(ctx, tx, syntax.DID(did), key, ws, swapCommit, s.clock.Now())
			if err != nil || commit == nil {
				return err
			}
			if garbage, err = trackBlobs(ctx, blob.NewRefs(tx, refStmts), did, writes); err != nil {
				return err
			}
			// The #commit is written before the commit and committed
			// after it, as the reference sequences it inside its actor
			// store transaction: an event that cannot be stored fails the
			// write, and no consumer hears of data not yet readable.
			event, err = s.seq.Prepare(ctx, s.clock.Now(), sequencer.Commit(commit.CommitEvent()))
			return err
		})
		if err != nil {
			return nil, err
		}
		if p := event; p != nil {
			event = nil
			if _, err := p.Commit(); err != nil {
				return nil, s.resyncAfterLostEvent(ctx, a.DB, did, err)
			}
			s.noteWrite()
		}
		// Files go only once the transaction that freed them has
		// committed; a failure leaves files, never loses one in use.
		if err := s.blobs().Sweep(ctx, a.DB, did, garbage); err != nil {
			s.log.Warn("blob sweep", "did", did, "err", err)
		}
		if a.restDue() {
			return func(a *actor) { a.prepareRest(context.Background()) }, nil
		}
		return nil, nil
	})
	if err != nil {
		return nil, repoWriteError(err)
	}
	return commit, nil
}

// resyncAfterLostEvent is for a commit stored whose #commit failed to
// commit after it (the rare failure left once Prepare succeeded): it
// sequences the #sync crash recovery would send at the next start, at
// once, so consumers' chains hold. The write stands when that works; when
// it fails too, the error is the write's and the next start sends it.
func (s *Server) resyncAfterLostEvent(ctx context.Context, db *store.DB, did string, lost error) error {
	s.log.Warn("firehose: a commit's event was lost; sequencing a #sync", "did", did, "err", lost)
	evt, err := repo.SyncEvent(ctx, db.Reader(), syntax.DID(did))
	if err == nil {
		_, err = s.seq.Append(ctx, s.clock.Now(), sequencer.Sync(evt))
	}
	if err != nil {
		return errors.Join(lost, err)
	}
	return nil
}

// repoWriteError maps the repo engine's errors to the reference's answers.
func repoWriteError(err error) error {
	var se *repo.SwapError
	switch {
	case errors.As(err, &se):
		return xrpc.InvalidRequest("InvalidSwap", "%s", se.Error())
	case errors.Is(err, repo.ErrTooManyWrites):
		return xrpc.InvalidRequest("", "Too many writes. Max: %d", repo.MaxWrites)
	case errors.Is(err, repo.ErrTooBig):
		return xrpc.InvalidRequest("", "Too many writes. Max event size: 2MB")
	}
	return blobRefError(err)
}

// trackBlobs keeps record_blob in step with the writes, in the write's
// transaction: a record naming a blob never uploaded fails the whole write
// (BlobNotFound). It returns the blobs no record references any more.
func trackBlobs(ctx context.Context, refs *blob.Refs, did string, writes []prepared) (blob.Garbage, error) {
	for _, w := range writes {
		uri := string(w.uri(did))
		if w.Action != repo.ActionCreate {
			if err := refs.Dissociate(ctx, uri); err != nil {
				return blob.Garbage{}, err
			}
		}
		if w.Action != repo.ActionDelete {
			if err := refs.Associate(ctx, uri, w.blobs); err != nil {
				return blob.Garbage{}, err
			}
		}
	}
	return refs.Collect(ctx)
}

// parseSwap reads an optional swap CID, whose format the lexicon checked.
func parseSwap(v *string) (*cid.Cid, error) {
	if v == nil {
		return nil, nil
	}
	c, err := cid.Decode(*v)
	if err != nil {
		return nil, fmt.Errorf("swap CID the lexicon passed: %w", err)
	}
	return &c, nil
}

// appendCommitMeta appends a write's "commit" property, {cid, rev}.
func appendCommitMeta(b []byte, c *repo.Commit) []byte {
	b = append(b, `"commit":{"cid":"`...)
	b = appendCID(b, c.CID.KeyString())
	b = append(b, `","rev":`...)
	b = xrpc.AppendString(b, c.Rev)
	return append(b, '}')
}

// appendRecordURI appends the quoted AT URI of a record of did.
func appendRecordURI(b []byte, did string, w repo.Write) []byte {
	collection, rkey := w.Collection.String(), w.RKey.String()
	if !plainJSON(did) || !plainJSON(collection) || !plainJSON(rkey) {
		return xrpc.AppendString(b, "at://"+did+"/"+collection+"/"+rkey)
	}
	b = append(b, `"at://`...)
	b = append(b, did...)
	b = append(b, '/')
	b = append(b, collection...)
	b = append(b, '/')
	b = append(b, rkey...)
	return append(b, '"')
}

// writeAnswer is createRecord's and putRecord's answer, the bytes
// xrpc.WriteJSON made of {uri, cid, commit (when the write made one),
// validationStatus (when not "")}.
func writeAnswer(did string, p prepared, c cid.Cid, commit *repo.Commit) []byte {
	b := make([]byte, 0, 224+len(did)+len(p.Collection)+len(p.RKey))
	b = append(b, `{"uri":`...)
	b = appendRecordURI(b, did, p.Write)
	b = append(b, `,"cid":"`...)
	b = appendCID(b, c.KeyString())
	b = append(b, '"')
	if commit != nil {
		b = appendCommitMeta(append(b, ','), commit)
	}
	if p.status != "" {
		b = append(b, `,"validationStatus":`...)
		b = xrpc.AppendString(b, p.status)
	}
	return append(b, '}')
}

// recordWriteInput is createRecord's and putRecord's input (indigo's types
// hold the record as a decoded lexicon type, and cannot tell putRecord's
// swapRecord null from absent). The json tags name the properties
// ReadInput reads, into what json.Unmarshal made of them.
type recordWriteInput struct {
	Repo       string  `json:"repo"`
	Collection string  `json:"collection"`
	RKey       *string `json:"rkey"`
	Validate   *bool   `json:"validate"`
	SwapCommit *string `json:"swapCommit"`
	SwapRecord *string `json:"swapRecord"`
	// SwapRecordNull: swapRecord is null (the record must not exist yet),
	// which differs from absent.
	SwapRecordNull bool `json:"-"`
	record         lexval.Value
}

func (in *recordWriteInput) ReadInput(x *lexval.Input) error {
	f := newInputFields(x.Record())
	in.Repo, in.Collection, in.RKey = f.str("repo"), f.str("collection"), f.strPtr("rkey")
	in.Validate, in.SwapCommit = f.boolPtr("validate"), f.strPtr("swapCommit")
	in.SwapRecord, in.SwapRecordNull = f.strPtr("swapRecord"), f.null("swapRecord")
	in.record, _ = f.v.Record("record")
	return f.err
}

func (s *Server) createRecord(w http.ResponseWriter, r *http.Request, c *caller, in *recordWriteInput) error {
	ctx := r.Context()
	acc, err := s.writer(ctx, c, in.Repo)
	if err == nil {
		err = c.mayWrite(in.Collection, "create")
	}
	if err != nil {
		return err
	}
	rkey := s.tids.Next().String()
	if in.RKey != nil {
		rkey = *in.RKey
	}
	p, err := s.prepareRecord(-1, repo.ActionCreate, in.Collection, rkey, in.record, in.Validate)
	if err != nil {
		return err
	}
	swap, err := parseSwap(in.SwapCommit)
	if err != nil {
		return err
	}
	commit, err := s.applyPrepared(ctx, acc.DID, []prepared{p}, swap, nil)
	if err != nil {
		return err
	}
	xrpc.WriteRawJSON(w, http.StatusOK, writeAnswer(acc.DID, p, *commit.Results[0].CID, commit))
	return nil
}

func (s *Server) putRecord(w http.ResponseWriter, r *http.Request, c *caller, in *recordWriteInput) error {
	ctx := r.Context()
	acc, err := s.writer(ctx, c, in.Repo)
	if err == nil {
		err = c.mayWrite(in.Collection, "create")
	}
	if err == nil {
		err = c.mayWrite(in.Collection, "update")
	}
	if err != nil {
		return err
	}
	p, err := s.prepareRecord(-1, repo.ActionUpdate, in.Collection, *in.RKey, in.record, in.Validate)
	if err != nil {
		return err
	}
	swap, err := parseSwap(in.SwapCommit)
	if err != nil {
		return err
	}
	nullSwap := in.SwapRecordNull
	if p.SwapRecord, err = parseSwap(in.SwapRecord); err != nil {
		return err
	}
	newCID := p.cid
	// Create or update, whichever applies; the same content again is a
	// no-op with no commit, as the reference.
	commit, err := s.applyPrepared(ctx, acc.DID, []prepared{p}, swap, func(current func(prepared) (*cid.Cid, error), ws []prepared) (bool, error) {
		cur, err := current(ws[0])
		if err != nil {
			return false, err
		}
		if nullSwap {
			// swapRecord: null says the record must not exist yet.
			if cur != nil {
				return false, xrpc.InvalidRequest("InvalidSwap", "Record was at %s", cur)
			}
			ws[0].SwapRecord = &cid.Undef
		}
		if cur == nil {
			ws[0].Action = repo.ActionCreate
		}
		return cur == nil || !cur.Equals(newCID), nil
	})
	if err != nil {
		return err
	}
	xrpc.WriteRawJSON(w, http.StatusOK, writeAnswer(acc.DID, p, newCID, commit))
	return nil
}

// deleteRecordInput is deleteRecord's input, indigo's
// RepoDeleteRecord_Input read by ReadInput.
type deleteRecordInput struct {
	Collection string  `json:"collection"`
	Repo       string  `json:"repo"`
	Rkey       string  `json:"rkey"`
	SwapCommit *string `json:"swapCommit,omitempty"`
	SwapRecord *string `json:"swapRecord,omitempty"`
}

func (in *deleteRecordInput) ReadInput(x *lexval.Input) error {
	f := newInputFields(x.Record())
	in.Collection, in.Repo, in.Rkey = f.str("collection"), f.str("repo"), f.str("rkey")
	in.SwapCommit, in.SwapRecord = f.strPtr("swapCommit"), f.strPtr("swapRecord")
	return f.err
}

func (s *Server) deleteRecord(w http.ResponseWriter, r *http.Request, c *caller, in *deleteRecordInput) error {
	ctx := r.Context()
	acc, err := s.writer(ctx, c, in.Repo)
	if err != nil {
		return err
	}
	if err := c.mayWrite(in.Collection, "delete"); err != nil {
		return err
	}
	p, err := s.prepareRecord(-1, repo.ActionDelete, in.Collection, in.Rkey, lexval.Value{}, nil)
	if err != nil {
		return err
	}
	swap, err := parseSwap(in.SwapCommit)
	if err != nil {
		return err
	}
	if p.SwapRecord, err = parseSwap(in.SwapRecord); err != nil {
		return err
	}
	// A record that is not there: nothing to do, and, as in the reference,
	// no swap to check.
	commit, err := s.applyPrepared(ctx, acc.DID, []prepared{p}, swap, func(current func(prepared) (*cid.Cid, error), ws []prepared) (bool, error) {
		cur, err := current(ws[0])
		return cur != nil, err
	})
	if err != nil {
		return err
	}
	xrpc.WriteRawJSON(w, http.StatusOK, deleteAnswer(commit))
	return nil
}

// deleteAnswer is deleteRecord's answer, the bytes xrpc.WriteJSON made of
// {commit (when the delete made one)}.
func deleteAnswer(commit *repo.Commit) []byte {
	b := append(make([]byte, 0, 128), '{')
	if commit != nil {
		b = appendCommitMeta(b, commit)
	}
	return append(b, '}')
}

type applyWriteInput struct {
	Type       string  `json:"$type"`
	Collection string  `json:"collection"`
	RKey       *string `json:"rkey"`
	value      lexval.Value
}

type applyWritesInput struct {
	Repo       string            `json:"repo"`
	Validate   *bool             `json:"validate"`
	Writes     []applyWriteInput `json:"writes"`
	SwapCommit *string           `json:"swapCommit"`
}

func (in *applyWritesInput) ReadInput(x *lexval.Input) error {
	f := newInputFields(x.Record())
	in.Repo, in.Validate, in.SwapCommit = f.str("repo"), f.boolPtr("validate"), f.strPtr("swapCommit")
	ws, ok := f.get("writes")
	if !ok {
		return f.err
	}
	n := ws.Len()
	if n < 0 {
		return errInputType
	}
	in.Writes = make([]applyWriteInput, n)
	for i := range in.Writes {
		wf := newInputFields(ws.Record(i))
		in.Writes[i] = applyWriteInput{Type: wf.str("$type"), Collection: wf.str("collection"), RKey: wf.strPtr("rkey")}
		in.Writes[i].value, _ = wf.v.Record("value")
		if wf.err != nil {
			return wf.err
		}
	}
	return f.err
}

func (s *Server) applyWrites(w http.ResponseWriter, r *http.Request, c *caller, in *applyWritesInput) error {
	ctx := r.Context()
	acc, err := s.writer(ctx, c, in.Repo)
	if err != nil {
		return err
	}
	if len(in.Writes) > repo.MaxWrites {
		return xrpc.InvalidRequest("", "Too many writes. Max: %d", repo.MaxWrites)
	}
	writes := make([]prepared, len(in.Writes))
	for i, wr := range in.Writes {
		var action repo.Action
		rkey := ""
		if wr.RKey != nil {
			rkey = *wr.RKey
		}
		switch wr.Type {
		case "com.atproto.repo.applyWrites#create":
			action = repo.ActionCreate
			if wr.RKey == nil {
				rkey = s.tids.Next().String()
			}
		case "com.atproto.repo.applyWrites#update":
			action = repo.ActionUpdate
		default: // the lexicon's union is closed
			action = repo.ActionDelete
		}
		if err := c.mayWrite(wr.Collection, strings.TrimPrefix(wr.Type, "com.atproto.repo.applyWrites#")); err != nil {
			return err
		}
		if writes[i], err = s.prepareRecord(i, action, wr.Collection, rkey, wr.value, in.Validate); err != nil {
			return err
		}
	}
	swap, err := parseSwap(in.SwapCommit)
	if err != nil {
		return err
	}
	commit, err := s.applyPrepared(ctx, acc.DID, writes, swap, func(current func(prepared) (*cid.Cid, error), ws []prepared) (bool, error) {
		for _, w := range ws {
			if w.Action != repo.ActionDelete {
				continue
			}
			// The reference fails the whole batch with a 500 when it
			// deletes a record that is not there (deleteRecord alone is a
			// no-op).
			if cur, err := current(w); err != nil {
				return false, err
			} else if cur == nil {
				return false, fmt.Errorf("applyWrites: delete of a missing record %s", w.Path())
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	xrpc.WriteRawJSON(w, http.StatusOK, applyAnswer(acc.DID, writes, commit))
	return nil
}

// applyAnswer is applyWrites' answer, the bytes xrpc.WriteJSON made of
// {commit (when one was made), results: [{$type, uri, cid, validationStatus}]}
// (a delete's result has only its $type; uri, cid and validationStatus
// are left out when "").
func applyAnswer(did string, writes []prepared, commit *repo.Commit) []byte {
	b := make([]byte, 0, 128+len(writes)*(160+len(did)))
	b = append(b, '{')
	if commit != nil {
		b = append(appendCommitMeta(b, commit), ',')
	}
	b = append(b, `"results":[`...)
	for i, p := range writes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"$type":`...)
		b = xrpc.AppendString(b, "com.atproto.repo.applyWrites#"+string(p.Action)+"Result")
		if p.Action != repo.ActionDelete {
			b = append(b, `,"uri":`...)
			b = appendRecordURI(b, did, p.Write)
			if commit != nil && commit.Results[i].CID != nil {
				b = append(b, `,"cid":"`...)
				b = appendCID(b, commit.Results[i].CID.KeyString())
				b = append(b, '"')
			}
			if p.status != "" {
				b = append(b, `,"validationStatus":`...)
				b = xrpc.AppendString(b, p.status)
			}
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// repoAccount finds the repo a record read names (a DID or a handle of
// this PDS); an unknown one is the reference's plain InvalidRequest.
func (s *Server) repoAccount(ctx context.Context, repoID string) (*account.Account, error) {
	acc, err := s.accounts.ByIdentifier(ctx, repoID)
	if errors.Is(err, account.ErrNotFound) {
		return nil, xrpc.InvalidRequest("", "Could not find repo: %s", repoID)
	}
	return acc, err
}

func (s *Server) getRecord(w http.ResponseWriter, r *http.Request, _ *caller) error {
	q := r.URL.Query()
	// The lexicon's nsid and record-key formats are indigo's syntax.
	collection, rkey := syntax.NSID(q.Get("collection")), syntax.RecordKey(q.Get("rkey"))
	want, err := queryCID(q, "cid")
	if err != nil {
		return err
	}
	ctx := r.Context()
	acc, err := s.repoAccount(ctx, q.Get("repo"))
	if err != nil {
		return err
	}
	if acc.TakedownRef != "" || acc.DeactivatedAt != "" {
		return xrpc.InvalidRequest("RecordNotFound", "Could not locate record: at://%s/%s/%s", acc.DID, collection, rkey)
	}
	var got cid.Cid
	var val []byte
	err = s.withActor(ctx, acc.DID, func(db *store.DB) error {
		return db.Query(func(q store.Querier) error {
			var err error
			got, val, err = repo.GetRecord(ctx, q, collection, rkey, want)
			return err
		})
	})
	if errors.Is(err, repo.ErrRecordNotFound) {
		return xrpc.InvalidRequest("RecordNotFound", "Could not locate record: at://%s/%s/%s", acc.DID, collection, rkey)
	}
	if err != nil {
		return err
	}
	body, err := recordAnswer(acc.DID, collection, rkey, got, val)
	if err != nil {
		return err
	}
	xrpc.WriteRawJSON(w, http.StatusOK, body)
	return nil
}

// recordAnswer is getRecord's answer, the bytes xrpc.WriteJSON makes of
// {uri, cid, value}, written as recordsPage writes a record of
// listRecords': encoding/json compacted the record's JSON again.
func recordAnswer(did string, collection syntax.NSID, rkey syntax.RecordKey, c cid.Cid, cbor []byte) ([]byte, error) {
	uri := "at://" + did + "/" + collection.String() + "/" + rkey.String()
	b := make([]byte, 0, 64+len(uri)+2*len(cbor))
	b = append(b, `{"uri":`...)
	// As encoding/json quotes it (U+2028 escaped, unlike
	// jsvalue.AppendQuote), for the same bytes as before.
	b = xrpc.AppendString(b, uri)
	b = append(b, `,"cid":"`...)
	b = appendCID(b, c.KeyString())
	b = append(b, `","value":`...)
	b, err := lexval.AppendRecordJSON(b, cbor)
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func (s *Server) listRecords(w http.ResponseWriter, r *http.Request, _ *caller) error {
	q := r.URL.Query()
	collection, limit, reverse := syntax.NSID(q.Get("collection")), queryInt(q, "limit", 50), q.Get("reverse") == "true"
	ctx := r.Context()
	acc, err := s.repoAccount(ctx, q.Get("repo"))
	if err != nil {
		return err
	}
	buf := pageBufs.Get().(*[]byte)
	defer pageBufs.Put(buf)
	page := newRecordsPage(*buf, acc.DID, collection)
	var cursor string
	err = s.withActor(ctx, acc.DID, func(db *store.DB) error {
		return db.Query(func(dq store.Querier) error {
			var err error
			cursor, err = repo.EachRecord(ctx, dq, collection, limit, q.Get("cursor"), reverse, page.add)
			return err
		})
	})
	if err != nil {
		return err
	}
	xrpc.WriteRawJSON(w, http.StatusOK, page.finish(cursor))
	if cap(page.b) <= maxPooledPage {
		*buf = page.b[:0]
	}
	return nil
}

// pageBufs are listRecords' answer buffers (a page of 50 posts is ~20
// KiB); one past maxPooledPage is left to the GC.
var pageBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledPage = 1 << 20

// recordsPage is listRecords' answer, the bytes xrpc.WriteJSON makes of
// {cursor (when not ""), records: [{uri, cid, value}]}, written into one
// buffer as the records come from the store: encoding/json scanned every
// record's JSON again to compact it, and each record was a buffer of its
// own (~30% of a page of 50); then each was a copy of the store's bytes,
// and its URI and CID strings of their own.
type recordsPage struct {
	b []byte
	// uri is the records' URI up to the rkey, quoted, without the closing
	// quote; "" when did or collection needs escaping (never, for valid
	// ones), and each URI is then quoted whole.
	uri        string
	did        string
	collection syntax.NSID
	n          int
}

// pageHead is room kept in front of a page's records for the cursor and
// "records" key, which go first but are known only after the last record:
// {"cursor":"<a TID>","records":[ fits.
const pageHead = 64

func newRecordsPage(buf []byte, did string, collection syntax.NSID) *recordsPage {
	p := &recordsPage{b: append(buf[:0], make([]byte, pageHead)...), did: did, collection: collection}
	if plainJSON(did) && plainJSON(collection.String()) {
		p.uri = `{"uri":"at://` + did + "/" + collection.String() + "/"
	}
	return p
}

// add appends one record.
func (p *recordsPage) add(rec repo.RawRecord) error {
	if p.n > 0 {
		p.b = append(p.b, ',')
	}
	p.n++
	if p.uri != "" && plainJSON(rec.RKey) {
		p.b = append(p.b, p.uri...)
		p.b = append(p.b, rec.RKey...)
		p.b = append(p.b, '"')
	} else {
		p.b = append(p.b, `{"uri":`...)
		p.b = jsvalue.AppendQuote(p.b, "at://"+p.did+"/"+p.collection.String()+"/"+string(rec.RKey))
	}
	p.b = append(p.b, `,"cid":"`...)
	p.b = appendCID(p.b, rec.CID)
	p.b = append(p.b, `","value":`...)
	var err error
	if p.b, err = lexval.AppendRecordJSON(p.b, rec.Value); err != nil {
		return err
	}
	p.b = append(p.b, '}')
	return nil
}

// finish closes the page and returns its bytes.
func (p *recordsPage) finish(cursor string) []byte {
	p.b = append(p.b, "]}"...)
	head := make([]byte, 0, pageHead)
	head = append(head, '{')
	if cursor != "" {
		head = append(head, `"cursor":`...)
		head = jsvalue.AppendQuote(head, cursor)
		head = append(head, ',')
	}
	head = append(head, `"records":[`...)
	if len(head) > pageHead {
		return append(head, p.b[pageHead:]...)
	}
	start := pageHead - len(head)
	copy(p.b[start:], head)
	return p.b[start:]
}

// plainJSON reports whether s is its own JSON string body: printable
// ASCII without a quote or a backslash (what a DID, an NSID and a record
// key are made of).
func plainJSON[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// appendCID appends the string form of a CID in binary form (its bytes or
// its KeyString), checked: what cid.Cid's String answers, without its
// copies.
func appendCID[T string | []byte](b []byte, c T) []byte {
	if len(c) == 34 && c[0] == 0x12 && c[1] == 0x20 {
		// CIDv0: base58btc of the multihash.
		v0, err := cid.Cast([]byte(c))
		if err != nil {
			panic(err) // checked by the caller
		}
		return append(b, v0.String()...)
	}
	// CIDv1: multibase base32, lower case, unpadded.
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b = append(b, 'b')
	var acc uint
	bits := 0
	for i := 0; i < len(c); i++ {
		acc = acc<<8 | uint(c[i])
		for bits += 8; bits >= 5; {
			bits -= 5
			b = append(b, alphabet[acc>>bits&31])
		}
	}
	if bits > 0 {
		b = append(b, alphabet[acc<<(5-bits)&31])
	}
	return b
}

func (s *Server) describeRepo(w http.ResponseWriter, r *http.Request, _ *caller) error {
	id := param(r, "repo")
	ctx := r.Context()
	acc, err := s.assertRepoAvailable(ctx, id, false)
	if err != nil {
		return err
	}
	var collections []string
	err = s.withActor(ctx, acc.DID, func(db *store.DB) error {
		return db.Query(func(q store.Querier) error {
			var err error
			collections, err = repo.Collections(ctx, q)
			return err
		})
	})
	if err != nil {
		return err
	}
	if collections == nil {
		collections = []string{}
	}
	doc := s.didDoc(ctx, acc.DID)
	var docVal any
	if doc != nil {
		docVal = *doc
	}
	// handleIsCorrect: the DID document names this handle, which resolves
	// back to the DID (both true by construction here unless the document
	// was changed behind the PDS's back).
	correct := false
	if ident, err := s.Directory().LookupDID(ctx, syntax.DID(acc.DID)); err == nil {
		correct = ident.Handle.String() == acc.Handle
	}
	xrpc.WriteJSON(w, http.StatusOK, comatproto.RepoDescribeRepo_Output{
		Handle: handleOrInvalid(acc), Did: acc.DID, DidDoc: docVal, Collections: collections, HandleIsCorrect: correct,
	})
	return nil
}

// importBlobRefs records the blobs imported records reference, unchecked:
// they are what listMissingBlobs lists until they are uploaded.
func importBlobRefs(ctx context.Context, tx *sql.Tx, did string, ops []repo.Op) error {
	refs := blob.NewRefs(tx, nil) // an import is rare: statements prepared per call
	for _, op := range ops {
		uri := "at://" + did + "/" + op.Path
		if err := refs.Dissociate(ctx, uri); err != nil {
			return err
		}
		if op.Action == repo.ActionDelete {
			continue
		}
		collection, rkey, _ := strings.Cut(op.Path, "/")
		_, val, err := repo.GetRecord(ctx, tx, syntax.NSID(collection), syntax.RecordKey(rkey), nil)
		if err != nil {
			return err
		}
		blobs, err := repo.BlobRefs(val)
		if err != nil {
			return err
		}
		if err := refs.Import(ctx, uri, blobs); err != nil {
			return err
		}
	}
	_, err := refs.Collect(ctx)
	return err
}

// maxImportSize bounds importRepo's CAR. The reference sets no limit by
// default; a test server keeps one so a runaway upload cannot fill the
// disk it is spooled to.
const maxImportSize = 256 << 20

func (s *Server) importRepo(w http.ResponseWriter, r *http.Request, c *caller) error {
	if enc, err := xrpc.Encoding(r); err != nil {
		return err
	} else if enc != "application/vnd.ipld.car" {
		return xrpc.InvalidRequest("", "Wrong request encoding (Content-Type): %s", enc)
	}
	car, err := s.spoolImport(r)
	if err == nil {
		defer car.Close()
		var release func()
		if release, err = s.importSlot(r.Context()); err != nil {
			return err
		}
		defer release()
		err = car.Index()
	}
	if err == nil {
		err = s.importCAR(r.Context(), c.DID, car)
	}
	if errors.Is(err, repo.ErrInvalidRepo) {
		return xrpc.InvalidRequest("", "%s", strings.TrimPrefix(err.Error(), repo.ErrInvalidRepo.Error()+": "))
	}
	if err != nil {
		return err
	}
	return noOutput(w)
}

// importCAR replaces did's repo with the indexed CAR.
func (s *Server) importCAR(ctx context.Context, did string, car *repo.CAR) error {
	unlock := s.repoLocks.lock(did)
	defer unlock()
	return s.withActor(ctx, did, func(db *store.DB) error {
		return db.Write(ctx, func(tx *sql.Tx) error {
			ops, err := repo.ImportCAR(ctx, tx, syntax.DID(did), car, s.clock.Now())
			if err != nil {
				return err
			}
			return importBlobRefs(ctx, tx, did, ops)
		})
	})
}
