package sequencer_test

import (
	"bytes"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
)

func open(t *testing.T) *sequencer.Sequencer {
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
