package plc_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/did-method-plc/go-didplc"
	"github.com/fakepds/fakepds/pds/plc"
)

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixture is a directory on a test clock, served over HTTP.
type fixture struct {
	dir   *plc.Directory
	clock *clock
	srv   *httptest.Server
}

func newFixture(t testing.TB, opts plc.Options) *fixture {
	t.Helper()
	f := &fixture{clock: newClock()}
	if opts.Now == nil {
		opts.Now = f.clock.Now
	}
	d, err := plc.Open(t.Context(), t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Error(err)
		}
	})
	f.dir = d
	f.srv = httptest.NewServer(d.Handler())
	t.Cleanup(f.srv.Close)
	return f
}

func newKey(t testing.TB) *atcrypto.PrivateKeyK256 {
	t.Helper()
	k, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func didKey(t testing.TB, k atcrypto.PrivateKey) string {
	t.Helper()
	pub, err := k.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return pub.DIDKey()
}

// account is a DID created the way a PDS creates one.
type account struct {
	did      syntax.DID
	genesis  *didplc.RegularOp
	rotation *atcrypto.PrivateKeyK256 // the PDS's rotation key
	signing  *atcrypto.PrivateKeyK256 // the repo signing key
}

const testPDS = "https://pds.example.test"

// createAccount makes and submits a genesis operation. Extra rotation keys
// go before the PDS's, as a user's recovery key does.
func createAccount(t testing.TB, d *plc.Directory, handle string, extraRotation ...string) *account {
	t.Helper()
	a := &account{rotation: newKey(t), signing: newKey(t)}
	var err error
	a.did, a.genesis, err = plc.CreateGenesis(a.rotation, plc.Fields{
		RotationKeys: append(extraRotation, didKey(t, a.rotation)),
		SigningKey:   didKey(t, a.signing),
		Handle:       syntax.Handle(handle),
		PDS:          testPDS,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(t.Context(), a.did, a.genesis); err != nil {
		t.Fatal(err)
	}
	return a
}

// response is what a request got back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// message is the body's "message", for the directory's error bodies.
func (r response) message(t testing.TB) string {
	t.Helper()
	var m struct{ Message string }
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("error body %q: %v", r.body, err)
	}
	return m.Message
}

func do(t testing.TB, method, url, contentType string, body []byte) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	// No redirect following: GET / must show its 302.
	client := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, b}
}

func (f *fixture) get(t testing.TB, path string) response {
	t.Helper()
	return do(t, http.MethodGet, f.srv.URL+path, "", nil)
}

func (f *fixture) post(t testing.TB, did string, op any) response {
	t.Helper()
	b, ok := op.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(op); err != nil {
			t.Fatal(err)
		}
	}
	return do(t, http.MethodPost, f.srv.URL+"/"+did, "application/json", b)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
