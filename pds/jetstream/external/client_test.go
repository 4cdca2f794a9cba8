package external_test

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	jetstream "github.com/bluesky-social/jetstream"
)

// cidOf is the CID (v1, dag-cbor, sha2-256) of DAG-CBOR bytes.
func cidOf(b []byte) string {
	sum := sha256.Sum256(b)
	raw := append([]byte{0x01, 0x71, 0x12, 0x20}, sum[:]...)
	return "b" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw))
}

// warnings records what a client logs at Warn and above: the client
// falls back to uncompressed frames with only a warning.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

// String is the first few messages.
func (w *warnings) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.msgs) > 3 {
		return strings.Join(w.msgs[:3], "; ") + fmt.Sprintf("; and %d more", len(w.msgs)-3)
	}
	return strings.Join(w.msgs, "; ")
}

// subscribe runs Jetstream's client on s until the test ends and hands
// over its events.
func subscribe(t *testing.T, s *server, opts ...jetstream.Option) (<-chan jetstream.Event, *warnings) {
	t.Helper()
	w := &warnings{}
	c, err := jetstream.Subscribe(s.URL, append(opts, jetstream.WithLogger(slog.New(w)), jetstream.WithBatchSize(1))...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan jetstream.Event, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for batch, err := range c.Events(ctx) {
			if err != nil {
				w.mu.Lock()
				w.msgs = append(w.msgs, "stream error: "+err.Error())
				w.mu.Unlock()
				continue
			}
			for _, e := range batch.Events() {
				select {
				case ch <- e:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		_ = c.Close()
		<-done
	})
	return ch, w
}

func next(t *testing.T, ch <-chan jetstream.Event, w *warnings) jetstream.Event {
	t.Helper()
	select {
	case e := <-ch:
		return e
	case <-time.After(10 * time.Second):
		t.Fatalf("no event from Jetstream's client in 10 s (it logged: %s)", w)
	}
	panic("unreachable")
}

func like(a *account) map[string]any {
	return map[string]any{"$type": "app.bsky.feed.like", "createdAt": now(), "subject": map[string]any{
		"uri": "at://" + a.DID + "/app.bsky.feed.post/3kabc", "cid": "bafyreidfayvfuwqa7qlnopdjiqrxzs6blmoeu4rujcjtnci5beludirz2a"}}
}

// connected waits until the client's live tail is in place: it writes
// marker likes until one arrives (a live tail from the tip sees only what
// comes after its dial).
func connected(t *testing.T, s *server, a *account, ch <-chan jetstream.Event, w *warnings) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r := s.create(t, a, "app.bsky.feed.like", "", like(a))
		select {
		case e := <-ch:
			for e.Commit == nil || e.Commit.Rkey != r.rkey() {
				e = next(t, ch, w)
			}
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	t.Fatalf("Jetstream's client got none of the markers (it logged: %s)", w)
}

// Today's Jetstream Go client (module root, v2 only) tails fakepds's
// subscribeEvents, compressed with the dictionary it fetches from
// getZstdDictionary: a post arrives as the record written (its JSON turns
// back into the very DAG-CBOR the CID names), then its delete, a handle
// change and a deactivation; a client resuming at a seq gets what
// followed it and nothing before; kinds and collections filter.
func TestV2Client(t *testing.T) {
	s := serve(t)
	alice := s.newAccount(t)
	ch, w := subscribe(t, s, jetstream.WithDID(alice.DID))
	connected(t, s, alice, ch, w)

	p := s.create(t, alice, "app.bsky.feed.post", "", post("hello <v2> & all"))
	e := next(t, ch, w)
	if e.Kind != jetstream.KindCommit || e.DID != alice.DID || e.Commit.Operation != jetstream.OpCreate ||
		e.Commit.Collection != "app.bsky.feed.post" || e.Commit.Rkey != p.rkey() || e.Commit.CID != p.CID ||
		e.Commit.Record["text"] != "hello <v2> & all" {
		t.Fatalf("create event %+v %+v", e, e.Commit)
	}
	// The record the client rebuilt from the JSON hashes to the CID.
	if got := cidOf(e.Commit.RecordCBOR); got != p.CID {
		t.Fatalf("the client's DAG-CBOR of the record hashes to %s, want %s", got, p.CID)
	}
	created := e.Seq

	s.delete(t, alice, "app.bsky.feed.post", p.rkey())
	if e := next(t, ch, w); e.Commit == nil || e.Commit.Operation != jetstream.OpDelete || e.Commit.Rkey != p.rkey() || e.Seq <= created {
		t.Fatalf("delete event %+v", e)
	}
	handle := "r-" + alice.Handle
	s.call(t, alice.token, "com.atproto.identity.updateHandle", map[string]string{"handle": handle}, nil)
	if e := next(t, ch, w); e.Kind != jetstream.KindIdentity || e.Identity.Handle != handle || e.Identity.DID != alice.DID {
		t.Fatalf("identity event %+v %+v", e, e.Identity)
	}
	s.call(t, alice.token, "com.atproto.server.deactivateAccount", map[string]string{}, nil)
	if e := next(t, ch, w); e.Kind != jetstream.KindAccount || e.Account.Active || e.Account.Status != "deactivated" {
		t.Fatalf("account event %+v %+v", e, e.Account)
	}
	if w.String() != "" {
		t.Fatalf("Jetstream's client logged: %s", w)
	}

	// Resuming at the create: the delete and what followed, not the create.
	again, w2 := subscribe(t, s, jetstream.WithDID(alice.DID), jetstream.WithLiveCursor(created))
	if e := next(t, again, w2); e.Commit == nil || e.Commit.Operation != jetstream.OpDelete {
		t.Fatalf("resumed at %d: %+v", created, e)
	}
	if e := next(t, again, w2); e.Kind != jetstream.KindIdentity {
		t.Fatalf("resumed: %+v", e)
	}

	// Uncompressed, commits of one collection only.
	bob := s.newAccount(t)
	only, w3 := subscribe(t, s, jetstream.WithDID(bob.DID), jetstream.WithZstdCompression(false),
		jetstream.WithKinds([]jetstream.Kind{jetstream.KindCommit}), jetstream.WithCollection("app.bsky.feed.like"))
	connected(t, s, bob, only, w3)
	s.create(t, bob, "app.bsky.feed.post", "", post("not wanted"))
	s.call(t, bob.token, "com.atproto.identity.updateHandle", map[string]string{"handle": "r-" + bob.Handle}, nil)
	l := s.create(t, bob, "app.bsky.feed.like", "", like(bob))
	if e := next(t, only, w3); e.Commit == nil || e.Commit.Rkey != l.rkey() {
		t.Fatalf("got %+v, want the like alone", e)
	}
	if w3.String() != "" {
		t.Fatalf("Jetstream's client logged: %s", w3)
	}
}
