package sequencer_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/sequencer"
)

// LastBefore bisects the log by seq: on a log with runs of events sharing
// a millisecond, and holes where an account's events were deleted (at the
// start, the middle and the end), it answers what a scan of every event
// answers, for times before, between, at and after the events'.
func TestLastBeforeAgreesWithAScan(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range 60 {
		did := "did:plc:keep"
		if i < 5 || i >= 20 && i < 30 || i >= 55 {
			did = "did:plc:gone"
		}
		at := t0.Add(time.Duration(i/3) * time.Millisecond) // three a millisecond
		if _, err := s.Append(ctx, at, sequencer.Identity(did, "")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteAccountEvents(ctx, "did:plc:gone"); err != nil {
		t.Fatal(err)
	}
	all, err := s.After(ctx, 0, 100)
	if err != nil || len(all) != 40 {
		t.Fatalf("After(0) = %d events, %v; want 40", len(all), err)
	}
	for ms := -1; ms <= 21; ms++ {
		before := t0.Add(time.Duration(ms) * time.Millisecond)
		var want int64
		for _, e := range all {
			if e.Time.Before(before) {
				want = e.Seq
			}
		}
		if got, err := s.LastBefore(ctx, before); err != nil || got != want {
			t.Errorf("LastBefore(t0%+dms) = %d, %v; a scan says %d", ms, got, err, want)
		}
	}
	if err := s.DeleteAccountEvents(ctx, "did:plc:keep"); err != nil {
		t.Fatal(err)
	}
	if got, err := s.LastBefore(ctx, t0.Add(time.Hour)); err != nil || got != 0 {
		t.Errorf("LastBefore on an empty log = %d, %v; want 0", got, err)
	}
}

// BenchmarkAppend: one event a call, one caller, each of another account
// (a suite's writes): what every repo write pays the log.
func BenchmarkAppend(b *testing.B) {
	s := open(b)
	i := 0
	for b.Loop() {
		i++
		if _, err := s.Append(b.Context(), time.Now(), sequencer.Identity(fmt.Sprintf("did:plc:%08d", i*7919%100000), "")); err != nil {
			b.Fatal(err)
		}
	}
}
