package sequencer

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fakepds/fakepds/pds/store"
)

// TestGroupCommit: Appends that queue while a commit runs are written by
// the next one together, each call's events contiguous with no gap between
// calls; a call whose events do not encode fails alone.
func TestGroupCommit(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	const calls = 8
	s.qmu.Lock()
	s.leading = true // as a commit in progress: every call below queues
	s.qmu.Unlock()
	type result struct {
		out []Stored
		err error
	}
	results := make([]result, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			did := fmt.Sprintf("did:plc:call%d", i)
			evs := []Event{Identity(did, ""), Identity(did, "")}
			if i == 3 {
				evs[1] = Event{DID: did, Body: nil} // no frame to encode
			}
			out, err := s.Append(ctx, time.Now(), evs...)
			results[i] = result{out, err}
		})
	}
	leadWhenQueued(t, s, calls)
	wg.Wait()

	var seqs []int64
	for i, r := range results {
		if i == 3 {
			if r.err == nil {
				t.Errorf("call 3 (an event with no body) succeeded: %v", r.out)
			}
			continue
		}
		if r.err != nil || len(r.out) != 2 {
			t.Fatalf("call %d: %d events, %v", i, len(r.out), r.err)
		}
		if r.out[1].Seq != r.out[0].Seq+1 {
			t.Errorf("call %d: seqs %d, %d not contiguous", i, r.out[0].Seq, r.out[1].Seq)
		}
		seqs = append(seqs, r.out[0].Seq, r.out[1].Seq)
	}
	evs, err := s.After(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2*(calls-1) {
		t.Fatalf("%d events stored, want %d", len(evs), 2*(calls-1))
	}
	got := map[int64]bool{}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Errorf("stored seq %d at position %d: a gap", e.Seq, i)
		}
		got[e.Seq] = true
	}
	for _, q := range seqs {
		if !got[q] {
			t.Errorf("seq %d returned but not stored", q)
		}
	}
}

// Prepares queue with Appends into one batch: each Prepare returns once
// the batch is written, and the batch commits only when every Prepare in
// it has reported; an Abort rolls the whole batch back, and every call in
// it fails.
func TestPendingInGroupCommit(t *testing.T) {
	for _, abort := range []bool{false, true} {
		t.Run(fmt.Sprintf("abort=%v", abort), func(t *testing.T) {
			ctx := t.Context()
			s, err := Open(ctx, t.TempDir(), store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			const calls = 6
			s.qmu.Lock()
			s.leading = true // as a commit in progress: every call below queues
			s.qmu.Unlock()
			pending := make(chan *Pending, calls)
			errs := make([]error, calls)
			var wg sync.WaitGroup
			for i := range calls {
				wg.Go(func() {
					did := fmt.Sprintf("did:plc:call%d", i)
					if i%2 == 1 {
						_, errs[i] = s.Append(ctx, time.Now(), Identity(did, ""))
						return
					}
					p, err := s.Prepare(ctx, time.Now(), Identity(did, ""))
					if err != nil {
						errs[i] = err
						pending <- nil
						return
					}
					pending <- p
					// What the caller stores would commit here; the batch
					// waits for every Prepare's report.
					if abort && i == 2 {
						p.Abort()
						return
					}
					_, errs[i] = p.Commit()
				})
			}
			leadWhenQueued(t, s, calls)
			for range calls / 2 {
				if p := <-pending; p == nil {
					t.Fatal("a Prepare failed")
				}
			}
			wg.Wait()
			evs, err := s.After(ctx, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			for i, err := range errs {
				if abort && i != 2 && err == nil {
					t.Errorf("call %d succeeded in a batch rolled back", i)
				}
				if !abort && err != nil {
					t.Errorf("call %d: %v", i, err)
				}
			}
			want := calls
			if abort {
				want = 0
			}
			if len(evs) != want {
				t.Fatalf("%d events stored, want %d", len(evs), want)
			}
			for i, e := range evs {
				if e.Seq != int64(i+1) {
					t.Errorf("stored seq %d at position %d: a gap", e.Seq, i)
				}
			}
			// The lead was handed on: the next call commits alone.
			if _, err := s.Append(ctx, time.Now(), Identity("did:plc:next", "")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// leadWhenQueued waits until calls Appends are queued behind a commit the
// test holds open (s.leading set by hand), then ends that commit as a
// leader would: it hands the lead to the first queued call, which takes
// them all in one batch.
func leadWhenQueued(t *testing.T, s *Sequencer, calls int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.qmu.Lock()
		n := len(s.queue)
		if n == calls {
			s.queue[0].wake <- struct{}{}
			s.qmu.Unlock()
			return
		}
		s.qmu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls queued", n, calls)
		}
	}
}
