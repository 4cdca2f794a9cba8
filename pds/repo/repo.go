package repo

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atcrypto"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	lexutil "github.com/bluesky-social/indigo/lex/util"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// Limits of one commit, the reference PDS's.
const (
	// MaxWrites is the most writes one Apply takes ("Too many writes. Max: 200").
	MaxWrites = 200
	// MaxEventBytes bounds the blocks of one #commit ("Too many writes. Max
	// event size: 2MB").
	MaxEventBytes = 2_000_000
)

var (
	// ErrRepoNotFound: the actor store holds no repo (no Create yet).
	ErrRepoNotFound = errors.New("repo: no repo in this store")
	// ErrRepoExists: Create on a store that already holds a repo (the
	// reference's AlreadyExists "Repo already exists").
	ErrRepoExists = errors.New("repo: repo already exists")
	// ErrRecordNotFound: no such record (getRecord's RecordNotFound), or an
	// update of a record that does not exist (the reference fails the
	// whole write with an internal error).
	ErrRecordNotFound = errors.New("repo: record not found")
	// ErrRecordExists: a create of a record that exists (the reference
	// fails the whole write with an internal error).
	ErrRecordExists = errors.New("repo: record already exists")
	// ErrInvalidSwap: swapCommit or swapRecord did not match. The error is
	// a *SwapError, whose message is the reference's.
	ErrInvalidSwap = errors.New("repo: invalid swap")
	// ErrTooManyWrites: more than MaxWrites writes.
	ErrTooManyWrites = errors.New("repo: too many writes")
	// ErrTooBig: the commit's blocks exceed MaxEventBytes.
	ErrTooBig = errors.New("repo: commit too big for an event")
)

// SwapError is a swapCommit or swapRecord mismatch. errors.Is(err,
// ErrInvalidSwap) holds for it.
type SwapError struct {
	// Record is true for a swapRecord mismatch, false for swapCommit. (The
	// reference answers InvalidSwap to both from createRecord, putRecord and
	// deleteRecord, but only to swapCommit from applyWrites.)
	Record bool
	// Path is the record's collection/rkey, for a swapRecord mismatch.
	Path string
	// Current is what the commit or record was at; nil for a record that
	// does not exist.
	Current *cid.Cid
}

// Error is the reference's message: "Commit was at <cid>" or "Record was at
// <cid|null>".
func (e *SwapError) Error() string {
	if !e.Record {
		return fmt.Sprintf("Commit was at %s", e.Current)
	}
	if e.Current == nil {
		return "Record was at null"
	}
	return fmt.Sprintf("Record was at %s", e.Current)
}

// Is makes errors.Is(err, ErrInvalidSwap) true.
func (e *SwapError) Is(target error) bool { return target == ErrInvalidSwap }

// Action is what a write does to a record, spelled as the firehose spells it.
type Action string

// The actions.
const (
	ActionCreate Action = "create"
	ActionUpdate Action = "update"
	ActionDelete Action = "delete"
)

// Write is one record change of an Apply.
type Write struct {
	Action     Action
	Collection syntax.NSID
	RKey       syntax.RecordKey
	// Value is the record as DAG-CBOR, already validated; ignored for
	// deletes.
	Value []byte
	// SwapRecord, when not nil, is the CID the record must be at before the
	// write; a pointer to the zero cid.Cid (cid.Undef) means the record
	// must not exist (the reference's swapRecord: null). As in the
	// reference, a create only takes the latter and updates and deletes
	// only the former.
	SwapRecord *cid.Cid
}

// Path is the write's MST key, collection/rkey.
func (w Write) Path() string { return w.Collection.String() + "/" + w.RKey.String() }

// Op is one change in a commit, as the firehose #commit lists it.
type Op struct {
	Action Action
	Path   string   // collection/rkey
	CID    *cid.Cid // the new record; nil for a delete
	Prev   *cid.Cid // the record before; nil for a create
}

// Result is what one write answers (applyWrites results, createRecord and
// putRecord's uri and cid).
type Result struct {
	URI syntax.ATURI
	CID *cid.Cid // the record written; nil for a delete
}

