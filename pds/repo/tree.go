package repo

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/bluesky-social/indigo/atproto/repo/mst"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	blockstore "github.com/ipfs/go-ipfs-blockstore"
)

// Querier is what the read functions need: a *sql.Tx (a snapshot across
// statements) or a *sql.DB (each function that takes one runs a single
// statement, which sees one snapshot by itself).
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// block is a block of the repo: its CID and bytes.
type block struct {
	cid  cid.Cid
	data []byte
}

// appendNew appends the blocks of add not already in list. Lists are a few
// blocks long; a linear scan beats a map.
func appendNew(list []block, add ...block) []block {
next:
	for _, b := range add {
		for _, have := range list {
			if have.cid.Equals(b.cid) {
				continue next
			}
		}
		list = append(list, b)
	}
	return list
}

// collector receives the blocks indigo's WriteDiffBlocks encodes. It only
// calls Put; the embedded nil interface stands in for the rest of the
// blockstore.Blockstore it asks for.
type collector struct {
	blockstore.Blockstore
	blocks []block
}

func (c *collector) Put(_ context.Context, b blocks.Block) error {
	c.blocks = append(c.blocks, block{cid: b.Cid(), data: b.RawData()})
	return nil
}

// head is the repo_root row with the MST root node decoded.
type head struct {
	did  string
	cid  cid.Cid // commit
	rev  string
	data cid.Cid // MST root
	root *mst.Node
}

// nodeSource loads MST nodes of one repo from repo_block, on demand. It
// keeps the CIDs of what it loaded: after a write, those the tree no
// longer holds are the blocks the write made dead.
type nodeSource struct {
	ctx    context.Context
	tx     *sql.Tx
	get    *sql.Stmt // prepared on first use: a write loads a few nodes
	loaded []cid.Cid
	raw    [][]byte // bytes of loaded[i], for proofs
}

func newNodeSource(ctx context.Context, tx *sql.Tx) *nodeSource {
	return &nodeSource{ctx: ctx, tx: tx}
}

func (s *nodeSource) close() {
	if s.get != nil {
		s.get.Close()
	}
}

// head reads the repo root and its MST root node in one statement.
func (s *nodeSource) head() (*head, error) {
	var h head
	var cc, data, content []byte
	err := s.tx.QueryRowContext(s.ctx, `SELECT r.did, r.cid, r.rev, r.data, b.content
		FROM repo_root r LEFT JOIN repo_block b ON b.cid = r.data WHERE r.id = 1`).
		Scan(&h.did, &cc, &h.rev, &data, &content)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrRepoNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("repo: read root: %w", err)
	}
	if h.cid, err = cid.Cast(cc); err != nil {
		return nil, fmt.Errorf("repo: root cid: %w", err)
	}
	if h.data, err = cid.Cast(data); err != nil {
		return nil, fmt.Errorf("repo: root data cid: %w", err)
	}
	if content == nil {
		return nil, fmt.Errorf("repo: MST root %s: block missing", h.data)
	}
	if h.root, err = s.decode(h.data, content, -1); err != nil {
		return nil, err
	}
	return &h, nil
}

// block reads one block's bytes.
func (s *nodeSource) block(c cid.Cid) ([]byte, error) {
	if s.get == nil {
		st, err := s.tx.PrepareContext(s.ctx, `SELECT content FROM repo_block WHERE cid = ?`)
		if err != nil {
			return nil, fmt.Errorf("repo: %w", err)
		}
		s.get = st
	}
	var b []byte
	err := s.get.QueryRowContext(s.ctx, c.Bytes()).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("repo: block %s missing", c)
	}
	if err != nil {
		return nil, fmt.Errorf("repo: read block %s: %w", c, err)
	}
	return b, nil
}

// node loads the node c at height (-1: unknown, as for the root).
func (s *nodeSource) node(c cid.Cid, height int) (*mst.Node, error) {
	b, err := s.block(c)
	if err != nil {
		return nil, err
	}
	return s.decode(c, b, height)
}

func (s *nodeSource) decode(c cid.Cid, b []byte, height int) (*mst.Node, error) {
	nd, err := mst.NodeDataFromCBOR(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("repo: MST node %s: %w", c, err)
	}
	n := nd.Node(&c)
	s.loaded = append(s.loaded, c)
	s.raw = append(s.raw, b)
	switch {
	case height >= 0:
		// indigo derives a node's height from its first key, and a node of
		// only a left pointer has none: the parent knows it.
		n.Height = height
	case n.Height < 0 && len(n.Entries) == 0:
		n.Height = 0 // the empty tree, as mst.NewEmptyTree has it
	case n.Height < 0:
		// A root of only a pointer (trimmed away in a canonical tree, but an
		// imported repo may have one): one above its child.
		e := &n.Entries[0]
		child, err := s.node(*e.ChildCID, -1)
		if err != nil {
			return nil, err
		}
		e.Child = child
		n.Height = child.Height + 1
	}
	return &n, nil
}

func (s *nodeSource) wasLoaded(c cid.Cid) bool { return s.rawOf(c) != nil }

// rawOf is the bytes of a loaded node; nil if it was not loaded.
func (s *nodeSource) rawOf(c cid.Cid) []byte {
	for i, l := range s.loaded {
		if l.Equals(c) {
			return s.raw[i]
		}
	}
	return nil
}

