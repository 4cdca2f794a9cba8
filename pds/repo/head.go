package repo

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
)

// SyncEvent is the repo's current commit as a firehose #sync (sent when an
// account is activated): the rev and a CAR holding the commit block, with
// the commit as its root. The sequencer sets Seq and Time. One statement,
// so a *sql.DB cannot see a head whose block a concurrent write deleted.
func SyncEvent(ctx context.Context, q Querier, did syntax.DID) (*comatproto.SyncSubscribeRepos_Sync, error) {
	var cc, data []byte
	var rev string
	err := q.QueryRowContext(ctx, `SELECT r.cid, r.rev, b.content FROM repo_root r
		JOIN repo_block b ON b.cid = r.cid WHERE r.id = 1`).Scan(&cc, &rev, &data)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrRepoNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("repo: head commit: %w", err)
	}
	head, err := cid.Cast(cc)
	if err != nil {
		return nil, fmt.Errorf("repo: head commit: %w", err)
	}
	var buf bytes.Buffer
	w, err := newCARWriter(&buf, head)
	if err != nil {
		return nil, err
	}
	if err := w.block(head, data); err != nil {
		return nil, err
	}
	return &comatproto.SyncSubscribeRepos_Sync{Did: did.String(), Rev: rev, Blocks: buf.Bytes()}, nil
}
