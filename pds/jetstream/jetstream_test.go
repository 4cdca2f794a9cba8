package jetstream_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/fakepds/fakepds/pds/clock"
	"github.com/fakepds/fakepds/pds/jetstream"
	"github.com/fakepds/fakepds/pds/sequencer"
	"github.com/fakepds/fakepds/pds/store"
)

type fixture struct {
	seq   *sequencer.Sequencer
	clock *clock.Shifted
	url   string
}

func setup(t *testing.T, opts jetstream.Options) *fixture {
	t.Helper()
	seq, err := sequencer.Open(t.Context(), t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { seq.Close() })
	c := &clock.Shifted{}
	opts.Clock = c
	opts.Logger = slog.New(slog.DiscardHandler)
	h := jetstream.New(seq, opts)
	srv := httptest.NewServer(h)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return &fixture{seq: seq, clock: c, url: jetstream.URL(srv.URL)}
}

func (f *fixture) append(t *testing.T, at time.Time, evs ...sequencer.Event) {
	t.Helper()
	if _, err := f.seq.Append(t.Context(), at, evs...); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) dial(t *testing.T, query string) *websocket.Conn {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), f.url+query, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", query, err, resp)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// read is the next event, or the close code and text as "close CODE: TEXT".
func read(t *testing.T, conn *websocket.Conn) (jetstream.Event, string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, msg, err := conn.ReadMessage()
	if err != nil {
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return jetstream.Event{}, fmt.Sprintf("close %d: %s", ce.Code, ce.Text)
		}
		t.Fatalf("read: %v", err)
	}
	var e jetstream.Event
	if err := json.Unmarshal(msg, &e); err != nil {
		t.Fatalf("event %s: %v", msg, err)
	}
	return e, ""
}

func expect(t *testing.T, conn *websocket.Conn, want ...string) {
	t.Helper()
	for _, w := range want {
		e, closed := read(t, conn)
		got := closed
		if closed == "" {
			got = e.Kind + ":" + e.DID
		}
		if !strings.HasPrefix(got, w) {
			t.Fatalf("got %q, want %q", got, w)
		}
	}
}

