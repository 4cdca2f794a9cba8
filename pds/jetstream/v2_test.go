package jetstream_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	lexutil "github.com/bluesky-social/indigo/lex/util"
	"github.com/gorilla/websocket"
	"github.com/ipfs/go-cid"
	"github.com/klauspost/compress/zstd"

	"github.com/fakepds/fakepds/pds/jetstream"
	"github.com/fakepds/fakepds/pds/sequencer"
)

// v2 is a fixture serving the v2 stream and the dictionary as the PDS
// mounts them.
func v2(t *testing.T, opts jetstream.Options) (*fixture, string) {
	t.Helper()
	f := setup(t, opts)
	opts.Clock, opts.Logger = f.clock, slog.New(slog.DiscardHandler)
	h := jetstream.New(f.seq, opts)
	mux := http.NewServeMux()
	mux.Handle("GET "+jetstream.PathV2, h.V2())
	mux.HandleFunc("GET "+jetstream.PathDictionary, h.ServeDictionary)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { h.Close(); srv.Close() })
	return f, srv.URL
}

func dialV2(t *testing.T, base, query string, header http.Header) *websocket.Conn {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.DialContext(t.Context(), "ws"+strings.TrimPrefix(base, "http")+jetstream.PathV2+query, header)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", query, err, resp)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// frame is the next frame as a JSON object, or "close CODE: TEXT".
func frame(t *testing.T, conn *websocket.Conn, dec *zstd.Decoder) (map[string]any, string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	typ, msg, err := conn.ReadMessage()
	if err != nil {
		if ce, ok := err.(*websocket.CloseError); ok {
			return nil, fmt.Sprintf("close %d: %s", ce.Code, ce.Text)
		}
		t.Fatalf("read: %v", err)
	}
	if dec != nil {
		if typ != websocket.BinaryMessage {
			t.Fatalf("a %d frame on a compressed stream: %s", typ, msg)
		}
		if msg, err = dec.DecodeAll(msg, nil); err != nil {
			t.Fatal(err)
		}
	}
	var m map[string]any
	if err := json.Unmarshal(msg, &m); err != nil {
		t.Fatalf("frame %s: %v", msg, err)
	}
	return m, ""
}

// payload is a message frame's payload; it fails on any other frame.
func payload(t *testing.T, conn *websocket.Conn) map[string]any {
	t.Helper()
	m, closed := frame(t, conn, nil)
	if closed != "" || m["$type"] != "message" {
		t.Fatalf("got %v %s, want a message frame", m, closed)
	}
	return m["payload"].(map[string]any)
}

func keys(m map[string]any) string { return fmt.Sprint(slices.Sorted(maps.Keys(m))) }

// Each kind is framed as the lexicon says: the payload's $type names it,
// seq is the v1 cursor, time the v1 time_us as RFC 3339 with six
// fractional digits, and the upstream event is wrapped whole. #sync is
// sent on v2 and not on v1.
func TestV2Frames(t *testing.T) {
	f, base := v2(t, jetstream.Options{})
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 123_000_000, time.UTC)
	f.clock.Advance(time.Until(t0.Add(time.Minute))) // t0 is within the lookback
	f.append(t, t0, sequencer.Identity("did:plc:a", "a.test"), sequencer.Account("did:plc:a", "deactivated"),
		sequencer.Sync(&comatproto.SyncSubscribeRepos_Sync{Did: "did:plc:a", Rev: "3kabc", Blocks: []byte{1, 2}}))

	c := dialV2(t, base, "?cursor=0", nil)
	want := []struct{ typ, keys string }{
		{"#identity", "[$type did identity seq time]"},
		{"#account", "[$type account did seq time]"},
		{"#sync", "[$type did seq sync time]"},
	}
	for i, w := range want {
		p := payload(t, c)
		if p["$type"] != jetstream.NSIDv2+w.typ || keys(p) != w.keys {
			t.Fatalf("frame %d: %v, want %s with %s", i, p, w.typ, w.keys)
		}
		if p["did"] != "did:plc:a" || p["seq"] != float64(jetstream.CursorOf(int64(i+1), 0)) {
			t.Errorf("frame %d: did %v seq %v", i, p["did"], p["seq"])
		}
		if at := fmt.Sprintf("2026-12-01T10:00:00.123%03dZ", i); p["time"] != at {
			t.Errorf("frame %d: time %v, want %s", i, p["time"], at)
		}
	}
	// v1 never sends the #sync.
	v1 := f.dial(t, "?cursor=0")
	expect(t, v1, "identity:did:plc:a", "account:did:plc:a")
	f.append(t, t0.Add(time.Second), sequencer.Identity("did:plc:b", ""))
	expect(t, v1, "identity:did:plc:b")
}

