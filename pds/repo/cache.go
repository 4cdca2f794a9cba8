package repo

import (
	"container/list"
	"sync"

	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/ipfs/go-cid"
)

// NodeCacheBytes bounds the process-wide cache of MST nodes, in heap bytes
// as nodeCost counts them.
const NodeCacheBytes = 16 << 20

// nodeCost is what a cached node holds on the heap: its encoded bytes, its
// decoded form (1.96x the encoded size, measured over the 5,373 nodes of a
// tree of 20,000 TID keys) and the entry's own structures (the map entry,
// the list element, cachedNode, the CID: ~300 bytes a node with the map's
// growth, TestNodeCacheCountsItsHeap). Counting only twice the encoded
// size, as an earlier version did, let a 32 MiB bound hold ~60 MiB: in a
// soak the live heap grew with it for minutes.
func nodeCost(raw []byte) int { return 3*len(raw) + nodeOverhead }

const nodeOverhead = 384

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
	cost := nodeCost(n.raw)
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
		c.size -= nodeCost(old.raw)
	}
}