// Bad options are refused before the upgrade with 400 and a plain-text
// reason, as Jetstream refuses them; what Jetstream lets through passes.
func TestBadParams(t *testing.T) {
	f := setup(t, jetstream.Options{})
	many := url.Values{}
	for i := range jetstream.MaxWantedCollections + 1 {
		many.Add("wantedCollections", fmt.Sprintf("app.test.c%d", i))
	}
	for _, tc := range []struct {
		query, header, want string
	}{
		{"?wantedCollections=not-an-nsid", "", "invalid collection: not-an-nsid"},
		{"?wantedCollections=app.bsky.feed.po*", "", "invalid collection"},
		{"?" + many.Encode(), "", "too many wanted collections"},
		{"?wantedDids=alice", "", "invalid DID: alice"},
		{"?cursor=yesterday", "", "invalid cursor: yesterday"},
		{"?cursor=-1", "", "invalid cursor"},
		{"?compress=true", "permessage-deflate", "choose one compression scheme"},
	} {
		req, _ := http.NewRequest("GET", "http"+strings.TrimPrefix(f.url, "ws")+tc.query, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if tc.header != "" {
			req.Header.Set("Sec-WebSocket-Extensions", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(body), tc.want) {
			t.Errorf("%.60s: %d %q, want 400 %q", tc.query, resp.StatusCode, body, tc.want)
		}
	}
	// A prefix whose head is not an NSID, duplicates past the limit and a
	// malformed maxMessageSizeBytes are what Jetstream accepts.
	dup := url.Values{}
	for range jetstream.MaxWantedCollections + 5 {
		dup.Add("wantedCollections", "app.bsky.feed.post")
	}
	for _, q := range []string{"?wantedCollections=app.bsky.*", "?" + dup.Encode(), "?maxMessageSizeBytes=lots", "?cursor=99999999999999999"} {
		f.dial(t, q)
	}
}

// Identity and account events pass a collection filter; wantedDids
// filters them; a time cursor replays from the first event at or after
// it; a seq cursor from that very event.
func TestFiltersAndCursors(t *testing.T) {
	f := setup(t, jetstream.Options{})
	t0 := time.Now().Truncate(time.Millisecond)
	f.append(t, t0, sequencer.Identity("did:plc:a", "a.test"), sequencer.Account("did:plc:b", ""))
	f.append(t, t0.Add(10*time.Millisecond), sequencer.Identity("did:plc:b", ""))

	all := f.dial(t, "?cursor=0&wantedCollections=app.bsky.feed.post")
	expect(t, all, "identity:did:plc:a", "account:did:plc:b", "identity:did:plc:b")
	expect(t, f.dial(t, "?cursor=0&wantedDids=did:plc:b"), "account:did:plc:b", "identity:did:plc:b")

	// time_us: the millisecond, then the op's place in it.
	c := f.dial(t, "?cursor=0")
	var evs []jetstream.Event
	for range 3 {
		e, _ := read(t, c)
		evs = append(evs, e)
	}
	ms := t0.UnixMilli() * 1000
	if evs[0].TimeUS != ms || evs[1].TimeUS != ms+1 || evs[2].TimeUS != ms+10_000 {
		t.Fatalf("time_us %d %d %d, want %d, +1, +10000", evs[0].TimeUS, evs[1].TimeUS, evs[2].TimeUS, ms)
	}
	if evs[1].Cursor != jetstream.CursorOf(2, 0) {
		t.Fatalf("cursor %d, want %d", evs[1].Cursor, jetstream.CursorOf(2, 0))
	}
	expect(t, f.dial(t, fmt.Sprint("?cursor=", evs[1].TimeUS)), "account:did:plc:b", "identity:did:plc:b")
	expect(t, f.dial(t, fmt.Sprint("?cursor=", evs[1].TimeUS+1)), "identity:did:plc:b")
	expect(t, f.dial(t, fmt.Sprint("?cursor=", evs[1].Cursor)), "account:did:plc:b", "identity:did:plc:b")

	// A future cursor is live; live goes on after replay.
	future := f.dial(t, fmt.Sprint("?cursor=", time.Now().Add(time.Hour).UnixMicro()))
	f.append(t, t0.Add(20*time.Millisecond), sequencer.Account("did:plc:c", "deactivated"))
	expect(t, future, "account:did:plc:c")
	expect(t, all, "account:did:plc:c")
}

// Events share milliseconds (a write that took its time before another's
// is given the newer one by the sequencer): a walk from any event's
// time_us cursor or seq cursor starts before its millisecond, so it
// stamps that event and what follows as the walk from 0 does, and
// time_us grows along the stream.
func TestCursorsWithinAMillisecond(t *testing.T) {
	f := setup(t, jetstream.Options{})
	// In the past: a cursor after now is live.
	t0 := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	for i, at := range []time.Duration{0, 3, 2, 2, 5, 1, 6} {
		evs := []sequencer.Event{sequencer.Identity(fmt.Sprintf("did:plc:e%d", i), "")}
		if i == 4 {
			evs = append(evs, sequencer.Account(fmt.Sprintf("did:plc:e%d", i), ""))
		}
		f.append(t, t0.Add(at*time.Millisecond), evs...)
	}
	c := f.dial(t, "?cursor=0")
	var evs []jetstream.Event
	for range 8 {
		e, _ := read(t, c)
		if len(evs) > 0 && e.TimeUS <= evs[len(evs)-1].TimeUS {
			t.Fatalf("time_us %d after %d", e.TimeUS, evs[len(evs)-1].TimeUS)
		}
		evs = append(evs, e)
	}
	if ms := t0.UnixMilli() * 1000; evs[3].TimeUS != ms+3002 || evs[6].TimeUS != ms+5002 {
		t.Fatalf("time_us %d and %d, want the third of +3 ms (%d) and of +5 ms (%d)", evs[3].TimeUS, evs[6].TimeUS, ms+3002, ms+5002)
	}
	for i, e := range evs {
		for _, cursor := range []int64{e.TimeUS, e.Cursor} {
			r := f.dial(t, fmt.Sprint("?cursor=", cursor))
			for _, want := range evs[i:] {
				if got, _ := read(t, r); got.Kind != want.Kind || got.DID != want.DID || got.TimeUS != want.TimeUS {
					t.Fatalf("from %d: %s %s at %d, want %s %s at %d", cursor, got.Kind, got.DID, got.TimeUS, want.Kind, want.DID, want.TimeUS)
				}
			}
		}
	}
}

// A cursor older than the lookback starts at the oldest event within it.
func TestLookback(t *testing.T) {
	f := setup(t, jetstream.Options{Lookback: time.Hour})
	now := time.Now()
	f.append(t, now.Add(-2*time.Hour), sequencer.Identity("did:plc:old", ""))
	f.append(t, now.Add(-time.Minute), sequencer.Identity("did:plc:new", ""))
	expect(t, f.dial(t, "?cursor=0"), "identity:did:plc:new")
	expect(t, f.dial(t, fmt.Sprint("?cursor=", now.Add(-3*time.Hour).UnixMicro())), "identity:did:plc:new")
}

// requireHello holds the stream until an options_update; a bad update
// ends it with Jetstream's close codes; an unknown message type is
// ignored.
func TestSubscriberMessages(t *testing.T) {
	f := setup(t, jetstream.Options{})
	f.append(t, time.Now(), sequencer.Identity("did:plc:a", ""), sequencer.Identity("did:plc:b", ""))

	// Without the hold, a's event would leave before the messages come.
	hello := f.dial(t, "?cursor=0&requireHello=true")
	send(t, hello, `{"type":"something_else","payload":{}}`)
	send(t, hello, `{"type":"options_update","payload":{"wantedDids":["did:plc:b"]}}`)
	expect(t, hello, "identity:did:plc:b")

	for _, tc := range []struct{ msg, want string }{
		{`not json`, "close 1007"},
		{`{"type":"options_update","payload":[]}`, "close 1007"},
		{`{"type":"options_update","payload":{"wantedDids":["bob"]}}`, "close 1008: invalid subscriber options: invalid DID: bob"},
	} {
		c := f.dial(t, "?requireHello=true")
		send(t, c, tc.msg)
		expect(t, c, tc.want)
	}
}

func send(t *testing.T, c *websocket.Conn, msg string) {
	t.Helper()
	if err := c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		t.Fatal(err)
	}
}

// maxMessageSizeBytes drops the events larger than it.
func TestMaxMessageSize(t *testing.T) {
	f := setup(t, jetstream.Options{})
	f.append(t, time.Now(), sequencer.Identity("did:plc:a", "a-very-long-handle-indeed.test"), sequencer.Identity("did:plc:b", ""))
	expect(t, f.dial(t, "?cursor=0&maxMessageSizeBytes=170"), "identity:did:plc:b")
}

// A live subscriber that falls too far behind is cut off, and the rest
// of the server goes on.
func TestConsumerTooSlow(t *testing.T) {
	f := setup(t, jetstream.Options{MaxBacklog: 5})
	c := f.dial(t, "")
	f.append(t, time.Now(), sequencer.Identity("did:plc:a", ""))
	expect(t, c, "identity:did:plc:a")
	burst := make([]sequencer.Event, 10)
	for i := range burst {
		burst[i] = sequencer.Identity("did:plc:b", "")
	}
	f.append(t, time.Now(), burst...)
	expect(t, c, "close 1008: consumer too slow")
	expect(t, f.dial(t, "?cursor=0"), "identity:did:plc:a")
}
