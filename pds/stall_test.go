package pds_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/pds"
)

// soak is FAKEPDS_SOAK=1: the tests that scale run full size.
var soak = os.Getenv("FAKEPDS_SOAK") == "1"

// stall opens a raw connection and sends a request that declares a body of
// declared bytes but sends only the first few, then nothing: a client that
// stalls mid-body. The connection closes with the test.
func stall(t *testing.T, s *pds.Server, nsid, token, ctype string, declared int, sent string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /xrpc/%s HTTP/1.1\r\nHost: pds\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s",
		nsid, token, ctype, declared, sent)
	return conn
}

// inHandler counts the server goroutines running handler fn (a function
// name as it appears in a stack trace) that are blocked: reading a request
// body or waiting for an actor store handle. It is how the test knows its
// stalled requests are inside the server, whichever of the two holds them.
func inHandler(fn string) int {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	n := 0
	for g := range strings.SplitSeq(buf.String(), "\n\n") {
		if strings.Contains(g, fn) && (strings.Contains(g, "net/http.(*body).Read") || strings.Contains(g, "actorstore.(*Cache[...]).Acquire")) {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s after a minute", what)
		}
	}
}

// More uploads stalled mid-body, on distinct accounts, than the server has
// actor store handles: every other account still reads, writes, uploads
// and signs up. The stalled bodies are read before any handle is taken.
//
// FAKEPDS_SOAK=1 runs it at the size that hung before: 300 stalled uploads
// beside the default 256 handles.
func TestStalledUploadsHoldNoActorStore(t *testing.T) {
	slots, stalled := 2, 5
	if soak {
		slots, stalled = 256, 300
	}
	s := start(t, pds.Config{ActorStoreCache: slots})
	ctx := t.Context()
	// Created first, so the stalled accounts' stores push theirs out of
	// the cache: every call below has to open a store.
	other := createAccount(t, s, "bystander.test", "bystander@example.com", "pw")
	rec, err := comatproto.RepoCreateRecord(ctx, bearer(s, other.AccessJwt), &comatproto.RepoCreateRecord_Input{
		Repo: other.Did, Collection: "app.bsky.feed.post", Record: post("before"),
	})
	if err != nil {
		t.Fatal(err)
	}
	var tokens []string
	for i := range stalled {
		a := createAccount(t, s, fmt.Sprintf("stalled%d.test", i), fmt.Sprintf("stalled%d@example.com", i), "pw")
		tokens = append(tokens, a.AccessJwt)
	}
	before := heapAfterGC()
	var conns []net.Conn
	for _, tok := range tokens {
		conns = append(conns, stall(t, s, "com.atproto.repo.uploadBlob", tok, "text/plain", 100_000, "abcd"))
	}
	waitFor(t, "the stalled uploads to reach the server", func() bool { return inHandler("(*Server).uploadBlob") == stalled })
	grew := int64(heapAfterGC()) - int64(before)
	t.Logf("%d uploads stalled mid-body beside %d actor store handles: %.1f MiB of heap (%.0f KiB each)",
		stalled, slots, float64(grew)/mib, float64(grew)/float64(stalled)/1024)

	// A client that gives up long after a healthy answer, so a hang fails
	// the test rather than the test binary's timeout.
	c := atclient.NewAPIClient(s.URL())
	c.Client = &http.Client{Timeout: 20 * time.Second}
	c.Headers.Set("Authorization", "Bearer "+other.AccessJwt)
	if _, err := comatproto.RepoGetRecord(ctx, c, "", "app.bsky.feed.post", other.Did, strings.TrimPrefix(rec.Uri, "at://"+other.Did+"/app.bsky.feed.post/")); err != nil {
		t.Fatalf("getRecord beside stalled uploads: %v", err)
	}
	if _, err := comatproto.RepoCreateRecord(ctx, c, &comatproto.RepoCreateRecord_Input{
		Repo: other.Did, Collection: "app.bsky.feed.post", Record: post("beside stalled uploads"),
	}); err != nil {
		t.Fatalf("createRecord beside stalled uploads: %v", err)
	}
	if _, err := comatproto.RepoUploadBlob(ctx, c, strings.NewReader("a whole body")); err != nil {
		t.Fatalf("uploadBlob beside stalled uploads: %v", err)
	}
	email, pw := "late@example.com", "pw"
	anon := atclient.NewAPIClient(s.URL())
	anon.Client = c.Client
	if _, err := comatproto.ServerCreateAccount(ctx, anon, &comatproto.ServerCreateAccount_Input{Handle: "late.test", Email: &email, Password: &pw}); err != nil {
		t.Fatalf("createAccount beside stalled uploads: %v", err)
	}

	// When the stalled clients go, so do their handlers and their
	// temporary files.
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "the stalled uploads to end", func() bool { return inHandler("(*Server).uploadBlob") == 0 })
	waitFor(t, "no temporary upload file", func() bool { return len(tempFiles(t, s.DataDir())) == 0 })
}

// tempFiles lists the files under dir that an upload or import left in
// flight (named .upload-* or under tmp/).
func tempFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if !d.IsDir() && (strings.HasPrefix(d.Name(), ".upload-") || strings.HasPrefix(rel, "tmp"+string(filepath.Separator))) {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readResponse reads the HTTP response on a raw connection.
func readResponse(t *testing.T, conn net.Conn) *http.Response {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled request: %v", err)
	}
	return resp
}

// A body that stops arriving is answered 408 once Config.BodyTimeout has
// passed, whatever the client does; a firehose subscriber connected the
// whole time is not cut by that deadline.
func TestBodyTimeoutEndsStalledRequests(t *testing.T) {
	s := start(t, pds.Config{BodyTimeout: 200 * time.Millisecond})
	a := createAccount(t, s, "slow.test", "slow@example.com", "pw")
	live := firehose(t, s, "")

	for _, tc := range []struct{ nsid, ctype string }{
		{"com.atproto.repo.uploadBlob", "text/plain"},
		{"com.atproto.repo.createRecord", "application/json"},
		{"com.atproto.repo.importRepo", "application/vnd.ipld.car"},
	} {
		conn := stall(t, s, tc.nsid, a.AccessJwt, tc.ctype, 100_000, "{")
		resp := readResponse(t, conn)
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestTimeout || e.Error != "RequestTimeout" {
			t.Errorf("%s stalled mid-body: %d %s, want 408 RequestTimeout", tc.nsid, resp.StatusCode, e.Error)
		}
	}

	// The subscriber has now been connected for longer than the deadline.
	if _, err := comatproto.RepoCreateRecord(t.Context(), bearer(s, a.AccessJwt), &comatproto.RepoCreateRecord_Input{
		Repo: a.Did, Collection: "app.bsky.feed.post", Record: post("after the stalls"),
	}); err != nil {
		t.Fatal(err)
	}
	expectEvents(t, live, "commit:5:"+a.Did)
	waitFor(t, "no temporary upload or import file", func() bool { return len(tempFiles(t, s.DataDir())) == 0 })
}
