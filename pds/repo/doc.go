// Package repo is the repository engine of one account: a signed commit
// (version 3) over a Merkle Search Tree of records, stored in the account's
// actor store (tables repo_root, repo_block and record; see
// actorstore.Migrations) and changed only inside the caller's write
// transaction.
//
// The tree, commits and CAR framing come from indigo (atproto/repo,
// atproto/repo/mst) and go-car; this package decides what to load, what to
// store and what to send. The choices, and why they hold:
//
//   - A write loads only the MST nodes on the paths of its keys (and the
//     neighbours a split, merge or proof needs) into a partial indigo tree.
//     indigo marks every node a change touches, or needs to prove the change
//     invertible, dirty; so WriteDiffBlocks yields exactly the blocks a
//     firehose #commit carries, and the nodes loaded but no longer in the
//     tree are exactly the blocks the write made dead.
//   - Nodes come from a process-wide cache keyed by CID before SQLite: a
//     write's path starts where the last write on the repo ended. Content
//     addressing makes the cache right for every account and every
//     transaction, even one rolled back.
//   - repo_block holds only live blocks: each write deletes the nodes it
//     replaced, the previous commit and records no other record shares, as
//     the reference PDS does. So sync.getRepo is one table scan, and "since"
//     is a filter on the rev each block was written at.
//   - The record table is kept in the same transaction as the tree, so
//     getRecord and listRecords are one indexed query each, never the MST.
//   - A Writer holds the write statements prepared once per actor store
//     (parsing them was a sixth of a write); Apply without one prepares
//     them per call.
//
// Semantics follow the reference PDS (npm @atproto/pds): swapCommit and
// swapRecord checks, ops carrying prev CIDs, prevData, the blocks of a
// #commit, reverse chronological listRecords. Where fakepds differs, the
// function says so.
package repo