// The #sync's payload keeps its blocks as atproto JSON writes bytes.
func TestV2SyncBlocks(t *testing.T) {
	f, base := v2(t, jetstream.Options{})
	f.append(t, time.Now(), sequencer.Sync(&comatproto.SyncSubscribeRepos_Sync{Did: "did:plc:a", Rev: "3kabc", Blocks: []byte{1, 2, 3}}))
	p := payload(t, dialV2(t, base, "?cursor=0", nil))
	sync := p["sync"].(map[string]any)
	if b, _ := json.Marshal(sync["blocks"]); string(b) != `{"$bytes":"AQID"}` || sync["rev"] != "3kabc" {
		t.Fatalf("sync payload %v", sync)
	}
}

// kinds, dids and collections are ANDed; collections leave other kinds
// through.
func TestV2Filters(t *testing.T) {
	f, base := v2(t, jetstream.Options{})
	f.append(t, time.Now(), sequencer.Identity("did:plc:a", ""), sequencer.Account("did:plc:b", ""),
		sequencer.Identity("did:plc:b", ""))
	name := func(p map[string]any) string {
		return strings.TrimPrefix(p["$type"].(string), jetstream.NSIDv2+"#") + ":" + p["did"].(string)
	}
	for _, tc := range []struct {
		query string
		want  []string
		// Appended after: the filter drops the first and passes the
		// second, so nothing else came between.
		drop, end sequencer.Event
	}{
		{"", []string{"identity:did:plc:a", "account:did:plc:b", "identity:did:plc:b"}, sequencer.Event{}, sequencer.Identity("did:plc:c", "")},
		{"&kinds=account", []string{"account:did:plc:b"}, sequencer.Identity("did:plc:c", ""), sequencer.Account("did:plc:c", "")},
		{"&kinds=identity&dids=did:plc:b", []string{"identity:did:plc:b"}, sequencer.Identity("did:plc:a", ""), sequencer.Identity("did:plc:b", "")},
		{"&collections=app.bsky.feed.post&dids=did:plc:a", []string{"identity:did:plc:a"}, sequencer.Account("did:plc:b", ""), sequencer.Account("did:plc:a", "")},
	} {
		c := dialV2(t, base, "?cursor=0"+tc.query, nil)
		for _, w := range tc.want {
			if got := name(payload(t, c)); got != w {
				t.Fatalf("%s: got %s, want %s", tc.query, got, w)
			}
		}
		evs := []sequencer.Event{tc.end}
		if tc.drop.Body != nil {
			evs = []sequencer.Event{tc.drop, tc.end}
		}
		f.append(t, time.Now(), evs...)
		if p := payload(t, c); p["did"] != tc.end.DID {
			t.Fatalf("%s: got %s, want the event of %s", tc.query, name(p), tc.end.DID)
		}
	}
}

