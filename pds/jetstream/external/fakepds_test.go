package external_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// fakepdsBin is the fakepds binary TestMain builds from this repository.
var fakepdsBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakepds-external-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakepdsBin = filepath.Join(dir, "fakepds")
	build := exec.Command("go", "build", "-o", fakepdsBin, "./harness/cmd/fakepds")
	build.Dir = "../../.." // the repository's root, fakepds's own module
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building fakepds: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running `fakepds serve`.
type server struct {
	URL          string `json:"url"`
	PLCURL       string `json:"plcUrl"`
	JetstreamURL string `json:"jetstreamUrl"`
}

// serve starts `fakepds serve` on free loopback ports; it ends with the
// test.
func serve(t *testing.T) *server {
	t.Helper()
	cmd := exec.Command(fakepdsBin, "serve")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("fakepds serve printed no line: %v\n%s", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	var s server
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		t.Fatalf("fakepds serve's line %q: %v", line, err)
	}
	return &s
}

// account is one signed-in account.
type account struct {
	DID, Handle, token string
}

var accounts atomic.Int64

// noInput is the input of a procedure that takes none.
type noInput struct{}

// call is one XRPC call: a procedure when in is not nil, else a query.
func (s *server) call(t *testing.T, token, nsid string, in, out any) {
	t.Helper()
	method, body := "GET", io.Reader(nil)
	if _, ok := in.(noInput); ok {
		method, in = "POST", nil
	}
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		method, body = "POST", bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+"/xrpc/"+nsid, body)
	if err != nil {
		t.Fatal(err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", nsid, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", nsid, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: %v: %s", nsid, err, b)
		}
	}
}

// newAccount creates an account with a fresh handle.
func (s *server) newAccount(t *testing.T) *account {
	t.Helper()
	name := fmt.Sprintf("ext%d-%d", time.Now().UnixNano()%1e6, accounts.Add(1))
	var out struct{ DID, Handle, AccessJwt string }
	s.call(t, "", "com.atproto.server.createAccount", map[string]string{
		"handle": name + ".test", "email": name + "@example.test", "password": "hunter2",
	}, &out)
	return &account{DID: out.DID, Handle: out.Handle, token: out.AccessJwt}
}

// ref is a written record.
type ref struct {
	URI, CID string
}

func (r ref) rkey() string { return r.URI[strings.LastIndex(r.URI, "/")+1:] }

func (s *server) create(t *testing.T, a *account, collection, rkey string, record map[string]any) ref {
	t.Helper()
	in := map[string]any{"repo": a.DID, "collection": collection, "record": record}
	if rkey != "" {
		in["rkey"] = rkey
	}
	var out ref
	s.call(t, a.token, "com.atproto.repo.createRecord", in, &out)
	return out
}

func (s *server) put(t *testing.T, a *account, collection, rkey string, record map[string]any) ref {
	t.Helper()
	var out ref
	s.call(t, a.token, "com.atproto.repo.putRecord", map[string]any{
		"repo": a.DID, "collection": collection, "rkey": rkey, "record": record}, &out)
	return out
}

func (s *server) delete(t *testing.T, a *account, collection, rkey string) {
	t.Helper()
	s.call(t, a.token, "com.atproto.repo.deleteRecord", map[string]any{
		"repo": a.DID, "collection": collection, "rkey": rkey}, nil)
}

func now() string { return time.Now().UTC().Format("2006-01-02T15:04:05.000Z") }

func post(text string) map[string]any {
	return map[string]any{"$type": "app.bsky.feed.post", "text": text, "createdAt": now()}
}
