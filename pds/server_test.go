package pds_test

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/fakepds/fakepds/pds"
)

func start(t testing.TB, cfg pds.Config) *pds.Server {
	t.Helper()
	s, err := pds.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestHealth(t *testing.T) {
	s := start(t, pds.Config{})
	resp, err := http.Get(s.URL() + "/xrpc/_health")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || body["version"] != pds.Version {
		t.Fatalf("health = %d %v", resp.StatusCode, body)
	}
}

func TestDescribeServer(t *testing.T) {
	s := start(t, pds.Config{
		HandleDomains:  []string{".test", ".Example"},
		InviteRequired: true,
		ContactEmail:   "ops@example.com",
	})
	c := atclient.NewAPIClient(s.URL())
	out, err := comatproto.ServerDescribeServer(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if out.Did != "did:web:localhost" {
		t.Errorf("did = %q", out.Did)
	}
	if len(out.AvailableUserDomains) != 2 || out.AvailableUserDomains[0] != ".test" || out.AvailableUserDomains[1] != ".example" {
		t.Errorf("availableUserDomains = %v", out.AvailableUserDomains)
	}
	if out.InviteCodeRequired == nil || !*out.InviteCodeRequired {
		t.Errorf("inviteCodeRequired = %v, want true", out.InviteCodeRequired)
	}
	if out.Contact == nil || out.Contact.Email == nil || *out.Contact.Email != "ops@example.com" {
		t.Errorf("contact = %+v", out.Contact)
	}
	// blobUploadLimit is not in indigo's type; read it raw.
	var raw map[string]any
	if err := c.Get(t.Context(), "com.atproto.server.describeServer", nil, &raw); err != nil {
		t.Fatal(err)
	}
	if raw["blobUploadLimit"] != float64(5<<20) {
		t.Errorf("blobUploadLimit = %v", raw["blobUploadLimit"])
	}
}

func TestUnknownMethod(t *testing.T) {
	s := start(t, pds.Config{})
	c := atclient.NewAPIClient(s.URL())
	err := c.Get(t.Context(), "com.example.nothing", nil, nil)
	var ae *atclient.APIError
	if !errors.As(err, &ae) || ae.StatusCode != 501 || ae.Name != "MethodNotImplemented" {
		t.Fatalf("unknown method: %v", err)
	}
	err = c.Post(t.Context(), "com.atproto.server.describeServer", map[string]any{}, nil)
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Name != "InvalidRequest" {
		t.Fatalf("POST to a query: %v", err)
	}
}

func TestFsyncFromPragmas(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		s, err := pds.New(pds.Config{Fsync: fsync})
		if err != nil {
			t.Fatal(err)
		}
		if s.Fsync() != fsync {
			t.Errorf("Config.Fsync=%v but server reports %v", fsync, s.Fsync())
		}
		s.Close()
	}
}

func TestCloseIsIdempotentAndRemovesTempDir(t *testing.T) {
	s := start(t, pds.Config{})
	dir := s.DataDir()
	url := s.URL()
	if _, err := os.Stat(filepath.Join(dir, "account.sqlite")); err != nil {
		t.Fatalf("account database missing: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temp data dir still there after Close: %v", err)
	}
	if _, err := http.Get(url + "/xrpc/_health"); err == nil {
		t.Fatal("server still answers after Close")
	}
}

func TestGivenDataDirIsKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := start(t, pds.Config{DataDir: dir})
	s.Close()
	if _, err := os.Stat(filepath.Join(dir, "account.sqlite")); err != nil {
		t.Fatalf("data dir not kept: %v", err)
	}
	// And it opens again.
	start(t, pds.Config{DataDir: dir})
}

func TestHandlerWithoutSocket(t *testing.T) {
	s, err := pds.New(pds.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.URL() != "" {
		t.Fatalf("URL before Start = %q", s.URL())
	}
	req, _ := http.NewRequest("GET", "/xrpc/com.atproto.server.describeServer", nil)
	rec := &recorder{header: http.Header{}}
	s.Handler().ServeHTTP(rec, req)
	if rec.status != 200 {
		t.Fatalf("describeServer through Handler = %d", rec.status)
	}
}

type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(s int)           { r.status = s }

// BenchmarkNewStart is the cost of an empty server from nothing to
// answering: temp dir, the account and sequencer databases with their
// schemas, the listener. Close (shutdown, removing the dir) is timed apart
// in BenchmarkNewStartClose.
func BenchmarkNewStart(b *testing.B) {
	for b.Loop() {
		s, err := pds.New(pds.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkNewStartClose(b *testing.B) {
	for b.Loop() {
		s, err := pds.New(pds.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Start(); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// Remove closes the server and deletes its data dir, a given one too; a
// start makes no tmp/ (the first importRepo does).
func TestRemoveDeletesDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := start(t, pds.Config{DataDir: dir})
	if _, err := os.Stat(filepath.Join(dir, "tmp")); !os.IsNotExist(err) {
		t.Errorf("a start made tmp/: %v", err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("data dir still there after Remove: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close after Remove: %v", err)
	}
}

// A connection that never sends a request (an HTTP client's pool dials
// such spares under load) must not hold Close: net/http's Shutdown waits 5 s
// for it, so Close hit its deadline, reported it, and fakepds serve exited
// 1 on SIGTERM.
func TestCloseEndsConnectionsWithoutRequest(t *testing.T) {
	s, err := pds.New(pds.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var unused []net.Conn
	for _, u := range []string{s.URL(), s.PLCURL()} {
		c, err := net.Dial("tcp", strings.TrimPrefix(u, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		unused = append(unused, c)
		// A request on a later connection: the server accepts in order,
		// so the unused one has been accepted once this answers.
		resp, err := http.Get(u + "/xrpc/_health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close with a connection that sent no request: %v", err)
	}
	for _, c := range unused {
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("a connection without a request is still open after Close")
		}
	}
}
