package oauth

import (
	"encoding/binary"
	"runtime"
	"testing"
	"time"
)

// A flood of distinct jtis, none expired, leaves at most maxRememberedJTIs
// remembered, and the newest is still refused a second time.
func TestReplayBoundsItsCount(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := newReplay(func() time.Time { return now }, replayWindow)
	var key string
	for i := range 2*maxRememberedJTIs + 10 {
		key = "dpop:" + string(binary.AppendUvarint(nil, uint64(i)))
		if !r.unique(key) {
			t.Fatalf("key %d refused on its first use", i)
		}
	}
	if n := r.len(); n > maxRememberedJTIs {
		t.Fatalf("%d keys remembered, want at most %d", n, maxRememberedJTIs)
	}
	if r.unique(key) {
		t.Fatal("the newest key was accepted twice")
	}
}

// The replay store keeps no client string: a client's jti may be as long
// as a header allows, and the count bound alone let 1<<17 of them stay.
// 512 jtis of 256 KiB (128 MiB sent) must leave the live heap almost where
// it was; kept whole they would hold all 128 MiB.
func TestReplayKeepsNoKey(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	r := newReplay(func() time.Time { return now }, replayWindow)
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	b := make([]byte, 256<<10)
	for i := range 512 {
		binary.BigEndian.PutUint64(b, uint64(i))
		if !r.unique(string(b)) {
			t.Fatalf("key %d refused on its first use", i)
		}
	}
	binary.BigEndian.PutUint64(b, 7)
	if r.unique(string(b)) {
		t.Fatal("a long key was accepted twice")
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if grew := int64(ms.HeapAlloc) - int64(before); grew > 16<<20 {
		t.Fatalf("live heap grew %d MiB for 512 remembered jtis", grew>>20)
	}
	runtime.KeepAlive(r)
}