// hydrate loads, below n, every node indigo may touch to insert, update or
// remove key, or to prove the change: at each level the child holding the
// key's position and, when the key sits in this node, the child after it
// (a removal merges the two, along the right edge of one and the left edge
// of the other, which are the key's positions in each). Inserts split along
// the key's path, and indigo's proofs walk the same children, so nothing
// else is read: a write costs a few nodes per level, not the tree.
func (s *nodeSource) hydrate(n *mst.Node, key []byte) error {
	p := len(n.Entries)
	for i := range n.Entries {
		if e := &n.Entries[i]; e.IsValue() && bytes.Compare(e.Key, key) >= 0 {
			p = i
			break
		}
	}
	if p > 0 {
		if err := s.descend(n, p-1, key); err != nil {
			return err
		}
	}
	if p+1 < len(n.Entries) && bytes.Equal(n.Entries[p].Key, key) {
		return s.descend(n, p+1, key)
	}
	return nil
}

func (s *nodeSource) descend(n *mst.Node, i int, key []byte) error {
	e := &n.Entries[i]
	if !e.IsChild() {
		return nil
	}
	if e.Child == nil {
		child, err := s.node(*e.ChildCID, n.Height-1)
		if err != nil {
			return err
		}
		e.Child = child
	}
	return s.hydrate(e.Child, key)
}

// liveNodes adds the CIDs of the in-memory nodes of a tree (after
// WriteDiffBlocks, so every CID is current) to set.
func liveNodes(n *mst.Node, set map[cid.Cid]struct{}) {
	if n.CID != nil {
		set[*n.CID] = struct{}{}
	}
	for i := range n.Entries {
		if c := n.Entries[i].Child; c != nil {
			liveNodes(c, set)
		}
	}
}

// batchRows bounds the rows of one multi-row statement, well under
// SQLite's limit on bound parameters.
const batchRows = 300

// batch collects blocks to insert at one rev. One multi-row INSERT costs
// about what one single-row statement does, so a write inserts all its
// blocks in one.
type batch struct {
	rev    string
	blocks []block
}

func newBatch(rev string) *batch { return &batch{rev: rev} }

func (b *batch) add(c cid.Cid, data []byte) { b.blocks = appendNew(b.blocks, block{c, data}) }

// insert writes the blocks; one already present keeps its rev, as in the
// reference (the same record content written twice is one block).
func (b *batch) insert(ctx context.Context, tx *sql.Tx) error {
	for rest := b.blocks; len(rest) > 0; {
		n := min(len(rest), batchRows)
		args := make([]any, 0, 3*n)
		for _, bl := range rest[:n] {
			args = append(args, bl.cid.Bytes(), b.rev, bl.data)
		}
		q := `INSERT OR IGNORE INTO repo_block (cid, repo_rev, content) VALUES ` + rows(n, "(?, ?, ?)")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// rows is n copies of row, comma separated.
func rows(n int, row string) string {
	var sb strings.Builder
	sb.Grow(n * (len(row) + 2))
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(row)
	}
	return sb.String()
}

// writeRecords updates the record table for ops.
func writeRecords(ctx context.Context, tx *sql.Tx, ops []Op, rev string) error {
	var put, del []any
	for _, op := range ops {
		coll, rkey, _ := strings.Cut(op.Path, "/")
		if op.CID != nil {
			put = append(put, coll, rkey, op.CID.Bytes(), rev)
		} else {
			del = append(del, coll, rkey)
		}
	}
	for len(put) > 0 {
		n := min(len(put)/4, batchRows)
		q := `INSERT INTO record (collection, rkey, cid, repo_rev) VALUES ` + rows(n, "(?, ?, ?, ?)") +
			` ON CONFLICT (collection, rkey) DO UPDATE SET cid = excluded.cid, repo_rev = excluded.repo_rev`
		if _, err := tx.ExecContext(ctx, q, put[:4*n]...); err != nil {
			return fmt.Errorf("repo: write records: %w", err)
		}
		put = put[4*n:]
	}
	for len(del) > 0 {
		n := min(len(del)/2, batchRows)
		q := `DELETE FROM record WHERE (collection, rkey) IN (VALUES ` + rows(n, "(?, ?)") + `)`
		if _, err := tx.ExecContext(ctx, q, del[:2*n]...); err != nil {
			return fmt.Errorf("repo: delete records: %w", err)
		}
		del = del[2*n:]
	}
	return nil
}

// deleteBlocks deletes the dead blocks, and the replaced record blocks no
// record points at any more, in one statement when they fit in one.
func deleteBlocks(ctx context.Context, tx *sql.Tx, dead, replaced []cid.Cid) error {
	for len(dead) > 0 || len(replaced) > 0 {
		nd := min(len(dead), batchRows)
		nr := min(len(replaced), batchRows-nd)
		args := make([]any, 0, nd+nr)
		for _, c := range dead[:nd] {
			args = append(args, c.Bytes())
		}
		for _, c := range replaced[:nr] {
			args = append(args, c.Bytes())
		}
		q := `DELETE FROM repo_block WHERE cid IN (` + rows(nd, "?") + `)`
		if nd == 0 {
			q = `DELETE FROM repo_block WHERE false`
		}
		if nr > 0 {
			q += ` OR (cid IN (` + rows(nr, "?") + `) AND NOT EXISTS (SELECT 1 FROM record WHERE record.cid = repo_block.cid))`
		}
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("repo: delete blocks: %w", err)
		}
		dead, replaced = dead[nd:], replaced[nr:]
	}
	return nil
}
