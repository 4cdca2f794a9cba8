package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"

	"github.com/fakepds/fakepds/pds/store"
)

// A write runs the same handful of statements every time, and parsing them
// was about 50 µs of a ~350 µs write. So their SQL is fixed and a Writer
// prepares each once per database. Blocks are inserted and deleted one row
// per execution, and only a write of more blocks than singleRows runs the
// padded statements (a fixed number of rows, padded with NULLs that match
// nothing): in a test suite most accounts see a few small writes, and there
// preparing a statement costs more than running it. The 16-row insert took
// 20-40 µs to prepare where the one-row one took 3-4, and three blocks
// inserted and deleted one row at a time took 28-30 µs a transaction where
// the padded statements took 39-43 (six: 42-44 and 41-46).
type stmtID int

const (
	stmtHead stmtID = iota
	stmtGetBlock
	stmtPutBlock
	stmtPutBlocks
	stmtDelBlock
	stmtDelBlocks
	stmtDelReplaced
	stmtPutRecord
	stmtDelRecord
	stmtSetRoot
	stmtCurrent
	numStmts
)

// singleRows is the most blocks a write inserts, or deletes, one
// statement execution each; above it, putRows and delRows at a time: a
// single create on a repo of thousands of records writes and frees fewer
// blocks than those; bigger commits loop.
const (
	singleRows = 6
	putRows    = 16
	delRows    = 8
)

var stmtSQL = [numStmts]string{
	stmtHead:     `SELECT did, cid, rev, data FROM repo_root WHERE id = 1`,
	stmtGetBlock: `SELECT content FROM repo_block WHERE cid = ?`,
	stmtPutBlock: `INSERT OR IGNORE INTO repo_block (cid, repo_rev, content) VALUES (?, ?, ?)`,
	// The first parameter is the rev, then (cid, content) pairs.
	stmtPutBlocks: `INSERT OR IGNORE INTO repo_block (cid, repo_rev, content)
		SELECT column1, ?, column2 FROM (VALUES ` + rows(putRows, "(?, ?)") + `) WHERE column1 IS NOT NULL`,
	stmtDelBlock:  `DELETE FROM repo_block WHERE cid = ?`,
	stmtDelBlocks: `DELETE FROM repo_block WHERE cid IN (` + rows(delRows, "?") + `)`,
	// A replaced record's block goes only when no other record (with the
	// same content) still points at it.
	stmtDelReplaced: `DELETE FROM repo_block WHERE cid = ?1 AND NOT EXISTS (SELECT 1 FROM record WHERE record.cid = ?1)`,
	stmtPutRecord: `INSERT INTO record (collection, rkey, cid, repo_rev) VALUES (?, ?, ?, ?)
		ON CONFLICT (collection, rkey) DO UPDATE SET cid = excluded.cid, repo_rev = excluded.repo_rev`,
	stmtDelRecord: `DELETE FROM record WHERE collection = ? AND rkey = ?`,
	stmtSetRoot:   `UPDATE repo_root SET cid = ?, rev = ?, data = ? WHERE id = 1`,
	// What GetRecord finds, without the content.
	stmtCurrent: `SELECT r.cid FROM record r JOIN repo_block b ON b.cid = r.cid
		WHERE r.collection = ? AND r.rkey = ? AND r.takedown_ref IS NULL`,
}

// Writer applies writes to the repos of one actor store with statements
// prepared once on its writer connection (store.DB.Writer); each write
// binds them to its transaction. The package-level Apply does the same
// work preparing them per call.
//
// NewWriter prepares only what every write runs; the statements of
// updates and deletes wait for the first write that has one (Prepare), or
// for PrepareRest: preparing all of them was ~200 µs of an account's first
// createRecord, and many accounts of a test suite only ever create.
type Writer struct {
	stmts *store.Statements[stmtID]

	// mu guards kept, the MST of the last commit this Writer made, as it
	// stood in memory after that write, and missed, the statements writes
	// ran unprepared since the last Prepare.
	mu     sync.Mutex
	kept   *keptTree
	missed []stmtID
}

// createStmts are the statements a small write of creates runs; the rest
// serve updates, deletes, big writes, and reads of MST nodes missing from
// memory (for a new account's writes, the node cache and the kept tree
// hold every node).
var createStmts = []stmtID{stmtHead, stmtPutBlock, stmtDelBlock, stmtPutRecord, stmtSetRoot}

// restStmts are what small updates and deletes run besides.
var restStmts = []stmtID{stmtCurrent, stmtDelReplaced, stmtDelRecord}

// keptTree is a repo's MST after a write: clean (every node's CID known),
// holding the nodes on the paths written so far. The next write, when the
// repo's head is still this commit, starts from it instead of loading and
// decoding the root and the write's path again (for TID keys, the same
// right edge every time).
type keptTree struct {
	commit cid.Cid
	root   *mst.Node
}

// maxKeptNodes bounds a kept tree: writes spread over the key space would
// hydrate ever more of it, and every write walks what is in memory.
const maxKeptNodes = 64

// take hands over the kept tree if it is the one of commit, else nil; the
// caller mutates it, so it is no longer kept either way.
func (w *Writer) take(commit cid.Cid) *mst.Node {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	k := w.kept
	w.kept = nil
	if k == nil || !k.commit.Equals(commit) {
		return nil
	}
	return k.root
}

// keep holds root, the tree of commit, for the next write. A commit that
// is then rolled back leaves a tree no head will match.
func (w *Writer) keep(commit cid.Cid, root *mst.Node) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.kept = &keptTree{commit: commit, root: root}
	w.mu.Unlock()
}

