package stats_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/stats"
)

func TestSnapshot(t *testing.T) {
	var s stats.Stats
	for i := 1; i <= 100; i++ {
		s.Record("a.b.c", 200, time.Duration(i)*time.Millisecond)
	}
	s.Record("a.b.c", 500, time.Millisecond)
	s.Record("x.y.z", 400, 3*time.Millisecond)
	snap := s.Snapshot()
	if len(snap) != 2 || snap[0].Name != "a.b.c" || snap[0].Count != 101 || snap[0].Errors != 1 {
		t.Fatalf("snapshot %+v", snap)
	}
	if snap[0].P50 != 50*time.Millisecond || snap[0].P95 != 95*time.Millisecond {
		t.Fatalf("percentiles p50=%v p95=%v", snap[0].P50, snap[0].P95)
	}
	if snap[1].Mean != 3*time.Millisecond || snap[1].Errors != 1 {
		t.Fatalf("x.y.z %+v", snap[1])
	}
}

// Memory stays bounded however many calls come.
func TestWindowIsBounded(t *testing.T) {
	var s stats.Stats
	for i := range 10000 {
		s.Record("m", 200, time.Duration(i))
	}
	snap := s.Snapshot()[0]
	if snap.Count != 10000 || snap.P50 < 5000 {
		t.Fatalf("%+v: percentiles should cover the recent calls only", snap)
	}
}

// Methods past MaxMethods are counted together, so that ever new names
// (any NSID reaches the mux) cannot grow the stats without bound; the
// methods already kept go on apart.
func TestMethodsAreBounded(t *testing.T) {
	var s stats.Stats
	for i := range stats.MaxMethods + 500 {
		s.Record(fmt.Sprintf("com.example.m%d", i), 200, time.Millisecond)
	}
	s.Record("com.example.m0", 200, time.Millisecond)
	snap := s.Snapshot()
	if len(snap) != stats.MaxMethods+1 {
		t.Fatalf("%d methods kept, want %d and %q", len(snap), stats.MaxMethods, stats.Other)
	}
	byName := map[string]int64{}
	for _, m := range snap {
		byName[m.Name] = m.Count
	}
	if byName[stats.Other] != 500 || byName["com.example.m0"] != 2 {
		t.Fatalf("%s counted %d (want 500), com.example.m0 %d (want 2)", stats.Other, byName[stats.Other], byName["com.example.m0"])
	}
}
