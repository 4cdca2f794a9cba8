package repo

import (
	"container/list"
	"sync"

	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/ipfs/go-cid"
)

// NodeCacheBytes bounds the process-wide cache of MST nodes (counting the
// encoded size of each node twice, for its decoded form).
const NodeCacheBytes = 32 << 20

// nodes caches decoded MST nodes by CID for every account. A write's path
// starts where the previous write's ended (the root and the right edge, for
// TID keys), so reading it from memory instead of SQLite saves a query per
// level. Content addressing makes every entry right for every account and
// every transaction, committed or rolled back: a CID names one content
// forever. The lock only guards the map and list; no I/O happens under it.
var nodes = newNodeCache(NodeCacheBytes)

type nodeCache struct {
	mu    sync.Mutex
	max   int
	size  int
	items map[cid.Cid]*list.Element
	lru   list.List // of *cachedNode, most recent at the front
}

type cachedNode struct {
	cid cid.Cid
	raw []byte
	// nd is never modified: NodeData.Node copies what indigo may mutate
	// (keys, values), and indigo replaces child CID pointers rather than
	// writing through them.
	nd *mst.NodeData
}

func newNodeCache(max int) *nodeCache {
	return &nodeCache{max: max, items: make(map[cid.Cid]*list.Element)}
}

func (c *nodeCache) get(k cid.Cid) *cachedNode {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[k]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*cachedNode)
}

func (c *nodeCache) put(n *cachedNode) {
	cost := 2 * len(n.raw)
	if cost > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[n.cid]; ok {
		c.lru.MoveToFront(e)
		return
	}
	c.items[n.cid] = c.lru.PushFront(n)
	c.size += cost
	for c.size > c.max {
		old := c.lru.Remove(c.lru.Back()).(*cachedNode)
		delete(c.items, old.cid)
		c.size -= 2 * len(old.raw)
	}
}
