package pds_test

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"

	"github.com/fakepds/fakepds/pds"
)

// heapGrowth runs fn and reports how far the live heap rose above where it
// stood before, at its highest. The collector runs at GOGC=1 meanwhile, so
// the heap holds little garbage beyond what is live, and a sampler reads it
// every millisecond: a body held whole for the length of a request shows.
func heapGrowth(t *testing.T, fn func()) uint64 {
	t.Helper()
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var ms runtime.MemStats
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	fn()
	close(stop)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// heapAfterGC is the live heap once collected.
func heapAfterGC() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

const mib = 1 << 20

// importRepo of a 10 MiB CAR whose records must all be written again: the
// server's heap rises by less than the CAR (it is spooled to a file,
// indexed, and its records written about a MiB at a time); a server that
// holds the body whole holds it at least twice.
func TestImportRepoMemoryIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10 MiB of records")
	}
	s := start(t, pds.Config{})
	ctx := t.Context()
	a := createAccount(t, s, "bigimport.test", "bigimport@example.com", "pw")
	cl := bearer(s, a.AccessJwt)
	const records = 34
	var rkeys []string
	for i := range records {
		// Unvalidated records of an unknown collection, each just under
		// the reference's 1 MB record limit.
		var out comatproto.RepoCreateRecord_Output
		err := cl.LexDo(ctx, "POST", "application/json", "com.atproto.repo.createRecord", nil, map[string]any{
			"repo": a.Did, "collection": "com.example.big",
			"record": map[string]any{"$type": "com.example.big", "data": fmt.Sprintf("%02d", i) + strings.Repeat("x", 300_000)},
		}, &out)
		if err != nil {
			t.Fatal(err)
		}
		rkeys = append(rkeys, out.Uri[strings.LastIndex(out.Uri, "/")+1:])
	}
	car, err := comatproto.SyncGetRepo(ctx, cl, a.Did, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(car) < records*300_000 {
		t.Fatalf("CAR of %d bytes", len(car))
	}
	for _, rkey := range rkeys {
		if _, err := comatproto.RepoDeleteRecord(ctx, cl, &comatproto.RepoDeleteRecord_Input{Repo: a.Did, Collection: "com.example.big", Rkey: rkey}); err != nil {
			t.Fatal(err)
		}
	}

	var importErr error
	grew := heapGrowth(t, func() {
		importErr = cl.LexDo(ctx, "POST", "application/vnd.ipld.car", "com.atproto.repo.importRepo", nil, bytes.NewReader(car), nil)
	})
	if importErr != nil {
		t.Fatalf("importRepo: %v", importErr)
	}
	t.Logf("importRepo of a %.1f MiB CAR: heap grew %.1f MiB at most", float64(len(car))/mib, float64(grew)/mib)
	// Holding the body whole, it grew by 74 MiB (3.6 times the CAR).
	if limit := uint64(len(car)); grew > limit {
		t.Errorf("importRepo of a %d MiB CAR grew the heap by %d MiB, want under %d MiB", len(car)/mib, grew/mib, limit/mib)
	}
	for _, rkey := range rkeys {
		var got struct{ Value struct{ Data string } }
		if err := cl.LexDo(ctx, "GET", "", "com.atproto.repo.getRecord", map[string]any{"repo": a.Did, "collection": "com.example.big", "rkey": rkey}, nil, &got); err != nil || len(got.Value.Data) != 300_002 {
			t.Fatalf("record %s after import: %d bytes, %v", rkey, len(got.Value.Data), err)
		}
	}
}
