// Package chain checks a firehose's repo events the way a strict Sync 1.1
// consumer does, for tests: every #commit verified by indigo (structure,
// records in the tree, the ops inverted back to prevData, the signature),
// and chained to what came before it in the same repo (since is the last
// rev seen, prevData the last data root seen, revs only grow). A #sync is
// the repo's new base. A consumer that reads the stream from its first
// event, as these tests do, sees every repo begin with its creation.
package chain

import (
	"bytes"
	"context"
	"fmt"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/repo"
	"github.com/ipfs/go-cid"
)

// Checker follows the repos of one stream. The zero value checks no
// signatures; set Directory to check them against each DID's key.
type Checker struct {
	Directory identity.Directory
	repos     map[string]State
}

// State is what a consumer knows of a repo: its last commit.
type State struct {
	Rev    string
	Commit cid.Cid
	Data   cid.Cid
}

// Repo is the state of did after the events checked so far.
func (c *Checker) Repo(did string) (State, bool) {
	st, ok := c.repos[did]
	return st, ok
}

// Commit checks a #commit and, when it holds, advances its repo.
func (c *Checker) Commit(ctx context.Context, e *comatproto.SyncSubscribeRepos_Commit) error {
	if err := c.check(ctx, e); err != nil {
		return fmt.Errorf("#commit seq %d of %s at rev %s: %w", e.Seq, e.Repo, e.Rev, err)
	}
	return nil
}

func (c *Checker) check(ctx context.Context, e *comatproto.SyncSubscribeRepos_Commit) error {
	commit, commitCID, err := repo.LoadCommitFromCAR(ctx, bytes.NewReader(e.Blocks))
	if err != nil {
		return err
	}
	if *commitCID != cid.Cid(e.Commit) {
		return fmt.Errorf("commit field %s is not the CAR's root %s", cid.Cid(e.Commit), commitCID)
	}
	if c.Directory != nil {
		if err := repo.VerifyCommitSignature(ctx, c.Directory, e); err != nil {
			return fmt.Errorf("signature: %w", err)
		}
	}
	prev, known := c.repos[e.Repo]
	switch {
	case !known && (e.Since != nil || e.PrevData != nil):
		return fmt.Errorf("first event of the repo follows a commit never seen (since %v)", str(e.Since))
	case known && (e.Since == nil || *e.Since != prev.Rev):
		return fmt.Errorf("since %v is not the last rev seen, %s", str(e.Since), prev.Rev)
	case known && (e.PrevData == nil || cid.Cid(*e.PrevData) != prev.Data):
		return fmt.Errorf("prevData is not the last data root seen, %s", prev.Data)
	case known && e.Rev <= prev.Rev:
		return fmt.Errorf("rev does not follow %s", prev.Rev)
	}
	// Chained, so its ops must invert its tree back to prevData.
	if _, err := repo.VerifyCommitMessage(ctx, e); err != nil {
		return err
	}
	c.set(e.Repo, State{Rev: commit.Rev, Commit: *commitCID, Data: commit.Data})
	return nil
}

// Sync checks a #sync (its commit, and the signature with a Directory) and
// makes it the repo's base.
func (c *Checker) Sync(ctx context.Context, e *comatproto.SyncSubscribeRepos_Sync) error {
	fail := func(err error) error { return fmt.Errorf("#sync seq %d of %s at rev %s: %w", e.Seq, e.Did, e.Rev, err) }
	commit, commitCID, err := repo.LoadCommitFromCAR(ctx, bytes.NewReader(e.Blocks))
	if err != nil {
		return fail(err)
	}
	if err := commit.VerifyStructure(); err != nil {
		return fail(err)
	}
	if commit.DID != e.Did || commit.Rev != e.Rev {
		return fail(fmt.Errorf("the commit is %s at %s", commit.DID, commit.Rev))
	}
	if c.Directory != nil {
		if _, err := repo.VerifySyncMessage(ctx, c.Directory, e); err != nil {
			return fail(fmt.Errorf("signature: %w", err))
		}
	}
	// A new account's #sync repeats its first #commit's rev.
	if prev, ok := c.repos[e.Did]; ok && e.Rev < prev.Rev {
		return fail(fmt.Errorf("rev goes back from %s", prev.Rev))
	}
	c.set(e.Did, State{Rev: commit.Rev, Commit: *commitCID, Data: commit.Data})
	return nil
}

func (c *Checker) set(did string, st State) {
	if c.repos == nil {
		c.repos = map[string]State{}
	}
	c.repos[did] = st
}

func str(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}
