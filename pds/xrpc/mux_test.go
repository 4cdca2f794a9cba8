package xrpc_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fakepds/fakepds/pds/faults"
	"github.com/fakepds/fakepds/pds/stats"
	"github.com/fakepds/fakepds/pds/xrpc"
)

type envelope struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func do(t *testing.T, h http.Handler, method, path string) (int, envelope, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	var e envelope
	body := rec.Body.String()
	if rec.Code >= 400 {
		if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s %s: error Content-Type %q", method, path, ct)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
			t.Fatalf("%s %s: error body %q is not an envelope: %v", method, path, body, err)
		}
	}
	return rec.Code, e, body
}

func TestMuxErrors(t *testing.T) {
	var logs bytes.Buffer
	m := xrpc.NewMux(slog.New(slog.NewTextHandler(&logs, nil)))
	xrpc.Handle(m, xrpc.Query, "com.example.ok", xrpc.NoAuth{}, func(w http.ResponseWriter, r *http.Request, _ struct{}) error {
		xrpc.WriteJSON(w, 200, map[string]string{"ok": "yes"})
		return nil
	})
	xrpc.Handle(m, xrpc.Procedure, "com.example.proc", xrpc.NoAuth{}, func(w http.ResponseWriter, r *http.Request, _ struct{}) error {
		return xrpc.InvalidRequest("RecordNotFound", "Could not locate record")
	})
	xrpc.Handle(m, xrpc.Query, "com.example.panic", xrpc.NoAuth{}, func(w http.ResponseWriter, r *http.Request, _ struct{}) error {
		panic("secret internal detail")
	})
	xrpc.Handle(m, xrpc.Query, "com.example.fail", xrpc.NoAuth{}, func(w http.ResponseWriter, r *http.Request, _ struct{}) error {
		return errors.New("db is on fire at /var/secret/path")
	})
	xrpc.Handle(m, xrpc.Query, "com.example.fail500", xrpc.NoAuth{}, func(w http.ResponseWriter, r *http.Request, _ struct{}) error {
		return xrpc.Errorf(500, "", "detail that must not leak")
	})
	xrpc.Handle(m, xrpc.Query, "com.example.auth", xrpc.NoAuth{}, func(w http.ResponseWriter, r *http.Request, _ struct{}) error {
		return xrpc.AuthRequired("", "")
	})

	for _, tc := range []struct {
		method, path string
		status       int
		name, msg    string
	}{
		{"GET", "/xrpc/com.example.ok", 200, "", ""},
		{"HEAD", "/xrpc/com.example.ok", 200, "", ""},
		{"GET", "/xrpc/com.example.unknown", 501, "MethodNotImplemented", "Method Not Implemented"},
		{"POST", "/xrpc/com.example.ok", 400, "InvalidRequest", "Incorrect HTTP method (POST) expected GET"},
		{"GET", "/xrpc/com.example.proc", 400, "InvalidRequest", "Incorrect HTTP method (GET) expected POST"},
		{"POST", "/xrpc/com.example.proc", 400, "RecordNotFound", "Could not locate record"},
		{"GET", "/xrpc/not..an.nsid", 400, "InvalidRequest", "invalid xrpc path"},
		{"GET", "/xrpc/com.example.panic", 500, "InternalServerError", "Internal Server Error"},
		{"GET", "/xrpc/com.example.fail", 500, "InternalServerError", "Internal Server Error"},
		{"GET", "/xrpc/com.example.fail500", 500, "InternalServerError", "Internal Server Error"},
		{"GET", "/xrpc/com.example.auth", 401, "AuthenticationRequired", "Authentication Required"},
	} {
		code, e, body := do(t, m, tc.method, tc.path)
		if code != tc.status || e.Error != tc.name || e.Message != tc.msg {
			t.Errorf("%s %s = %d %q %q, want %d %q %q", tc.method, tc.path, code, e.Error, e.Message, tc.status, tc.name, tc.msg)
		}
		if strings.Contains(body, "secret") || strings.Contains(body, "leak") {
			t.Errorf("%s %s leaks internals: %s", tc.method, tc.path, body)
		}
	}
	// The server keeps the details it does not send.
	for _, s := range []string{"secret internal detail", "db is on fire"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("log lacks %q:\n%s", s, logs.String())
		}
	}
}

func TestHandleRejectsBadRegistrations(t *testing.T) {
	m := xrpc.NewMux(nil)
	var h xrpc.Handler[struct{}]
	xrpc.Handle(m, xrpc.Query, "com.example.a", xrpc.NoAuth{}, h)
	for name, f := range map[string]func(){
		"duplicate":    func() { xrpc.Handle(m, xrpc.Query, "com.example.a", xrpc.NoAuth{}, h) },
		"invalid NSID": func() { xrpc.Handle(m, xrpc.Query, "nope", xrpc.NoAuth{}, h) },
		"no auth":      func() { xrpc.Handle[struct{}](m, xrpc.Query, "com.example.b", nil, h) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestFaultsAndStats(t *testing.T) {
	m := xrpc.NewMux(nil)
	m.Faults, m.Stats = &faults.Faults{}, &stats.Stats{}
	xrpc.Handle(m, xrpc.Query, "com.example.ok", xrpc.NoAuth{}, func(w http.ResponseWriter, r *http.Request, _ struct{}) error {
		xrpc.WriteJSON(w, 200, map[string]string{})
		return nil
	})
	m.Faults.Add(faults.Rule{Method: "com.example.ok", Times: 2, Status: 503, Error: "NotEnoughResources", Message: "injected"})
	for i, want := range []int{503, 503, 200} {
		code, e, _ := do(t, m, "GET", "/xrpc/com.example.ok")
		if code != want || (want == 503 && (e.Error != "NotEnoughResources" || e.Message != "injected")) {
			t.Fatalf("call %d: %d %+v, want %d", i, code, e, want)
		}
	}
	snap := m.Stats.Snapshot()
	if len(snap) != 1 || snap[0].Count != 3 || snap[0].Errors != 2 {
		t.Fatalf("stats %+v", snap)
	}
}

func TestWriteJSONKeepsHTMLCharacters(t *testing.T) {
	rec := httptest.NewRecorder()
	xrpc.WriteJSON(rec, 200, map[string]string{"text": "<b>&</b>"})
	if got := rec.Body.String(); got != `{"text":"<b>&</b>"}` {
		t.Fatalf("body %q", got)
	}
}
