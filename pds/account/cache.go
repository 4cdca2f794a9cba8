package account

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// Every authenticated write looks its account up by DID, and that two-table
// read is ~20-45 µs of a write that should take a fraction of a
// millisecond (a reader whose snapshot moved reads its pages again). So
// ByDID answers from memory while no write that may have changed the row
// has ended since it was read.
//
// Every write goes through one of three doors, each bumping gen once its
// transaction has ended, or not at all:
//   - write: any table; it may change every account (all).
//   - writeAccount: only rows of one DID (changed[did]): a new account.
//   - writeTokens: only the session tables, which no Account holds.
//
// A row is kept with the gen loaded before it was read and served only
// while no write that may have changed it has ended at a later gen, so a
// row read before a write is never served after that write returns: a
// caller that changed an account, and anyone it tells, reads the change.
// A test suite's accounts stay cached while others are created and log in.
type accountCache struct {
	gen     atomic.Uint64
	mu      sync.Mutex
	rows    map[string]cachedAccount // by DID
	changed map[string]uint64        // by DID: the gen writeAccount ended at
	all     uint64                   // the gen the last write ended at
}

type cachedAccount struct {
	gen uint64
	acc Account
}

// maxCachedAccounts bounds both maps; past it, each starts over.
const maxCachedAccounts = 4096

// staleBefore is the gen a row of did must have been read at to be served.
// c.mu is held.
func (c *accountCache) staleBefore(did string) uint64 {
	return max(c.all, c.changed[did])
}

func (c *accountCache) get(did string) (*Account, bool) {
	c.mu.Lock()
	e, ok := c.rows[did]
	fresh := ok && e.gen >= c.staleBefore(did)
	c.mu.Unlock()
	if !fresh {
		return nil, false
	}
	acc := e.acc // a copy: callers may change theirs
	return &acc, true
}

// put keeps acc, read when gen was g, unless a write that may have changed
// it has ended since (it would never be served).
func (c *accountCache) put(acc *Account, g uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g < c.staleBefore(acc.DID) {
		return
	}
	if c.rows == nil || len(c.rows) >= maxCachedAccounts {
		c.rows = make(map[string]cachedAccount)
	}
	c.rows[acc.DID] = cachedAccount{gen: g, acc: *acc}
}

// ended records that a write has ended: of did's rows only, or of any
// ("" did).
func (c *accountCache) ended(did string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.gen.Add(1)
	if did == "" || len(c.changed) >= maxCachedAccounts {
		c.all = g
		clear(c.changed)
		if did == "" {
			return
		}
	}
	if c.changed == nil {
		c.changed = make(map[string]uint64)
	}
	c.changed[did] = g
}

// write is how the manager writes its database, unless the write is known
// to change only one account's rows (writeAccount) or none (writeTokens).
func (m *Manager) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	defer m.cache.ended("")
	return m.db.Write(ctx, fn)
}

// writeAccount is a write that changes rows of did and of no other
// account.
func (m *Manager) writeAccount(ctx context.Context, did string, fn func(tx *sql.Tx) error) error {
	defer m.cache.ended(did)
	return m.db.Write(ctx, fn)
}

// writeTokens is a write of the refresh_token table alone, which no
// Account reads: the cache stays as it is.
func (m *Manager) writeTokens(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return m.db.Write(ctx, fn)
}