// Commit is a commit Create or Apply made, with all the firehose needs.
type Commit struct {
	DID      syntax.DID
	CID      cid.Cid // the commit block
	Rev      string
	Since    *string  // the previous commit's rev; nil for a new repo
	Data     cid.Cid  // the MST root
	PrevData *cid.Cid // the previous commit's MST root; nil for a new repo
	Ops      []Op
	Results  []Result // one per write, in order
	// Blocks is the #commit CAR: root the commit; the commit block, the new
	// MST and record blocks, the records written and the MST nodes needed
	// to invert the ops.
	Blocks []byte

	commitBlock []byte
}

// SyncBlocks is the #sync CAR: the commit block alone.
func (c *Commit) SyncBlocks() []byte {
	var buf bytes.Buffer
	w, _ := newCARWriter(&buf, c.CID) // a bytes.Buffer does not fail
	_ = w.block(c.CID, c.commitBlock)
	return buf.Bytes()
}

// CommitEvent is the commit as a firehose #commit; the sequencer sets Seq
// and Time.
func (c *Commit) CommitEvent() *comatproto.SyncSubscribeRepos_Commit {
	ops := make([]*comatproto.SyncSubscribeRepos_RepoOp, len(c.Ops))
	for i, op := range c.Ops {
		ops[i] = &comatproto.SyncSubscribeRepos_RepoOp{
			Action: string(op.Action),
			Path:   op.Path,
			Cid:    (*lexutil.LexLink)(op.CID),
			Prev:   (*lexutil.LexLink)(op.Prev),
		}
	}
	return &comatproto.SyncSubscribeRepos_Commit{
		Repo:     c.DID.String(),
		Commit:   lexutil.LexLink(c.CID),
		Rev:      c.Rev,
		Since:    c.Since,
		Blocks:   c.Blocks,
		Ops:      ops,
		PrevData: (*lexutil.LexLink)(c.PrevData),
		Blobs:    []lexutil.LexLink{},
	}
}

// SyncEvent is the commit as a firehose #sync (sent for a new account); the
// sequencer sets Seq and Time.
func (c *Commit) SyncEvent() *comatproto.SyncSubscribeRepos_Sync {
	return &comatproto.SyncSubscribeRepos_Sync{
		Did:    c.DID.String(),
		Rev:    c.Rev,
		Blocks: c.SyncBlocks(),
	}
}

// cidBuilder is the CID of every block of a repo: CIDv1, dag-cbor, sha2-256.
var cidBuilder = cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256)

