package external_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// The real Jetstream program, built from its source (bluesky-social/
// jetstream at the version this module's go.mod names) and pointed at a
// fakepds's firehose, and fakepds's own Jetstream give the same events for
// the same writes, on v1 (/subscribe) and v2 (subscribeEvents), field by
// field except the fields each side numbers and stamps itself:
//
//   - v1 time_us and cursor, v2 seq and time: Jetstream's are its own
//     clock when it read the event and its own event counter; fakepds's
//     its sequencer's time and seq*1000 + op index (docs/known-
//     differences.md "Jetstream"). The upstream seq and time inside
//     #identity and #account are compared: both sides copy fakepds's.
//
// Events are compared per DID, in order: Jetstream's ingest may reorder
// the events of different repos. It runs when FAKEPDS_JETSTREAM_BIN names
// the program: scripts/jetstream-diff.sh builds it and runs this test.
func TestJetstreamProgram(t *testing.T) {
	bin := os.Getenv("FAKEPDS_JETSTREAM_BIN")
	if bin == "" {
		t.Skip("FAKEPDS_JETSTREAM_BIN does not name a Jetstream program: scripts/jetstream-diff.sh builds one and runs this test")
	}
	s := serve(t)
	alice, bob := s.newAccount(t), s.newAccount(t)
	js := runJetstream(t, bin, s, alice.DID, bob.DID)

	dids := url.Values{"wantedDids": {alice.DID, bob.DID}}.Encode()
	didsV2 := url.Values{"dids": {alice.DID, bob.DID}}.Encode()
	streams := map[string][2]*stream{
		"v1": {dial(t, s.JetstreamURL+"?"+dids, false), dial(t, js+"/subscribe?"+dids, false)},
		"v2": {dial(t, wsURL(s.URL)+"/xrpc/network.bsky.jetstream.subscribeEvents?"+didsV2, true),
			dial(t, js+"/xrpc/network.bsky.jetstream.subscribeEvents?"+didsV2, true)},
	}
	workload(t, s, alice, bob)

	for _, proto := range []string{"v1", "v2"} {
		ours, theirs := streams[proto][0].wait(t, alice.DID, bob.DID), streams[proto][1].wait(t, alice.DID, bob.DID)
		compare(t, proto, ours, theirs)
	}
}

// workload writes between each account's start and end markers: posts
// (one with a link facet, one with an image blob), a follow, a reply, a
// like, a profile created then updated, two creates in one commit, a
// delete, a handle change, a deactivation and an activation.
func workload(t *testing.T, s *server, alice, bob *account) {
	marker(t, s, alice, "start")
	marker(t, s, bob, "start")
	linked := post("see https://example.com now")
	linked["facets"] = []any{map[string]any{
		"index":    map[string]any{"byteStart": 4, "byteEnd": 23},
		"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#link", "uri": "https://example.com"}},
	}}
	p := s.create(t, alice, "app.bsky.feed.post", "", linked)
	s.create(t, bob, "app.bsky.graph.follow", "", map[string]any{
		"$type": "app.bsky.graph.follow", "subject": alice.DID, "createdAt": now()})
	strong := map[string]any{"uri": p.URI, "cid": p.CID}
	reply := post("a <reply> & more")
	reply["reply"] = map[string]any{"root": strong, "parent": strong}
	s.create(t, bob, "app.bsky.feed.post", "", reply)
	s.create(t, bob, "app.bsky.feed.like", "", map[string]any{"$type": "app.bsky.feed.like", "subject": strong, "createdAt": now()})
	s.put(t, alice, "app.bsky.actor.profile", "self", map[string]any{"$type": "app.bsky.actor.profile", "displayName": "Alice"})
	s.put(t, alice, "app.bsky.actor.profile", "self", map[string]any{"$type": "app.bsky.actor.profile", "displayName": "Alice 2", "description": "now with a bio"})
	blob := s.upload(t, alice, "image/png", onePixelPNG)
	image := post("a picture")
	image["embed"] = map[string]any{"$type": "app.bsky.embed.images", "images": []any{map[string]any{"alt": "one pixel", "image": blob}}}
	s.create(t, alice, "app.bsky.feed.post", "", image)
	s.call(t, alice.token, "com.atproto.repo.applyWrites", map[string]any{"repo": alice.DID, "writes": []any{
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": "app.bsky.feed.post", "value": post("one of two")},
		map[string]any{"$type": "com.atproto.repo.applyWrites#create", "collection": "app.bsky.feed.post", "value": post("two of two")},
	}}, nil)
	s.delete(t, alice, "app.bsky.feed.post", p.rkey())
	s.call(t, bob.token, "com.atproto.identity.updateHandle", map[string]string{"handle": "r-" + bob.Handle}, nil)
	s.call(t, bob.token, "com.atproto.server.deactivateAccount", map[string]string{}, nil)
	s.call(t, bob.token, "com.atproto.server.activateAccount", noInput{}, nil)
	marker(t, s, alice, "end")
	marker(t, s, bob, "end")
}

// marker writes a record of a collection no lexicon knows, keyed
// "start" or "end": the ends of the compared stretch of each stream.
func marker(t *testing.T, s *server, a *account, which string) {
	s.create(t, a, markers, which, map[string]any{"$type": markers, "at": now()})
}

const markers = "com.example.fakepds.diffmarker"

// A 1x1 PNG.
var onePixelPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")

