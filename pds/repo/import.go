package repo

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/bluesky-social/indigo/atproto/atdata"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"
)

// ErrInvalidRepo: Import was given a CAR that is not a whole repo of the
// account (the reference's InvalidRequest).
var ErrInvalidRepo = errors.New("repo: invalid repo")

// ErrUnreadableRepo: Import was given a CAR that does not read as a repo:
// no CAR, a block that does not hash to its CID, the commit or a tree node
// missing. The reference fails these with an internal error (a 500), not
// an InvalidRequest.
var ErrUnreadableRepo = errors.New("repo: unreadable repo")

// BlobRefs lists the blobs a DAG-CBOR record references, legacy refs
// included, in no particular order and not de-duplicated (for record_blob
// and the BlobNotFound check).
func BlobRefs(record []byte) ([]atdata.Blob, error) {
	obj, err := atdata.UnmarshalCBOR(record)
	if err != nil {
		return nil, fmt.Errorf("repo: blob refs: %w", err)
	}
	return atdata.ExtractBlobs(obj), nil
}

// Import replaces the repo with the one in the CAR r (repo.importRepo): the
// CAR's commit becomes the head as it is, signature and rev included, and
// the record table and blocks follow it. It returns what changed, as ops
// against the repo it replaced (sorted by path), so the caller can redo
// those records' blob refs. Import makes no commit of its own and no
// event, as in the reference.
//
// It checks more than the reference: the commit must be of did, and the
// tree well formed. A CAR the reference cannot read (ErrUnreadableRepo),
// a tree with nodes missing among them, is its 500; the rest of what it
// refuses is ErrInvalidRepo. Records the repo already holds need not
// be in the CAR; any other must be, as a parsable record. Blocks and
// records are tagged with the imported commit's rev (the reference tags
// them with a fresh one).
func Import(ctx context.Context, tx *sql.Tx, did syntax.DID, r io.Reader) ([]Op, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	// The reference reads the header, checks its roots, then the blocks.
	hdr, err := car.ReadHeader(bufio.NewReader(bytes.NewReader(raw)))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
	}
	if len(hdr.Roots) != 1 {
		return nil, fmt.Errorf("%w: expected one root", ErrInvalidRepo)
	}
	_, commitCID, err := indigorepo.LoadCommitFromCAR(ctx, bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
	}
	commit, rp, err := indigorepo.LoadRepoFromCAR(ctx, bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadableRepo, err)
	}
	if commit.DID != did.String() {
		return nil, fmt.Errorf("%w: repo of %s, not %s", ErrInvalidRepo, commit.DID, did)
	}
	tree := &rp.MST
	if tree.IsPartial() {
		return nil, fmt.Errorf("%w: MST blocks missing", ErrUnreadableRepo)
	}
	if err := tree.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRepo, err)
	}
	blockOf := func(c cid.Cid) []byte {
		b, err := rp.RecordStore.Get(ctx, c)
		if err != nil {
			return nil
		}
		return b.RawData()
	}

	bw := newBatch(commit.Rev)
	bw.add(*commitCID, blockOf(*commitCID))
	var addNodes func(n *mst.Node)
	addNodes = func(n *mst.Node) {
		bw.add(*n.CID, blockOf(*n.CID))
		for i := range n.Entries {
			if c := n.Entries[i].Child; c != nil {
				addNodes(c)
			}
		}
	}
	addNodes(tree.Root)

	old, err := allRecords(ctx, tx)
	if err != nil {
		return nil, err
	}
	var ops []Op
	records := make(map[string]cid.Cid)
	err = tree.Walk(func(key []byte, val cid.Cid) error {
		path := string(key)
		records[path] = val
		prev, had := old[path]
		if had && prev.Equals(val) {
			return nil // the block is already stored
		}
		b := blockOf(val)
		if b == nil {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM repo_block WHERE cid = ?`, val.Bytes()).Scan(&one); err == nil {
				b = []byte{} // stored, shared with another record: keep it
			}
		}
		if b == nil {
			return fmt.Errorf("%w: Could not parse record at '%s'", ErrInvalidRepo, path)
		}
		if len(b) > 0 {
			if _, err := atdata.UnmarshalCBOR(b); err != nil {
				return fmt.Errorf("%w: Could not parse record at '%s'", ErrInvalidRepo, path)
			}
			bw.add(val, b)
		}
		v := val
		if had {
			p := prev
			ops = append(ops, Op{Action: ActionUpdate, Path: path, CID: &v, Prev: &p})
		} else {
			ops = append(ops, Op{Action: ActionCreate, Path: path, CID: &v})
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrInvalidRepo) {
			return nil, err
		}
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	for path, prev := range old {
		if _, ok := records[path]; !ok {
			p := prev
			ops = append(ops, Op{Action: ActionDelete, Path: path, Prev: &p})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })

	st := newTxStmts(ctx, tx, nil)
	if err := writeRecords(st, ops, commit.Rev); err != nil {
		return nil, err
	}
	// Keep exactly the blocks of the new repo: its commit and nodes, and
	// the blocks of its records.
	keep := make(map[cid.Cid]struct{}, len(bw.blocks)+len(records))
	for _, b := range bw.blocks {
		keep[b.cid] = struct{}{}
	}
	for _, c := range records {
		keep[c] = struct{}{}
	}
	if err := deleteBlocksExcept(st, keep); err != nil {
		return nil, err
	}
	filled := bw.blocks[:0]
	for _, b := range bw.blocks {
		if len(b.data) > 0 {
			filled = append(filled, b)
		}
	}
	bw.blocks = filled
	if err := bw.insert(st); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO repo_root (id, did, cid, rev, data) VALUES (1, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET did = excluded.did, cid = excluded.cid, rev = excluded.rev, data = excluded.data`,
		did.String(), commitCID.Bytes(), commit.Rev, commit.Data.Bytes()); err != nil {
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	return ops, nil
}

// allRecords maps every record's path to its CID.
func allRecords(ctx context.Context, tx *sql.Tx) (map[string]cid.Cid, error) {
	rows, err := tx.QueryContext(ctx, `SELECT collection, rkey, cid FROM record`)
	if err != nil {
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	defer rows.Close()
	out := make(map[string]cid.Cid)
	for rows.Next() {
		var coll, rkey string
		var cc []byte
		if err := rows.Scan(&coll, &rkey, &cc); err != nil {
			return nil, fmt.Errorf("repo: import: %w", err)
		}
		c, err := cid.Cast(cc)
		if err != nil {
			return nil, fmt.Errorf("repo: import: %w", err)
		}
		out[coll+"/"+rkey] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	return out, nil
}

// deleteBlocksExcept deletes every block not in keep.
func deleteBlocksExcept(st *txStmts, keep map[cid.Cid]struct{}) error {
	rows, err := st.tx.QueryContext(st.ctx, `SELECT cid FROM repo_block`)
	if err != nil {
		return fmt.Errorf("repo: import: %w", err)
	}
	var drop []cid.Cid
	for rows.Next() {
		var cc []byte
		if err := rows.Scan(&cc); err != nil {
			rows.Close()
			return fmt.Errorf("repo: import: %w", err)
		}
		c, err := cid.Cast(cc)
		if err != nil {
			rows.Close()
			return fmt.Errorf("repo: import: %w", err)
		}
		if _, ok := keep[c]; !ok {
			drop = append(drop, c)
		}
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("repo: import: %w", err)
	}
	return deleteBlocks(st, drop, nil)
}