// Create writes an empty repo for did (an empty MST and a signed commit at
// a fresh rev, the TID of now) into the actor store of tx, a write
// transaction (a *sql.Tx, or a store.TxQuerier that runs the statements
// of CreateQueries prepared ahead), for createAccount.
func Create(ctx context.Context, tx TxRunner, did syntax.DID, key atcrypto.PrivateKey, now time.Time) (*Commit, error) {
	if exists, err := Exists(ctx, tx); err != nil {
		return nil, fmt.Errorf("repo: create: %w", err)
	} else if exists {
		return nil, ErrRepoExists
	}
	tree := mst.NewEmptyTree()
	var diff collector
	data, err := tree.WriteDiffBlocks(ctx, &diff)
	if err != nil {
		return nil, fmt.Errorf("repo: create: %w", err)
	}
	rev := syntax.NewTIDFromTime(now, 0).String()
	cc, commitBlock, err := signCommit(did, key, *data, rev)
	if err != nil {
		return nil, err
	}
	bw := newBatch(rev)
	for _, b := range diff.blocks {
		bw.add(b.cid, b.data)
	}
	bw.add(cc, commitBlock)
	for _, b := range bw.blocks { // the empty tree's node and the commit
		if _, err := tx.ExecContext(ctx, createQueries[1], b.cid.Bytes(), rev, b.data); err != nil {
			return nil, fmt.Errorf("repo: create: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, createQueries[2], did.String(), cc.Bytes(), rev, data.Bytes()); err != nil {
		return nil, fmt.Errorf("repo: create: %w", err)
	}
	c := &Commit{DID: did, CID: cc, Rev: rev, Data: *data, Ops: []Op{}, commitBlock: commitBlock}
	c.Blocks = commitCAR(cc, bw.blocks)
	return c, nil
}

// Exists reports whether the actor store of tx holds a repo.
func Exists(ctx context.Context, tx TxRunner) (bool, error) {
	var one int
	switch err := tx.QueryRowContext(ctx, createQueries[0]).Scan(&one); {
	case err == nil:
		return true, nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	default:
		return false, err
	}
}

// TxRunner is what Create runs its statements on: a *sql.Tx, or a
// store.TxQuerier.
type TxRunner interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// createQueries are Create's statements: whether there is a repo
// (Exists), a block in, the head in.
var createQueries = [...]string{
	`SELECT 1 FROM repo_root`,
	stmtSQL[stmtPutBlock],
	`INSERT INTO repo_root (id, did, cid, rev, data) VALUES (1, ?, ?, ?, ?)`,
}

// CreateQueries are the texts of Create's statements, for a store that
// prepares them ahead of the account (store.DB.PrepareQueries on the
// spare actor store): prepared by Create itself, on a connection that had
// not yet parsed the schema.
func CreateQueries() []string { return createQueries[:] }

// Apply makes writes one signed commit on top of the repo's head.
//
// swapCommit, when set, must be the head (*SwapError otherwise). Record
// swaps are checked against the repo as it was before any of the writes,
// as the reference does. A create of an existing record fails with
// ErrRecordExists and an update of a missing one with ErrRecordNotFound;
// a delete of a missing record, or an update to the record's current
// value, changes nothing and makes no op. When no write changes anything,
// Apply writes nothing and returns a nil Commit (the reference's no-op
// deleteRecord and putRecord).
//
// Differs from the reference: its applyWrites fails a delete of a missing
// record with an internal error; here it is skipped.
//
// On error, rows may be half written: the caller must roll tx back
// (store.DB.Write does when fn fails). Apply prepares its statements on tx
// each call; a server should use a Writer's Apply, which reuses them.
func Apply(ctx context.Context, tx *sql.Tx, did syntax.DID, key atcrypto.PrivateKey, writes []Write, swapCommit *cid.Cid, now time.Time) (*Commit, error) {
	return apply(ctx, newTxStmts(ctx, tx, nil), did, key, writes, swapCommit, now)
}

func apply(ctx context.Context, st *txStmts, did syntax.DID, key atcrypto.PrivateKey, writes []Write, swapCommit *cid.Cid, now time.Time) (*Commit, error) {
	if len(writes) > MaxWrites {
		return nil, ErrTooManyWrites
	}
	src := &nodeSource{st: st}
	head, err := src.headRow()
	if err != nil {
		return nil, err
	}
	if head.did != did.String() {
		return nil, fmt.Errorf("repo: store holds the repo of %s, not %s", head.did, did)
	}
	if swapCommit != nil && !swapCommit.Equals(head.cid) {
		return nil, &SwapError{Current: &head.cid}
	}
	// The old tree's nodes in memory before any write: those the Writer
	// kept from its last commit, then those hydrate loads (src.loaded).
	old := map[cid.Cid]struct{}{}
	if head.root = st.w.take(head.cid); head.root != nil {
		liveNodes(head.root, old)
	} else if head.root, err = src.node(head.data, -1); err != nil {
		return nil, err
	}
	tree := mst.Tree{Root: head.root}

	paths := make([][]byte, len(writes))
	for i, w := range writes {
		switch w.Action {
		case ActionCreate, ActionUpdate, ActionDelete:
		default:
			return nil, fmt.Errorf("repo: unknown action %q", w.Action)
		}
		paths[i] = []byte(w.Path())
		if w.SwapRecord == nil {
			continue
		}
		// Before any write is applied: the reference checks swaps against
		// its record table, which only changes after the commit is made.
		if err := src.hydrate(tree.Root, paths[i]); err != nil {
			return nil, err
		}
		cur, err := tree.Get(paths[i])
		if err != nil {
			return nil, fmt.Errorf("repo: %w", err)
		}
		if err := checkSwap(w, cur); err != nil {
			return nil, err
		}
	}

	c := &Commit{DID: did, Results: make([]Result, len(writes))}
	ops := make([]Op, 0, len(writes))
	var records []block // record blocks written, for the tables and the event
	var recordPaths [][]byte
	// before is each path's record as of the previous commit: every op on
	// a path names it as prev, even when an earlier op of this commit
	// changed the path, as the reference does.
	before := map[string]*cid.Cid{}
	for i, w := range writes {
		path := paths[i]
		if err := src.hydrate(tree.Root, path); err != nil {
			return nil, err
		}
		if _, seen := before[string(path)]; !seen {
			cur, err := tree.Get(path)
			if err != nil {
				return nil, fmt.Errorf("repo: %w", err)
			}
			before[string(path)] = cur
		}
		c.Results[i].URI = syntax.ATURI("at://" + did.String() + "/" + string(path))
		var val cid.Cid
		if w.Action != ActionDelete {
			if val, err = cidBuilder.Sum(w.Value); err != nil {
				return nil, fmt.Errorf("repo: %w", err)
			}
			c.Results[i].CID = &val
		}
		switch w.Action {
		case ActionCreate:
			prev, err := tree.Insert(path, val)
			if err != nil {
				return nil, fmt.Errorf("repo: %w", err)
			}
			if prev != nil {
				return nil, fmt.Errorf("%w: %s", ErrRecordExists, path)
			}
			ops = append(ops, Op{Action: ActionCreate, Path: string(path), CID: &val})
		case ActionUpdate:
			cur, err := tree.Get(path)
			if err != nil {
				return nil, fmt.Errorf("repo: %w", err)
			}
			if cur == nil {
				return nil, fmt.Errorf("%w: %s", ErrRecordNotFound, path)
			}
			if cur.Equals(val) {
				continue
			}
			if _, err := tree.Insert(path, val); err != nil {
				return nil, fmt.Errorf("repo: %w", err)
			}
			ops = append(ops, Op{Action: ActionUpdate, Path: string(path), CID: &val, Prev: before[string(path)]})
		case ActionDelete:
			prev, err := tree.Remove(path)
			if err != nil {
				return nil, fmt.Errorf("repo: %w", err)
			}
			if r := tree.Root; len(r.Entries) == 0 && !r.Stub {
				// indigo leaves an emptied root at the removed key's
				// height; an insert into it would grow a pointer-only
				// root. The empty tree is height 0.
				r.Height = 0
			}
			if prev == nil {
				continue
			}
			ops = append(ops, Op{Action: ActionDelete, Path: string(path), Prev: before[string(path)]})
			continue
		}
		records = append(records, block{cid: val, data: w.Value})
		recordPaths = append(recordPaths, path)
	}
	// Only the records the new tree holds are written and sent: one
	// replaced later in the same commit is neither.
	kept := records[:0]
	keptPaths := recordPaths[:0]
	for i, rec := range records {
		if cur, err := tree.Get(recordPaths[i]); err == nil && cur != nil && cur.Equals(rec.cid) {
			kept = append(kept, rec)
			keptPaths = append(keptPaths, recordPaths[i])
		}
	}
	records, recordPaths = kept, keptPaths
	if len(ops) == 0 && len(writes) > 0 {
		// Writes that change nothing make no commit. No writes at all
		// (applyWrites with an empty list) make an empty commit, as the
		// reference does: a new rev and signature over the same tree.
		return nil, nil
	}

	// Dirty nodes are the new ones and those indigo marked as the proof
	// that makes the ops invertible: together, the MST part of the event.
	var diff collector
	data, err := tree.WriteDiffBlocks(ctx, &diff)
	if err != nil {
		return nil, fmt.Errorf("repo: %w", err)
	}
	rev := nextRev(head.rev, now)
	cc, commitBlock, err := signCommit(did, key, *data, rev)
	if err != nil {
		return nil, err
	}
	since, prevData := head.rev, head.data
	c.CID, c.Rev, c.Since, c.Data, c.PrevData = cc, rev, &since, *data, &prevData
	c.Ops, c.commitBlock = ops, commitBlock

	// The event: commit, MST diff and proof, every record written (even one
	// whose block the repo already held, as the reference sends it).
	event := make([]block, 0, 1+len(diff.blocks)+len(records))
	event = append(event, block{cid: cc, data: commitBlock})
	event = append(event, diff.blocks...)
	event = appendNew(event, records...)
	size := 0
	for _, b := range event {
		size += len(b.data)
	}
	if size > MaxEventBytes {
		return nil, ErrTooBig
	}
	c.Blocks = commitCAR(cc, event)

	// Dead blocks: nodes of the old tree in memory that the new one no
	// longer holds (MST node CIDs are unique within a tree: a node is
	// identified by its keys), the old commit, and the records replaced
	// unless another record still points at the same block.
	for _, c := range src.loaded {
		old[c] = struct{}{}
	}
	live := make(map[cid.Cid]struct{}, len(diff.blocks)+len(old))
	liveNodes(tree.Root, live)
	dead := []cid.Cid{head.cid}
	for c := range old {
		if _, ok := live[c]; !ok {
			dead = append(dead, c)
		}
	}
	var replaced []cid.Cid
	for _, op := range ops {
		if op.Prev != nil {
			replaced = append(replaced, *op.Prev)
		}
	}
	bw := newBatch(rev)
	bw.add(cc, commitBlock)
	for _, b := range diff.blocks {
		if _, stored := old[b.cid]; !stored { // a proof node, unchanged
			bw.add(b.cid, b.data)
		}
	}
	for i, b := range records {
		// Only records still there: a batch may write a path twice.
		if cur, err := tree.Get(recordPaths[i]); err == nil && cur != nil && cur.Equals(b.cid) {
			bw.add(b.cid, b.data)
		}
	}

	// Rows first, so the dead-record check sees the records as they are now.
	if err := writeRecords(st, ops, rev); err != nil {
		return nil, err
	}
	if err := deleteBlocks(st, dead, replaced); err != nil {
		return nil, err
	}
	if err := bw.insert(st); err != nil {
		return nil, err
	}
	if err := st.exec(stmtSetRoot, cc.Bytes(), rev, data.Bytes()); err != nil {
		return nil, fmt.Errorf("repo: set root: %w", err)
	}
	// The next write starts from this tree if it is small; if not, or
	// without a Writer, the node cache keeps the new nodes instead.
	if st.w != nil && len(live) <= maxKeptNodes {
		st.w.keep(cc, tree.Root)
	} else {
		src.cacheNew(tree.Root, diff.blocks)
	}
	return c, nil
}

// checkSwap applies the reference's swapRecord rules to the record's
// current CID (nil when it does not exist).
func checkSwap(w Write, cur *cid.Cid) error {
	fail := &SwapError{Record: true, Path: w.Path(), Current: cur}
	want := w.SwapRecord
	mustNotExist := !want.Defined()
	switch {
	case w.Action == ActionCreate && !mustNotExist:
		return fail // a create can only expect no record
	case w.Action != ActionCreate && mustNotExist:
		return fail // an update or delete expects a record
	case mustNotExist && cur != nil:
		return fail
	case !mustNotExist && (cur == nil || !cur.Equals(*want)):
		return fail
	}
	return nil
}

// nextRev is a rev after prev: the TID of now, or prev plus one microsecond
// when now is not later (revs of one repo must strictly increase).
func nextRev(prev string, now time.Time) string {
	next := syntax.NewTIDFromTime(now, 0)
	if t, err := syntax.ParseTID(prev); err == nil && next.Integer() <= t.Integer() {
		next = syntax.NewTID(t.Time().UnixMicro()+1, 0)
	}
	return next.String()
}

// signCommit builds, signs and encodes a version 3 commit.
func signCommit(did syntax.DID, key atcrypto.PrivateKey, data cid.Cid, rev string) (cid.Cid, []byte, error) {
	c := indigorepo.Commit{
		DID:     did.String(),
		Version: indigorepo.ATPROTO_REPO_VERSION,
		Data:    data,
		Rev:     rev,
	}
	if err := c.Sign(key); err != nil {
		return cid.Undef, nil, fmt.Errorf("repo: sign commit: %w", err)
	}
	var buf bytes.Buffer
	if err := c.MarshalCBOR(&buf); err != nil {
		return cid.Undef, nil, fmt.Errorf("repo: encode commit: %w", err)
	}
	cc, err := cidBuilder.Sum(buf.Bytes())
	if err != nil {
		return cid.Undef, nil, fmt.Errorf("repo: %w", err)
	}
	return cc, buf.Bytes(), nil
}