// upload stores a blob and returns its ref as a record holds it.
func (s *server) upload(t *testing.T, a *account, mime string, data []byte) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", s.URL+"/xrpc/com.atproto.repo.uploadBlob", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mime)
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Blob map[string]any `json:"blob"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("uploadBlob: %d %v", resp.StatusCode, err)
	}
	return out.Blob
}

// runJetstream starts the Jetstream program on a free loopback port, its
// relay and PLC fakepds's, backfilling only the given repos (it would
// otherwise crawl a relay's listHosts), and waits until it serves.
func runJetstream(t *testing.T, bin string, s *server, dids ...string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "jetstream.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--log-format", "text", "serve", "--addr", addr,
		"--relay-url", s.URL, "--plc-url", s.PLCURL, "--data-dir", filepath.Join(dir, "data"),
		"--backfill-repos", strings.Join(dids, ","))
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("Jetstream's log ends:\n%s", b)
		}
	})
	base := "ws://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		// /subscribe answers 503 until Jetstream has bootstrapped.
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		c, _, err := websocket.Dial(ctx, base+"/subscribe", nil)
		cancel()
		if err == nil {
			c.CloseNow()
			return base
		}
		select {
		case err := <-exited:
			t.Fatalf("Jetstream exited: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("Jetstream did not serve /subscribe within 60 s: %v", err)
		}
	}
}

func wsURL(u string) string { return "ws" + strings.TrimPrefix(u, "http") }

// stream reads one subscription's events: v2 frames are unwrapped to
// their payloads.
type stream struct {
	url  string
	v2   bool
	mu   sync.Mutex
	evs  []map[string]any
	err  error
	done chan struct{}
}

func dial(t *testing.T, u string, v2 bool) *stream {
	t.Helper()
	c, _, err := websocket.Dial(t.Context(), u, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	c.SetReadLimit(1 << 24)
	s := &stream{url: u, v2: v2, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			_, msg, err := c.Read(context.Background())
			if err == nil {
				var m map[string]any
				if err = json.Unmarshal(msg, &m); err == nil && v2 {
					if m["$type"] != "message" {
						err = fmt.Errorf("frame %s", msg)
					} else {
						m, _ = m["payload"].(map[string]any)
					}
				}
				if err == nil {
					s.mu.Lock()
					s.evs = append(s.evs, m)
					s.mu.Unlock()
					continue
				}
			}
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return
		}
	}()
	t.Cleanup(func() { c.CloseNow(); <-s.done })
	return s
}

// rkey and collection are a commit event's, "" for other events.
func rkey(v2 bool, e map[string]any) string       { return commitField(v2, e, "rkey") }
func collection(v2 bool, e map[string]any) string { return commitField(v2, e, "collection") }

func commitField(v2 bool, e map[string]any, name string) string {
	if !v2 {
		e, _ = e["commit"].(map[string]any)
	} else if !strings.HasSuffix(fmt.Sprint(e["$type"]), "#commit") {
		return ""
	}
	r, _ := e[name].(string)
	return r
}

// wait returns each DID's events from its start marker to its end
// marker.
func (s *stream) wait(t *testing.T, dids ...string) map[string][]map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.mu.Lock()
		evs, err := s.evs, s.err
		s.mu.Unlock()
		got := map[string][]map[string]any{}
		open, ended := map[string]bool{}, 0
		for _, e := range evs {
			did := fmt.Sprint(e["did"])
			switch collection(s.v2, e) + "/" + rkey(s.v2, e) {
			case markers + "/start":
				open[did] = true
			case markers + "/end":
				if open[did] {
					got[did] = append(got[did], e)
					open[did] = false
					ended++
				}
			}
			if open[did] {
				got[did] = append(got[did], e)
			}
		}
		if ended == len(dids) {
			return got
		}
		if err != nil || time.Now().After(deadline) {
			var seen []string
			for _, e := range evs {
				seen = append(seen, fmt.Sprintf("%v %v %s/%s", e["did"], e["kind"], collection(s.v2, e), rkey(s.v2, e))+fmt.Sprint(e["$type"]))
			}
			t.Fatalf("%s: %d of %d end markers after %d events (%v):\n%s", s.url, ended, len(dids), len(evs), err, strings.Join(seen, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// compare holds the two streams' events equal per DID, in order, except
// the fields each side stamps itself.
func compare(t *testing.T, proto string, ours, theirs map[string][]map[string]any) {
	t.Helper()
	ignored := []string{"time_us", "cursor"}
	if proto == "v2" {
		ignored = []string{"seq", "time"}
	}
	for did, evs := range ours {
		got := theirs[did]
		t.Logf("%s %s: fakepds sent %d events, Jetstream %d", proto, did, len(evs), len(got))
		for i := range max(len(evs), len(got)) {
			var a, b map[string]any
			if i < len(evs) {
				a = without(evs[i], ignored)
			}
			if i < len(got) {
				b = without(got[i], ignored)
			}
			if !reflect.DeepEqual(a, b) {
				ja, _ := json.Marshal(a)
				jb, _ := json.Marshal(b)
				t.Errorf("%s %s event %d:\nfakepds:   %s\nJetstream: %s", proto, did, i, ja, jb)
			}
		}
	}
}

// without is m less the top-level fields named.
func without(m map[string]any, fields []string) map[string]any {
	c := maps.Clone(m)
	for _, f := range fields {
		delete(c, f)
	}
	return c
}
