package repo

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"
)

// carWriter writes a CAR v1 through go-car's header framing; a block is
// go-car's LdWrite framing (the varint of the CID's and data's length,
// then both), written with a scratch buffer of its own: LdWrite allocates
// one for each block.
type carWriter struct {
	w       io.Writer
	scratch [binary.MaxVarintLen64]byte
}

// newCARWriter writes the header; root may be cid.Undef for a CAR without
// roots (sync.getBlocks).
func newCARWriter(w io.Writer, root cid.Cid) (*carWriter, error) {
	roots := []cid.Cid{}
	if root.Defined() {
		roots = append(roots, root)
	}
	if err := car.WriteHeader(&car.CarHeader{Roots: roots, Version: 1}, w); err != nil {
		return nil, fmt.Errorf("repo: write CAR: %w", err)
	}
	return &carWriter{w: w}, nil
}

func (cw *carWriter) block(c cid.Cid, data []byte) error {
	return cw.rawBlock(c.Bytes(), data)
}

// rawBlock is block of a CID in its binary form.
func (cw *carWriter) rawBlock(c, data []byte) error {
	n := binary.PutUvarint(cw.scratch[:], uint64(len(c)+len(data)))
	for _, p := range [][]byte{cw.scratch[:n], c, data} {
		if _, err := cw.w.Write(p); err != nil {
			return fmt.Errorf("repo: write CAR: %w", err)
		}
	}
	return nil
}

// carBytes is a CAR of blocks under root.
func carBytes(root cid.Cid, blocks []block) ([]byte, error) {
	size := 64
	for _, b := range blocks {
		size += len(b.data) + 48
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	cw, err := newCARWriter(buf, root)
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if err := cw.block(b.cid, b.data); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// ExportCAR writes the repo as a CAR whose root is the head commit
// (sync.getRepo): the commit block first, then every block. With since (a
// rev), only the blocks written at later revs, as the reference does; the
// commit too only when it is later.
//
// It is one statement, so a *sql.DB gives a consistent snapshot too; the
// snapshot stays open while w is written.
func ExportCAR(ctx context.Context, q Querier, w io.Writer, since string) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := export(ctx, q, bw, since); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("repo: export: %w", err)
	}
	return nil
}

// ErrExportTooLarge is ExportCARBytes' CAR past its limit.
var ErrExportTooLarge = errors.New("repo: export larger than the limit")

// ExportCARBytes is ExportCAR's CAR appended to buf, for a caller that
// wants it in memory while it is small: past limit bytes it stops reading
// and returns ErrExportTooLarge. On an error it returns buf as it was
// (its capacity perhaps grown).
func ExportCARBytes(ctx context.Context, q Querier, buf []byte, since string, limit int) ([]byte, error) {
	lw := &limitedBuffer{b: buf, limit: len(buf) + limit}
	if err := export(ctx, q, lw, since); err != nil {
		return lw.b[:len(buf)], err
	}
	return lw.b, nil
}

// limitedBuffer appends up to limit bytes, then fails.
type limitedBuffer struct {
	b     []byte
	limit int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(l.b)+len(p) > l.limit {
		return 0, ErrExportTooLarge
	}
	l.b = append(l.b, p...)
	return len(p), nil
}

// exportQuery is a whole export's statement: the head commit's block
// first, then every other.
const exportQuery = `SELECT 1, r.cid, b.content FROM repo_root r JOIN repo_block b ON b.cid = r.cid WHERE r.id = 1
	UNION ALL
	SELECT 0, cid, content FROM repo_block WHERE cid != (SELECT cid FROM repo_root WHERE id = 1)`

// export is ExportCAR, unbuffered.
func export(ctx context.Context, q Querier, w io.Writer, since string) error {
	query := exportQuery
	var args []any
	if since != "" {
		query = `SELECT 1, r.cid, CASE WHEN r.rev > ? THEN b.content END
			FROM repo_root r JOIN repo_block b ON b.cid = r.cid WHERE r.id = 1
			UNION ALL
			SELECT 0, cid, content FROM repo_block WHERE repo_rev > ? AND cid != (SELECT cid FROM repo_root WHERE id = 1)`
		args = []any{since, since}
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("repo: export: %w", err)
	}
	defer rows.Close()
	var cw *carWriter
	// Raw: each row is written out before the next, so the driver's bytes
	// need no copy of their own. Declared once: Scan's pointers make them
	// escape.
	var isHead bool
	var cc, data sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&isHead, &cc, &data); err != nil {
			return fmt.Errorf("repo: export: %w", err)
		}
		if cw == nil {
			// SQLite runs UNION ALL's arms in order: the head comes first.
			if !isHead {
				return fmt.Errorf("repo: export: head commit not first")
			}
			c, err := cid.Cast(cc)
			if err != nil {
				return fmt.Errorf("repo: export: %w", err)
			}
			if cw, err = newCARWriter(w, c); err != nil {
				return err
			}
		} else if err := checkCID(cc); err != nil {
			return fmt.Errorf("repo: export: %w", err)
		}
		if data == nil {
			continue // the head commit, not newer than since
		}
		// cc as stored: a CID that casts is its own binary form.
		if err := cw.rawBlock(cc, data); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("repo: export: %w", err)
	}
	if cw == nil {
		return ErrRepoNotFound
	}
	return nil
}

