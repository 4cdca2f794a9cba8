package sequencer_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
)

func open(t testing.TB) *sequencer.Sequencer {
	t.Helper()
	s, err := sequencer.Open(t.Context(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestAppendAndRead(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	changed := s.Changed()
	stored, err := s.Append(ctx, t0, sequencer.Identity("did:plc:a", "a.test"), sequencer.Account("did:plc:a", ""))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Append did not wake the waiters")
	}
	if len(stored) != 2 || stored[0].Seq != 1 || stored[1].Seq != 2 || stored[1].Type != sequencer.TypeAccount {
		t.Fatalf("stored %+v", stored)
	}
	// The stored frame is the header then the body, seq and time inside.
	var body comatproto.SyncSubscribeRepos_Account
	hdr, _ := atdata.MarshalCBOR(map[string]any{"op": int64(1), "t": "#account"})
	frame := stored[1].Frame
	if !bytes.HasPrefix(frame, hdr) {
		t.Fatalf("frame does not start with the #account header")
	}
	if err := body.UnmarshalCBOR(bytes.NewReader(frame[len(hdr):])); err != nil {
		t.Fatal(err)
	}
	if body.Seq != 2 || body.Did != "did:plc:a" || !body.Active || body.Time != "2026-11-30T12:00:00.000Z" {
		t.Fatalf("frame body %+v", body)
	}
	s.Append(ctx, t0.Add(time.Hour), sequencer.Identity("did:plc:b", ""))
	if head, _ := s.Head(ctx); head != 3 {
		t.Fatalf("head %d", head)
	}
	after, err := s.After(ctx, 1, 10)
	if err != nil || len(after) != 2 || after[0].Seq != 2 || !after[1].Time.Equal(t0.Add(time.Hour)) {
		t.Fatalf("After(1) = %+v, %v", after, err)
	}
	if seq, _ := s.LastBefore(ctx, t0.Add(time.Minute)); seq != 2 {
		t.Fatalf("LastBefore = %d, want 2", seq)
	}
	// Deleting an account's history keeps the event named, and never
	// reuses a seq.
	deleted, _ := s.Append(ctx, t0, sequencer.Account("did:plc:a", "deleted"))
	if err := s.DeleteAccountEventsBefore(ctx, "did:plc:a", deleted[0].Seq); err != nil {
		t.Fatal(err)
	}
	all, _ := s.After(ctx, 0, 10)
	if len(all) != 2 || all[0].DID != "did:plc:b" || all[1].Seq != 4 {
		t.Fatalf("after deletion: %+v", all)
	}
	next, _ := s.Append(ctx, t0, sequencer.Identity("did:plc:c", ""))
	if next[0].Seq != 5 {
		t.Fatalf("seq after deletions %d, want 5", next[0].Seq)
	}
}

// The last seq is kept in memory between Appends: it must come back from
// the database on reopen, even when the newest events were deleted, and a
// failed Append must not use one up.
func TestSeqAcrossReopenAndFailure(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s, err := sequencer.Open(ctx, dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Append(ctx, time.Now(), sequencer.Identity("did:plc:a", ""), sequencer.Identity("did:plc:b", ""))
	if _, err := s.Append(ctx, time.Now(), sequencer.Event{DID: "did:plc:a", Body: &comatproto.SyncSubscribeRepos_Info{}}); err == nil {
		t.Fatal("an event of an unknown type was sequenced")
	}
	if err := s.DeleteAccountEvents(ctx, "did:plc:b"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s, err = sequencer.Open(ctx, dir, store.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Append(ctx, time.Now(), sequencer.Identity("did:plc:c", ""))
	if err != nil || got[0].Seq != 3 {
		t.Fatalf("first seq after reopen: %+v, %v; want 3", got, err)
	}
}

// The newest events are served from memory: After and Head must answer
// exactly what the database holds, across the tail's edge, after it
// wraps, and after a deletion.
func TestTailMatchesDatabase(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s, err := sequencer.Open(ctx, dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 123456789, time.UTC)
	for i := range 1400 {
		did := []string{"did:plc:a", "did:plc:b"}[i%2]
		if _, err := s.Append(ctx, t0, sequencer.Identity(did, ""), sequencer.Account(did, "")); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		t.Helper()
		// A second Sequencer on the same files has nothing in memory: it
		// answers from the database.
		db, err := sequencer.Open(ctx, dir, store.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		h1, _ := s.Head(ctx)
		h2, _ := db.Head(ctx)
		if h1 != h2 {
			t.Fatalf("%s: Head %d, database %d", when, h1, h2)
		}
		head := h1
		for _, after := range []int64{0, 1000, 1700, 1710, 2000, 2300, 2799, 2800, 2801, head - 30, head - 20, head - 1, head} {
			for _, limit := range []int{1, 7, 500} {
				got, err1 := s.After(ctx, after, limit)
				want, err2 := db.After(ctx, after, limit)
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				if len(got) != len(want) {
					t.Fatalf("%s: After(%d, %d): %d events, database %d", when, after, limit, len(got), len(want))
				}
				for i := range got {
					if got[i].Seq != want[i].Seq || got[i].DID != want[i].DID || got[i].Type != want[i].Type ||
						!got[i].Time.Equal(want[i].Time) || !bytes.Equal(got[i].Frame, want[i].Frame) {
						t.Fatalf("%s: After(%d, %d)[%d] = %+v, database %+v", when, after, limit, i, got[i].Seq, want[i].Seq)
					}
				}
			}
		}
	}
	check("after 2,800 appends")
	if err := s.DeleteAccountEvents(ctx, "did:plc:b"); err != nil {
		t.Fatal(err)
	}
	check("after a deletion")
	s.Append(ctx, t0, sequencer.Identity("did:plc:c", ""))
	check("after a deletion and an append")
	// Large frames: the tail keeps fewer of them (bounded by bytes).
	big := strings.Repeat("x", 512<<10)
	for range 40 {
		s.Append(ctx, t0, sequencer.Identity("did:plc:c", big))
	}
	check("after large events")
}

// Times never go backwards in seq order, whatever the callers' clocks
// read (they read them before waiting for the lock, and a test may move
// its clock back), and LastBefore answers from that order: the newest
// seq before a time.
func TestTimesNeverGoBack(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	s, err := sequencer.Open(ctx, dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{t0.Add(time.Second), t0, t0.Add(2 * time.Second), t0.Add(1500 * time.Millisecond)} {
		if _, err := s.Append(ctx, at, sequencer.Identity("did:plc:a", "")); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = sequencer.Open(ctx, dir, store.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The newest time outlives a reopen.
	if _, err := s.Append(ctx, t0, sequencer.Identity("did:plc:a", "")); err != nil {
		t.Fatal(err)
	}
	want := []time.Time{t0.Add(time.Second), t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(2 * time.Second), t0.Add(2 * time.Second)}
	evs, err := s.After(ctx, 0, 10)
	if err != nil || len(evs) != len(want) {
		t.Fatalf("After(0) = %d events, %v", len(evs), err)
	}
	hdr, _ := atdata.MarshalCBOR(map[string]any{"op": int64(1), "t": "#identity"})
	for i, e := range evs {
		var body comatproto.SyncSubscribeRepos_Identity
		if err := body.UnmarshalCBOR(bytes.NewReader(e.Frame[len(hdr):])); err != nil {
			t.Fatal(err)
		}
		if !e.Time.Equal(want[i]) || body.Time != want[i].Format("2006-01-02T15:04:05.000Z") {
			t.Errorf("seq %d at %s (frame %s), want %s", e.Seq, e.Time, body.Time, want[i])
		}
	}
	for _, c := range []struct {
		before time.Time
		seq    int64
	}{
		{t0.Add(time.Second), 0},
		{t0.Add(time.Second + time.Millisecond), 2},
		{t0.Add(2 * time.Second), 2},
		{t0.Add(time.Hour), 5},
	} {
		if seq, err := s.LastBefore(ctx, c.before); err != nil || seq != c.seq {
			t.Errorf("LastBefore(%s) = %d, %v; want %d", c.before, seq, err, c.seq)
		}
	}
}

// Writers that read the clock before they queue for the lock still get
// times in seq order.
func TestConcurrentAppendTimesInOrder(t *testing.T) {
	s := open(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				// Every other writer's clock is a few ms behind.
				at := time.Now().Add(-time.Duration(w%2*(i%5)) * time.Millisecond)
				if _, err := s.Append(ctx, at, sequencer.Identity("did:plc:a", "")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	evs, err := s.After(ctx, 0, 1000)
	if err != nil || len(evs) != 400 {
		t.Fatalf("After(0) = %d events, %v", len(evs), err)
	}
	for i := 1; i < len(evs); i++ {
		if evs[i].Time.Before(evs[i-1].Time) {
			t.Fatalf("seq %d at %s, after seq %d at %s", evs[i].Seq, evs[i].Time, evs[i-1].Seq, evs[i-1].Time)
		}
	}
}

// BenchmarkLastBefore: the seq before a time near the head of a log of
// 20,000 events (a replay's start from a cursor past the retention).
func BenchmarkLastBefore(b *testing.B) {
	s, err := sequencer.Open(b.Context(), b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i := range 200 {
		evs := make([]sequencer.Event, 100)
		for j := range evs {
			evs[j] = sequencer.Identity("did:plc:a", "")
		}
		if _, err := s.Append(b.Context(), t0.Add(time.Duration(i)*time.Second), evs...); err != nil {
			b.Fatal(err)
		}
	}
	at := t0.Add(190 * time.Second)
	for b.Loop() {
		if seq, err := s.LastBefore(b.Context(), at); err != nil || seq != 19000 {
			b.Fatal(seq, err)
		}
	}
}

// BenchmarkAppendParallel: 16 goroutines appending one event each call,
// as 16 concurrent repo writers do; ns/op is per event.
func BenchmarkAppendParallel(b *testing.B) {
	s, err := sequencer.Open(b.Context(), b.TempDir(), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetParallelism(8) // 16 on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Append(b.Context(), time.Now(), sequencer.Identity("did:plc:a", "")); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// A log written before repo_seq lost AUTOINCREMENT (user_version 1) opens
// with its events as they were, and the seq goes on after the last one
// given out, even when the newest events had been deleted: migration 2
// carries sqlite_sequence's record of it over. Deletions after it keep it
// too, the newest event of an empty log included.
func TestSeqMigratedFromAutoincrement(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	old, err := store.Open(ctx, filepath.Join(dir, sequencer.File), store.Options{Migrations: sequencer.Migrations[:1]})
	if err != nil {
		t.Fatal(err)
	}
	for _, did := range []string{"did:plc:a", "did:plc:b", "did:plc:c"} {
		if _, err := old.Writer().ExecContext(ctx, `INSERT INTO repo_seq (did, event_type, event, sequenced_at) VALUES (?, 'identity', x'a0', '2026-12-02T00:00:00.000Z')`, did); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.Writer().ExecContext(ctx, `DELETE FROM repo_seq WHERE did = 'did:plc:c'`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	s, err := sequencer.Open(ctx, dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if evs, err := s.After(ctx, 0, 10); err != nil || len(evs) != 2 || evs[0].DID != "did:plc:a" || evs[1].Seq != 2 || !bytes.Equal(evs[1].Frame, []byte{0xa0}) {
		t.Fatalf("events after the migration: %+v, %v; want did:plc:a at 1 and did:plc:b at 2 as stored", evs, err)
	}
	got, err := s.Append(ctx, time.Now(), sequencer.Identity("did:plc:d", ""))
	if err != nil || got[0].Seq != 4 {
		t.Fatalf("first seq after the migration: %+v, %v; want 4", got, err)
	}
	for _, did := range []string{"did:plc:a", "did:plc:b", "did:plc:d"} {
		if err := s.DeleteAccountEvents(ctx, did); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	if s, err = sequencer.Open(ctx, dir, store.Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err = s.Append(ctx, time.Now(), sequencer.Identity("did:plc:e", "")); err != nil || got[0].Seq != 5 {
		t.Fatalf("first seq after every event was deleted: %+v, %v; want 5", got, err)
	}
}
