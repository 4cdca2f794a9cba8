package repo

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// treeNodes is the encoded nodes of an MST of n TID keys, each with its CID.
func treeNodes(t *testing.T, n int) []*cachedNode {
	t.Helper()
	tree := mst.NewEmptyTree()
	clock := syntax.NewTIDClock(0)
	h, err := multihash.Sum([]byte("a record"), multihash.SHA2_256, -1)
	if err != nil {
		t.Fatal(err)
	}
	v := cid.NewCidV1(cid.DagCBOR, h)
	for range n {
		if _, err := tree.Insert([]byte("app.bsky.feed.post/"+clock.Next().String()), v); err != nil {
			t.Fatal(err)
		}
	}
	var out []*cachedNode
	var walk func(n *mst.Node)
	walk = func(n *mst.Node) {
		nd := n.NodeData()
		raw, c, err := nd.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &cachedNode{cid: *c, raw: raw})
		for _, e := range n.Entries {
			if e.Child != nil {
				walk(e.Child)
			}
		}
	}
	walk(tree.Root)
	return out
}

// What the node cache counts is at least what it holds on the heap (and
// not far above it), so NodeCacheBytes bounds the heap it takes. Not
// parallel: the heap is measured.
func TestNodeCacheCountsItsHeap(t *testing.T) {
	encoded := treeNodes(t, 5000)
	c := newNodeCache(1 << 30)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, e := range encoded {
		// What node() keeps: its own copy of the bytes read, and their
		// decoded form.
		raw := bytes.Clone(e.raw)
		nd, err := mst.NodeDataFromCBOR(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		c.put(&cachedNode{cid: cid.MustParse(e.cid.String()), raw: raw, nd: nd})
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(encoded)
	if int64(c.size) < held {
		t.Errorf("%d nodes counted as %d bytes hold %d on the heap: the bound undercounts", len(encoded), c.size, held)
	}
	if int64(c.size) > 2*held {
		t.Errorf("%d nodes counted as %d bytes hold only %d on the heap: more than twice over", len(encoded), c.size, held)
	}
	t.Logf("%d nodes: counted %d bytes, %d on the heap", len(encoded), c.size, held)
}

// The cache never counts more than its bound: the least recently used
// nodes go first.
func TestNodeCacheBound(t *testing.T) {
	t.Parallel()
	encoded := treeNodes(t, 2000)
	c := newNodeCache(64 << 10)
	for _, e := range encoded {
		c.put(e)
		if c.size > c.max {
			t.Fatalf("counted %d bytes, over the bound of %d", c.size, c.max)
		}
	}
	if len(c.items) == len(encoded) || len(c.items) == 0 {
		t.Fatalf("%d of %d nodes kept within 64 KiB", len(c.items), len(encoded))
	}
	last := encoded[len(encoded)-1]
	if c.get(last.cid) == nil {
		t.Error("the last node put is gone")
	}
	if c.get(encoded[0].cid) != nil {
		t.Error("the first node put is still there, past the bound")
	}
}