// RecordProofCAR writes the proof of one record (sync.getRecord): a CAR
// rooted at the head commit with the commit block, the MST nodes from the
// root down to the record and the record itself. For a missing record the
// nodes prove its absence, as the reference answers.
func RecordProofCAR(ctx context.Context, tx *sql.Tx, collection syntax.NSID, rkey syntax.RecordKey, w io.Writer) error {
	src := &nodeSource{st: newTxStmts(ctx, tx, nil)}
	h, err := src.head()
	if err != nil {
		return err
	}
	commit, err := src.block(h.cid)
	if err != nil {
		return err
	}
	key := []byte(collection.String() + "/" + rkey.String())
	out := []block{{h.cid, commit}, {h.data, src.raw[0]}}
	var leaf *cid.Cid
	for n := h.root; ; {
		p := len(n.Entries)
		for i := range n.Entries {
			if e := &n.Entries[i]; e.IsValue() && bytes.Compare(e.Key, key) >= 0 {
				p = i
				break
			}
		}
		if p < len(n.Entries) && bytes.Equal(n.Entries[p].Key, key) {
			leaf = n.Entries[p].Value
			break
		}
		if p == 0 || !n.Entries[p-1].IsChild() {
			break // the key would sit here: absent
		}
		e := &n.Entries[p-1]
		if e.Child == nil {
			if e.Child, err = src.node(*e.ChildCID, n.Height-1); err != nil {
				return err
			}
		}
		out = appendNew(out, block{*e.ChildCID, src.rawOf(*e.ChildCID)})
		n = e.Child
	}
	if leaf != nil {
		rec, err := src.block(*leaf)
		if err != nil {
			return err
		}
		out = appendNew(out, block{*leaf, rec})
	}
	cw, err := newCARWriter(w, h.cid)
	if err != nil {
		return err
	}
	for _, b := range out {
		if err := cw.block(b.cid, b.data); err != nil {
			return err
		}
	}
	return nil
}

// GetBlocks writes the blocks cids name as a CAR without roots
// (sync.getBlocks), in the order asked. If any is missing it writes
// nothing and returns those missing (the reference's "Could not find
// cids").
func GetBlocks(ctx context.Context, q Querier, cids []cid.Cid, w io.Writer) ([]cid.Cid, error) {
	found := make(map[cid.Cid][]byte, len(cids))
	for rest := cids; len(rest) > 0; {
		n := min(len(rest), 500)
		args := make([]any, n)
		for i, c := range rest[:n] {
			args[i] = c.Bytes()
		}
		rows, err := q.QueryContext(ctx, `SELECT cid, content FROM repo_block WHERE cid IN (`+rows(n, "?")+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("repo: get blocks: %w", err)
		}
		for rows.Next() {
			var cc, data []byte
			if err := rows.Scan(&cc, &data); err != nil {
				rows.Close()
				return nil, fmt.Errorf("repo: get blocks: %w", err)
			}
			c, err := cid.Cast(cc)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("repo: get blocks: %w", err)
			}
			found[c] = data
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("repo: get blocks: %w", err)
		}
		rest = rest[n:]
	}
	var missing []cid.Cid
	for _, c := range cids {
		if _, ok := found[c]; !ok {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return missing, nil
	}
	bw := bufio.NewWriter(w)
	cw, err := newCARWriter(bw, cid.Undef)
	if err != nil {
		return nil, err
	}
	for _, c := range cids {
		if err := cw.block(c, found[c]); err != nil {
			return nil, err
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("repo: get blocks: %w", err)
	}
	return nil, nil
}

// checkCID is cid.Cast's check of a CID in binary form, without keeping
// the CID.
func checkCID(b []byte) error {
	n, _, err := cid.CidFromBytes(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("cid: %d trailing bytes", len(b)-n)
	}
	return err
}
