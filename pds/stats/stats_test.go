package stats_test

import (
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
