package repo

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"time"

	"github.com/bluesky-social/indigo/atproto/atdata"
	indigorepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
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

// Import replaces the repo with the one in the CAR r: SpoolCAR (to a
// temporary file, without a limit), Index, then ImportCAR.
func Import(ctx context.Context, tx *sql.Tx, did syntax.DID, r io.Reader, now time.Time) ([]Op, error) {
	c, err := SpoolCAR(r, "", math.MaxInt64-1)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Index(); err != nil {
		return nil, err
	}
	return ImportCAR(ctx, tx, did, c, now)
}

// importFlush is how many bytes of blocks ImportCAR gathers before it
// writes them: memory holds one such batch, not the repo.
const importFlush = 1 << 20

// ImportCAR replaces the repo with the one in c, indexed
// (repo.importRepo): the CAR's commit becomes the head as it is, signature
// included, under a fresh rev (the TID of now, or after the last) (as the reference's: the repo's rev is not
// the commit block's until the next commit), and the record table and
// blocks follow it. It returns what changed, as ops against the repo it
// replaced (sorted by path), so the caller can redo those records' blob
// refs. ImportCAR makes no commit of its own and no event, as in the
// reference.
//
// Like the reference, it checks neither the commit's DID nor its
// signature: another account's repo imports as it is, its records under
// did's URIs and its commit, naming the other DID, as the head (the next
// commit of did names did again). It checks more than the reference: the
// tree must be well formed. A CAR the reference cannot read
// (ErrUnreadableRepo), a tree with nodes missing among them, is its 500;
// the rest of what it refuses is ErrInvalidRepo. Records the repo already
// holds need not be in the CAR; any other must be, as a parsable record.
// Blocks and records are tagged with the fresh rev.
//
// Blocks are read from c's file as they are needed and written in
// batches of importFlush bytes; what stays in memory is the MST (as
// indigo loads it), the record paths and the CIDs to keep.
func ImportCAR(ctx context.Context, tx *sql.Tx, did syntax.DID, c *CAR, now time.Time) ([]Op, error) {
	commitCID := c.Root()
	raw, err := c.data(commitCID)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadableRepo, indigorepo.ErrNoCommit)
	}
	var commit indigorepo.Commit
	if err := commit.UnmarshalCBOR(bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("%w: parsing commit block from CAR file: %v", ErrUnreadableRepo, err)
	}
	if err := commit.VerifyStructure(); err != nil {
		return nil, fmt.Errorf("%w: parsing commit block from CAR file: %v", ErrUnreadableRepo, err)
	}
	tree, err := mst.LoadTreeFromStore(ctx, c, commit.Data)
	if err != nil {
		return nil, fmt.Errorf("%w: reading MST from CAR file: %v", ErrUnreadableRepo, err)
	}
	if tree.IsPartial() {
		return nil, fmt.Errorf("%w: MST blocks missing", ErrUnreadableRepo)
	}
	if err := tree.Verify(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidRepo, err)
	}

	// The repo's rev is a fresh one, after the rev it replaces, as the
	// reference's: the commit block keeps its own.
	_, prevRev, err := Head(ctx, tx)
	if err != nil && !errors.Is(err, ErrRepoNotFound) {
		return nil, err
	}
	rev := nextRev(prevRev, now)

	st := newTxStmts(ctx, tx, nil)
	// Keep exactly the blocks of the new repo: its commit and nodes, and
	// the blocks of its records. keep also tells which are written.
	keep := make(map[cid.Cid]struct{}, c.Len())
	bw := &flushingBatch{batch: newBatch(rev), st: st}
	if err := bw.add(keep, commitCID, raw); err != nil {
		return nil, err
	}
	var addNodes func(n *mst.Node) error
	addNodes = func(n *mst.Node) error {
		b, err := c.data(*n.CID)
		if err != nil {
			return err
		}
		if err := bw.add(keep, *n.CID, b); err != nil {
			return err
		}
		for i := range n.Entries {
			if ch := n.Entries[i].Child; ch != nil {
				if err := addNodes(ch); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := addNodes(tree.Root); err != nil {
		return nil, err
	}

	old, err := allRecords(ctx, tx)
	if err != nil {
		return nil, err
	}
	var ops []Op
	records := make(map[string]struct{})
	err = tree.Walk(func(key []byte, val cid.Cid) error {
		path := string(key)
		records[path] = struct{}{}
		prev, had := old[path]
		if had && prev.Equals(val) {
			keep[val] = struct{}{} // the block is already stored
			return nil
		}
		if _, done := keep[val]; !done {
			b, err := c.data(val)
			if err != nil {
				return err
			}
			if b == nil {
				var one int
				if err := tx.QueryRowContext(ctx, `SELECT 1 FROM repo_block WHERE cid = ?`, val.Bytes()).Scan(&one); err != nil {
					return fmt.Errorf("%w: Could not parse record at '%s'", ErrInvalidRepo, path)
				}
				keep[val] = struct{}{} // stored, shared with another record: keep it
			} else {
				if _, err := atdata.UnmarshalCBOR(b); err != nil {
					return fmt.Errorf("%w: Could not parse record at '%s'", ErrInvalidRepo, path)
				}
				if err := bw.add(keep, val, b); err != nil {
					return err
				}
			}
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
	if err := bw.flush(); err != nil {
		return nil, err
	}
	for path, prev := range old {
		if _, ok := records[path]; !ok {
			p := prev
			ops = append(ops, Op{Action: ActionDelete, Path: path, Prev: &p})
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })

	if err := writeRecords(st, ops, rev); err != nil {
		return nil, err
	}
	if err := deleteBlocksExcept(st, keep); err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO repo_root (id, did, cid, rev, data) VALUES (1, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET did = excluded.did, cid = excluded.cid, rev = excluded.rev, data = excluded.data`,
		did.String(), commitCID.Bytes(), rev, commit.Data.Bytes()); err != nil {
		return nil, fmt.Errorf("repo: import: %w", err)
	}
	return ops, nil
}

// flushingBatch writes its blocks whenever they pass importFlush bytes.
type flushingBatch struct {
	*batch
	st    *txStmts
	bytes int
}

// add queues block id unless keep already holds it, and marks it kept.
func (b *flushingBatch) add(keep map[cid.Cid]struct{}, id cid.Cid, data []byte) error {
	if _, ok := keep[id]; ok {
		return nil
	}
	keep[id] = struct{}{}
	b.blocks = append(b.blocks, block{id, data})
	if b.bytes += len(data); b.bytes >= importFlush {
		return b.flush()
	}
	return nil
}

func (b *flushingBatch) flush() error {
	err := b.insert(b.st)
	clear(b.blocks)
	b.blocks, b.bytes = b.blocks[:0], 0
	return err
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
