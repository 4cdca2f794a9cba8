package sequencer

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
)

// What the server's crash recovery asks of the log: which repo state a
// consumer last heard of, and whether this run's log is known whole.

// RepoState is what the log last told consumers of one account.
type RepoState struct {
	// Rev is the rev of the account's newest #commit or #sync; "" when
	// the log holds neither.
	Rev string
	// Any reports whether the log holds any event of the account at all.
	Any bool
}

// LastRepoState reads did's newest repo event (#commit or #sync) from the
// database: one indexed lookup and one frame decode.
func (s *Sequencer) LastRepoState(ctx context.Context, did string) (RepoState, error) {
	return s.RepoStateBefore(ctx, did, math.MaxInt64)
}

// RepoStateBefore is LastRepoState as the log stood before seq.
func (s *Sequencer) RepoStateBefore(ctx context.Context, did string, seq int64) (RepoState, error) {
	var st RepoState
	var typ string
	var frame []byte
	// repo_seq_did orders each DID's rows by seq, so this reads backwards
	// from the newest and stops at the first repo event.
	err := s.db.Reader().QueryRowContext(ctx, `SELECT event_type, event FROM repo_seq
		WHERE did = ? AND seq < ? AND event_type IN (?, ?) ORDER BY seq DESC LIMIT 1`, did, seq, TypeCommit, TypeSync).Scan(&typ, &frame)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		err = s.db.Reader().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM repo_seq WHERE did = ? AND seq < ?)`, did, seq).Scan(&st.Any)
		return st, err
	case err != nil:
		return st, err
	}
	st.Any = true
	body, ok := bytes.CutPrefix(frame, headers[typ])
	if !ok {
		return st, fmt.Errorf("sequencer: %s event of %s: unexpected frame header", typ, did)
	}
	if typ == TypeCommit {
		var c comatproto.SyncSubscribeRepos_Commit
		err = c.UnmarshalCBOR(bytes.NewReader(body))
		st.Rev = c.Rev
	} else {
		var e comatproto.SyncSubscribeRepos_Sync
		err = e.UnmarshalCBOR(bytes.NewReader(body))
		st.Rev = e.Rev
	}
	if err != nil {
		return st, fmt.Errorf("sequencer: decode %s event of %s: %w", typ, did, err)
	}
	return st, nil
}

// Last is the last seq given out (0 before the first event).
func (s *Sequencer) Last() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Failed reports whether an Append failed since Open: its events may be
// missing although what they describe was stored, so this run cannot vouch
// for the log at shutdown.
func (s *Sequencer) Failed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}
