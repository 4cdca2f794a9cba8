package pds

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/fakepds/fakepds/pds/account"
	"github.com/fakepds/fakepds/pds/actorstore"
	"github.com/fakepds/fakepds/pds/repo"
	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
)

// The firehose after a crash.
//
// A repo write commits to the account's actor store, then commits its
// #commit (written before, see applyPrepared) to the sequencer: two
// databases, two transactions. A process killed between them leaves a commit no consumer heard of, and the repo's
// next #commit names in since a rev nobody saw, so every consumer's chain
// check fails for that repo. The protocol's repair (Sync 1.1) is a #sync
// carrying the current commit, which a consumer takes as the repo's new
// base; the reference's repair scripts (rebuild-repo, rotate-keys) send the
// same.
//
// Start-up stays cheap: Close leaves a marker naming the last seq once no
// request is left running, no Append failed and the stores closed cleanly;
// New takes it away. Only a start without a marker, or with one naming
// another seq than the log's, compares every account's head with the log.
// That runs in New, before anything is served, so each #sync precedes any
// new write of its repo.

// cleanMarker is the marker's file name in the data dir.
const cleanMarker = "clean-shutdown"

// recoverFirehose sends a #sync for every repo the log is behind on,
// unless the last run ended cleanly or there was no account database
// before this start (a new data dir: no account to check).
func (s *Server) recoverFirehose(ctx context.Context) error {
	clean, err := s.takeCleanMarker()
	if err != nil {
		return err
	}
	if clean || s.newData {
		return nil
	}
	start := time.Now()
	checked, synced, err := s.syncReposAhead(ctx)
	if err != nil {
		return fmt.Errorf("firehose recovery: %w", err)
	}
	if checked > 0 {
		s.log.Info("firehose recovery after an unclean shutdown", "accounts", checked, "synced", synced,
			"took", time.Since(start))
	}
	return nil
}

// takeCleanMarker removes the marker and reports whether it vouched for
// this log. The removal reaches the disk before anything is written when
// fsync is on: a marker that came back after a power cut would hide the
// gaps of the run it did not describe.
func (s *Server) takeCleanMarker() (bool, error) {
	path := filepath.Join(s.dataDir, cleanMarker)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("clean-shutdown marker: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return false, fmt.Errorf("clean-shutdown marker: %w", err)
	}
	if s.cfg.Fsync {
		if err := store.SyncDir(s.dataDir); err != nil {
			return false, fmt.Errorf("clean-shutdown marker: %w", err)
		}
	}
	seq, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "seq ")
	n, err := strconv.ParseInt(seq, 10, 64)
	return ok && err == nil && n == s.seq.Last(), nil
}

// closeStoresMarked closes the stores and, when idle says no request can
// still be writing, leaves the marker for the next start.
func (s *Server) closeStoresMarked(idle bool) error {
	if err := s.closeStores(); err != nil || !idle || s.tempDir || s.discard.Load() || s.seq.Failed() {
		return err
	}
	// Read after the close: nothing can append any more.
	marker := fmt.Sprintf("seq %d\n", s.seq.Last())
	return os.WriteFile(filepath.Join(s.dataDir, cleanMarker), []byte(marker), 0o600)
}

// syncReposAhead compares each account's head with its last repo event in
// the log and sequences a #sync of the head where the log is behind.
func (s *Server) syncReposAhead(ctx context.Context) (checked, synced int, err error) {
	var afterTime, afterDID string
	for {
		accs, err := s.accounts.List(ctx, afterTime, afterDID, 500)
		if err != nil {
			return checked, synced, err
		}
		if len(accs) == 0 {
			return checked, synced, nil
		}
		for _, acc := range accs {
			did, err := s.syncIfAhead(ctx, acc)
			if err != nil {
				return checked, synced, fmt.Errorf("%s: %w", acc.DID, err)
			}
			checked++
			if did {
				synced++
			}
		}
		last := accs[len(accs)-1]
		afterTime, afterDID = last.CreatedAt, last.DID
	}
}

// syncIfAhead sequences a #sync of acc's head when the log's newest repo
// event of acc is older. An account the log never announced gets what
// createAccount would have sent around it (#identity, #account), unless it
// is not active: its activation announces it, #sync included.
func (s *Server) syncIfAhead(ctx context.Context, acc *account.Account) (bool, error) {
	if _, err := os.Stat(actorstore.Path(s.actorDir(), acc.DID)); err != nil {
		return false, nil // no repo (an account in migration before its import)
	}
	logged, err := s.seq.LastRepoState(ctx, acc.DID)
	if err != nil {
		return false, err
	}
	if !logged.Any && !acc.Active() {
		return false, nil
	}
	var evts []sequencer.Event
	err = s.withActor(ctx, acc.DID, func(db *store.DB) error {
		_, rev, err := repo.Head(ctx, db.Reader())
		if errors.Is(err, repo.ErrRepoNotFound) || err == nil && rev <= logged.Rev {
			// TIDs sort as strings: a head at or behind the log is known.
			return nil
		}
		if err != nil {
			return err
		}
		evt, err := repo.SyncEvent(ctx, db.Reader(), syntax.DID(acc.DID))
		if err != nil {
			return err
		}
		if !logged.Any {
			evts = append(evts, sequencer.Identity(acc.DID, handleOrInvalid(acc)), sequencer.Account(acc.DID, ""))
		}
		evts = append(evts, sequencer.Sync(evt))
		return nil
	})
	if err != nil || evts == nil {
		return false, err
	}
	_, err = s.seq.Append(ctx, s.clock.Now(), evts...)
	return err == nil, err
}
