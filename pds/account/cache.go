package account

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// Every authenticated write looks its account up by DID, and that two-table
// read is ~20 µs of a write that should take a fraction of a millisecond. So
// ByDID answers from memory while no write to the account database has
// ended since the row was read.
//
// Writes go through Manager.write, which bumps gen once the transaction has
// ended. A row is kept with the gen loaded before it was read and served
// only while gen is unchanged, so a row read before a write is never served
// after that write returns: a caller that changed an account, and anyone it
// tells, reads the change.
type accountCache struct {
	gen  atomic.Uint64
	mu   sync.Mutex
	rows map[string]cachedAccount // by DID
}

type cachedAccount struct {
	gen uint64
	acc Account
}

// maxCachedAccounts bounds the map; past it, the cache starts over.
const maxCachedAccounts = 4096

func (c *accountCache) get(did string) (*Account, bool) {
	g := c.gen.Load()
	c.mu.Lock()
	e, ok := c.rows[did]
	c.mu.Unlock()
	if !ok || e.gen != g {
		return nil, false
	}
	acc := e.acc // a copy: callers may change theirs
	return &acc, true
}

// put keeps acc, read when gen was g, unless a write has ended since (it
// would never be served).
func (c *accountCache) put(acc *Account, g uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen.Load() != g {
		return
	}
	if c.rows == nil || len(c.rows) >= maxCachedAccounts {
		c.rows = make(map[string]cachedAccount)
	}
	c.rows[acc.DID] = cachedAccount{gen: g, acc: *acc}
}

// write is the only way the manager writes its database (see accountCache).
func (m *Manager) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	defer m.cache.gen.Add(1)
	return m.db.Write(ctx, fn)
}
