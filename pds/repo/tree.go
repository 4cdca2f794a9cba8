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

// nodeSource loads MST nodes of one repo, from the node cache or
// repo_block. It keeps the CIDs of what it loaded: after a write, those the
// tree no longer holds are the blocks the write made dead.
type nodeSource struct {
	st     *txStmts
	loaded []cid.Cid
	raw    [][]byte // bytes of loaded[i], for proofs
}

// head reads the repo root and loads its MST root node.
func (s *nodeSource) head() (*head, error) {
	h, err := s.headRow()
	if err != nil {
		return nil, err
	}
	if h.root, err = s.node(h.data, -1); err != nil {
		return nil, err
	}
	return h, nil
}

// headRow reads the repo root, without loading the MST root node.
func (s *nodeSource) headRow() (*head, error) {
	var h head
	var cc, data []byte
	st, err := s.st.stmt(stmtHead)
	if err != nil {
		return nil, err
	}
	err = st.QueryRowContext(s.st.ctx).Scan(&h.did, &cc, &h.rev, &data)
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
	return &h, nil
}

// block reads one block's bytes.
func (s *nodeSource) block(c cid.Cid) ([]byte, error) {
	st, err := s.st.stmt(stmtGetBlock)
	if err != nil {
		return nil, err
	}
	var b []byte
	err = st.QueryRowContext(s.st.ctx, c.Bytes()).Scan(&b)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("repo: block %s missing", c)
	}
	if err != nil {
		return nil, fmt.Errorf("repo: read block %s: %w", c, err)
	}
	return b, nil
}

// node loads the node c at height (-1: unknown, as for the root), from the
// cache or else from repo_block.
func (s *nodeSource) node(c cid.Cid, height int) (*mst.Node, error) {
	cn := nodes.get(c)
	if cn == nil {
		b, err := s.block(c)
		if err != nil {
			return nil, err
		}
		nd, err := mst.NodeDataFromCBOR(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("repo: MST node %s: %w", c, err)
		}
		cn = &cachedNode{cid: c, raw: b, nd: nd}
		nodes.put(cn)
	}
	n := cn.nd.Node(&c)
	s.loaded = append(s.loaded, c)
	s.raw = append(s.raw, cn.raw)
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

// cacheNew puts the nodes a write made (in memory, clean after
// WriteDiffBlocks) in the node cache: the next write on this repo starts
// from them.
func (s *nodeSource) cacheNew(n *mst.Node, written []block) {
	for _, b := range written {
		if n.CID != nil && b.cid.Equals(*n.CID) {
			if !s.wasLoaded(b.cid) {
				nd := n.NodeData()
				nodes.put(&cachedNode{cid: b.cid, raw: b.data, nd: &nd})
			}
			break
		}
	}
	for i := range n.Entries {
		if c := n.Entries[i].Child; c != nil {
			s.cacheNew(c, written)
		}
	}
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

// batch collects the blocks a commit stores, once each.
type batch struct {
	rev    string
	blocks []block
}

func newBatch(rev string) *batch { return &batch{rev: rev} }

func (b *batch) add(c cid.Cid, data []byte) { b.blocks = appendNew(b.blocks, block{c, data}) }

// insert stores the blocks; one already present keeps its rev, as in the
// reference (the same record content written twice is one block).
func (b *batch) insert(st *txStmts) error {
	if len(b.blocks) <= singleRows {
		for _, bl := range b.blocks {
			if err := st.exec(stmtPutBlock, bl.cid.Bytes(), b.rev, bl.data); err != nil {
				return fmt.Errorf("repo: store blocks: %w", err)
			}
		}
		return nil
	}
	args := make([]any, 1+2*putRows)
	args[0] = b.rev
	for rest := b.blocks; len(rest) > 0; {
		n := min(len(rest), putRows)
		for i := range putRows {
			args[1+2*i], args[2+2*i] = nil, nil
			if i < n {
				args[1+2*i], args[2+2*i] = rest[i].cid.Bytes(), rest[i].data
			}
		}
		if err := st.exec(stmtPutBlocks, args...); err != nil {
			return fmt.Errorf("repo: store blocks: %w", err)
		}
		rest = rest[n:]
	}
	return nil
}

// writeRecords updates the record table for ops.
func writeRecords(st *txStmts, ops []Op, rev string) error {
	for _, op := range ops {
		coll, rkey, _ := strings.Cut(op.Path, "/")
		var err error
		if op.CID != nil {
			err = st.exec(stmtPutRecord, coll, rkey, op.CID.Bytes(), rev)
		} else {
			err = st.exec(stmtDelRecord, coll, rkey)
		}
		if err != nil {
			return fmt.Errorf("repo: write record %s: %w", op.Path, err)
		}
	}
	return nil
}

// deleteBlocks deletes the dead blocks, and the replaced record blocks no
// record points at any more.
func deleteBlocks(st *txStmts, dead, replaced []cid.Cid) error {
	if len(dead) <= singleRows {
		for _, c := range dead {
			if err := st.exec(stmtDelBlock, c.Bytes()); err != nil {
				return fmt.Errorf("repo: delete blocks: %w", err)
			}
		}
	} else {
		args := make([]any, delRows)
		for rest := dead; len(rest) > 0; {
			n := min(len(rest), delRows)
			for i := range delRows {
				args[i] = nil // NULL matches no row
				if i < n {
					args[i] = rest[i].Bytes()
				}
			}
			if err := st.exec(stmtDelBlocks, args...); err != nil {
				return fmt.Errorf("repo: delete blocks: %w", err)
			}
			rest = rest[n:]
		}
	}
	for _, c := range replaced {
		if err := st.exec(stmtDelReplaced, c.Bytes()); err != nil {
			return fmt.Errorf("repo: delete blocks: %w", err)
		}
	}
	return nil
}