// NewWriter prepares the statements of creates on writer, the actor
// store's writer pool (one connection). Call it, and Prepare, when no
// transaction holds that connection, such as right after store.Open or
// before a write begins: preparing needs it.
func NewWriter(ctx context.Context, writer *sql.DB) (*Writer, error) {
	w := &Writer{stmts: store.NewStatements[stmtID](writer, stmtSQL[:])}
	if err := w.stmts.Prepare(ctx, createStmts...); err != nil {
		return nil, fmt.Errorf("repo: %w", err)
	}
	return w, nil
}

// Prepare prepares what writes will run that is not prepared yet: the
// statement of Current when current is set, of an update's replaced
// block when there is an update, of a record's deletion when there is a
// delete, the padded block insert when they are many, and those earlier
// writes ran unprepared. A write that runs a
// statement not prepared still works: it prepares that one in its
// transaction, for itself alone.
func (w *Writer) Prepare(ctx context.Context, writes []Write, current bool) error {
	w.mu.Lock()
	ids := w.missed
	w.missed = nil
	w.mu.Unlock()
	if current {
		ids = append(ids, stmtCurrent)
	}
	if slices.ContainsFunc(writes, func(w Write) bool { return w.Action == ActionUpdate }) {
		ids = append(ids, stmtDelReplaced)
	}
	if slices.ContainsFunc(writes, func(w Write) bool { return w.Action == ActionDelete }) {
		ids = append(ids, stmtDelRecord)
	}
	if len(writes)+2 > singleRows { // the records, the commit, an MST node at least
		ids = append(ids, stmtPutBlocks)
	}
	if err := w.stmts.Prepare(ctx, ids...); err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	return nil
}

// PrepareRest prepares what small updates and deletes run, for a caller
// with the connection warm and nothing to do: right after an account's
// first write. Prepared at the account's first update or delete instead,
// each was the first SQLite work of its request, on a connection whose
// memory other accounts' requests had pushed out of the CPU caches since,
// and took 53-90 µs (Current 90, the first of putRecord; the record
// delete 53, the first of deleteRecord), where the same statements take
// 3-20 µs in a loop. As Prepare, call it when no transaction holds the
// writer connection, or it waits for one to end.
func (w *Writer) PrepareRest(ctx context.Context) error {
	if err := w.stmts.Prepare(ctx, restStmts...); err != nil {
		return fmt.Errorf("repo: %w", err)
	}
	return nil
}

// Close releases the statements; close it before the database.
func (w *Writer) Close() error { return w.stmts.Close() }

// Apply is the package-level Apply with the Writer's statements. A nil
// Writer prepares them per call.
func (w *Writer) Apply(ctx context.Context, tx *sql.Tx, did syntax.DID, key atcrypto.PrivateKey, writes []Write, swapCommit *cid.Cid, now time.Time) (*Commit, error) {
	return apply(ctx, newTxStmts(ctx, tx, w), did, key, writes, swapCommit, now)
}

// Current is the CID of the record collection/rkey as GetRecord finds it
// in tx, nil when there is none: what a write checks before it applies,
// with a statement prepared once (preparing this join was ~50 µs).
func (w *Writer) Current(ctx context.Context, tx *sql.Tx, collection syntax.NSID, rkey syntax.RecordKey) (*cid.Cid, error) {
	st, err := newTxStmts(ctx, tx, w).stmt(stmtCurrent)
	if err != nil {
		return nil, err
	}
	var b []byte
	err = st.QueryRowContext(context.WithoutCancel(ctx), collection.String(), rkey.String()).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("repo: current record: %w", err)
	}
	c, err := cid.Cast(b)
	if err != nil {
		return nil, fmt.Errorf("repo: current record: %w", err)
	}
	return &c, nil
}

// newTxStmts binds statements to tx. They run without ctx's cancellation:
// modernc watches a cancellable context with a goroutine and a progress
// handler per statement (a few µs each, a dozen statements a write), and a
// write's statements are short. database/sql still ends the transaction
// when ctx is done, which fails the statements after it.
func newTxStmts(ctx context.Context, tx *sql.Tx, w *Writer) *txStmts {
	return &txStmts{ctx: context.WithoutCancel(ctx), tx: tx, w: w}
}

// txStmts are the statements of one transaction, bound on first use.
type txStmts struct {
	ctx   context.Context
	tx    *sql.Tx
	w     *Writer // nil: prepare on tx
	bound [numStmts]*sql.Stmt
}

func (t *txStmts) stmt(id stmtID) (*sql.Stmt, error) {
	if st := t.bound[id]; st != nil {
		return st, nil
	}
	var ps *sql.Stmt
	if t.w != nil {
		if ps = t.w.stmts.Get(id); ps == nil {
			t.w.miss(id)
		}
	}
	var st *sql.Stmt
	if ps != nil {
		st = t.tx.StmtContext(t.ctx, ps)
	} else {
		var err error
		if st, err = t.tx.PrepareContext(t.ctx, stmtSQL[id]); err != nil {
			return nil, fmt.Errorf("repo: prepare: %w", err)
		}
	}
	t.bound[id] = st
	return st, nil
}

func (t *txStmts) exec(id stmtID, args ...any) error {
	st, err := t.stmt(id)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(t.ctx, args...)
	return err
}

// miss notes that a write ran statement id unprepared, for the next
// Prepare.
func (w *Writer) miss(id stmtID) {
	w.mu.Lock()
	if !slices.Contains(w.missed, id) {
		w.missed = append(w.missed, id)
	}
	w.mu.Unlock()
}

// rows is n copies of row, comma separated.
func rows(n int, row string) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
}