// What v2 refuses before the upgrade, with the XRPC error it names.
func TestV2Refusals(t *testing.T) {
	f, base := v2(t, jetstream.Options{Lookback: time.Hour})
	f.append(t, time.Now().Add(-2*time.Hour), sequencer.Identity("did:plc:old", ""))
	f.append(t, time.Now(), sequencer.Identity("did:plc:new", ""))
	many := url.Values{}
	for range jetstream.MaxWantedCollections + 1 {
		many.Add("collections", "app.bsky.feed.post") // raw counts are capped on v2
	}
	for _, tc := range []struct{ query, header, name, msg string }{
		{"?wantedDids=did:plc:a", "", "InvalidRequest", "use dids"},
		{"?wantedCollections=app.bsky.feed.post", "", "InvalidRequest", "use collections"},
		{"?requireHello=true", "", "InvalidRequest", "server-push only"},
		{"?kinds=commit&kinds=identity&kinds=account&kinds=sync&kinds=commit", "", "InvalidRequest", "too many kinds"},
		{"?kinds=post", "", "InvalidRequest", `unknown kind "post"`},
		{"?kinds=identity&collections=app.bsky.feed.post", "", "InvalidRequest", "can never apply"},
		{"?collections=app.*", "", "InvalidRequest", "invalid collection wildcard"},
		{"?" + many.Encode(), "", "InvalidRequest", "too many collections"},
		{"?dids=alice", "", "InvalidRequest", "invalid DID"},
		{"?maxMessageSizeBytes=lots", "", "InvalidRequest", "maxMessageSizeBytes"},
		{"?compress=true", "", "InvalidRequest", "zstdDictionary=<id>"},
		{"?zstdDictionary=0", "", "InvalidRequest", "positive integer"},
		{"?zstdDictionary=7", "", "UnknownZstdDictionary", fmt.Sprint("current dictionary id is ", jetstream.DictionaryID)},
		{"?cursor=soon", "", "InvalidRequest", "invalid cursor"},
		{"?cursor=0", "", "CursorTooOld", fmt.Sprintf("below lookback floor %d", jetstream.CursorOf(2, 0))},
	} {
		req, _ := http.NewRequest("GET", base+jetstream.PathV2+tc.query, nil)
		for k, v := range map[string]string{"Connection": "Upgrade", "Upgrade": "websocket",
			"Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error, Message string }
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 400 || body.Error != tc.name || !strings.Contains(body.Message, tc.msg) {
			t.Errorf("%.50s: %d %+v (%v), want 400 %s %q", tc.query, resp.StatusCode, body, err, tc.name, tc.msg)
		}
	}
	// A cursor at the lookback's first event is served.
	c := dialV2(t, base, fmt.Sprint("?cursor=", jetstream.CursorOf(2, 0)), nil)
	if p := payload(t, c); p["did"] != "did:plc:new" {
		t.Fatalf("got %v", p)
	}
}

// A time cursor older than the lookback starts at its first event, after
// an #info OutdatedCursor naming it.
func TestV2OutdatedCursor(t *testing.T) {
	f, base := v2(t, jetstream.Options{Lookback: time.Hour})
	now := time.Now()
	f.append(t, now.Add(-2*time.Hour), sequencer.Identity("did:plc:old", ""))
	f.append(t, now.Add(-time.Minute), sequencer.Identity("did:plc:new", ""))
	c := dialV2(t, base, fmt.Sprint("?cursor=", now.Add(-3*time.Hour).UnixMicro()), nil)
	info := payload(t, c)
	if info["$type"] != jetstream.NSIDv2+"#info" || info["name"] != "OutdatedCursor" ||
		!strings.HasSuffix(info["message"].(string), fmt.Sprint("starting at seq ", jetstream.CursorOf(2, 0))) {
		t.Fatalf("got %v, want #info OutdatedCursor", info)
	}
	if p := payload(t, c); p["did"] != "did:plc:new" {
		t.Fatalf("got %v", p)
	}
	// Within the lookback no #info comes.
	c = dialV2(t, base, fmt.Sprint("?cursor=", now.Add(-30*time.Minute).UnixMicro()), nil)
	if p := payload(t, c); p["$type"] == jetstream.NSIDv2+"#info" {
		t.Fatalf("got %v", p)
	}
}

// The subprotocol is echoed when offered; the stream is server-push only:
// a message from the subscriber ends it with 1008.
func TestV2SubprotocolAndPushOnly(t *testing.T) {
	_, base := v2(t, jetstream.Options{})
	c := dialV2(t, base, "", http.Header{"Sec-WebSocket-Protocol": {"xrpc.v0.cbor, " + jetstream.Subprotocol}})
	if c.Subprotocol() != jetstream.Subprotocol {
		t.Fatalf("subprotocol %q, want %q", c.Subprotocol(), jetstream.Subprotocol)
	}
	if c := dialV2(t, base, "", nil); c.Subprotocol() != "" {
		t.Fatalf("subprotocol %q unoffered", c.Subprotocol())
	}
	if err := c.WriteMessage(websocket.TextMessage, []byte(`{"type":"options_update","payload":{}}`)); err != nil {
		t.Fatal(err)
	}
	if _, closed := frame(t, c, nil); !strings.HasPrefix(closed, "close 1008") {
		t.Fatalf("got %q, want close 1008", closed)
	}
}

// zstdDictionary=<the dictionary's ID> sends every frame compressed with
// the dictionary getZstdDictionary serves.
func TestV2Compressed(t *testing.T) {
	f, base := v2(t, jetstream.Options{})
	resp, err := http.Get(base + jetstream.PathDictionary)
	if err != nil {
		t.Fatal(err)
	}
	dict, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(dict) != string(jetstream.Dictionary()) {
		t.Fatalf("getZstdDictionary: %d, %d bytes", resp.StatusCode, len(dict))
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDicts(dict))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	f.append(t, time.Now(), sequencer.Identity("did:plc:a", "a.test"))
	c := dialV2(t, base, fmt.Sprint("?cursor=0&zstdDictionary=", jetstream.DictionaryID), nil)
	if m, _ := frame(t, c, dec); m["payload"].(map[string]any)["did"] != "did:plc:a" {
		t.Fatalf("got %v", m)
	}

	for _, tc := range []struct {
		query string
		code  int
		name  string
	}{
		{fmt.Sprint("?id=", jetstream.DictionaryID), 200, ""},
		{"?id=7", 404, "DictionaryNotFound"},
		{"?id=x", 400, "InvalidRequest"},
	} {
		resp, err := http.Get(base + jetstream.PathDictionary + tc.query)
		if err != nil {
			t.Fatal(err)
		}
		var body struct{ Error string }
		if tc.name != "" {
			_ = json.NewDecoder(resp.Body).Decode(&body)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.code || body.Error != tc.name {
			t.Errorf("%s: %d %q, want %d %q", tc.query, resp.StatusCode, body.Error, tc.code, tc.name)
		}
	}
}

// A live subscriber too far behind gets an error frame, then the close.
func TestV2ConsumerTooSlow(t *testing.T) {
	f, base := v2(t, jetstream.Options{MaxBacklog: 5})
	c := dialV2(t, base, "", nil)
	f.append(t, time.Now(), sequencer.Identity("did:plc:a", ""))
	payload(t, c)
	burst := make([]sequencer.Event, 10)
	for i := range burst {
		burst[i] = sequencer.Identity("did:plc:b", "")
	}
	f.append(t, time.Now(), burst...)
	m, _ := frame(t, c, nil)
	if m["$type"] != "error" || m["error"] != "ConsumerTooSlow" {
		t.Fatalf("got %v, want the ConsumerTooSlow error frame", m)
	}
	if _, closed := frame(t, c, nil); !strings.HasPrefix(closed, "close 1008") {
		t.Fatalf("got %q", closed)
	}
}

// A #sync whose rev is not past the repo's last #commit or #sync (as
// activateAccount's) is dropped, as Jetstream's verifier drops it, whether
// the walk saw that commit or must look it up; a newer one is sent.
func TestV2StaleSync(t *testing.T) {
	f, base := v2(t, jetstream.Options{})
	now := time.Now()
	head, err := cid.Decode("bafyreiejqtvukwnbs6i3cgay4i64xjygwsrp3kdhoi5pergys2yig7vdku")
	if err != nil {
		t.Fatal(err)
	}
	commit := func(rev string) sequencer.Event { // an empty commit: no ops, no events, a rev
		return sequencer.Commit(&comatproto.SyncSubscribeRepos_Commit{Repo: "did:plc:a", Rev: rev, Commit: lexutil.LexLink(head), Blocks: []byte{}})
	}
	sync := func(rev string) sequencer.Event {
		return sequencer.Sync(&comatproto.SyncSubscribeRepos_Sync{Did: "did:plc:a", Rev: rev, Blocks: []byte{1}})
	}
	f.append(t, now.Add(-time.Hour), commit("3kaaa"))
	f.append(t, now, sync("3kaaa"), sync("3kbbb"), sync("3kbbb"), sequencer.Identity("did:plc:a", ""))
	for _, cursor := range []int64{0, jetstream.CursorOf(2, 0)} { // the second walk starts after the commit
		c := dialV2(t, base, fmt.Sprint("?cursor=", cursor), nil)
		p := payload(t, c)
		if p["$type"] != jetstream.NSIDv2+"#sync" || p["sync"].(map[string]any)["rev"] != "3kbbb" {
			t.Fatalf("from %d: got %v, want the #sync of 3kbbb", cursor, p)
		}
		if p := payload(t, c); p["$type"] != jetstream.NSIDv2+"#identity" {
			t.Fatalf("from %d: got %v, want the #identity", cursor, p)
		}
	}
}
